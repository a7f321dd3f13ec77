"""A comparison's results as tidy CSV files beside ``results.json`` (one observation per row, one variable per
column), for pandas, R or a spreadsheet: ``runs.csv`` (one row per run), ``steps.csv`` (one per run and step) and
``pairs.csv`` (one per pair of runs and step). Every row repeats the settings that vary between comparisons (model,
dtype, optimizer, learning rate, epsilon, batch, split bound, perturbation), so the files of several result folders
can simply be concatenated."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The settings every row repeats, from the results' ``config``: those a sweep varies (``eps`` included, empty for the
#: optimizer's default), the bound pairs part past, and ``--perturb`` (a perturbed run must not pass for a real one).
SETTINGS = ("model", "dtype", "optimizer", "lr", "eps", "batch", "split_bound", "perturb")
#: The columns of ``runs.csv`` after the settings.
RUN_COLUMNS = ("backend", "devices", "seed", "init_seed", "data_seed", "noise_seed", "steps", "final_loss",
               "accuracy", "first_step_ms", "median_ms", "p10_ms", "p90_ms", "peak_rss_mb")
#: The columns of ``steps.csv`` after the settings.
STEP_COLUMNS = ("backend", "devices", "seed", "step", "loss", "step_time_ms")
#: The columns of ``pairs.csv`` after the settings.
PAIR_COLUMNS = ("seed", "kind", "backend_a", "devices_a", "backend_b", "devices_b", "step", "max_rel_param_diff",
                "parted")


def _write(path: Path, columns: Sequence[str], rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows({key: "" if row.get(key) is None else row[key] for key in columns} for row in rows)
    return path


def tidy_rows(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The rows of the three files, as dicts by column.

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`), with ``config``.

    Returns:
        ``{"runs": [...], "steps": [...], "pairs": [...]}``.
    """
    config = results["config"]
    settings = {key: config.get(key) for key in SETTINGS}
    runs, steps, pairs = [], [], []
    for run in results["runs"]:
        seeds = run.get("seeds", {})
        runs.append({**settings, **{key: run.get(key) for key in RUN_COLUMNS}, "steps": len(run["losses"]),
                     "init_seed": seeds.get("init"), "data_seed": seeds.get("data"), "noise_seed": seeds.get("noise"),
                     "final_loss": run["losses"][-1] if run["losses"] else None})
        for step, (loss, time_ms) in enumerate(zip(run["losses"], run["step_times_ms"]), start=1):
            steps.append({**settings, "backend": run["backend"], "devices": run["devices"], "seed": run.get("seed"),
                          "step": step, "loss": loss, "step_time_ms": time_ms})
    for pair in results.get("pairs", []):
        a, b = pair["runs"]
        split = pair.get("split_step")
        for step, value in enumerate(pair["max_rel_param_diff"], start=1):
            pairs.append({**settings, "seed": pair.get("seed"), "kind": pair["kind"], "backend_a": a["backend"],
                          "devices_a": a["devices"], "backend_b": b["backend"], "devices_b": b["devices"],
                          "step": step, "max_rel_param_diff": value, "parted": split is not None and step >= split})
    return {"runs": runs, "steps": steps, "pairs": pairs}


def write_csv(results: dict[str, Any], folder: Path) -> list[Path]:
    """Write ``runs.csv``, ``steps.csv`` and ``pairs.csv`` (the last only where the results have pairs).

    Args:
        results: a comparison's results, with ``config``.
        folder: the existing folder written to (beside ``results.json``).

    Returns:
        The files written.
    """
    rows = tidy_rows(results)
    written = [_write(Path(folder) / "runs.csv", (*SETTINGS, *RUN_COLUMNS), rows["runs"]),
               _write(Path(folder) / "steps.csv", (*SETTINGS, *STEP_COLUMNS), rows["steps"])]
    if rows["pairs"]:
        written.append(_write(Path(folder) / "pairs.csv", (*SETTINGS, *PAIR_COLUMNS), rows["pairs"]))
    return written
