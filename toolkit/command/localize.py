"""The ``multigpu localize`` command's results in words and as a table: the first quantity past the bound, the
largest error, which backend is farther from the float64 reference, and where followed training runs part
(``--follow``).

The measurement is :mod:`toolkit.command.localize_measure` (the module's docstring gives the results' fields); its
public names are importable from here too, the command's module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolkit.command.localize_measure import (
    KINDS,
    LOCALIZE_BOUND,
    LOSS,
    OUTPUT,
    REFERENCE_DTYPE,
    SCHEMA,
    SCHEMA_VERSION,
    UNRESOLVED,
    compare_runs,
    evaluate,
    localize,
    relative_error,
    starting_point,
    summarize,
)

__all__ = ["KINDS", "LOCALIZE_BOUND", "LOSS", "OUTPUT", "REFERENCE_DTYPE", "SCHEMA", "SCHEMA_VERSION", "UNRESOLVED",
           "compare_runs", "evaluate", "findings", "first_parting", "layer_of", "localize", "print_localization",
           "relative_error", "starting_point", "summarize", "trajectory_findings"]


def print_localization(results: dict[str, Any], console=None) -> None:
    """The table of a localization, one row per quantity in step order (rows past the bound marked), and the
    findings: the first quantity past the bound, the largest error, which backend is farther from the reference.

    Args:
        results: a localization's results (:func:`localize`, with ``config``).
        console: the ``rich`` console printed on (None: a new one).
    """
    from rich.table import Table

    from toolkit.command.compare_tables import make_console

    console = console or make_console()
    config, bound = results["config"], results["bound"]
    for line in trajectory_findings(results):
        console.print(line, highlight=False)
    backends, dtype = config["backends"], config["dtype"]
    table = Table(title=f"{config['model']}: {dtype} against {REFERENCE_DTYPE} on {backends[0]}, batch "
                        f"{config['batch']}, after {config['steps']} steps; relative error, * past {bound:g}")
    for column in ("kind", "name", "shape", "scale"):
        table.add_column(column, justify="left" if column in ("kind", "name") else "right")
    for name in backends:
        table.add_column(f"{name} {dtype}", justify="right")
    table.add_column(f"{REFERENCE_DTYPE} (max)", justify="right")
    table.add_column("farther", justify="left")
    for row in results["rows"]:
        cells = [f"{row['error'][b]:.1e}{' *' if row['error'][b] > bound else ''}" for b in backends]
        table.add_row(row["kind"], row["name"], "x".join(map(str, row["shape"])) or "()", f"{row['scale']:.2g}",
                      *cells, f"{max(row['float64_error'].values()):.0e}",
                      "unresolved" if row["unresolved"] else row["farther"] or "")
    console.print(table)
    for line in findings(results):
        console.print(line, highlight=False)


def findings(results: dict[str, Any]) -> list[str]:
    """What a localization found, in sentences: the first quantity past the bound (or none), each backend's first,
    the largest error, which backend is farther from the reference, and how far the reference's own float64 runs
    agree.

    Args:
        results: a localization's results, with ``config``.

    Returns:
        The lines.
    """
    backends, bound, rows = results["config"]["backends"], results["bound"], results["rows"]
    first, lines = results["first_past"], []
    if first is None:
        lines.append(f"no quantity past {bound:g}: every output and gradient within {bound:g} of {REFERENCE_DTYPE}")
    else:
        errors = ", ".join(f"{b} {first['error'][b]:.1e}" for b in backends)
        lines.append(f"first past {bound:g}: {first['kind']} {first['name']} ({errors}"
                     f"{'; ' + first['farther'] + ' farther' if first['farther'] else ''})")
        lines += [f"  first past on {b}: {name or 'none'}" for b, name in results["first_past_by_backend"].items()]
    worst = results["worst"]
    if worst is not None:
        lines.append(f"largest error: {worst['kind']} {worst['name']}, {max(worst['error'].values()):.1e}")
    if len(backends) > 1:
        for kind, counts in results["farther_counts"].items():
            total = sum(1 for row in rows if row["kind"] == kind and not row["unresolved"])
            if total and kind != "loss":
                lines.append(f"farther from the reference in {kind}s: " + ", ".join(
                    f"{b} in {counts[b]} of {total}" for b in backends))
    unresolved = [row["name"] for row in rows if row["unresolved"]]
    if unresolved:
        lines.append(f"unresolved (rounding noise in {REFERENCE_DTYPE} too, zero in exact arithmetic; not judged): "
                     + ", ".join(unresolved))
    exact = max((max(row["float64_error"].values()) for row in rows if not row["unresolved"]), default=0.0)
    lines.append(f"the reference: {REFERENCE_DTYPE} on {backends[0]}; every backend's {REFERENCE_DTYPE} run within "
                 f"{exact:.1e} of it on every quantity judged")
    return lines


def layer_of(parameter: str) -> str:
    """The layer a parameter belongs to, by its name: the prefix before its last ``/`` (``b1/mha/query/kernel`` ->
    ``b1/mha/query``), or the name itself.

    Args:
        parameter: a parameter's name.

    Returns:
        The layer's name.
    """
    return parameter.rsplit("/", 1)[0]


def first_parting(trajectories: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Where the followed runs first part from float64: the earliest step any run parts at, the backends that part
    then, and the layer of the parameter that parts furthest at that step.

    Args:
        trajectories: a localization's ``trajectories``.

    Returns:
        ``{"step", "backends", "parameter", "layer"}``, or None where no run parts.
    """
    parted = [run for run in trajectories if run["split_step"] is not None]
    if not parted:
        return None
    step = min(run["split_step"] for run in parted)
    runs = [run for run in parted if run["split_step"] == step]
    parameter = max(((name, run["max_rel_param_diff"][step - 1]) for run in runs for name in run["first_parted"][:1]),
                    key=lambda found: found[1])[0]
    return {"step": step, "backends": [run["backend"] for run in runs], "parameter": parameter,
            "layer": layer_of(parameter)}


def trajectory_findings(results: dict[str, Any]) -> list[str]:
    """What following the training runs found (``--follow``): where each backend's run parts from float64, the
    parameters that part first, and the first layer to part; empty where no run was followed.

    Args:
        results: a localization's results, with ``config``.

    Returns:
        The lines.
    """
    trajectories, config, bound = results.get("trajectories") or [], results["config"], results["bound"]
    if not trajectories:
        return []
    lines = [f"followed {config['steps']} {config['dtype']} training steps beside {REFERENCE_DTYPE} "
             f"({config['optimizer']}({config['lr']})), divergence over the largest |parameter|, parted past "
             f"{bound:g}:"]
    for run in trajectories:
        final = run["max_rel_param_diff"][-1]
        if run["split_step"] is None:
            lines.append(f"  {run['backend']}: never parts; {final:.1e} at the end")
        else:
            lines.append(f"  {run['backend']}: parts at step {run['split_step']}, first "
                         f"{', '.join(run['first_parted'][:3])}; {final:.1e} at the end")
    first = first_parting(trajectories)
    if first is not None:
        lines.append(f"first layer past {bound:g}: {first['layer']} (step {first['step']}, on "
                     f"{' and '.join(first['backends'])}); farther from {REFERENCE_DTYPE} at the end: "
                     f"{max(trajectories, key=lambda run: run['max_rel_param_diff'][-1])['backend']}")
    lines.append(f"the table: step {config['steps'] + 1}, each backend from the {REFERENCE_DTYPE} run's parameters")
    return lines
