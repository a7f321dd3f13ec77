"""The printed tables of ``multigpu compare``: the runs, the gap between backends against the spread over seeds, and
where pairs of runs part."""

from __future__ import annotations

import statistics
import sys
from typing import Any

from toolkit.command.divergence import PAIR_KINDS, pair_label
from toolkit.command.seed_stats import INTERVAL_LEVEL, parted_words


def make_console():
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 150)


def _seeds(results: dict[str, Any]) -> list[int]:
    return list(dict.fromkeys(run.get("seed", 0) for run in results["runs"]))


def _mean_sd(values: list[float], digits: int) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def print_comparison(results: dict[str, Any]) -> None:
    """The tables of a comparison: :func:`print_runs`, then over seeds :func:`print_statistics` (two seeds or more)
    and :func:`print_pairs` (two runs or more).

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`).
    """
    console = make_console()
    perturbed = results.get("config", {}).get("perturb")
    if perturbed:
        print(f"PERTURBED (--perturb {perturbed}): these runs check the check; they are not the backends' own numbers")
    print_runs(results, console)
    if len(_seeds(results)) > 1:
        print_statistics(results, console)
    if results.get("pairs"):
        print_pairs(results, console)


def print_runs(results: dict[str, Any], console=None) -> None:
    """One row per backend and device count: the final loss, step times, memory, test accuracy and the largest
    parameter divergence from the other backend; over several seeds, the mean ± standard deviation of the loss and
    accuracy, the first seed's first step (later seeds reuse what it compiled), the median over seeds of the other
    times, and the largest memory and divergence.

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`).
        console: the ``rich`` console printed on (None: a new one, 150 columns wide off a terminal).
    """
    from rich.table import Table

    config, seeds = results["config"], _seeds(results)
    over = f", {len(seeds)} seeds" if len(seeds) > 1 else ""
    table = Table(title=f"{config['model']}: {config['optimizer']}({config['lr']}), {config['dtype']}, "
                        f"batch {config['batch']}, {config['steps']} steps{over}")
    for column in ("backend", "devices", "final loss", "first step", "median step", "p10-p90", "peak RSS",
                   "accuracy", "max divergence"):
        table.add_column(column, justify="right")
    divergence: dict[int, float] = {}
    for entry in results["divergence"]:
        divergence[entry["devices"]] = max(divergence.get(entry["devices"], 0.0), max(entry["max_abs_param_diff"]))
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in results["runs"]:
        grouped.setdefault((run["backend"], run["devices"]), []).append(run)
    for (backend, devices), runs in grouped.items():
        def median(field: str, runs=runs) -> float:
            return statistics.median(run[field] for run in runs)

        scores = [run["accuracy"] for run in runs if run["accuracy"] is not None]
        table.add_row(backend, str(devices), _mean_sd([run["losses"][-1] for run in runs], 6),
                      f"{runs[0]['first_step_ms']:.0f} ms", f"{median('median_ms'):.2f} ms",
                      f"{median('p10_ms'):.2f}-{median('p90_ms'):.2f}",
                      f"{max(run['peak_rss_mb'] for run in runs):.0f} MB", _mean_sd(scores, 3) if scores else "-",
                      f"{divergence[devices]:.2g}" if devices in divergence else "-")
    (console or make_console()).print(table)
    print("first step: includes tracing (TensorFlow) or compilation (Aesara); peak RSS: the process's, so far"
          + ("; over seeds: mean ± standard deviation, the first seed's first step, median step times"
             if len(seeds) > 1 else ""))


def _interval(entry: dict[str, Any]) -> str:
    if entry["low"] is None:
        return f"{entry['mean_difference']:+.2g}"
    return f"{entry['mean_difference']:+.2g} ({entry['low']:+.2g}, {entry['high']:+.2g})"


