"""The numbers ``multigpu bench`` reports from its step times: ratios between candidates and fractions of the
machine's peak, each with a bootstrap interval over the rounds and a verdict against its target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from toolkit.command.bench.schema import INPUT_CANDIDATES
from toolkit.command.bench.targets import (
    CROSS_BACKEND_BOUNDS,
    DISPATCH_SCALING_BOUND,
    INPUT_THROUGHPUT_TARGET,
    PEAK_FRACTION_TARGET,
    SCALING_BOUND,
    SCALING_DEVICES,
    target_for,
)

#: The bootstrap behind each ratio's interval: resamples of the rounds, the interval's percentiles (a 90% interval),
#: and a fixed seed so the same measurements always give the same interval.
BOOTSTRAP_RESAMPLES, INTERVAL_PERCENTILES, BOOTSTRAP_SEED = 2000, (5.0, 95.0), 0


def _by_run(runs: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """The runs by ``(model, backend, candidate, devices)``."""
    return {(r.get("model", ""), r["backend"], r["candidate"], r["devices"]): r for r in runs}


def ratio_interval(candidate: Sequence[float], baseline: Sequence[float], paired: bool) -> tuple[float, float]:
    """The bootstrap interval of ``median(candidate) / median(baseline)`` over rounds (:data:`INTERVAL_PERCENTILES`).

    ``paired``: the two were measured in the same rounds of one process (taking turns), so a round is resampled as a
    pair and what slowed the whole machine during a round cancels; otherwise each side is resampled on its own.

    Args:
        candidate: the candidate's per-round step times.
        baseline: the baseline's per-round step times.
        paired: resample rounds as pairs (the two sides need as many rounds).

    Returns:
        ``(low, high)``, the interval's ends.
    """
    a, b = np.asarray(candidate, np.float64), np.asarray(baseline, np.float64)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(a), size=(BOOTSTRAP_RESAMPLES, len(a)))
    other = picks if paired and len(a) == len(b) else rng.integers(0, len(b), size=(BOOTSTRAP_RESAMPLES, len(b)))
    samples = np.median(a[picks], axis=1) / np.median(b[other], axis=1)
    low, high = np.percentile(samples, INTERVAL_PERCENTILES)
    return float(low), float(high)


def verdict(low: float, high: float, target: float | None) -> str | None:
    """Whether a ratio (lower is better) meets its target, judged on its interval.

    Args:
        low, high: the ratio's interval.
        target: the largest ratio that meets the target, or None.

    Returns:
        ``"met"`` (the whole interval at or below the target), ``"not met"`` (the whole interval above),
        ``"within noise"``, or None without a target.
    """
    if target is None:
        return None
    return "met" if high <= target else "not met" if low > target else "within noise"


def ratios(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model: every toolkit candidate over every native of its backend in the same process, and each candidate
    that uses all the process's devices over its own one-device run (scaling); with the targets of
    :data:`~toolkit.command.bench.targets.TARGETS` and the scaling bounds where they apply, each with its bootstrap
    interval and verdict.

    Args:
        runs: the results file's runs (each with ``model``, ``backend``, ``candidate``, ``devices``, ``round_ms``,
            ``median_ms``).

    Returns:
        One dict per ratio: ``model``, ``backend``, ``devices``, ``candidate``, ``baseline``, ``baseline_devices``,
        ``ratio``, ``low``, ``high``, ``target`` and ``verdict``.
    """
    found = _by_run(runs)
    out = []

    def add(model, backend, devices, candidate, baseline, baseline_devices, target):
        top, bottom = found[(model, backend, candidate, devices)], found[(model, backend, baseline, baseline_devices)]
        low, high = ratio_interval(top["round_ms"], bottom["round_ms"], paired=devices == baseline_devices)
        out.append({"model": model, "backend": backend, "devices": devices, "candidate": candidate,
                    "baseline": baseline, "baseline_devices": baseline_devices,
                    "ratio": top["median_ms"] / bottom["median_ms"], "low": low, "high": high, "target": target,
                    "verdict": verdict(low, high, target)})

    for (model, backend, candidate, devices), run in found.items():
        if not candidate.startswith("toolkit"):
            continue
        for other_model, other, baseline, other_devices in found:
            if ((other_model, other, other_devices) == (model, backend, devices) and not baseline.startswith("toolkit")
                    and baseline not in INPUT_CANDIDATES):
                add(model, backend, devices, candidate, baseline, devices,
                    target_for(backend, candidate, baseline, devices, run.get("compute_bound", False)))
    for (model, backend, candidate, devices), run in found.items():
        if (devices > 1 and (model, backend, candidate, 1) in found and run.get("devices_used", devices) == devices
                and candidate not in INPUT_CANDIDATES):
            target = None
            if candidate == "toolkit" and devices == SCALING_DEVICES:
                target = SCALING_BOUND if run.get("compute_bound", False) else DISPATCH_SCALING_BOUND
            add(model, backend, devices, candidate, candidate, 1, target)
    return out


