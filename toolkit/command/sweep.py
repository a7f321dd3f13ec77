"""Sweeps in one ``multigpu compare``: list-valued ``--batch``, ``--dtype``, ``--lr`` and ``--eps`` run every
combination as its own comparison (its own folder under ``--out``, with everything a comparison writes), and one
table and ``sweep.csv`` put them side by side, one row per combination, backend and device count (a tidy table: every
swept field is a column): the final loss, the first and median step (in the comparison's process, and with
``--fresh-timing`` in a fresh process of its own), and how the framework pairs part against the order pairs, their
baseline.

Plain Python on the results: no framework is needed here."""

from __future__ import annotations

import csv
import itertools
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolkit.errors import ArgumentError

#: The options a sweep varies, in the order of its folder names and table columns.
SWEPT = ("batch", "dtype", "lr", "eps")


def parse_list(text: str, kind: type) -> list:
    """A comma-separated option value as a list of distinct values: ``"0.01,0.001"`` -> ``[0.01, 0.001]``.

    Args:
        text: the option's value.
        kind: ``int``, ``float`` or ``str`` (each part is converted with it).

    Returns:
        The values, in the order written.

    Raises:
        ArgumentError: an empty list, a part that does not convert, or a value given twice.
    """
    try:
        values = [kind(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise ArgumentError(f"expected a comma-separated list of values: {error}; got {text!r}") from error
    if not values or len(set(values)) != len(values):
        raise ArgumentError(f"expected distinct comma-separated values; got {text!r}")
    return values


def combinations(options: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the swept options' values, the first option varying slowest.

    Args:
        options: ``{name: values}`` for the names of :data:`SWEPT`.

    Returns:
        One ``{name: value}`` per combination.
    """
    names = [name for name in SWEPT if name in options]
    return [dict(zip(names, values)) for values in itertools.product(*(options[name] for name in names))]


def label(combination: dict[str, Any]) -> str:
    """A combination's folder name: ``batch128-float32-lr0.01-eps1e-07`` (``eps`` left out where it is the
    optimizer's default).

    Args:
        combination: a :func:`combinations` entry.

    Returns:
        The name.
    """
    parts = [f"batch{combination['batch']}", str(combination["dtype"]), f"lr{combination['lr']:g}"]
    if combination.get("eps") is not None:
        parts.append(f"eps{combination['eps']:g}")
    return "-".join(parts)


def _mean(values: list[float]) -> float | None:
    return statistics.mean(values) if values else None


#: ``--fresh-timing``: each backend and device count of a combination timed in a fresh process of its own
#: (:func:`toolkit.command.timing.run_timing`): this many rounds of this many steps after the first step. Enough for
#: a median of medians and the first step, which is what a sweep compares; ``multigpu time`` measures with more.
FRESH_ROUNDS, FRESH_STEPS = 3, 5
#: Seconds ``--fresh-timing`` allows each process unless ``--timeout`` says otherwise (``multigpu time``'s default).
FRESH_TIMEOUT = 600.0


def time_fresh(config: dict[str, Any], timeout: float) -> dict[str, Any]:
    """A combination's backends and device counts, each timed in a fresh process of its own
    (:func:`toolkit.command.timing.run_timing`, :data:`FRESH_ROUNDS` rounds of :data:`FRESH_STEPS` steps).

    Args:
        config: the combination's comparison's ``config`` (its model, backends, devices, dtype, optimizer, lr, eps,
            batch and first seed are timed).
        timeout: seconds allowed per process.

    Returns:
        The timing's results (``timing.json``).
    """
    from toolkit.command.timing import run_timing

    spec = {key: config[key] for key in ("model", "backends", "devices", "dtype", "optimizer", "lr", "eps", "batch")}
    return run_timing({**spec, "steps": FRESH_STEPS, "rounds": FRESH_ROUNDS, "seed": config["seed"]}, timeout)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def sweep_rows(combination: dict[str, Any], results: dict[str, Any],
               timing: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One combination of a sweep, one row per backend and device count: the combination's options, the run's final
    loss and test accuracy (means over seeds), its first step and median step in the comparison's process (medians
    over seeds), where ``timing`` is given the same two measured in a fresh process of its own and that process's
    peak resident memory (the run's own: in the comparison's process every run shares one peak), and per kind of pair
    how many part and their median divergence after the last step (the combination's, on each of its rows).

    Args:
        combination: the combination's options.
        results: its comparison's results.
        timing: its :func:`toolkit.command.timing.run_timing` results, or None.

    Returns:
        The rows, each by column.
    """
    pairs: dict[str, Any] = {}
    for kind in ("framework", "order"):
        found = next((entry for entry in results.get("kind_summary", []) if entry["kind"] == kind), None)
        pairs[f"{kind} pairs parted"] = None if found is None else f"{found['parted']}/{found['pairs']}"
        pairs[f"{kind} divergence"] = None if found is None else found["final_median"]
    fresh = {(run["backend"], run["devices"]): run for run in (timing or {}).get("runs", [])}
    rows = []
    for backend in results["config"]["backends"]:
        for devices in results["config"]["devices"]:
            runs = [run for run in results["runs"] if run["backend"] == backend and run["devices"] == devices]
            row: dict[str, Any] = {"folder": label(combination), **combination, "backend": backend,
                                   "devices": devices, "perturb": results["config"].get("perturb"),
                                   "final loss": _mean([run["losses"][-1] for run in runs]),
                                   "accuracy": _mean([run["accuracy"] for run in runs if run["accuracy"] is not None]),
                                   "first step (ms)": _median([run["first_step_ms"] for run in runs]),
                                   "median step (ms)": _median([run["median_ms"] for run in runs])}
            if timing is not None:
                own = fresh.get((backend, devices), {})
                row["fresh first step (ms)"] = None if "first_step_s" not in own else 1e3 * own["first_step_s"]
                row["fresh median step (ms)"] = own.get("median_ms")
                row["fresh peak RSS (MB)"] = own.get("peak_rss_mb")
                row["fresh error"] = own.get("error")
            rows.append({**row, **pairs})
    return rows


#: What a sweep's table says of its columns (the command's table and the report's).
SWEEP_NOTE = ("final loss and accuracy: means over seeds; first and median step: medians over seeds, in the "
              "comparison's process, where the runs take turns (a first step, which traces or compiles, depends on "
              "what ran before it there); fresh: the same backend and device count timed in a new process of its own "
              "(--fresh-timing), where nothing ran before, with that process's own peak memory; pairs parted: "
              "framework pairs (two backends, one device count) and order pairs (one backend, two device counts: the "
              "summation order alone), with their median relative divergence after the last step")


def write_sweep(rows: list[dict[str, Any]], folder: Path) -> Path:
    """``sweep.csv``: one row per combination, backend and device count (:func:`sweep_rows`).

    Args:
        rows: the sweep's rows.
        folder: the sweep's ``--out`` folder.

    Returns:
        The file written.
    """
    columns = list(dict.fromkeys(key for row in rows for key in row))
    path = Path(folder) / "sweep.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({key: "" if row.get(key) is None else row[key] for key in columns} for row in rows)
    return path


def print_sweep(rows: list[dict[str, Any]], title: str) -> None:
    """The sweep's table: one row per combination, backend and device count.

    Args:
        rows: the sweep's rows (:func:`sweep_rows`).
        title: the table's title.
    """
    from rich.table import Table

    from toolkit.command.compare_tables import make_console

    table = Table(title=title)
    columns = [key for key in dict.fromkeys(key for row in rows for key in row) if key != "folder"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("dtype", "backend", "fresh error") else "right")

    def shown(value: Any) -> str:
        if value is None:
            return "-"
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    for row in rows:
        table.add_row(*(shown(row.get(column)) for column in columns))
    make_console().print(table)
    print(SWEEP_NOTE)
