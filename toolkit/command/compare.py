"""Run the same workload on several backends and device counts in lockstep, and record what differs: losses,
parameter divergence between backends, step times, memory, accuracy. Used by ``multigpu compare`` and ``parity``.

The results are a plain dict (``results.json``), schema ``multigpu-toolkit/compare`` version :data:`SCHEMA_VERSION`:

- ``schema``, ``version``, ``toolkit_version``, ``config``: the command's settings;
- ``runs``: one per (backend, device count): ``backend``, ``devices`` (count), ``device_names``, ``losses`` (per
  step), ``step_times_ms`` (per step; the first includes tracing/compilation), ``first_step_ms``, ``median_ms``,
  ``p10_ms``, ``p90_ms`` (over steps 2..n), ``peak_rss_mb`` (the process's peak resident memory after the run),
  ``accuracy`` (test accuracy, classifiers only, else null), ``params`` (not written to JSON);
- ``divergence``: one per device count: ``devices``, ``backends`` (the pair compared), ``max_abs_param_diff`` (per
  step), ``param_scale`` (max |param| of the first backend at the end);
- ``within`` (since version 2): one per backend and pair of device counts: ``backend``, ``devices`` (the two counts),
  ``max_abs_param_diff`` (per step): how far a backend parts from itself when only the summation order changes.

Since version 3, seeds are an axis (:mod:`toolkit.command.seeds`) and every pair of runs is compared parameter by
parameter (:mod:`toolkit.command.divergence`):

- ``config`` also holds ``seeds`` (the list run; ``seed`` is its first), ``init_seed``, ``data_seed`` and
  ``noise_seed`` (a value fixed for every seed, or null: the seed's own), ``split_bound``, and ``eps`` (the
  optimizer's epsilon, null for its default);
- each run, and each ``divergence`` and ``within`` entry, has ``seed`` (its seed of the axis); each run has ``seeds``
  (``init``, ``data``, ``noise``: what that seed seeded). ``runs`` holds every backend, device count and seed;
- ``pairs``: every pair of runs of one seed (:func:`toolkit.command.divergence.pair_record`: ``kind``
  framework/order/both, ``max_rel_param_diff`` per step, ``rel_param_diff`` per parameter, ``split_step``,
  ``param_split_steps``, ``first_parted``) with its ``seed`` and ``rel_param_curves`` (per parameter, the
  relative divergence after each step: what ``multigpu parity`` judges; not written to JSON), and ``split_bound``,
  the bound they part past;
- ``pair_summary`` and ``kind_summary``: the pairs over seeds, and per kind (the framework pairs beside the order
  pairs, their baseline) (:func:`~toolkit.command.divergence.summarize_pairs`, ``summarize_kinds``);
  ``parted_test``: whether framework pairs part more often than order pairs, per seed, with an exact sign test
  (:func:`toolkit.command.seed_stats.parted_test`; null without both kinds);
- ``statistics``: per metric, the gap between two backends (and between two device counts of one backend) against
  the spread over seeds, paired by seed, with a t interval (:func:`toolkit.command.seed_stats.seed_statistics`).

``first_step_rounding`` (``{backend: {parameter: relative divergence}}``, empty unless asked for, float32): each
backend's float32 parameters after the first step against the same step in float64.

``params.npz`` holds the first seed's final parameters; ``params-seed-<S>.npz`` each other seed's.
"""

from __future__ import annotations

import itertools
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.command.divergence import SPLIT_BOUND, pair_record, relative_divergence, summarize_kinds, summarize_pairs
from toolkit.command.perturb import Perturbation
from toolkit.command.seed_stats import parted_test, seed_statistics
from toolkit.command.seeds import RunSeeds, run_seeds, seed_trainer
from toolkit.command.workloads import Workload, draw_batches
from toolkit.errors import ArgumentError
from toolkit.nn.models import accuracy
from toolkit.training.data_parallel import DataParallel
from toolkit.training.optim import SGD, Adam, AdamW, Optimizer, RMSprop

#: The results' ``schema`` entry, and its version (raised when a field changes meaning or goes).
SCHEMA = "multigpu-toolkit/compare"
SCHEMA_VERSION = 3

