"""Where two runs part, and whether the framework or the summation order parts them (``multigpu compare``).

Every pair of runs of one seed is compared after every step, parameter by parameter, relative to the model's
parameter scale (:func:`relative_divergence`). A pair is one of three kinds (:data:`PAIR_KINDS`): two backends on
one device count (the framework alone), one backend on two device counts (the summation order alone: the same math,
the batch summed in other parts), or both at once. The order pairs are the baseline a framework pair is read against: in
float32 a rounding-level difference can cross a ReLU or max-pool boundary and grow, and it does so for one
framework's own reorderings as often as across frameworks. A pair *parts* at the first step its divergence passes
:data:`toolkit.tolerances.SPLIT_BOUND`.
"""

from __future__ import annotations

import collections
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.tolerances import SPLIT_BOUND

#: The kinds of pair, by what differs between the two runs.
PAIR_KINDS = {
    "framework": "the backend",
    "order": "the device count (summation order)",
    "both": "backend and device count",
}


def relative_divergence(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Per parameter, max |a - b| over the model's parameter scale: the largest |value| of any parameter of either
    run (all 0: 0), computed in float64.

    The scale is the model's, as :data:`toolkit.tolerances.FLOAT32_RTOL`'s, not each parameter's own: a parameter
    that gets no gradient in exact arithmetic (an attention key's bias: softmax ignores a shift of its logits) is
    moved by rounding noise alone, stays near 1e-6, and differs between any two runs by as much as its own size.

    Args:
        a: one run's parameters by name.
        b: the other's, with at least ``a``'s names.

    Returns:
        ``{name: divergence}`` for every name of ``a``.
    """
    pairs = {name: (np.asarray(first, dtype=np.float64), np.asarray(b[name], dtype=np.float64))
             for name, first in a.items()}
    scale = max((float(np.max(np.abs(x))) for pair in pairs.values() for x in pair if x.size), default=0.0)
    return {name: float(np.max(np.abs(x - y))) / scale if scale > 0 and x.size else 0.0
            for name, (x, y) in pairs.items()}


def pair_kind(first: tuple[str, int], second: tuple[str, int]) -> str:
    """The kind of a pair of runs: a key of :data:`PAIR_KINDS`.

    Args:
        first, second: the runs, each ``(backend, devices)``.

    Returns:
        ``"order"`` (one backend), ``"framework"`` (one device count) or ``"both"``.
    """
    if first[0] == second[0]:
        return "order"
    return "framework" if first[1] == second[1] else "both"


def first_step_past(values: Sequence[float], bound: float) -> int | None:
    """The first step whose value exceeds ``bound``.

    Args:
        values: one value per step.
        bound: the bound.

    Returns:
        The step, counted from 1, or None where no value exceeds ``bound``.
    """
    past = np.flatnonzero(np.asarray(values, dtype=np.float64) > bound)
    return int(past[0]) + 1 if len(past) else None


def pair_record(first: tuple[str, int], second: tuple[str, int], per_step: Sequence[Mapping[str, float]],
                bound: float = SPLIT_BOUND) -> dict[str, Any]:
    """What results.json says of one pair of runs, from its :func:`relative_divergence` after each step.

    Args:
        first, second: the runs, each ``(backend, devices)``.
        per_step: the pair's :func:`relative_divergence` after each step.
        bound: the divergence past which the pair parts.

    Returns:
        ``runs`` (the two, ``{"backend", "devices"}``), ``kind``, ``max_rel_param_diff`` (per step, the largest over
        parameters), ``rel_param_diff`` (per parameter, after the last step), ``split_step`` (the first step past
        ``bound``, or None), ``param_split_steps`` (the same per parameter) and ``first_parted`` (the parameters
        past ``bound`` at the split step, the largest first; empty where the pair never parts).
    """
    names = list(per_step[0]) if per_step else []
    curve = [max(step.values(), default=0.0) for step in per_step]
    param_steps = {name: first_step_past([step[name] for step in per_step], bound) for name in names}
    split = first_step_past(curve, bound)
    parted = [] if split is None else sorted((n for n in names if param_steps[n] == split),
                                             key=lambda n: -per_step[split - 1][n])
    return {"runs": [{"backend": first[0], "devices": first[1]}, {"backend": second[0], "devices": second[1]}],
            "kind": pair_kind(first, second), "max_rel_param_diff": curve,
            "rel_param_diff": dict(per_step[-1]) if per_step else {}, "split_step": split,
            "param_split_steps": param_steps, "first_parted": parted}


def _label(run: Mapping[str, Any]) -> str:
    return f"{run['backend']} x{run['devices']}"


def pair_label(pair: Mapping[str, Any]) -> str:
    """A pair's two runs in words.

    Args:
        pair: a :func:`pair_record` (or summary) with its ``runs``.

    Returns:
        E.g. ``"tensorflow x1 - aesara x2"``.
    """
    return " - ".join(_label(run) for run in pair["runs"])


def summarize_pairs(pairs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each pair of runs over the seeds: ``runs``, ``kind``, ``seeds`` (how many), ``parted`` (on how many seeds
    it parts), ``first_parted`` (the parameters that part first, the most often first over the seeds; empty where
    it never parts), ``split_steps`` (per seed, in seed order: the step or None), the divergence after the first
    step and after the last as the median and largest over seeds (``step1_median``, ``step1_max``,
    ``final_median``, ``final_max``).

    Args:
        pairs: :func:`pair_record` s of every seed, each with at least one step.

    Returns:
        One dict per pair of runs, in the order the pairs first appear.
    """
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for pair in pairs:
        grouped.setdefault(pair_label(pair), []).append(pair)
    out = []
    for found in grouped.values():
        first = [p["max_rel_param_diff"][0] for p in found]
        final = [p["max_rel_param_diff"][-1] for p in found]
        first_parted = collections.Counter(p["first_parted"][0] for p in found if p.get("first_parted"))
        out.append({"runs": found[0]["runs"], "kind": found[0]["kind"], "seeds": len(found),
                    "parted": sum(p["split_step"] is not None for p in found),
                    "first_parted": [name for name, _ in first_parted.most_common()],
                    "split_steps": [p["split_step"] for p in found],
                    "step1_median": statistics.median(first), "step1_max": max(first),
                    "final_median": statistics.median(final), "final_max": max(final)})
    return out


def summarize_kinds(pairs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The framework pairs beside their baseline, the order pairs (and the pairs that differ in both): per kind,
    ``pairs`` (pairs times seeds), ``parted``, ``split_steps`` (those that part, sorted), and the divergence after
    the first step and after the last over all of them (median and largest).

    Args:
        pairs: :func:`pair_record` s of every seed, each with at least one step.

    Returns:
        One dict per kind that has pairs, in the order of :data:`PAIR_KINDS`.
    """
    out = []
    for kind in PAIR_KINDS:
        found = [p for p in pairs if p["kind"] == kind]
        if not found:
            continue
        first = [p["max_rel_param_diff"][0] for p in found]
        final = [p["max_rel_param_diff"][-1] for p in found]
        out.append({"kind": kind, "pairs": len(found), "parted": sum(p["split_step"] is not None for p in found),
                    "split_steps": sorted(p["split_step"] for p in found if p["split_step"] is not None),
                    "step1_median": statistics.median(first), "step1_max": max(first),
                    "final_median": statistics.median(final), "final_max": max(final)})
    return out