def print_statistics(results: dict[str, Any], console=None) -> None:
    """Per metric, each backend against another on one device count (framework), and each against itself on
    another device count (order, the baseline): the mean over seeds of each, their paired difference with its t
    interval, the spread over seeds, and the gap in units of that spread.

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`).
        console: the ``rich`` console printed on (None: a new one, 150 columns wide off a terminal).
    """
    from rich.table import Table

    seeds = len(_seeds(results))
    table = Table(title=f"the gap against the seed spread: paired over {seeds} seeds, a - b with its "
                        f"{INTERVAL_LEVEL:.0%} t interval")
    for column in ("metric", "kind", "a", "b", "mean a", "mean b", "a - b (interval)", "seed spread (sd)",
                   "|gap| / spread"):
        table.add_column(column, justify="left" if column in ("metric", "kind", "a", "b") else "right")
    for kind in ("framework", "order"):
        for entry in (e for e in results.get("statistics", []) if e["kind"] == kind):
            spread, ratio = entry["seed_spread"], entry["gap_over_spread"]
            table.add_row(entry["metric"], kind, f"{entry['a']['backend']} x{entry['a']['devices']}",
                          f"{entry['b']['backend']} x{entry['b']['devices']}", f"{entry['mean_a']:.4g}",
                          f"{entry['mean_b']:.4g}", _interval(entry), "-" if spread is None else f"{spread:.3g}",
                          "-" if ratio is None else f"{ratio:.2g}")
    (console or make_console()).print(table)
    print("framework: two backends on one device count; order: one backend on two device counts (the summation "
          "order alone). An interval that holds 0 is a gap these seeds cannot tell from none.")


def _steps(steps: list[int | None]) -> str:
    parted = sorted(s for s in steps if s is not None)
    if not parted:
        return "-"
    return str(parted[0]) if parted[0] == parted[-1] else f"{parted[0]}-{parted[-1]}"


def _median_max(median: float, largest: float, seeds: int) -> str:
    return f"{median:.2g}" if seeds == 1 else f"{median:.2g} (max {largest:.2g})"


def first_in(pair: dict[str, Any]) -> str:
    """Where a pair of runs parts first, in words: the parameter most often first over the seeds, and how many
    others were first on some seed.

    Args:
        pair: a :func:`toolkit.command.divergence.summarize_pairs` entry.

    Returns:
        E.g. ``"block1/attention/key (+1 other)"``, or ``"-"`` where it never parts.
    """
    names = pair.get("first_parted") or []
    if not names:
        return "-"
    return names[0] + (f" (+{len(names) - 1} other{'s' if len(names) > 2 else ''})" if len(names) > 1 else "")


def print_pairs(results: dict[str, Any], console=None) -> None:
    """Every pair of runs (over seeds): its kind, its relative divergence after the first step and the last, and
    the step where it parts; then per kind, the framework pairs beside the order pairs, their baseline.

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`).
        console: the ``rich`` console printed on (None: a new one, 150 columns wide off a terminal).
    """
    from rich.table import Table

    console = console or make_console()
    bound, seeds = results["split_bound"], len(_seeds(results))
    over = "" if seeds == 1 else f", median over {seeds} seeds (largest)"
    table = Table(title=f"where runs part: relative divergence of every pair of runs{over}")
    for column in ("pair", "kind", "after step 1", "after the last", "parts", "at step", "first in"):
        table.add_column(column, justify="left" if column in ("pair", "kind", "first in") else "right")
    for kind in PAIR_KINDS:
        for pair in (p for p in results["pair_summary"] if p["kind"] == kind):
            table.add_row(pair_label(pair), kind, _median_max(pair["step1_median"], pair["step1_max"], seeds),
                          _median_max(pair["final_median"], pair["final_max"], seeds),
                          f"{pair['parted']}/{pair['seeds']}", _steps(pair["split_steps"]),
                          first_in(pair))
    console.print(table)
    print(f"relative divergence: the largest over parameters of max |a - b|, over the largest |parameter| of the two "
          f"runs; a pair parts at the first step past {bound:g}, first in the parameter named (the most often first "
          f"over seeds)")
    kinds = Table(title="the framework against the summation order: the pairs of each kind" + (
        "" if seeds == 1 else f", over {seeds} seeds"))
    for column in ("kind", "what differs", "pairs", "part", "at steps", "after step 1 (median, max)",
                   "after the last (median, max)"):
        kinds.add_column(column, justify="left" if column in ("kind", "what differs") else "right")
    for entry in results["kind_summary"]:
        kinds.add_row(entry["kind"], PAIR_KINDS[entry["kind"]], str(entry["pairs"]), str(entry["parted"]),
                      _steps(entry["split_steps"]), f"{entry['step1_median']:.2g}, {entry['step1_max']:.2g}",
                      f"{entry['final_median']:.2g}, {entry['final_max']:.2g}")
    console.print(kinds)
    if results.get("parted_test"):
        print(parted_words(results["parted_test"]))