#: The optimizers ``--optimizer`` names, each made from the learning rate with Keras' other defaults.
OPTIMIZERS: dict[str, Callable[[float], Optimizer]] = {
    "sgd": lambda lr: SGD(lr),
    "momentum": lambda lr: SGD(lr, momentum=0.9),
    "adam": lambda lr: Adam(lr),
    "rmsprop": lambda lr: RMSprop(lr),
    "adamw": lambda lr: AdamW(lr),
}
#: The optimizers ``--eps`` applies to, each made from the learning rate and eps with Keras' other defaults.
EPS_OPTIMIZERS: dict[str, Callable[[float, float], Optimizer]] = {
    "adam": lambda lr, eps: Adam(lr, eps=eps),
    "rmsprop": lambda lr, eps: RMSprop(lr, eps=eps),
    "adamw": lambda lr, eps: AdamW(lr, eps=eps),
}


def make_optimizer(name: str, lr: float, eps: float | None = None) -> Optimizer:
    """The optimizer ``--optimizer name --lr lr [--eps eps]`` names.

    Args:
        name: a key of :data:`OPTIMIZERS`.
        lr: the learning rate.
        eps: the optimizer's epsilon, or None for Keras' default (1e-7).

    Returns:
        The optimizer.

    Raises:
        ArgumentError: an ``eps`` for an optimizer that has none (SGD, momentum).
    """
    if eps is None:
        return OPTIMIZERS[name](lr)
    if name not in EPS_OPTIMIZERS:
        raise ArgumentError(f"--eps {eps:g} given for --optimizer {name}, which has no eps; it applies to "
                         f"{', '.join(EPS_OPTIMIZERS)}")
    return EPS_OPTIMIZERS[name](lr, eps)


