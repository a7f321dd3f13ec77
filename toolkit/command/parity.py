"""``multigpu parity``: exit 1 with a readable diff when two backends disagree beyond what rounding explains.

Every step and every parameter is judged, not only the last: each backend also runs on the other device counts, and
how far it parts from itself there (the same math in another summation order) is the rounding-only divergence; the
smaller of the two backends' is what their divergence is judged against (:func:`toolkit.tolerances.judge_parity`),
so a defect confined to one backend (or to its multi-device path) cannot raise its own allowance. A real difference
parts the backends far more than rounding from step 1; where rounding splits two runs (float32, a ReLU boundary
crossed in one example), the runs are judged up to the split, which is reported.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.command.divergence import relative_divergence
from toolkit.errors import ArgumentError
from toolkit.tolerances import ParityVerdict, judge_parity, reference_null, trajectory_bounds

#: Why a verdict that went beyond no bound failed: it judged no step.
NOTHING_JUDGED = "nothing could be judged: rounding alone parts every backend from itself from step 1"

#: The run options that ``parity --against`` takes from the reference file's config.
AGAINST_CONFIG = ("model", "devices", "dtype", "optimizer", "lr", "steps", "batch", "seed")
#: The seed options it also takes where the file has them (results.json since version 3); the file's ``seed`` is its
#: first seed, whose runs are compared.
AGAINST_SEEDS = ("init_seed", "data_seed", "noise_seed")


def own_curves(*found: dict[str, Any], seed: Any = None) -> dict[str, list[dict[str, list[float]]]]:
    """Each backend's own divergences, per parameter and step: its pairs of device counts (``order`` pairs) of the
    results given.

    Args:
        *found: comparisons' results, with their pairs' ``rel_param_curves``.
        seed: only the pairs of this seed, or None for every pair.

    Returns:
        ``{backend: [{parameter: per step}, ...]}``.
    """
    own: dict[str, list[dict[str, list[float]]]] = {}
    for results in found:
        for pair in results["pairs"]:
            if pair["kind"] == "order" and (seed is None or pair.get("seed") == seed):
                own.setdefault(pair["runs"][0]["backend"], []).append(pair["rel_param_curves"])
    return own


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
    """Print, per device count, the two backends' largest relative parameter and loss differences over the judged
    steps beside each backend's own, the steps judged, and where the runs split; on a failure, the first step and
    parameter (or the loss) beyond tolerance and the parameters that differ most.

    Args:
        results: a comparison's results, with each run's ``params`` and each pair's ``rel_param_curves``.
        backends: the two backends compared.
        quiet: print only the failures' diffs.

    Returns:
        Whether every device count passed.
    """
    config = results["config"]
    passed = True
    for n, found in judge(results, config["dtype"]).items():
        passed = passed and found.passed
        if not quiet:
            print(f"{' vs '.join(backends)} on {n} device(s), {config['dtype']}, {config['steps']} "
                  f"{config['optimizer']} steps: {describe(found.params, found.param_gaps, found.param_null)}; "
                  f"losses: {describe(found.losses, found.loss_gaps, found.loss_null, 'loss')}: "
                  f"{'ok' if found.passed else 'FAILED'}")
        if found.params.beyond or not found.passed:
            _print_failure(results, backends, n, found.params)
        for step, _, gap, bound in found.losses.beyond[:3]:
            print(f"  loss at step {step} beyond tolerance: relative difference {gap:.3g} > {bound:.3g}")
        if not found.losses.beyond and not any(found.losses.judged.values()):
            print(f"  {NOTHING_JUDGED} in the loss (per-device batch statistics?): judged by the parameters alone")
    return passed


@dataclass(frozen=True)
class Judged:
    """Two backends' runs on one device count, judged (:func:`judge`).

    Attributes:
        params: the parameters' verdict, per parameter and step.
        losses: the losses' verdict, step by step (each step's loss, relative to the runs' largest).
        param_gaps: the parameters' relative divergence per step, judged.
        loss_gaps: ``{"loss": the losses' relative difference per step}``, judged.
        param_null: what the parameters were judged against (:func:`toolkit.tolerances.reference_null`), or None.
        loss_null: what the losses were judged against, or None.
    """

    params: ParityVerdict
    losses: ParityVerdict
    param_gaps: dict[str, list[float]]
    loss_gaps: dict[str, list[float]]
    param_null: dict[str, list[float]] | None
    loss_null: dict[str, list[float]] | None

    @property
    def passed(self) -> bool:
        """Whether neither the parameters nor the losses went beyond a bound, and one of them judged a step (the
        loss alone may be unjudgeable: a model with per-device batch statistics computes another loss on another
        device count, so its own loss differences are not rounding)."""
        judged = any(self.params.judged.values()) or any(self.losses.judged.values())
        return not self.params.beyond and not self.losses.beyond and judged

    @property
    def first_beyond(self) -> int | None:
        """The first step (from 1) beyond tolerance in a parameter or the loss, or None."""
        steps = [verdict.beyond[0][0] for verdict in (self.params, self.losses) if verdict.beyond]
        return min(steps) if steps else None


def judge(results: dict[str, Any], dtype: str) -> dict[int, Judged]:
    """The two backends' runs judged per device count (:func:`toolkit.tolerances.judge_parity`): the parameters
    against the smaller of the backends' own divergences (:func:`toolkit.tolerances.reference_null`), raised to the
    smaller backend's first-step float32 rounding where the results have it (``first_step_rounding``); every step's
    loss the same way against the backends' own loss differences (a model whose parameters an optimizer moves alike
    under a small change of its outputs, Adam's sign-like steps on a tiny model, still shows it in its loss).

    Args:
        results: a comparison of two backends on at least two device counts (float64: one will do), with its pairs'
            ``rel_param_curves``; of several seeds, the first seed's runs are judged.
        dtype: the computation dtype.

    Returns:
        ``{devices: Judged}``.
    """
    seed = results["divergence"][0].get("seed") if results["divergence"] else None
    null = reference_null(own_curves(results, seed=seed))
    found = results.get("first_step_rounding") or {}
    rounding = {name: min(each[name] for each in found.values()) for name in next(iter(found.values()))} \
        if found else None
    runs = [r for r in results["runs"] if r.get("seed") == seed]
    loss_scale = max((abs(float(v)) for run in runs for v in run["losses"]), default=0.0)
    loss_null = reference_null(_own_losses(runs, loss_scale))
    out = {}
    for entry in (e for e in results["divergence"] if e.get("seed") == seed):
        n = entry["devices"]
        (pair,) = [p for p in results["pairs"] if p["kind"] == "framework" and p["runs"][0]["devices"] == n
                   and p.get("seed") == seed]
        first, second = ({r["backend"]: r for r in results["runs"] if r["devices"] == n and r.get("seed") == seed}[b]
                         for b in entry["backends"])
        on_params = judge_parity(dtype, pair["rel_param_curves"], null, entry["param_scale"], rounding)
        # A step's loss is computed from the parameters of the step before: after a split, from parted ones.
        losses = {"loss": _relative_losses(first["losses"], second["losses"], loss_scale)[:on_params.split]}
        out[n] = Judged(on_params, judge_parity(dtype, losses, loss_null, loss_scale), pair["rel_param_curves"],
                        losses, null, loss_null)
    return out


def describe(verdict: ParityVerdict, gaps: dict[str, list[float]], null: dict[str, list[float]] | None,
             what: str = "param") -> str:
    """A verdict in words: the largest relative difference over the judged steps, the largest rounding-only one
    (where there is a null), how many steps were judged and where the runs split.

    Args:
        verdict: :func:`toolkit.tolerances.judge_parity`'s.
        gaps: the divergences it judged, per parameter and step.
        null: the rounding-only divergence it judged them against, or None.
        what: what differs, in words (``"param"``, ``"loss"``).

    Returns:
        One line, without its verdict.
    """
    def largest(curves):
        return max((max(curves[name][:steps], default=0.0) for name, steps in verdict.judged.items()), default=0.0)

    judged = max(verdict.judged.values(), default=0)
    words = f"max relative {what} difference {largest(gaps):.3g}"
    if null is not None:
        words += f" (each backend against itself on other device counts, the smaller: {largest(null):.3g})"
    if verdict.split is not None:
        words += (f", judged to step {judged}: the runs split at step {verdict.split} (in "
                  f"{', '.join(verdict.jumped[:3])}: a jump out of the rounding band, as rounding crossing a ReLU "
                  f"boundary makes, or a difference that starts there; later steps cannot tell the two apart)")
    elif judged < verdict.steps:
        rounding = sorted(name for name, steps in verdict.judged.items() if steps < verdict.steps)
        words += (f", {', '.join(rounding[:3])}{' ...' if len(rounding) > 3 else ''} judged only until rounding "
                  f"alone parted every backend from itself in it")
    elif verdict.steps > 1:
        words += ", every step judged"
    return words


def _print_failure(results: dict[str, Any], backends: list[str], n: int, verdict: ParityVerdict) -> None:
    if not verdict.beyond:
        print(f"  {NOTHING_JUDGED} in every parameter")
        return
    step, name, gap, bound = verdict.beyond[0]
    first, second = ({r["backend"]: r for r in results["runs"] if r["devices"] == n}[b] for b in backends)
    for key in first["params"]:
        a, b = first["params"][key].astype(np.float64), second["params"][key].astype(np.float64)
        index = np.unravel_index(int(np.argmax(np.abs(a - b))), a.shape) if a.ndim else ()
        where = tuple(int(i) for i in index)
        print(f"  {key}: max |difference| {float(np.max(np.abs(a - b))):.3g} at {where} after the last step: "
              f"{backends[0]} {float(a[index]):.10g} vs {backends[1]} {float(b[index]):.10g}")
    print(f"  first step beyond tolerance: {step} in {name} (relative difference {gap:.3g} > {bound:.3g}); losses "
          f"{first['losses'][step - 1]:.10g} vs {second['losses'][step - 1]:.10g}")


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
    """``parity --against``: this environment's runs against another environment's, run by run: every step's loss
    and the final parameters, each judged (:func:`toolkit.tolerances.judge_parity`) against the smaller of the
    backends' own divergences of both environments (their runs on other device counts): the losses step by step,
    up to a split, the parameters at the last step (the reference keeps only the final ones).

    Args:
        results: this environment's results, with each run's ``params`` and each pair's ``rel_param_curves``.
        reference: the other environment's results (:func:`read_reference`).
        theirs: the reference's runs compared (of backends not run here, of its first seed).
        params: the reference's final parameters (:func:`toolkit.command.compare.load_params`).
        against: the reference's path, for the report.
        quiet: print nothing.

    Returns:
        Whether every run passed.
    """
    config, dtype = results["config"], results["config"]["dtype"]
    runs = [*results["runs"], *theirs]
    loss_scale = max((abs(float(v)) for run in runs for v in run["losses"]), default=0.0)
    loss_null = reference_null(_own_losses(runs, loss_scale))
    final = {backend: [{name: curve[-1:] for name, curve in curves.items()} for curves in found]
             for backend, found in own_curves(results).items()}
    for pair in reference.get("pairs", []):
        if pair["kind"] == "order" and pair.get("seed", config["seed"]) == config["seed"]:
            final.setdefault(pair["runs"][0]["backend"], []).append(
                {name: [value] for name, value in pair["rel_param_diff"].items()})
    param_null = reference_null(final)
    passed = True
    for ours in results["runs"]:
        for run in (r for r in theirs if r["devices"] == ours["devices"]):
            other = params[(run["backend"], run["devices"])]
            gaps = {name: [value] for name, value in relative_divergence(ours["params"], other).items()}
            scale = max(float(np.max(np.abs(v))) for v in other.values())
            on_params = judge_parity(dtype, gaps, param_null, scale, first_step=len(ours["losses"]))
            losses = {"loss": _relative_losses(ours["losses"], run["losses"], loss_scale)}
            on_losses = judge_parity(dtype, losses, loss_null, loss_scale)
            # Final parameters that rounding alone has parted every backend from itself in cannot be judged; the
            # losses, judged at every step, still are.
            unjudged = not on_params.beyond and not any(on_params.judged.values())
            ok = (on_params.passed or unjudged) and on_losses.passed
            passed = passed and ok
            if not quiet:
                print(f"{run['backend']} ({against}) vs {ours['backend']} on {ours['devices']} device(s), "
                      f"{dtype}, {config['steps']} {config['optimizer']} steps: final parameters: "
                      f"{describe(on_params, gaps, param_null)}; losses: "
                      f"{describe(on_losses, losses, loss_null, 'loss')}: {'ok' if ok else 'FAILED'}")
            if unjudged and not quiet:
                print("  final parameters not judged: every backend parts from itself in each of them past "
                      "1e-4 (rounding amplified)")
            for _, name, gap, bound in on_params.beyond[:3] if not quiet else ():
                print(f"  final {name} beyond tolerance: relative difference {gap:.3g} > {bound:.3g}")
            for step, _, gap, bound in on_losses.beyond[:3] if not quiet else ():
                print(f"  loss at step {step} beyond tolerance: relative difference {gap:.3g} > {bound:.3g}")
    return passed


def _own_losses(runs: list[dict[str, Any]], scale: float) -> dict[str, list[dict[str, list[float]]]]:
    """Each backend's own loss divergences, relative to ``scale``: every pair of its device counts' runs (of one
    seed), step by step, as :func:`own_curves` takes every pair for the parameters."""
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_backend.setdefault(run["backend"], []).append(run)
    return {backend: [{"loss": _relative_losses(a["losses"], b["losses"], scale)}
                      for a, b in itertools.combinations(found, 2)]
            for backend, found in by_backend.items()}


def _relative_losses(first: list[float], second: list[float], scale: float) -> list[float]:
    return [abs(a - b) / scale if scale else 0.0 for a, b in zip(first, second)]


def calibration_markdown(records: list[dict[str, Any]]) -> str:
    """The table of docs/parity.json (docs/parity.py): per model, how the real backends fared over the seeds and
    how each defect was caught.

    Args:
        records: one per model, case (``"real"`` or a ``--perturb`` value), seed and device count: ``passed``,
            ``steps``, ``split`` (the step or None) and ``first_beyond`` (the first step beyond tolerance, or None).

    Returns:
        A Markdown table.
    """
    models = list(dict.fromkeys(r["model"] for r in records))
    defects = list(dict.fromkeys(r["case"] for r in records if r["case"] != "real"))
    lines = ["| model | steps | real backends: passed | of which split (earliest step) | "
             + " | ".join(f"`--perturb {d}`: failed (by step)" for d in defects) + " |",
             "|---|---|---|---|" + "---|" * len(defects)]
    for model in models:
        real = [r for r in records if r["model"] == model and r["case"] == "real"]
        splits = [r["split"] for r in real if r["split"] is not None]
        cells = [model, str(real[0]["steps"]) if real else "", f"{sum(r['passed'] for r in real)}/{len(real)}",
                 f"{len(splits)} ({min(splits)})" if splits else "0"]
        for defect in defects:
            perturbation = defect.split(":")
            found = [r for r in records if r["model"] == model and r["case"] == defect
                     and (len(perturbation) < 3 or str(r["devices"]) in perturbation[2].split(","))]
            spared = [r for r in records if r["model"] == model and r["case"] == defect and r not in found]
            by = max((r["first_beyond"] for r in found if r["first_beyond"] is not None), default=None)
            cell = f"{sum(not r['passed'] for r in found)}/{len(found)}" + (f" (step {by})" if by else "")
            if spared:
                cell += f"; unperturbed device counts passed {sum(r['passed'] for r in spared)}/{len(spared)}"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
