"""The ``multigpu`` command (also ``python -m toolkit``): devices, compare, parity, localize, time, report,
bench, launch.

Errors in what the user typed (a malformed option, an unknown model, a bad device list, too few devices, an output
folder that cannot be written) are one line on stderr and exit status 2, before anything runs; a parity failure is
exit status 1 with a readable diff.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toolkit.command.parser import EXIT_OK, EXIT_PARITY_FAILED, EXIT_USAGE, build_parser
from toolkit.errors import ToolkitError
from toolkit.version import __version__

__all__ = ["EXIT_OK", "EXIT_PARITY_FAILED", "EXIT_USAGE", "build_parser", "main", "print_table", "public_results"]


@contextlib.contextmanager
def _progress_bar(args, description: str, total: int) -> Iterator[Callable[[str], None] | None]:
    """A transient progress bar on stderr for ``total`` units of work, given as a callback ``progress(text)`` that marks
    one unit done and shows ``text``; None, no bar, with ``--quiet`` or ``--json`` or where stderr is not a terminal."""
    if args.quiet or args.json or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda text: bar.update(task, advance=1, description=text)


def main(argv: list[str] | None = None) -> int:
    """Run the ``multigpu`` command.

    Args:
        argv: the arguments after the program's name (None: ``sys.argv[1:]``).

    Returns:
        The exit status: :data:`EXIT_OK`, :data:`EXIT_PARITY_FAILED`, or :data:`EXIT_USAGE` after a
        :class:`~toolkit.ToolkitError` or ``ValueError``, printed as one line on stderr.
    """
    args = build_parser().parse_args(argv)
    try:
        commands = {"devices": _devices, "compare": _compare, "parity": _parity, "localize": _localize,
                    "time": _time, "report": _report, "bench": _bench, "launch": _launch,
                    "determinism": _determinism}
        return commands[args.command](args)
    except (ToolkitError, ValueError) as error:
        print(f"multigpu {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE


# ----------------------------------------------------------------------------------------------------------------------

def _devices(args) -> int:
    import toolkit

    if args.logical is not None:
        toolkit.use_logical_devices(args.logical)
    table = {name: [{"device": str(d), "kind": d.kind, "index": d.index, "native": native}
                    for d, native in toolkit.get_backend(name).device_table()]
             for name in toolkit.available_backends()}
    if args.json:
        print(json.dumps(table, indent=2))
        return EXIT_OK
    if not table:
        print('no backend installed: pip install "multigpu-toolkit[all]"')
    for name, rows in table.items():
        print(f"{name}:")
        for row in rows:
            print(f"  {row['device']:<8} {row['kind']:<4} index {row['index']:<3} {row['native']}")
    return EXIT_OK


def _prepare(args) -> Any:
    """Check the request before any framework starts; returns the workload."""
    import toolkit
    from toolkit.backend.logical_devices import logical_device_count
    from toolkit.command.seeds import run_seeds
    from toolkit.command.workloads import load_workload

    if args.steps < 1 or args.batch < 1:
        raise ValueError(f"--steps and --batch must be >= 1, got {args.steps} and {args.batch}")
    if getattr(args, "seeds", None) is not None and args.seed is not None:
        raise ValueError(f"--seed {args.seed} and --seeds: give one (--seeds runs each of its seeds)")
    run_seeds(_seed_list(args), args.init_seed, args.data_seed, args.noise_seed)
    if not getattr(args, "split_bound", 1.0) > 0:
        raise ValueError(f"--split-bound must be > 0, got {args.split_bound}")
    if getattr(args, "out", None) is not None:
        _check_out(args.out)
    _check_backends(args.backends)
    _perturbation(args)  # refused now, before anything trains
    workload = load_workload(args.model)
    if (logical_device_count() or 0) < max(args.devices):  # a process that already has enough keeps them
        toolkit.use_logical_devices(max(args.devices))
    for name in args.backends:
        toolkit.get_backend(name).select_devices(max(args.devices))  # too few devices: one clear error, now
    return workload


def _seed_list(args) -> list[int]:
    """The seeds a compare or parity runs: ``--seeds``, or the one ``--seed``."""
    from toolkit.command.seeds import DEFAULT_SEED

    seeds = getattr(args, "seeds", None)
    return seeds if seeds is not None else [DEFAULT_SEED if args.seed is None else args.seed]


def _check_backends(names: list[str]) -> None:
    """Refuse a backend name that is not registered (installed or not), before anything starts."""
    from toolkit.backend.registry import REGISTRY

    unknown = [name for name in names if name not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown backend(s) {unknown}; known: {', '.join(REGISTRY)}")


def _perturbation(args) -> Any:
    """``--perturb``'s :class:`toolkit.command.perturb.Perturbation`, or None."""
    from toolkit.command.perturb import parse_perturbation

    text = getattr(args, "perturb", None)
    return None if text is None else parse_perturbation(text, args.backends, args.devices)


