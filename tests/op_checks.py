"""How the op tests run an op on a backend and check it, written once for every op group's test file: values against
a NumPy reference, gradients against central differences of that reference, and gradients across backends.

A case is ``fn(ops, **inputs)`` (the toolkit's op applied to named inputs), a NumPy ``reference(**inputs)`` and the
inputs as NumPy arrays; float inputs are cast to the computation dtype, others go in as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

import toolkit

#: Tolerance of a float32 result against a float64 NumPy reference (a few roundings of ~6e-8 each, relative).
FLOAT32_RTOL = 2e-5
#: Tolerance of a float64 result against a float64 NumPy reference.
FLOAT64_RTOL = 1e-12
#: Step of the central differences, and how close an analytic directional derivative must be to the numeric one.
DIFFERENCE_STEP = 1e-6
GRADIENT_RTOL, GRADIENT_ATOL = 1e-5, 1e-6


def _cast(value: np.ndarray, dtype: str) -> np.ndarray:
    return value.astype(dtype) if np.asarray(value).dtype.kind == "f" else value


def run(backend, fn: Callable, inputs: Mapping[str, np.ndarray], dtype: str = "float64"):
    """``fn(ops, **inputs)`` on ``backend``'s first device with the computation dtype ``dtype``, as NumPy (a pytree
    of NumPy arrays where ``fn`` returns several)."""
    import optree

    device = backend.list_devices()[0]
    placed = {name: backend.place(_cast(np.asarray(value), dtype), device) for name, value in inputs.items()}
    out = backend.call(lambda ops, **t: fn(ops, **t), device, placed, dtype)
    return optree.tree_map(backend.to_numpy, out, is_leaf=lambda v: not isinstance(v, (list, tuple, dict)))


def check_values(backend, fn: Callable, reference: Callable, inputs: Mapping[str, np.ndarray],
                 dtype: str = "float64", expected_dtype: str | None = None) -> None:
    """``fn`` on ``backend`` equals ``reference`` (NumPy, float64) in shape, values (NaN where it has NaN) and dtype
    (``expected_dtype``, default: the computation dtype for a float result, else the reference's)."""
    result = np.asarray(run(backend, fn, inputs, dtype))
    expected = np.asarray(reference(**inputs))
    assert result.shape == expected.shape, (result.shape, expected.shape)
    wanted = expected_dtype or (dtype if expected.dtype.kind == "f" else expected.dtype.name)
    assert result.dtype == np.dtype(wanted), (result.dtype, wanted)
    tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance, equal_nan=True)
    else:
        np.testing.assert_array_equal(result, expected)


def gradients(backend_name: str, fn: Callable, inputs: Mapping[str, np.ndarray], weights: np.ndarray,
              dtype: str = "float64") -> dict[str, np.ndarray]:
    """The gradient of ``sum(fn(ops, **inputs) * weights)`` for each float input, through a trainer (so it is the
    gradient the backend's training step computes)."""
    floats = {n: np.asarray(v, np.float64) for n, v in inputs.items() if np.asarray(v).dtype.kind == "f"}
    others = {n: v for n, v in inputs.items() if n not in floats}
    model = toolkit.Model(lambda rng: {n: v.copy() for n, v in floats.items()},
                          lambda ops, p, x: fn(ops, **p, **others),
                          lambda ops, out, target: ops.reshape(ops.sum(out * target[0]), (1,)))
    trainer = toolkit.DataParallel(model, backend_name, 1, toolkit.optim.SGD(0.1), dtype=dtype)
    return trainer.gradients(np.zeros((1, 1)), np.asarray(weights)[None])


def check_gradients(backend_name: str, fn: Callable, reference: Callable, inputs: Mapping[str, np.ndarray],
                    seed: int = 1) -> dict[str, np.ndarray]:
    """The float64 gradient of ``fn`` on a backend, in a random direction, equals the central difference of the
    NumPy ``reference``; returns the gradients (for a comparison across backends)."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=np.shape(reference(**inputs)))
    grads = gradients(backend_name, fn, inputs, weights)
    direction = {n: rng.normal(size=np.shape(v)) for n, v in inputs.items() if n in grads}

    def value(sign: float) -> float:
        moved = {n: (v + sign * DIFFERENCE_STEP * direction[n] if n in direction else v) for n, v in inputs.items()}
        return float(np.sum(reference(**moved) * weights))

    numeric = (value(1.0) - value(-1.0)) / (2 * DIFFERENCE_STEP)
    analytic = sum(float(np.sum(grads[n] * direction[n])) for n in direction)
    assert abs(analytic - numeric) <= GRADIENT_ATOL + GRADIENT_RTOL * abs(numeric), (analytic, numeric)
    return grads


def failures(checks: Mapping[str, Callable[[], None]]) -> dict[str, str]:
    """The checks that raise an AssertionError, by name, with its message: where many cases share one compiled call
    (on the Theano family each distinct graph compiles for seconds), every case is still checked and each failing
    one named."""
    failed = {}
    for name, check in checks.items():
        try:
            check()
        except AssertionError as error:
            failed[name] = str(error).strip()
    return failed


def one_device_equals_many(backend_name: str, model: toolkit.Model, x: np.ndarray, y: np.ndarray,
                           learning_rate: float, devices: int) -> np.ndarray:
    """The same float64 gradients and the same SGD step for the parameter ``w`` on 1 device and on ``devices``
    (with a batch they do not divide: uneven shards); returns the 1-device gradient, checked finite and non-zero."""
    grads, params = [], []
    for n in (1, devices):
        trainer = toolkit.DataParallel(model, backend_name, n, toolkit.optim.SGD(learning_rate), dtype="float64")
        grads.append(trainer.gradients(x, y)["w"])
        trainer.step(x, y)
        params.append(trainer.params()["w"])
    np.testing.assert_allclose(grads[0], grads[-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(params[0], params[-1], rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(grads[0])) and np.any(grads[0] != 0)
    return grads[0]
