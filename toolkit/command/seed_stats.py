"""The gap between two kinds of run against the spread over seeds (``multigpu compare --seeds``).

For each metric of a run (:data:`METRICS`) and each pair of run kinds compared on the same seeds (two backends on one
device count: ``"framework"``; one backend on two device counts: ``"order"``, the summation order alone), the
statistics are paired: per seed, the difference between the two runs of that seed (same initial parameters, data and
noise), then over seeds the mean difference with a Student t interval at :data:`INTERVAL_LEVEL` (the seeds taken as a
sample of seeds; a paired difference cancels what the seed does to both runs). Beside it, the seed spread: the
standard deviation of the metric over seeds, of each side, pooled. A framework gap far inside the seed spread is one
a study over seeds cannot see; a gap whose interval excludes 0 is one it can.

No framework is needed here: plain NumPy on the results' runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError

#: The confidence level of every interval: a two-sided Student t interval over seeds.
INTERVAL_LEVEL = 0.95

#: The metrics compared over seeds: the last step's training loss (the same batch for every run of a seed) and the
#: test accuracy (classifiers). A metric a run does not have (None) is left out for that workload.
METRICS: dict[str, Callable[[dict[str, Any]], float | None]] = {
    "final_loss": lambda run: run["losses"][-1],
    "accuracy": lambda run: run["accuracy"],
}

#: Simpson intervals per evaluation of the t distribution's CDF: its quantiles come out within 1e-8 (relative) for 1
#: to 1000 degrees of freedom and levels up to 99.9% (checked against SciPy; tests/test_compare_stats.py checks tables).
_SIMPSON_INTERVALS = 2000


def _t_cdf_angle(angle: float, df: int) -> float:
    """P(T <= sqrt(df) tan(angle)) for Student's t with ``df`` degrees of freedom, ``0 <= angle < pi/2``.

    With ``t = sqrt(df) tan(a)`` the density becomes ``cos(a) ** (df - 1)`` times a constant: smooth and bounded on
    a bounded interval, which Simpson's rule integrates to float64 accuracy (the density in ``t`` has heavy tails)."""
    a = np.linspace(0.0, angle, _SIMPSON_INTERVALS + 1)
    weights = np.ones_like(a)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    norm = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(math.pi)
    return 0.5 + norm * float(np.dot(weights, np.cos(a) ** (df - 1))) * (angle / _SIMPSON_INTERVALS) / 3.0


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom (``0.5 <= p < 1``): e.g.
    ``t_quantile(0.975, 4) = 2.776``, the factor of a 95% interval over 5 seeds.

    Args:
        p: the probability, in ``[0.5, 1)``.
        df: the degrees of freedom, >= 1.

    Returns:
        The quantile, within 1e-8 (relative).

    Raises:
        ArgumentError: ``p`` outside ``[0.5, 1)`` or ``df < 1``.
    """
    if not 0.5 <= p < 1.0 or df < 1:
        raise ArgumentError(f"expected 0.5 <= p < 1 and df >= 1, got p={p}, df={df}")
    low, high = 0.0, math.pi / 2
    for _ in range(200):  # bisection on the angle, to float64 resolution
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        low, high = (middle, high) if _t_cdf_angle(middle, df) < p else (low, middle)
    return math.sqrt(df) * math.tan(0.5 * (low + high))


def paired_difference(a: Sequence[float], b: Sequence[float], level: float = INTERVAL_LEVEL) -> dict[str, Any]:
    """Paired statistics of ``a[i] - b[i]`` (one pair per seed).

    Args:
        a, b: the two kinds of run's values, on the same seeds in the same order.
        level: the interval's confidence level.

    Returns:
        ``seeds`` (the number of pairs), ``mean_difference``, ``sd_difference`` (sample deviation), and ``low`` and
        ``high``: the Student t interval of the mean difference at ``level``; the last three None for one seed.
    """
    differences = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n, mean = len(differences), float(np.mean(differences))
    if n < 2:
        return {"seeds": n, "mean_difference": mean, "sd_difference": None, "low": None, "high": None}
    sd = float(np.std(differences, ddof=1))
    half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return {"seeds": n, "mean_difference": mean, "sd_difference": sd, "low": mean - half, "high": mean + half}


def seed_spread(values: Sequence[float]) -> float | None:
    """The sample standard deviation of a metric over seeds.

    Args:
        values: the metric, one value per seed.

    Returns:
        The deviation (``ddof=1``), or None for one seed.
    """
    return float(np.std(np.asarray(values, dtype=np.float64), ddof=1)) if len(values) > 1 else None


def compare_over_seeds(a: Sequence[float], b: Sequence[float], level: float = INTERVAL_LEVEL) -> dict[str, Any]:
    """:func:`paired_difference` of ``a`` and ``b`` (values on the same seeds, in the same order) beside the seed
    spread: each side's mean and deviation over seeds, ``seed_spread`` (the two deviations pooled, root mean
    square) and ``gap_over_spread``: |mean difference| / seed spread (None where there is no spread).

    Args:
        a, b: the two kinds of run's values, on the same seeds in the same order.
        level: the interval's confidence level.

    Returns:
        :func:`paired_difference`'s fields and ``level``, ``mean_a``, ``mean_b``, ``spread_a``, ``spread_b``,
        ``seed_spread``, ``gap_over_spread``.
    """
    stats = paired_difference(a, b, level)
    spread_a, spread_b = seed_spread(a), seed_spread(b)
    spread = None if spread_a is None else math.sqrt((spread_a ** 2 + spread_b ** 2) / 2)
    ratio = None if not spread else abs(stats["mean_difference"]) / spread
    return {**stats, "level": level, "mean_a": float(np.mean(a)), "mean_b": float(np.mean(b)), "spread_a": spread_a,
            "spread_b": spread_b, "seed_spread": spread, "gap_over_spread": ratio}


def seed_statistics(runs: Sequence[dict[str, Any]], level: float = INTERVAL_LEVEL) -> list[dict[str, Any]]:
    """Per metric of :data:`METRICS` the runs have, the paired comparison over seeds (:func:`compare_over_seeds`) of
    every two backends on one device count (``kind`` ``"framework"``) and every backend on two device counts
    (``"order"``), on the seeds both ran.

    Args:
        runs: the comparison's runs, each with ``backend``, ``devices``, ``seed`` and what :data:`METRICS` reads.
        level: the intervals' confidence level.

    Returns:
        One entry per metric and pair: ``metric``, ``kind``, ``a`` and ``b`` (``{"backend", "devices"}``), ``a``
        minus ``b`` in the fields of :func:`compare_over_seeds`.
    """
    by_key: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for run in runs:
        by_key.setdefault((run["backend"], run["devices"]), {})[run.get("seed", 0)] = run
    keys = list(by_key)
    pairs = [(a, b, "framework" if a[1] == b[1] else "order") for a, b in itertools.combinations(keys, 2)
             if (a[0] == b[0]) != (a[1] == b[1])]
    entries = []
    for metric, value in METRICS.items():
        for a, b, kind in pairs:
            seeds = [s for s in by_key[a] if s in by_key[b]]
            first, second = ([value(by_key[key][s]) for s in seeds] for key in (a, b))
            if not seeds or None in first or None in second:
                continue
            entries.append({"metric": metric, "kind": kind, "a": {"backend": a[0], "devices": a[1]},
                            "b": {"backend": b[0], "devices": b[1]}, **compare_over_seeds(first, second, level)})
    return entries


def sign_test(differences: Sequence[float]) -> dict[str, Any]:
    """The exact two-sided sign test of paired differences (one per seed): under the null hypothesis that neither
    side tends to be larger, each non-zero difference is positive with probability 1/2, so the count of positive
    ones is binomial; the p-value is the probability of a split at least as uneven. For a yes/no outcome per seed
    (did a pair of runs part?) it is McNemar's exact test. It assumes only that the seeds are independent: no
    normality, which a count of a few seeds does not have.

    Args:
        differences: one paired difference per seed.

    Returns:
        ``seeds``, ``positive``, ``negative`` (the ties, 0, count for neither) and ``p`` (1.0 with no non-zero
        difference).
    """
    positive = sum(1 for d in differences if d > 0)
    negative = sum(1 for d in differences if d < 0)
    n, fewer = positive + negative, min(positive, negative)
    tail = sum(math.comb(n, i) for i in range(fewer + 1)) / 2 ** n if n else 1.0
    return {"seeds": len(differences), "positive": positive, "negative": negative, "p": min(1.0, 2 * tail)}


def parted_test(pairs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Whether the framework parts runs more often than the summation order does, over seeds: per seed, the fraction
    of its framework pairs (two backends on one device count) that part and the fraction of its order pairs (one
    backend on two device counts) that part; their paired difference over the seeds that have both, with the exact
    :func:`sign_test` (pairs of one seed share runs, so they are not independent trials; seeds are).

    Args:
        pairs: :func:`toolkit.command.divergence.pair_record` s of every seed, each with ``kind``, ``seed`` and
            ``split_step``.

    Returns:
        ``seeds``, ``framework`` and ``order`` (the mean fractions over those seeds), ``positive`` (seeds on which
        more framework pairs part), ``negative`` and ``p``; None without a seed that has both kinds.
    """
    fractions: dict[Any, dict[str, list[bool]]] = {}
    for pair in pairs:
        if pair["kind"] in ("framework", "order"):
            fractions.setdefault(pair.get("seed", 0), {}).setdefault(pair["kind"], []).append(
                pair["split_step"] is not None)
    seeds = [s for s, kinds in fractions.items() if len(kinds) == 2]
    if not seeds:
        return None
    framework = [float(np.mean(fractions[s]["framework"])) for s in seeds]
    order = [float(np.mean(fractions[s]["order"])) for s in seeds]
    test = sign_test([f - o for f, o in zip(framework, order)])
    return {**test, "framework": float(np.mean(framework)), "order": float(np.mean(order))}


def parted_words(test: dict[str, Any] | None) -> str:
    """:func:`parted_test` in one sentence, for the tables and the report.

    Args:
        test: its result, or None.

    Returns:
        The sentence, or an empty string for None.
    """
    if test is None:
        return ""
    decided, alpha = test["positive"] + test["negative"], 1 - INTERVAL_LEVEL
    # The smallest p the test can give is 2 / 2**n for n seeds that are not ties.
    least = next(n for n in range(1, 64) if 2.0 / 2 ** n < alpha)
    return (f"framework pairs parted on average {test['framework']:.0%} of a seed's pairs, order pairs "
            f"{test['order']:.0%} ({test['seeds']} seed(s); more framework pairs on {test['positive']}, more order "
            f"pairs on {test['negative']}): exact sign test p = {test['p']:.3g}"
            + (f" ({decided} seed(s) not tied: fewer than {least} cannot reach p < {alpha:.2g})"
               if decided < least else ""))