def _run(args, workload, rounding: bool = False) -> dict[str, Any]:
    from toolkit.command.compare import run_over_seeds
    from toolkit.command.divergence import SPLIT_BOUND

    seeds, bound = _seed_list(args), getattr(args, "split_bound", SPLIT_BOUND)
    config = {"model": args.model, "backends": args.backends, "devices": args.devices, "dtype": args.dtype,
              "optimizer": args.optimizer, "lr": args.lr, "steps": args.steps, "batch": args.batch, "seed": seeds[0],
              "seeds": seeds, "init_seed": args.init_seed, "data_seed": args.data_seed, "noise_seed": args.noise_seed,
              "split_bound": bound, "eps": getattr(args, "eps", None), "perturb": getattr(args, "perturb", None)}
    with _progress_bar(args, "training", args.steps * len(seeds)) as progress:
        results = run_over_seeds(workload, args.backends, args.devices, args.dtype, args.optimizer, args.lr,
                                 args.steps, args.batch, seeds, args.init_seed, args.data_seed, args.noise_seed, bound,
                                 progress, getattr(args, "eps", None), _perturbation(args), rounding)
    return {**results, "toolkit_version": __version__, "config": config}


def _compare(args) -> int:
    from toolkit.command.compare import make_optimizer
    from toolkit.command.sweep import (
        FRESH_TIMEOUT,
        combinations,
        label,
        print_sweep,
        sweep_rows,
        time_fresh,
        write_sweep,
    )

    combos = combinations({"batch": args.batch, "dtype": args.dtype, "lr": args.lr, "eps": args.eps})
    for combo in combos:  # every combination checked before anything trains
        make_optimizer(args.optimizer, combo["lr"], combo["eps"])
        if combo["batch"] < 1:
            raise ValueError(f"--batch must be >= 1, got {combo['batch']}")
    if args.tensorboard is not None:
        _check_out(args.tensorboard)
    if args.timeout is not None and not args.fresh_timing:
        raise ValueError(f"--timeout {args.timeout:g} is for --fresh-timing's processes; without it nothing waits")
    if args.fresh_timing and args.perturb is not None:
        raise ValueError("--fresh-timing times the real model: it cannot time a --perturb run (time the combinations "
                         "without --perturb)")
    timeout = FRESH_TIMEOUT if args.timeout is None else args.timeout
    if args.fresh_timing and not timeout > 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {timeout}")
    if args.fresh_timing and len(combos) == 1:
        raise ValueError("--fresh-timing times the combinations of a sweep (give --batch, --dtype, --lr or --eps a "
                         "list); for one setting, multigpu time")
    if len(combos) == 1:
        single = argparse.Namespace(**{**vars(args), **combos[0]})
        results = _run(single, _prepare(single))
        written = _write_comparison(single, results)
        return _emit(single, "results.json", public_results(results), lambda: print_table(results), written)
    workload, rows = _prepare(argparse.Namespace(**{**vars(args), **combos[0]})), []
    for combo in combos:
        board = None if args.tensorboard is None else args.tensorboard / label(combo)
        one = argparse.Namespace(**{**vars(args), **combo, "out": args.out / label(combo), "quiet": True,
                                    "tensorboard": board})
        results = _run(one, workload)
        (_out(one) / "results.json").write_text(json.dumps(public_results(results), indent=2))
        _write_comparison(one, results)
        timing = time_fresh(results["config"], timeout) if args.fresh_timing else None
        if timing is not None:
            (_out(one) / "timing.json").write_text(json.dumps(timing, indent=2))
        rows += sweep_rows(combo, results, timing)
    path = write_sweep(rows, args.out)
    if args.json:
        print(json.dumps(rows))
    elif not args.quiet:
        print_sweep(rows, f"{args.model}: {args.optimizer}, {args.steps} steps, a sweep of {len(combos)} settings")
    print(f"wrote {path} and {len(combos)} comparisons under {args.out} (one folder each)")
    return EXIT_OK


def public_results(results: dict[str, Any]) -> dict[str, Any]:
    """The results as ``results.json`` holds them (:func:`toolkit.command.compare.public`).

    Args:
        results: a comparison's results.

    Returns:
        Them without the runs' parameters.
    """
    from toolkit.command.compare import public

    return public(results)


