"""Timing each backend and device count in its own fresh process (``multigpu time``).

``multigpu compare`` runs every backend and device count in one process, taking turns, so that their numbers can
be compared step by step; its timings then carry the process's history (the first run pays the process's start-up,
memory only grows). Here every backend and device count is a new Python process (``python -m
toolkit.command.timing SPEC``) that imports only its framework and reports, as one JSON line:

- ``startup_s``: from the parent starting the process to the backend ready on its devices (interpreter, imports,
  devices), apart from compilation;
- ``first_step_s``: the first training step (tracing or compiling it);
- ``rounds_ms``: per round of ``steps`` steps (after the first), the median step time in ms;
- ``peak_rss_mb``: that process's own peak resident memory;
- ``load``: the machine's 1-minute load average, the largest of its values when the timed steps start and end, and
  ``cores``, the machine's logical cores. Other processes' work shows in the steps: a load above the cores means a
  core was not always free. A step over several logical devices suffers most (their threads meet at every
  cross-device sum, and each waits for the others to be scheduled): on this project's 2-core machines at a load of
  about 10, the digits MLP's Aesara step on 2 devices measured 1.8 to 5.5 ms in fresh processes, 6.9 ms pinned to one
  core (1 device: 0.5 and 0.9 ms).

The parent gives each run the median over rounds with a bootstrap interval, and per device count every backend's
ratio to the first backend with the bootstrap interval of the ratio of medians
(:func:`toolkit.command.bench.statistics.ratio_interval`, rounds resampled on each side).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: The results' ``schema`` entry and version.
SCHEMA, SCHEMA_VERSION = "multigpu-toolkit/time", 1
#: The interval of a median over rounds: bootstrap percentiles (the same level as the bench's ratios).
INTERVAL_PERCENTILES = (2.5, 97.5)
#: Bootstrap resamples, and their seed (the intervals are reproducible).
RESAMPLES, RESAMPLE_SEED = 2000, 0


def median_interval(values: Sequence[float]) -> tuple[float, float]:
    """The bootstrap interval of the median of ``values`` (:data:`INTERVAL_PERCENTILES`).

    Args:
        values: per-round values.

    Returns:
        ``(low, high)``.
    """
    data = np.asarray(values, np.float64)
    picks = np.random.default_rng(RESAMPLE_SEED).integers(0, len(data), size=(RESAMPLES, len(data)))
    low, high = np.percentile(np.median(data[picks], axis=1), INTERVAL_PERCENTILES)
    return float(low), float(high)


def worker(spec: dict[str, Any], started: float) -> dict[str, Any]:
    """One backend and device count, timed in this process (which should be fresh).

    Args:
        spec: ``model``, ``backend``, ``devices``, ``dtype``, ``optimizer``, ``lr``, ``eps``, ``batch``, ``steps``
            (per round), ``rounds``, ``seed``.
        started: ``time.time()`` when the parent started this process.

    Returns:
        ``startup_s``, ``first_step_s``, ``rounds_ms``, ``peak_rss_mb``, ``load``, ``cores``.
    """
    import toolkit
    from toolkit.command.compare import make_optimizer
    from toolkit.command.workloads import draw_batches, load_workload
    from toolkit.training.data_parallel import DataParallel

    workload = load_workload(spec["model"])
    toolkit.use_logical_devices(spec["devices"])
    trainer = DataParallel(workload.model, spec["backend"], spec["devices"],
                           make_optimizer(spec["optimizer"], spec["lr"], spec["eps"]), dtype=spec["dtype"],
                           seed=spec["seed"])
    x, y, _, _ = workload.data(spec["seed"])
    batches = draw_batches(len(x), spec["batch"], 1 + spec["steps"] * spec["rounds"], spec["seed"])
    ready = time.time()
    load = os.getloadavg()[0]
    began = time.perf_counter()
    trainer.step(x[batches[0]], y[batches[0]])
    first = time.perf_counter() - began
    rounds = []
    for r in range(spec["rounds"]):
        times = []
        for index in batches[1 + r * spec["steps"]:1 + (r + 1) * spec["steps"]]:
            began = time.perf_counter()
            trainer.step(x[index], y[index])
            times.append((time.perf_counter() - began) * 1e3)
        rounds.append(statistics.median(times))
    return {"startup_s": ready - started, "first_step_s": first, "rounds_ms": rounds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "load": max(load, os.getloadavg()[0]), "cores": os.cpu_count()}


def busy_note(runs: Sequence[dict[str, Any]]) -> str | None:
    """A warning where the machine was busier than its cores while any run was timed (see the module's docstring).

    Args:
        runs: a timing's runs.

    Returns:
        The sentence, or None where every run had a core free (or the runs do not say: results from before ``load``).
    """
    busy = [run for run in runs if run.get("load", 0) > run.get("cores", float("inf"))]
    if not busy:
        return None
    worst = max(busy, key=lambda run: run["load"] / run["cores"])
    return (f"the machine was busy while {len(busy)} of {len(runs)} runs were timed (load average up to "
            f"{worst['load']:.1f} on {worst['cores']} cores): their steps include waiting for a core, multi-device "
            "steps most; time again on a quiet machine before reading ratios")


def run_timing(config: dict[str, Any], timeout: float,
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Time every backend and device count of ``config`` in its own process, one after another.

    Args:
        config: ``model``, ``backends``, ``devices`` (counts), ``dtype``, ``optimizer``, ``lr``, ``eps``,
            ``batch``, ``steps``, ``rounds``, ``seed``.
        timeout: seconds allowed per process.
        progress: called after each process with what it timed, or None.

    Returns:
        ``schema``, ``version``, ``config``, ``runs`` (one per backend and device count: the worker's fields, and
        ``median_ms``, ``low_ms``, ``high_ms``; or ``error``), ``ratios`` (per device count, each other backend's
        median over the first backend's, with ``low`` and ``high``).
    """
    from toolkit.command.bench.statistics import ratio_interval

    runs = []
    for devices in config["devices"]:
        for backend in config["backends"]:
            spec = {**{k: config[k] for k in ("model", "dtype", "optimizer", "lr", "eps", "batch", "steps",
                                              "rounds", "seed")}, "backend": backend, "devices": devices}
            run = {"backend": backend, "devices": devices, **_spawn(spec, timeout)}
            if "rounds_ms" in run:
                low, high = median_interval(run["rounds_ms"])
                run.update(median_ms=statistics.median(run["rounds_ms"]), low_ms=low, high_ms=high)
            runs.append(run)
            if progress:
                progress(f"{backend} on {devices} device(s)")
    ratios = []
    for devices in config["devices"]:
        found = {run["backend"]: run for run in runs if run["devices"] == devices and "rounds_ms" in run}
        base = config["backends"][0]
        for backend in config["backends"][1:]:
            if base in found and backend in found:
                low, high = ratio_interval(found[backend]["rounds_ms"], found[base]["rounds_ms"], paired=False)
                ratios.append({"devices": devices, "backend": backend, "over": base, "low": low, "high": high,
                               "ratio": found[backend]["median_ms"] / found[base]["median_ms"]})
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "config": config, "runs": runs, "ratios": ratios}


