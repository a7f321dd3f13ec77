"""Sweeps in one ``multigpu compare``: list-valued ``--batch``, ``--dtype``, ``--lr`` and ``--eps`` run every
combination as its own comparison (its own folder under ``--out``, with everything a comparison writes), and one
table and ``sweep.csv`` put the combinations side by side: per combination the final loss of each backend (mean over
seeds), and how the framework pairs part against the order pairs, their baseline.

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


def sweep_row(combination: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """One combination of a sweep in one row: its options, each backend's final loss and test accuracy (means over
    seeds and device counts), and per kind of pair how many part and their median divergence after the last step.

    Args:
        combination: the combination's options.
        results: its comparison's results.

    Returns:
        The row, by column.
    """
    row: dict[str, Any] = {"folder": label(combination), **combination}
    for backend in results["config"]["backends"]:
        runs = [run for run in results["runs"] if run["backend"] == backend]
        row[f"{backend} final loss"] = _mean([run["losses"][-1] for run in runs])
        row[f"{backend} accuracy"] = _mean([run["accuracy"] for run in runs if run["accuracy"] is not None])
    for kind in ("framework", "order"):
        found = next((entry for entry in results.get("kind_summary", []) if entry["kind"] == kind), None)
        row[f"{kind} pairs parted"] = None if found is None else f"{found['parted']}/{found['pairs']}"
        row[f"{kind} divergence"] = None if found is None else found["final_median"]
    return row


def write_sweep(rows: list[dict[str, Any]], folder: Path) -> Path:
    """``sweep.csv``: one row per combination (:func:`sweep_row`).

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
    """The sweep's table: one row per combination.

    Args:
        rows: the sweep's rows (:func:`sweep_row`).
        title: the table's title.
    """
    from rich.table import Table

    from toolkit.command.compare_tables import make_console

    table = Table(title=title)
    columns = [key for key in dict.fromkeys(key for row in rows for key in row) if key != "folder"]
    for column in columns:
        table.add_column(column, justify="left" if column == "dtype" else "right")

    def shown(value: Any) -> str:
        if value is None:
            return "-"
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    for row in rows:
        table.add_row(*(shown(row.get(column)) for column in columns))
    make_console().print(table)
    print("final loss and accuracy: means over seeds and device counts; pairs parted: framework pairs (two backends, "
          "one device count) and order pairs (one backend, two device counts: the summation order alone), with "
          "their median relative divergence after the last step")
