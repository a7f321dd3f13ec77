"""Tolerances for comparing runs: across backends, across device counts. Named once, used by the tests and by
anyone checking parity in their own CI.

Why these numbers (measured on the digits MLP 64-32-10, batch 64, 10 steps; see the parity table of
docs/guides/compare.md): both backends evaluate the same formulas in the same dtype and differ only in rounding
order (summation order of reductions and matrix products).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolkit.errors import ArgumentError

#: float64: max |a - b| of parameters after 10 steps. Measured differences are 1e-16 to 3e-15 (a few float64 ulps,
#: grown over 10 steps); 1e-10 leaves five orders of magnitude for deeper models and longer runs while still failing
#: on any real difference in the math (a wrong bias correction or a dropped shard is >= 1e-4).
FLOAT64_ATOL = 1e-10

#: float32 parameters, SGD and momentum: max |a - b| / max |p|. Measured 7e-8 to 1.3e-7 (about one float32 ulp,
#: 6e-8, of the parameter scale); 1e-5 allows ~100 ulps of accumulated rounding.
FLOAT32_RTOL = 1e-5

#: float32 gradients: max |a - b| / max |g|. Measured 1e-7 to 1.6e-7; same margin as FLOAT32_RTOL.
FLOAT32_GRAD_RTOL = 1e-5


def adaptive_float32_atol(lr: float, eps: float, steps: int, grad_scale: float, param_scale: float) -> float:
    """Bound on the float32 parameter difference after ``steps`` Adam or RMSprop updates.

    Adam divides by ``sqrt(v) + eps``, RMSprop (as Keras) by ``sqrt(v + eps)``, which is at least as large when
    ``eps <= 1``: the argument below holds for both. If the backends' gradients differ by at most ``d``
    elementwise, ``m`` differs by at most ``d`` and ``sqrt(v)`` by at most ``d`` (it is a weighted
    root-mean-square, which is 1-Lipschitz), so the normalised step ``m / (sqrt(v) + eps)`` (of size <= 1) differs
    by at most ``2 d / eps``, and each update by ``lr * 2 d / eps``. With ``d = FLOAT32_GRAD_RTOL * grad_scale``
    the bound over ``steps`` updates, on top of the plain float32 rounding of the parameters, is returned. It is
    only meaningful when ``eps`` is not tiny against ``d``: with Keras' default ``eps = 1e-7`` it exceeds the step
    size itself, which is why the float32 parity test uses ``eps = 1e-3`` (float64 is tested with the default
    eps).

    Args:
        lr: the (peak) learning rate.
        eps: the optimizer's epsilon.
        steps: the number of updates.
        grad_scale: the largest absolute gradient entry.
        param_scale: the largest absolute parameter.

    Returns:
        The bound on max |a - b| of the parameters, a float.
    """
    return FLOAT32_RTOL * param_scale + steps * lr * 2.0 * FLOAT32_GRAD_RTOL * grad_scale / eps


#: The relative divergence (max |a - b| of one parameter over the model's parameter scale) past which two runs have
#: parted: a rounding-level difference has crossed a ReLU or max-pool boundary and grown, and no later step tells a
#: difference in the math from rounding. Measured on the digits MLP (float32, Adam eps 1e-7, lr 0.01, batch 128, 300
#: steps, seeds 0-4, TensorFlow and Aesara on 1, 2 and 4 devices: 75 pairs): the 55 pairs that stay together stay
#: below 2.2e-5 at every step (float32 rounding grown over the steps); the 20 that part go from 1e-5 to past 1e-4
#: within 4 steps and end at 1.5e-4 to 3.9e-2. 1e-4 is 4.5 times the largest divergence of the pairs that stay
#: together.
SPLIT_BOUND = 1e-4

#: How far two backends' runs may part, as a multiple of how far each backend's own runs part when only the summation
#: order changes (the same backend on other device counts: the rounding-only "null" divergence), step by step.
#: Measured on the digits MLP, float32, Adam (eps 1e-7), lr 0.01, batch 128, 300 steps, seeds 0 and 1, TensorFlow and
#: Aesara on 1, 2 and 4 devices: the cross-backend divergence was at most 1.1 times the null at every step, also
#: after the runs split at a ReLU boundary (0.045 at step 300 for both); with Aesara's ReLU scaled by 1 + 1e-4, 800
#: times the null at step 1 (6.5e-4 against 7.9e-7), though at step 300 only 2 times (chaos hides it by then: every
#: step is checked, not only the last).
NULL_FACTOR = 10.0


def trajectory_bounds(dtype: str, null: Sequence[float] | None, param_scale: float) -> list[float] | float:
    """The largest parameter difference between two backends that parity allows, per step.

    Both backends evaluate the same formulas; only the order of their sums differs. In float64 that keeps runs within
    :data:`FLOAT64_ATOL` for the horizons tested; in float32 (and in float64 over long chaotic runs) a rounding-level
    difference can grow, most of all with Adam's ``m / (sqrt(v) + eps)`` and at ReLU and max-pool boundaries, so no
    fixed bound both passes rounding and fails a real difference. The bound is then calibrated on the ``null``: at
    each step, the largest divergence between one backend's runs on different device counts (the same framework with
    another summation order). A real difference (a changed op, a wrong update) parts the backends far more than that
    in the first steps, before chaos sets in.

    Args:
        dtype: ``"float32"`` or ``"float64"``.
        null: per step, the rounding-only divergence (see above), or None where there is none (one device count).
        param_scale: the largest absolute parameter, for float32's floor of :data:`FLOAT32_RTOL` of it.

    Returns:
        A list of bounds, one per step, where ``null`` is given: ``NULL_FACTOR * null[t]`` plus the floor
        (:data:`FLOAT64_ATOL`, or ``FLOAT32_RTOL * param_scale``); without a null, float64's fixed
        :data:`FLOAT64_ATOL` (a float).

    Raises:
        ArgumentError: float32 without a null: no fixed float32 bound is honest for every optimizer and horizon (run at
            least two device counts, so that each backend can be compared with itself).
    """
    floor = FLOAT64_ATOL if dtype == "float64" else FLOAT32_RTOL * param_scale
    if null is None:
        if dtype != "float64":
            raise ArgumentError(f"a {dtype} parity check needs each backend's own divergence to judge against: run "
                                "at least two device counts (e.g. --devices 1,2)")
        return floor
    return [NULL_FACTOR * gap + floor for gap in null]


#: The largest fixed bound that still tells a real difference from rounding: a fraction of the parameter scale.
#: :func:`adaptive_float32_atol` grows with the steps and with ``1 / eps``; past this it says nothing.
MEANINGFUL_BOUND = 1e-2


def parity_bound(dtype: str, optimizer, steps: int, grad_scale: float, param_scale: float) -> float:
    """A fixed bound on the final parameter difference between backends after ``steps`` updates, where one exists.

    float64: :data:`FLOAT64_ATOL`. float32: :data:`FLOAT32_RTOL` of the parameter scale for SGD and momentum, and
    :func:`adaptive_float32_atol` for optimizers that divide by ``sqrt(v) + eps`` (Adam, RMSprop), which is tight
    only for a large ``eps`` (the tests use 1e-3). ``multigpu parity`` uses :func:`trajectory_bounds` instead.

    Args:
        dtype: ``"float32"`` or ``"float64"``.
        optimizer: the :class:`toolkit.optim.Optimizer` both runs used; one with an ``eps`` attribute counts as
            adaptive, its ``peak_lr`` as the learning rate.
        steps: the number of updates.
        grad_scale: the largest absolute gradient entry.
        param_scale: the largest absolute parameter.

    Returns:
        The bound on max |a - b| of the final parameters, a float.

    Raises:
        ArgumentError: the adaptive bound exceeds :data:`MEANINGFUL_BOUND` of the parameter scale (Keras' default
            ``eps = 1e-7``, long runs): a check against it could not fail; use :func:`trajectory_bounds`.
    """
    if dtype == "float64":
        return FLOAT64_ATOL
    eps = getattr(optimizer, "eps", None)
    if eps is None:
        return FLOAT32_RTOL * param_scale
    bound = adaptive_float32_atol(optimizer.peak_lr, eps, steps, grad_scale, param_scale)
    if bound > MEANINGFUL_BOUND * param_scale:
        raise ArgumentError(f"no meaningful fixed float32 bound for {type(optimizer).__name__}(eps={eps:g}) over "
                            f"{steps} steps: {bound:.3g} against parameters of scale {param_scale:.3g}; judge the runs "
                            "against each backend's own divergence (toolkit.tolerances.trajectory_bounds)")
    return bound


#: float32: how far two backends' runs may drift apart per step, relative to the parameter scale, beyond what each
#: backend's own reorderings show: a framework's tanh, sigmoid or exp rounds differently from another's by about an
#: ulp, a difference no summation order within one backend makes, which accumulates steadily over the steps.
#: Measured (docs/parity.py's settings, the real backends over 10 seeds): the LSTM's TensorFlow-Aesara divergence
#: grows past ``NULL_FACTOR`` times its null plus the floor by at most 6.2e-8 per step (``lstm/recurrent``, seed 0,
#: step 93); 1e-6 (about 8 float32 ulps a step) leaves a factor of 16. float64's equivalent (1e-16 a step) stays
#: below its floor for a million steps, so float64 has none.
FLOAT32_DRIFT = 1e-6

#: A pair of runs *splits* at a step where one of its parameters' divergence jumps by at least this factor, from
#: within its bound to at least this fraction of the rounding band (``NULL_FACTOR`` times its null plus the floor): a
#: rounding-level difference has crossed a ReLU or max-pool boundary in one example, which moves one run away from
#: every other at once. Measured (docs/parity.py's settings, the digits MLP, both conv nets and the LSTM, 10 seeds):
#: the pairs that split jumped by factors of 11 to 10^4; a difference in the math is past its bound from the first
#: steps, or grows there.
JUMP_FACTOR = 10.0
#: The first steps, in which no jump is a split: a split needs a rounding difference grown large enough to cross a
#: boundary, and Adam's first update (``lr * sign(g)`` where ``|g| >> eps``) hides most differences in the math until
#: step 2, where they then appear as a jump. Measured (docs/parity.py's settings, 10 seeds, the same models): one
#: run of the digits MLP (seed 8) left the others at step 5, the earliest; the others from step 18.
SPLIT_AFTER = 3


@dataclass(frozen=True)
class ParityVerdict:
    """What :func:`judge_parity` found, parameter by parameter and step by step.

    Attributes:
        steps: the steps the runs took.
        judged: per parameter, how many steps were judged: up to the split (:attr:`split`), and up to the step
            before every backend parted from itself in that parameter past :data:`SPLIT_BOUND` (rounding alone
            then moves it further than a bound could tell from a difference).
        split: the step (counted from 1) at which the runs split (:data:`JUMP_FACTOR`), or None.
        jumped: the parameters that jumped at the split, largest jump first (empty without a split).
        beyond: ``(step, parameter, divergence, bound)`` for each judged step (counted from 1) and parameter whose
            divergence exceeded its bound, in step order.
    """

    steps: int
    judged: dict[str, int]
    split: int | None
    jumped: tuple[str, ...]
    beyond: tuple[tuple[int, str, float, float], ...]

    @property
    def passed(self) -> bool:
        """Whether some step was judged and none went beyond its bound (a check that judged nothing fails)."""
        return not self.beyond and any(self.judged.values())


def reference_null(own: Mapping[str, Sequence[Mapping[str, Sequence[float]]]]) -> dict[str, list[float]] | None:
    """The rounding-only divergence that two backends' runs are judged against, per parameter and step: for each
    backend, the largest of its own divergences (its runs on other device counts: the same math in another
    summation order); then the smallest over the backends.

    The smallest, so that the backend under test cannot raise its own allowance: a defect confined to one backend's
    multi-device path parts that backend from itself, and a bound taken from its own divergence (or the largest of
    every backend's) would grow with the defect. The other backend's divergence is untouched by it.

    Args:
        own: per backend, its curves: ``{parameter: relative divergence per step}`` for each pair of its device
            counts (:func:`toolkit.command.divergence.relative_divergence` after each step). A backend without a
            pair (one device count) is left out.

    Returns:
        ``{parameter: per step}``, or None where no backend has a pair.
    """
    per_backend = []
    for curves in own.values():
        if curves:
            per_backend.append({name: [max(values) for values in zip(*(c[name] for c in curves))]
                                for name in curves[0]})
    if not per_backend:
        return None
    return {name: [min(values) for values in zip(*(b[name] for b in per_backend))] for name in per_backend[0]}


def judge_parity(dtype: str, gaps: Mapping[str, Sequence[float]], null: Mapping[str, Sequence[float]] | None,
                 param_scale: float, rounding: Mapping[str, float] | None = None,
                 first_step: int = 1) -> ParityVerdict:
    """Judge two backends' runs, parameter by parameter and step by step, against what rounding alone explains.

    A parameter's bound at a step is :data:`NULL_FACTOR` times the rounding-only divergence of that parameter at that
    step (:func:`reference_null`) plus a floor (:data:`FLOAT32_RTOL`, or :data:`FLOAT64_ATOL` over ``param_scale``)
    plus, in float32, :data:`FLOAT32_DRIFT` per step taken, relative to the model's parameter scale. Where
    ``rounding`` is given the null is at least it: one backend's reorderings do not change how each example is
    computed, and Adam's first update (about ``lr * g / (|g| + eps)``) turns the frameworks' different rounding of a
    gradient entry near zero into a difference of up to ``2 lr`` that no reordering shows (measured: the
    Transformer's position embeddings, seed 7, 2.5e-5 apart after step 1 with a null of 2.8e-7; TensorFlow's float32
    step 5.5e-6 from float64 there, Aesara's 3.0e-5).

    Rounding can still split two runs, at a step no bound predicts (a difference crosses a ReLU boundary in one
    example, and one run leaves the others). The runs are judged up to such a split, which is reported, rather than
    against a bound widened to its size: a split is a jump (:data:`JUMP_FACTOR`) out of the rounding band before
    any step has passed a bound. No jump in the first :data:`SPLIT_AFTER` steps is a split (rounding has had no
    time to grow), nor is a jump from runs still equal; a step past a bound without a jump before it is a
    difference that grows. A parameter in which every backend parts from itself past
    :data:`SPLIT_BOUND` (one that rounding noise alone moves: no gradient in exact arithmetic) is judged up to that
    step.

    Args:
        dtype: ``"float32"`` or ``"float64"``.
        gaps: per parameter, the two backends' relative divergence after each step.
        null: per parameter, the rounding-only divergence after each step (:func:`reference_null`), or None where
            there is none (one device count: float64 only, every step against the floor).
        param_scale: the largest absolute parameter, for float64's absolute floor.
        rounding: per parameter, how far float32 rounding alone moves it in the first step (a backend's float32
            first step against its float64 one, the smaller backend's), which the null is raised to at every step;
            or None.
        first_step: the step (from 1) of the curves' first entry, for the drift (``steps`` for a final value
            alone).

    Returns:
        The :class:`ParityVerdict`.

    Raises:
        ArgumentError: float32 without a null (:func:`trajectory_bounds`), or ``null`` with fewer steps of a
            parameter than ``gaps``.
    """
    trajectory_bounds(dtype, None if null is None else [0.0], param_scale)  # float32 needs a null
    floor = FLOAT32_RTOL if dtype != "float64" else FLOAT64_ATOL / param_scale if param_scale > 0 else FLOAT64_ATOL
    drift = FLOAT32_DRIFT if dtype != "float64" else 0.0
    steps = max((len(curve) for curve in gaps.values()), default=0)
    bands, bounds, limit = {}, {}, {}
    for name, curve in gaps.items():
        own = [0.0] * len(curve) if null is None else list(null.get(name, ()))
        if len(own) < len(curve):
            raise ArgumentError(f"the null has {len(own)} step(s) of {name!r}, the runs {len(curve)}")
        least = 0.0 if rounding is None else rounding.get(name, 0.0)
        bands[name] = [NULL_FACTOR * max(value, least) + floor for value in own[:len(curve)]]
        bounds[name] = [band + drift * (first_step + t) for t, band in enumerate(bands[name])]
        limit[name] = next((t for t, value in enumerate(own[:len(curve)]) if value > SPLIT_BOUND), len(curve))
    split, jumped = _split(gaps, bounds, bands, limit, steps)
    end = steps if split is None else split - 1
    judged = {name: min(limit[name], end) for name in gaps}
    beyond = sorted((t + 1, name, gaps[name][t], bounds[name][t])
                    for name in gaps for t in range(judged[name]) if _past(gaps[name][t], bounds[name][t]))
    return ParityVerdict(steps, judged, split, jumped, tuple(beyond))


def _split(gaps, bounds, bands, limit, steps) -> tuple[int | None, tuple[str, ...]]:
    """The step (from 1) where the runs split and the parameters that jumped there, largest jump first; or
    ``(None, ())`` where a step passed a bound before any split, or none did and no parameter jumped."""
    for t in range(steps):
        live = [n for n in gaps if t < limit[n]]
        jumps = sorted((-gaps[n][t] / gaps[n][t - 1], n) for n in live if t >= SPLIT_AFTER
                       and 0 < gaps[n][t - 1] <= bounds[n][t - 1] and math.isfinite(gaps[n][t])
                       and gaps[n][t] >= JUMP_FACTOR * gaps[n][t - 1] and gaps[n][t] >= bands[n][t] / JUMP_FACTOR)
        if jumps:
            return t + 1, tuple(name for _, name in jumps)
        if any(_past(gaps[n][t], bounds[n][t]) for n in live):
            return None, ()
    return None, ()


def _past(gap: float, bound: float) -> bool:
    """Whether a divergence is past its bound: NaN or infinite (in the runs or in the null) counts as past."""
    return not gap <= bound or not math.isfinite(gap)