def inputs(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, backend and device count: the toolkit's fit from each source (a generator, ``tf.data``) against
    its fit from arrays in the same process (paired rounds), as a throughput share (higher is better), judged
    against :data:`~toolkit.command.bench.targets.INPUT_THROUGHPUT_TARGET`.

    Args:
        runs: the results file's runs.

    Returns:
        One dict per input candidate: ``model``, ``backend``, ``devices``, ``candidate``, ``baseline``
        (``"fit-arrays"``), ``throughput``, ``low``, ``high``, ``target`` and ``verdict``.
    """
    found = _by_run(runs)
    out = []
    for (model, backend, candidate, devices), run in found.items():
        arrays = found.get((model, backend, INPUT_CANDIDATES[0], devices))
        if candidate not in INPUT_CANDIDATES[1:] or arrays is None:
            continue
        low, high = ratio_interval(arrays["round_ms"], run["round_ms"], paired=True)
        out.append({"model": model, "backend": backend, "devices": devices, "candidate": candidate,
                    "baseline": INPUT_CANDIDATES[0], "throughput": arrays["median_ms"] / run["median_ms"],
                    "low": low, "high": high, "target": INPUT_THROUGHPUT_TARGET,
                    "verdict": at_least(low, high, INPUT_THROUGHPUT_TARGET)})
    return out


def at_least(low: float, high: float, target: float) -> str:
    """Whether a share (higher is better) meets its target, judged on its interval.

    Args:
        low, high: the share's interval.
        target: the smallest share that meets the target.

    Returns:
        ``"met"`` (the whole interval at or above the target), ``"not met"`` (the whole interval below) or
        ``"within noise"``.
    """
    return "met" if low >= target else "not met" if high < target else "within noise"


def cross_backend(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model and device count: every toolkit candidate of every backend over the fastest backend's toolkit
    step, measured in the same process taking turns (paired rounds), with its bootstrap interval; judged against
    :data:`~toolkit.command.bench.targets.CROSS_BACKEND_BOUNDS` on the compute-bound models at one device.

    Args:
        runs: the results file's runs.

    Returns:
        One dict per toolkit candidate: ``model``, ``devices``, ``backend``, ``candidate``, ``median_ms``,
        ``fastest`` (the fastest backend's name), ``ratio``, ``low``, ``high``, ``target``, ``verdict``,
        ``peak_fraction`` and ``products_alone_gflops`` (null where not measured).
    """
    out = []
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in runs:
        if run["candidate"].startswith("toolkit"):
            groups.setdefault((run.get("model", ""), run["devices"]), []).append(run)
    for (model, devices), group in groups.items():
        plain = [r for r in group if r["candidate"] == "toolkit"]
        if len({r["backend"] for r in plain}) < 2:
            continue
        fastest = min(plain, key=lambda r: r["median_ms"])
        for run in group:
            low, high = ratio_interval(run["round_ms"], fastest["round_ms"], paired=True)
            target = (CROSS_BACKEND_BOUNDS.get(run["candidate"]) if devices == 1 and run.get("compute_bound")
                      else None)
            out.append({"model": model, "devices": devices, "backend": run["backend"],
                        "candidate": run["candidate"], "median_ms": run["median_ms"], "fastest": fastest["backend"],
                        "ratio": run["median_ms"] / fastest["median_ms"], "low": low, "high": high,
                        "target": target, "verdict": verdict(low, high, target),
                        "peak_fraction": run.get("peak_fraction"),
                        "products_alone_gflops": run.get("products_alone_gflops")})
    return out


def fractions(runs: Sequence[dict[str, Any]], best_peak_gflops: float) -> list[dict[str, Any]]:
    """On each compute-bound model, every backend's one-device toolkit step as a fraction of the best matmul peak,
    with a bootstrap interval over its rounds; the faster backend's is judged against :data:`PEAK_FRACTION_TARGET`
    (the other is reported, with no target).

    Args:
        runs: the results file's runs.
        best_peak_gflops: the best matmul peak measured on the machine, in GFLOP/s.

    Returns:
        One dict per compute-bound one-device toolkit run: ``model``, ``backend``, ``candidate``, ``fraction``,
        ``low``, ``high``, ``target``, ``verdict``, ``products_alone_fraction`` and ``of_products_alone``.
    """
    candidates = [r for r in runs if r.get("compute_bound") and r["candidate"] == "toolkit" and r["devices"] == 1]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    out = []
    for run in candidates:
        rounds = np.asarray(run["round_ms"], np.float64)
        medians = np.median(rounds[rng.integers(0, len(rounds), size=(BOOTSTRAP_RESAMPLES, len(rounds)))], axis=1)
        share = run["gflop_per_step"] / (medians / 1e3) / best_peak_gflops
        low, high = np.percentile(share, INTERVAL_PERCENTILES)
        alone = run.get("products_alone_gflops")
        out.append({"model": run["model"], "backend": run["backend"], "candidate": run["candidate"],
                    "fraction": run["peak_fraction"], "low": float(low), "high": float(high), "target": None,
                    "verdict": None, "products_alone_fraction": None if alone is None else alone / best_peak_gflops,
                    "of_products_alone": None if alone is None else run["gflops"] / alone})
    for model in {f["model"] for f in out}:
        best = max((f for f in out if f["model"] == model), key=lambda f: f["fraction"])
        best["target"] = PEAK_FRACTION_TARGET
        best["verdict"] = at_least(best["low"], best["high"], PEAK_FRACTION_TARGET)
    return out