def _max_abs_diff(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in a)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def run_comparison(workload: Workload, backends: Sequence[str], device_counts: Sequence[int], dtype: str,
                   optimizer: str, lr: float, steps: int, batch: int, seed: int,
                   progress: Callable[[str], None] | None = None,
                   batches: Sequence[np.ndarray] | None = None, init_seed: int | None = None,
                   data_seed: int | None = None, noise_seed: int | None = None,
                   split_bound: float = SPLIT_BOUND, eps: float | None = None,
                   perturbation: Perturbation | None = None, first_step_rounding: bool = False) -> dict[str, Any]:
    """Train ``workload`` for ``steps`` steps on every backend and device count, on the same batches: ``batches``
    (row indices of the training data, one array per step; ``steps`` and ``batch`` are then ignored), or ``steps``
    batches of ``batch`` rows from :func:`~toolkit.command.workloads.draw_batches`.

    ``seed`` seeds the initial parameters, the data and the per-example noise, except those that ``init_seed``,
    ``data_seed`` or ``noise_seed`` set (:mod:`toolkit.command.seeds`).

    Every run takes its step in turn (lockstep), so that after each step the parameters of any two runs can be
    compared: the two backends on one device count (``divergence``), and one backend on two device counts
    (``within``: the same math in another summation order, the rounding-only divergence a cross-backend one is
    judged against); and every pair of runs parameter by parameter (``pairs``: where they part, past
    ``split_bound``).

    Args:
        workload: the model and its data.
        backends: the backends' names; the first two are compared in ``divergence``.
        device_counts: the device counts each backend runs on.
        dtype: the computation dtype.
        optimizer: a name of :data:`OPTIMIZERS`.
        lr: the learning rate.
        steps: the number of steps.
        batch: the global batch size.
        seed: the seed of this comparison.
        progress: called after each step with the step in words, or None.
        batches: row indices of the training data, one array per step, or None to draw them.
        init_seed, data_seed, noise_seed: a seed fixed for every seed of the axis for the initial parameters, the
            data, or the per-example noise (None: the seed's own).
        split_bound: the relative divergence past which a pair of runs counts as parted.
        eps: the optimizer's epsilon (:func:`make_optimizer`), or None for its default.
        perturbation: one backend's outputs scaled on the runs it applies to (``--perturb``), or None.
        first_step_rounding: float32 runs: also take each backend's first step in float64 (on the first device
            count), for ``first_step_rounding`` (what ``multigpu parity`` raises its null to).

    Returns:
        The results (the module's docstring gives their fields), each run with its final ``params``.
    """
    (seeds,) = run_seeds([seed], init_seed, data_seed, noise_seed)
    x_train, y_train, x_test, y_test = workload.data(seeds.data)
    if batches is None:
        batches = draw_batches(len(x_train), batch, steps, seeds.data)
    steps = len(batches)

    def model(name: str, n: int):
        return perturbation.model(workload.model) if perturbation and perturbation.applies(name, n) \
            else workload.model

    trainers = {(name, n): _trainer(workload, model(name, n), name, n, make_optimizer(optimizer, lr, eps), dtype,
                                    seeds)
                for n in device_counts for name in backends}
    records = {key: {"losses": [], "times": []} for key in trainers}
    cross = [((backends[0], n), (backends[1], n)) for n in device_counts] if len(backends) >= 2 else []
    same = [((name, a), (name, b)) for name in backends for a, b in itertools.combinations(device_counts, 2)]
    pairs = cross + same
    gaps: dict[tuple, list[float]] = {pair: [] for pair in pairs}
    every = list(itertools.combinations(trainers, 2))
    relative: dict[tuple, list[dict[str, float]]] = {pair: [] for pair in every}
    for step, index in enumerate(batches):
        for key, trainer in trainers.items():
            began = time.perf_counter()
            records[key]["losses"].append(trainer.step(x_train[index], y_train[index]))
            records[key]["times"].append((time.perf_counter() - began) * 1e3)
        params = {key: trainer.params() for key, trainer in trainers.items()} if every else {}
        for first, second in pairs:
            gaps[(first, second)].append(_max_abs_diff(params[first], params[second]))
        for first, second in every:
            relative[(first, second)].append(relative_divergence(params[first], params[second]))
        if step == 0 and first_step_rounding:
            after_first = {key: trainer.params() for key, trainer in trainers.items()}
        if progress:
            progress(f"step {step + 1}/{steps}")
    rounding = {}
    if first_step_rounding and dtype == "float32" and steps:
        n = device_counts[0]
        for name in backends:  # the first step again, in float64: how far float32 rounding alone moves it
            exact = _trainer(workload, model(name, n), name, n, make_optimizer(optimizer, lr, eps), "float64", seeds)
            exact.step(x_train[batches[0]], y_train[batches[0]])
            rounding[name] = relative_divergence(after_first[(name, n)], exact.params())
    runs = []
    for (name, n), trainer in trainers.items():
        times = records[(name, n)]["times"]
        steady = times[1:] or times
        deciles = statistics.quantiles(steady, n=10) if len(steady) > 1 else [steady[0]] * 9
        score = None
        if workload.classifier:
            score = accuracy(trainer.predict(x_test), y_test)  # inference: moving statistics, no dropout
        runs.append({"backend": name, "devices": n, "seed": seed, "seeds": seeds.as_dict(),
                     "device_names": [str(d) for d in trainer.devices],
                     "losses": records[(name, n)]["losses"], "step_times_ms": times, "first_step_ms": times[0],
                     "median_ms": statistics.median(steady), "p10_ms": deciles[0], "p90_ms": deciles[-1],
                     "peak_rss_mb": _peak_rss_mb(), "accuracy": score, "params": trainer.params()})
    divergence = [{"devices": first[1], "backends": list(backends[:2]), "max_abs_param_diff": gaps[(first, second)],
                   "param_scale": max(float(np.max(np.abs(v))) for v in trainers[first].params().values()),
                   "seed": seed}
                  for first, second in cross]
    within = [{"backend": first[0], "devices": [first[1], second[1]], "max_abs_param_diff": gaps[(first, second)],
               "seed": seed} for first, second in same]
    compared = [{**pair_record(first, second, relative[(first, second)], split_bound), "seed": seed,
                 "rel_param_curves": {name: [step[name] for step in relative[(first, second)]]
                                      for name in relative[(first, second)][0]} if steps else {}}
                for first, second in every]
    return _with_summaries({"schema": SCHEMA, "version": SCHEMA_VERSION, "runs": runs, "divergence": divergence,
                            "within": within, "pairs": compared, "split_bound": split_bound,
                            "first_step_rounding": rounding})