def _write_comparison(args, results: dict[str, Any]) -> list[str]:
    """Everything a comparison writes besides results.json: parameters, tidy CSV, plots, TensorBoard runs."""
    from toolkit.command.compare import save_params
    from toolkit.command.events import write_tensorboard
    from toolkit.command.plots import write_plots
    from toolkit.command.tidy import write_csv

    plots = write_plots(results, _out(args))
    params = save_params(results, _out(args))
    tables = write_csv(results, _out(args))
    boards = [f"{args.tensorboard} (TensorBoard)"] if args.tensorboard is not None and write_tensorboard(
        results, args.tensorboard) else []
    return [*(str(p) for p in params), *(str(p) for p in tables), *(str(p) for p in plots), *boards]


def _check_out(folder: Path) -> None:
    """Make sure the results can be written, before anything trains: the folder exists (made now) and is writable."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; expected a folder for the results")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--out {folder}: cannot make the folder ({error.strerror})") from error
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"--out {folder}: the folder is not writable")


def _out(args) -> Path:
    args.out.mkdir(parents=True, exist_ok=True)
    return args.out


def _emit(args, filename: str, results: dict[str, Any], show, also: list[str] = ()) -> int:
    """Write the results to ``--out``, then print them as JSON (``--json``), or ``show()`` them, then one line that
    says where they went (that line alone with ``--quiet``)."""
    (_out(args) / filename).write_text(json.dumps(results, indent=2))
    if args.json:
        print(json.dumps(results))
        return EXIT_OK
    if not args.quiet:
        show()
    print(f"wrote {' and '.join([str(args.out / filename), *also])}")
    return EXIT_OK


def print_table(results: dict[str, Any]) -> None:
    """The comparison tables of ``multigpu compare`` (also printed by the digits demo): the runs, and over seeds
    and pairs of runs what :func:`toolkit.command.compare_tables.print_comparison` adds.

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`).
    """
    from toolkit.command.compare_tables import print_comparison

    print_comparison(results)


def _parity(args) -> int:
    from toolkit.command import parity

    if args.against is not None:
        return _parity_against(args)
    if len(args.backends) != 2:
        raise ValueError(f"parity compares two backends, got {args.backends}")
    parity.check_request(args.dtype, args.devices)
    results = _run(args, _prepare(args), rounding=True)
    passed = parity.report(results, args.backends, args.quiet)
    if args.json:
        verdicts = {n: {"passed": found.passed, "judged": found.params.judged, "split": found.params.split,
                        "beyond": found.params.beyond[:10], "losses_beyond": found.losses.beyond[:10]}
                    for n, found in parity.judge(results, args.dtype).items()}
        print(json.dumps({"ok": passed, "verdicts": verdicts, "divergence": results["divergence"],
                          "within": results["within"], "first_step_rounding": results["first_step_rounding"]}))
    return EXIT_OK if passed else EXIT_PARITY_FAILED


def _parity_against(args) -> int:
    """Train this environment's backends as the reference file's runs were trained, and compare losses and final
    parameters run by run: how two backends that cannot share an environment (Aesara on NumPy 1, PyTensor on NumPy 2)
    show their agreement."""
    from toolkit.command import parity
    from toolkit.command.compare import load_params

    reference = parity.read_reference(args.against)
    for key in parity.AGAINST_CONFIG:
        setattr(args, key, reference["config"][key])
    for key in (*parity.AGAINST_SEEDS, "eps"):  # absent from older files: None, the default
        setattr(args, key, reference["config"].get(key))
    params = load_params(args.against)
    theirs = [run for run in reference["runs"] if run["backend"] not in args.backends
              and run.get("seed", args.seed) == args.seed]  # params.npz holds the first seed's runs
    if not theirs:
        found = sorted({run["backend"] for run in reference["runs"]})
        raise ValueError(f"--against {args.against}: its runs are of {found}, the backends checked here; expected "
                         f"another backend's runs")
    parity.check_request(args.dtype, args.devices)
    results = _run(args, _prepare(args))
    passed = parity.report_against(results, reference, theirs, params, args.against, args.quiet)
    if args.json:
        print(json.dumps({"ok": passed}))
    return EXIT_OK if passed else EXIT_PARITY_FAILED


def _determinism(args) -> int:
    from toolkit.command.determinism import compare_argv, differences, print_differences, run_twice

    _check_out(args.out)
    _check_backends(args.backends)
    _perturbation(args)
    if args.steps < 1 or args.batch < 1 or not args.timeout > 0:
        raise ValueError(f"--steps and --batch must be >= 1 and --timeout > 0, got {args.steps}, {args.batch} and "
                         f"{args.timeout}")
    records = differences(*run_twice(compare_argv(args), args.out, args.timeout))
    if args.json:
        print(json.dumps(records))
    elif not args.quiet:
        print_differences(records)
    return EXIT_OK if all(r["identical"] for r in records) else EXIT_PARITY_FAILED


def _localize(args) -> int:
    import toolkit
    from toolkit.command.compare import make_optimizer
    from toolkit.command.localize import localize, print_localization
    from toolkit.command.seeds import run_seeds
    from toolkit.command.workloads import load_workload

    if args.batch < 1 or args.steps < 0:
        raise ValueError(f"--batch must be >= 1 and --steps >= 0, got {args.batch} and {args.steps}")
    if args.follow and not args.steps:
        raise ValueError("--follow follows the training steps before the one compared: give --steps N (N >= 1)")
    if not args.bound > 0:
        raise ValueError(f"--bound must be > 0, got {args.bound}")
    (seeds,) = run_seeds([args.seed])
    make_optimizer(args.optimizer, args.lr, args.eps)  # an eps it has none of: refused now
    _check_out(args.out)
    _check_backends(args.backends)
    workload = load_workload(args.model)
    for name in args.backends:
        toolkit.get_backend(name)  # not installed: one clear error, now
    results = localize(workload, args.backends, args.dtype, args.batch, seeds, args.steps,
                       lambda: make_optimizer(args.optimizer, args.lr, args.eps), args.bound, args.follow)
    results["config"] = {"model": args.model, "backends": args.backends, "dtype": args.dtype, "batch": args.batch,
                         "steps": args.steps, "optimizer": args.optimizer, "lr": args.lr, "eps": args.eps,
                         "seed": args.seed, "follow": args.follow}
    return _emit(args, "localize.json", results, lambda: print_localization(results))


def _time(args) -> int:
    import toolkit
    from toolkit.command.compare import make_optimizer
    from toolkit.command.timing import print_timing, run_timing
    from toolkit.command.workloads import load_workload

    for name, value in (("--batch", args.batch), ("--steps", args.steps), ("--rounds", args.rounds)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not args.timeout > 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    make_optimizer(args.optimizer, args.lr, args.eps)
    _check_out(args.out)
    for name in args.backends:
        if name not in toolkit.backend.registry.REGISTRY:
            raise ValueError(f"unknown backend {name!r}; known: {', '.join(toolkit.backend.registry.REGISTRY)}")
    examples = len(load_workload(args.model).data(args.seed)[1])
    if args.batch > examples:
        raise ValueError(f"--batch {args.batch} is larger than the {examples} training examples of {args.model}")
    config = {key: getattr(args, key) for key in ("model", "backends", "devices", "dtype", "optimizer", "lr", "eps",
                                                  "batch", "steps", "rounds", "seed")}
    with _progress_bar(args, "timing", len(args.backends) * len(args.devices)) as progress:
        results = run_timing(config, args.timeout, progress)
    return _emit(args, "timing.json", results, lambda: print_timing(results))


def _report(args) -> int:
    from toolkit.command.report import write_report

    if args.out.is_dir():
        raise ValueError(f"--out {args.out} is a folder; expected the HTML file to write")
    print(f"wrote {write_report(args.folders, args.out, args.title)}")
    return EXIT_OK


def _bench(args) -> int:
    from toolkit.backend.registry import REGISTRY
    from toolkit.command.bench import print_report, run_bench
    from toolkit.command.workloads import load_workload
    from toolkit.errors import BackendUnavailableError

    for name, value in (("--steps", args.steps), ("--rounds", args.rounds), ("--batch", args.batch),
                        ("--peak-size", args.peak_size)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not args.timeout > 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    _check_out(args.out)
    for name in args.backends:
        if name not in REGISTRY:
            raise ValueError(f"unknown backend {name!r}; known: {', '.join(REGISTRY)}")
        if not REGISTRY[name].installed():
            raise BackendUnavailableError(f"{name} is not installed: {REGISTRY[name].install_command}")
    if not args.model:
        raise ValueError("--model needs at least one model")
    for model in args.model:
        workload = load_workload(model)
        examples, size = len(workload.data(args.seed)[1]), args.batch or workload.bench_batch
        if size > examples:
            raise ValueError(f"--batch {size} is larger than the {examples} training examples of {model}")
    config = {"models": args.model, "backends": args.backends, "devices": args.devices, "dtype": args.dtype,
              "lr": args.lr, "batch": args.batch, "steps": args.steps, "rounds": args.rounds, "seed": args.seed,
              "peak_size": args.peak_size, "inputs": args.inputs}
    with _progress_bar(args, "measuring", 1 + len(args.model) * len(args.devices)) as progress:
        results = run_bench(config, args.timeout, progress=progress)
    return _emit(args, "bench.json", results, lambda: print_report(results))


def _launch(args) -> int:
    from toolkit.processes.launch import launch

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return launch(command, args.processes, args.devices_per_process, args.backend, args.timeout)


def _entry() -> None:
    """The console script: exit with :func:`main`'s status."""
    sys.exit(main())