def _spawn(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run :func:`worker` in a new interpreter; its JSON line, or ``{"error": ...}``."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")}
    started = time.time()
    try:
        done = subprocess.run([sys.executable, "-m", "toolkit.command.timing", json.dumps(spec), repr(started)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit status {done.returncode}: {tail}"}
    return json.loads(lines[-1])


def print_timing(results: dict[str, Any]) -> None:
    """The table of a timing: one row per backend and device count, then the ratios.

    Args:
        results: :func:`run_timing`'s results.
    """
    from rich.table import Table

    from toolkit.command.compare_tables import make_console

    config = results["config"]
    table = Table(title=f"{config['model']}: {config['optimizer']}({config['lr']}), {config['dtype']}, batch "
                        f"{config['batch']}; each in its own process, {config['rounds']} rounds of {config['steps']} "
                        "steps")
    for column in ("backend", "devices", "start-up", "first step", "median step (95% interval)", "peak RSS"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for run in results["runs"]:
        if "error" in run:
            table.add_row(run["backend"], str(run["devices"]), run["error"], "", "", "")
            continue
        table.add_row(run["backend"], str(run["devices"]), f"{run['startup_s']:.1f} s", f"{run['first_step_s']:.2f} s",
                      f"{run['median_ms']:.2f} ms ({run['low_ms']:.2f}-{run['high_ms']:.2f})",
                      f"{run['peak_rss_mb']:.0f} MB")
    console = make_console()
    console.print(table)
    for ratio in results["ratios"]:
        console.print(f"{ratio['devices']} device(s): {ratio['backend']} / {ratio['over']} median step = "
                      f"{ratio['ratio']:.2f} (95% interval {ratio['low']:.2f}-{ratio['high']:.2f})", highlight=False)
    print("start-up: from starting the process to the backend ready on its devices (interpreter, imports), apart "
          "from the first step (tracing or compiling); peak RSS: each process's own")
    note = busy_note(results["runs"])
    if note:
        print(note)


if __name__ == "__main__":
    print(json.dumps(worker(json.loads(sys.argv[1]), float(sys.argv[2]))))