def run_over_seeds(workload: Workload, backends: Sequence[str], device_counts: Sequence[int], dtype: str,
                   optimizer: str, lr: float, steps: int, batch: int, seeds: Sequence[int],
                   init_seed: int | None = None, data_seed: int | None = None, noise_seed: int | None = None,
                   split_bound: float = SPLIT_BOUND,
                   progress: Callable[[str], None] | None = None, eps: float | None = None,
                   perturbation: Perturbation | None = None, first_step_rounding: bool = False) -> dict[str, Any]:
    """:func:`run_comparison` once per seed of ``seeds`` (each seed seeding what ``init_seed``, ``data_seed`` and
    ``noise_seed`` leave to it), the runs, divergences and pairs of every seed together, and the statistics over
    seeds (``statistics``, ``pair_summary``, ``kind_summary``).

    Args:
        workload: the model and its data.
        backends: the backends' names; the first two are compared in ``divergence``.
        device_counts: the device counts each backend runs on.
        dtype: the computation dtype.
        optimizer: a name of :data:`OPTIMIZERS`.
        lr: the learning rate.
        steps: the number of steps.
        batch: the global batch size.
        seeds: the seeds of the axis; the first is the one ``params.npz`` keeps.
        init_seed, data_seed, noise_seed: a seed fixed for every seed of the axis for the initial parameters, the
            data, or the per-example noise (None: the seed's own).
        split_bound: the relative divergence past which a pair of runs counts as parted.
        progress: called after each step with the seed and step in words, or None.
        eps: the optimizer's epsilon (:func:`make_optimizer`), or None for its default.
        perturbation: one backend's outputs scaled on the runs it applies to (``--perturb``), or None.
        first_step_rounding: as :func:`run_comparison`'s (the first seed's is kept).

    Returns:
        The results of every seed together, with the statistics over seeds.

    Raises:
        ValueError: a bad seed (:func:`toolkit.command.seeds.run_seeds`), before anything trains.
    """
    run_seeds(seeds, init_seed, data_seed, noise_seed)  # checks them all before anything trains
    found = []
    for i, seed in enumerate(seeds):
        tell = None if progress is None else (lambda text, i=i, seed=seed:
                                              progress(f"seed {seed} ({i + 1}/{len(seeds)}), {text}"))
        found.append(run_comparison(workload, backends, device_counts, dtype, optimizer, lr, steps, batch, seed,
                                    progress=tell, init_seed=init_seed, data_seed=data_seed, noise_seed=noise_seed,
                                    split_bound=split_bound, eps=eps, perturbation=perturbation,
                                    first_step_rounding=first_step_rounding and i == 0))
    merged = {key: [entry for result in found for entry in result[key]]
              for key in ("runs", "divergence", "within", "pairs")}
    return _with_summaries({"schema": SCHEMA, "version": SCHEMA_VERSION, **merged, "split_bound": split_bound,
                            "first_step_rounding": found[0]["first_step_rounding"]})


def _with_summaries(results: dict[str, Any]) -> dict[str, Any]:
    return {**results, "pair_summary": summarize_pairs(results["pairs"]),
            "kind_summary": summarize_kinds(results["pairs"]), "parted_test": parted_test(results["pairs"]),
            "statistics": seed_statistics(results["runs"])}


def _trainer(workload: Workload, model, backend: str, devices: int, optimizer: Optimizer, dtype: str,
             seeds: RunSeeds) -> DataParallel:
    """A trainer of ``model`` (the workload's, or it perturbed) whose per-example noise is keyed by
    ``seeds.noise``, starting from ``seeds.init``'s parameters (those of the workload's model)."""
    trainer = DataParallel(model, backend, devices, optimizer, dtype=dtype, seed=seeds.noise)
    seed_trainer(trainer, workload.model, seeds)
    return trainer


#: The file, beside results.json, that holds every run's final parameters (``multigpu parity --against`` reads it).
PARAMS_FILE = "params.npz"


def save_params(results: dict[str, Any], folder: Path) -> list[Path]:
    """Every run's final parameters, as ``backend/devices/name``: the first seed's in ``folder/params.npz``, each
    other seed ``S``'s in ``folder/params-seed-S.npz``.

    Args:
        results: a comparison's results, with each run's ``params``.
        folder: the existing folder written to.

    Returns:
        The files written, the first seed's first.
    """
    by_seed: dict[int, list[dict[str, Any]]] = {}
    for run in results["runs"]:
        by_seed.setdefault(run.get("seed", 0), []).append(run)
    written = []
    for i, (seed, runs) in enumerate(by_seed.items()):
        path = Path(folder) / (PARAMS_FILE if i == 0 else f"params-seed-{seed}.npz")
        np.savez(path, **{f"{run['backend']}/{run['devices']}/{name}": value
                          for run in runs for name, value in run["params"].items()})
        written.append(path)
    return written


