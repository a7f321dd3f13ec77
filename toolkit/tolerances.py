"""Tolerances for comparing runs: across backends, across device counts. Named once, used by the tests and by
anyone checking parity in their own CI.

Why these numbers (measured on the digits MLP 64-32-10, batch 64, 10 steps; see the parity table of
docs/guides/compare.md): both backends evaluate the same formulas in the same dtype and differ only in rounding
order (summation order of reductions and matrix products).
"""

from __future__ import annotations

from collections.abc import Sequence

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
