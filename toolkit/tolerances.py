"""Tolerances for comparing runs: across backends, across device counts. Named once, used by the tests and by
anyone checking parity in their own CI.

Why these numbers (measured on the digits MLP 64-32-10, batch 64, 10 steps; see the README's parity table):
both backends evaluate the same formulas in the same dtype and differ only in rounding order (summation order of
reductions and matrix products).
"""

from __future__ import annotations

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
    """
    return FLOAT32_RTOL * param_scale + steps * lr * 2.0 * FLOAT32_GRAD_RTOL * grad_scale / eps


def parity_bound(dtype: str, optimizer, steps: int, grad_scale: float, param_scale: float) -> float:
    """The largest parameter difference between backends that parity allows after ``steps`` updates.

    float64: :data:`FLOAT64_ATOL`. float32: :data:`FLOAT32_RTOL` of the parameter scale for SGD and momentum, and
    :func:`adaptive_float32_atol` for optimizers that divide by ``sqrt(v) + eps`` (Adam, RMSprop).
    """
    if dtype == "float64":
        return FLOAT64_ATOL
    eps = getattr(optimizer, "eps", None)
    if eps is None:
        return FLOAT32_RTOL * param_scale
    return adaptive_float32_atol(optimizer.peak_lr, eps, steps, grad_scale, param_scale)