def load_params(results_json: Path) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """The first seed's final parameters saved beside ``results_json`` by :func:`save_params`.

    Args:
        results_json: the path of a ``results.json``; :data:`PARAMS_FILE` is read from its folder.

    Returns:
        ``{(backend, devices): {name: array}}``.

    Raises:
        ValueError: no :data:`PARAMS_FILE` beside it.
    """
    path = Path(results_json).parent / PARAMS_FILE
    if not path.is_file():
        raise ValueError(f"{path} is missing: `multigpu compare --out` writes it beside results.json")
    out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    with np.load(path) as saved:
        for key in saved.files:
            backend, devices, name = key.split("/", 2)
            out.setdefault((backend, int(devices)), {})[name] = saved[key]
    return out


def public(results: dict[str, Any]) -> dict[str, Any]:
    """The results as written to ``results.json``: without each run's final parameters.

    Args:
        results: a comparison's results.

    Returns:
        A copy without the runs' ``params`` (the arrays go to ``params.npz``).
    """
    return {**results, "runs": [{k: v for k, v in run.items() if k != "params"} for run in results["runs"]],
            "pairs": [{k: v for k, v in pair.items() if k != "rel_param_curves"} for pair in results["pairs"]]}


def markdown(results: dict[str, Any]) -> str:
    """The comparison table of docs/guides/compare.md: per backend and device count, the first step
    (trace/compile), the median step with p10-p90, test accuracy and the largest parameter divergence between the
    first two backends.

    Args:
        results: a comparison's results.

    Returns:
        The markdown table, ending in a newline.
    """
    divergence = {d["devices"]: max(d["max_abs_param_diff"]) for d in results["divergence"]}
    lines = ["| backend | devices | first step | median step (p10-p90) | test accuracy | max divergence |",
             "|---|---|---|---|---|---|"]
    shown = set()
    for run in results["runs"]:
        gap = f"{divergence[run['devices']]:.2g}" if run["devices"] in divergence and run["devices"] not in shown \
            else ""
        shown.add(run["devices"])
        score = "" if run["accuracy"] is None else f"{run['accuracy']:.3f}"
        step = f"{run['median_ms']:.2f} ms ({run['p10_ms']:.2f}-{run['p90_ms']:.2f})"
        first = f"{run['first_step_ms']:.0f} ms"
        lines.append(f"| {run['backend']} | {run['devices']} | {first} | {step} | {score} | {gap} |")
    return "\n".join(lines) + "\n"


def models_markdown(results: dict[str, dict[str, Any]]) -> str:
    """The built-in models' table of docs/guides/compare.md (docs/models.json: a comparison per model): per
    model, backend and device count, the first step (which includes tracing and compiling), the median step, and
    the largest parameter divergence between the backends over the run.

    Args:
        results: ``{model name: its comparison's results}``.

    Returns:
        The markdown table, ending in a newline.
    """
    lines = ["| model | backend | devices | first step (compile) | median step | max divergence |",
             "|---|---|---|---|---|---|"]
    for model, result in results.items():
        divergence = {d["devices"]: max(d["max_abs_param_diff"]) for d in result["divergence"]}
        for run in result["runs"]:
            gap = f"{divergence[run['devices']]:.2g}" if run["backend"] == result["runs"][0]["backend"] else ""
            lines.append(f"| {model} | {run['backend']} | {run['devices']} | {run['first_step_ms'] / 1e3:.1f} s | "
                         f"{run['median_ms']:.1f} ms | {gap} |")
    return "\n".join(lines) + "\n"


def lengths_markdown(records: list[dict[str, Any]]) -> str:
    """The sequence-length table of docs/guides/compare.md: a recurrent model's first step at several sequence
    lengths (docs/lengths.json), one row per length, the backends side by side.

    Args:
        records: one per model, sequence length and backend: ``model``, ``seq_len``, ``backend``,
            ``first_step_s``, ``median_ms``.

    Returns:
        The markdown table, ending in a newline.
    """
    backends = list(dict.fromkeys(r["backend"] for r in records))
    lines = ["| model | sequence length | " + " | ".join(f"{b} first step | {b} median step" for b in backends) + " |",
             "|---|---|" + "---|---|" * len(backends)]
    for key in dict.fromkeys((r["model"], r["seq_len"]) for r in records):
        found = {r["backend"]: r for r in records if (r["model"], r["seq_len"]) == key}
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(
            f"{found[b]['first_step_s']:.1f} s | {found[b]['median_ms']:.1f} ms" for b in backends) + " |")
    return "\n".join(lines) + "\n"
