"""``multigpu parity``: exit 1 with a readable diff when two backends disagree beyond what rounding explains.

Every step is judged, not only the last: each backend also runs on the other device counts, and how far it parts
from itself there (the same math in another summation order) is the rounding-only divergence that the two backends'
divergence is judged against (:func:`toolkit.tolerances.trajectory_bounds`). A real difference parts the backends far
more than that in the first steps; chaotic float32 runs (Adam, ReLU boundaries) part each backend from itself as
much as from the other, so they pass where rounding alone explains the gap.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError
from toolkit.tolerances import trajectory_bounds

#: The run options that ``parity --against`` takes from the reference file's config.
AGAINST_CONFIG = ("model", "devices", "dtype", "optimizer", "lr", "steps", "batch", "seed")
#: The seed options it also takes where the file has them (results.json since version 3); the file's ``seed`` is its
#: first seed, whose runs are compared.
AGAINST_SEEDS = ("init_seed", "data_seed", "noise_seed")


def null_curve(results: dict[str, Any], *others: dict[str, Any]) -> list[float] | None:
    """Per step, the largest divergence of any backend from itself on another device count (``within`` of the
    results), or None where every backend ran on one device count.

    Args:
        results: a comparison's results.
        *others: more results (another environment's reference), whose ``within`` entries count too.

    Returns:
        One float per step, or None.
    """
    curves = [entry["max_abs_param_diff"] for found in (results, *others) for entry in found.get("within", [])]
    return [max(values) for values in zip(*curves)] if curves else None


def check_request(dtype: str, devices: list[int]) -> None:
    """Refuse, before anything trains, a check that could not be judged (float32 needs a null: two device counts).

    Args:
        dtype: the computation dtype.
        devices: the device counts asked for.

    Raises:
        ArgumentError: float32 on fewer than two device counts (:func:`toolkit.tolerances.trajectory_bounds`).
    """
    trajectory_bounds(dtype, None if len(devices) < 2 else [0.0], 1.0)


def report(results: dict[str, Any], backends: list[str], quiet: bool) -> bool:
    """Print, per device count, the two backends' largest parameter difference beside each backend's own, and the
    tolerance; on a failure, the parameters that differ most and the first step beyond tolerance.

    Args:
        results: a comparison's results, with each run's ``params``.
        backends: the two backends compared.
        quiet: print only the failures' diffs.

    Returns:
        Whether every device count passed.
    """
    config = results["config"]
    null = null_curve(results)
    passed = True
    for entry in results["divergence"]:
        n, gaps = entry["devices"], entry["max_abs_param_diff"]
        bounds = trajectory_bounds(config["dtype"], null, entry["param_scale"])
        bounds = bounds if isinstance(bounds, list) else [bounds] * len(gaps)
        beyond = [step for step, (gap, bound) in enumerate(zip(gaps, bounds)) if gap > bound]
        passed = passed and not beyond
        if not quiet:
            own = "" if null is None else f" (each backend against itself on other device counts: {max(null):.3g})"
            print(f"{' vs '.join(backends)} on {n} device(s), {config['dtype']}, {config['steps']} "
                  f"{config['optimizer']} steps: max |param difference| {max(gaps):.3g}{own}, tolerance "
                  f"{bounds[-1]:.3g} at the last step: {'FAILED' if beyond else 'ok'}")
        if beyond:
            _print_diff(results, backends, n, beyond[0], gaps[beyond[0]], bounds[beyond[0]])
    return passed


def _print_diff(results: dict[str, Any], backends: list[str], n: int, step: int, gap: float, bound: float) -> None:
    first, second = ({r["backend"]: r for r in results["runs"] if r["devices"] == n}[b] for b in backends)
    for name in first["params"]:
        a, b = first["params"][name].astype(np.float64), second["params"][name].astype(np.float64)
        index = np.unravel_index(int(np.argmax(np.abs(a - b))), a.shape) if a.ndim else ()
        where = tuple(int(i) for i in index)
        print(f"  {name}: max |difference| {float(np.max(np.abs(a - b))):.3g} at {where}: "
              f"{backends[0]} {float(a[index]):.10g} vs {backends[1]} {float(b[index]):.10g}")
    print(f"  first step beyond tolerance: {step + 1} ({gap:.3g} > {bound:.3g}); losses "
          f"{first['losses'][step]:.10g} vs {second['losses'][step]:.10g}")


def read_reference(path: Path) -> dict[str, Any]:
    """A ``multigpu compare`` results.json, checked enough to be used as a reference.

    Args:
        path: the file.

    Returns:
        The results, a dict.

    Raises:
        ArgumentError: a file that cannot be read, is not JSON, is not a compare results file, or whose config lacks
            one of :data:`AGAINST_CONFIG`.
    """
    from toolkit.command.compare import SCHEMA

    try:
        reference = json.loads(Path(path).read_text())
    except OSError as error:
        raise ArgumentError(f"--against {path}: cannot read it ({error.strerror})") from error
    except json.JSONDecodeError as error:
        raise ArgumentError(f"--against {path}: not JSON ({error.msg} at line {error.lineno})") from error
    if not isinstance(reference, dict) or reference.get("schema") != SCHEMA or "config" not in reference:
        raise ArgumentError(f"--against {path}: expected a `multigpu compare --out` results.json (schema {SCHEMA!r})")
    missing = [key for key in AGAINST_CONFIG if key not in reference["config"]]
    if missing:
        raise ArgumentError(f"--against {path}: its config lacks {missing}")
    return reference


def report_against(results: dict[str, Any], reference: dict[str, Any], theirs: list[dict[str, Any]],
                   params: dict[tuple[str, int], dict[str, np.ndarray]], against: Path, quiet: bool) -> bool:
    """``parity --against``: this environment's runs against another environment's, run by run: final parameters
    and every step's loss, judged against both environments' own divergence at the last step (where they have
    one).

    Args:
        results: this environment's results, with each run's ``params``.
        reference: the other environment's results (:func:`read_reference`).
        theirs: the reference's runs compared (of backends not run here, of its first seed).
        params: the reference's final parameters (:func:`toolkit.command.compare.load_params`).
        against: the reference's path, for the report.
        quiet: print nothing.

    Returns:
        Whether every run passed.
    """
    config = results["config"]
    null = null_curve(results, reference)
    passed = True
    for ours in results["runs"]:
        for run in (r for r in theirs if r["devices"] == ours["devices"]):
            other = params[(run["backend"], run["devices"])]
            worst = max(float(np.max(np.abs(ours["params"][k].astype(np.float64) - other[k].astype(np.float64))))
                        for k in other)
            losses = float(np.max(np.abs(np.subtract(ours["losses"], run["losses"]))))
            scale = max(float(np.max(np.abs(v))) for v in other.values())
            bound = trajectory_bounds(config["dtype"], None if null is None else null[-1:], scale)
            bound = bound[-1] if isinstance(bound, list) else bound
            ok = max(worst, losses) <= bound
            passed = passed and ok
            if not quiet:
                print(f"{run['backend']} ({against}) vs {ours['backend']} on {ours['devices']} device(s), "
                      f"{config['dtype']}, {config['steps']} {config['optimizer']} steps: max |param difference| "
                      f"{worst:.3g}, max |loss difference| {losses:.3g}, tolerance {bound:.3g}: "
                      f"{'ok' if ok else 'FAILED'}")
    return passed
