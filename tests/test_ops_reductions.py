"""Reductions, sorting, quantiles, the nan* family, segments and searching (toolkit.ops.reductions) against NumPy on
every backend, float32 and float64, with NaN, infinities, -0.0, ties, empty arrays, integers and booleans; no
gradient for NaN entries; typed refusals; a sample against keras.ops itself (the gradients:
tests/test_ops_gradients.py).

One compiled function computes every value case on a backend (a dict of results, each compared and named), so the
Theano family compiles a handful of graphs, not one per op.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, gradients, run
from toolkit.errors import ArgumentError, DTypeError, ShapeError

_RNG = np.random.default_rng(7)
INPUTS = {
    # NaN, infinities, signed zeros and ties, one slice of NaN only (row 2).
    "x": np.array([[3.0, np.nan, 1.0, -0.0, 0.0, 2.0],
                   [5.0, 4.0, 4.0, np.inf, -np.inf, 1.0],
                   [np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
                   [0.5, -2.0, 0.0, 7.0, -0.0, 0.5]]),
    "y": _RNG.normal(size=(3, 4, 5)),  # finite, distinct
    "ints": np.array([[3, -2, 7, 7], [0, 1, -5, 2], [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, 0]],
                     np.int32),
    "small": np.array([[1, -2, 3], [4, 0, 2]], np.int8),
    "bools": np.array([[True, False, True], [False, False, False]]),
    "empty": np.zeros((0, 3)),
    "weights": np.array([0.5, 1.0, 2.0, 0.25, 1.5, 3.0]),
    "ids": np.array([2, 0, -1, 2]),  # one id per row of x and y[0]; -1 drops the row
    "bins": np.array([-1.0, 0.0, 2.0, 4.0]),
}
Q = np.array([0.0, 0.3, 0.5, 0.75, 1.0])


def _ids(t):
    return INPUTS["ids"]


def _segment_reference(reduce, identity):
    def reference(data, ids, num):
        fill = identity if identity is not None else -np.inf if reduce is np.maximum else np.inf
        out = np.full((num,) + data.shape[1:], fill, data.dtype)
        done = np.zeros(num, bool)
        for row, i in zip(data, ids):
            if 0 <= i < num:
                out[i] = row if not done[i] else reduce(out[i], row)
                done[i] = True
        return out
    return reference


_SEGMENT_SUM = _segment_reference(np.add, 0.0)
_SEGMENT_MAX = _segment_reference(np.maximum, None)  # an empty segment: -inf (JAX's)
_SEGMENT_MIN = _segment_reference(np.minimum, None)
_SEGMENT_PROD = _segment_reference(np.multiply, 1.0)


def _q_first(found):
    return found


#: name: (the toolkit's op on Tensors t, NumPy's value on arrays t, the dtype expected when it is not the computation
#: dtype for a float result or int32/bool for an integer/boolean one).
CASES = {
    "prod": (lambda o, t: o.prod(t["x"], axis=1), lambda t: np.prod(t["x"], axis=1), None),
    "prod_axes": (lambda o, t: o.prod(t["y"], axis=(0, -1), keepdims=True),
                  lambda t: np.prod(t["y"], axis=(0, 2), keepdims=True), None),
    "prod_int8": (lambda o, t: o.prod(t["small"], axis=0), lambda t: np.prod(t["small"], 0), "int32"),
    "prod_bool": (lambda o, t: o.prod(t["bools"]), lambda t: np.prod(t["bools"]), "int32"),
    "prod_empty": (lambda o, t: o.prod(t["empty"], axis=0), lambda t: np.prod(t["empty"], 0), None),
    "var": (lambda o, t: o.var(t["x"], axis=1), lambda t: np.var(t["x"], axis=1), None),
    "var_all": (lambda o, t: o.var(t["y"]), lambda t: np.var(t["y"]), None),
    "var_int": (lambda o, t: o.var(t["small"], axis=1, keepdims=True), lambda t: np.var(t["small"], 1, keepdims=True),
                None),
    "std": (lambda o, t: o.std(t["y"], axis=(1, 2)), lambda t: np.std(t["y"], axis=(1, 2)), None),
    "any": (lambda o, t: o.any(t["x"], axis=0), lambda t: np.any(t["x"], axis=0), None),
    "any_bool": (lambda o, t: o.any(t["bools"], axis=1, keepdims=True), lambda t: np.any(t["bools"], 1, keepdims=True),
                 None),
    "all": (lambda o, t: o.all(t["ints"], axis=1), lambda t: np.all(t["ints"], axis=1), None),
    "all_empty": (lambda o, t: o.all(t["empty"], axis=0), lambda t: np.all(t["empty"], axis=0), None),
    "amax": (lambda o, t: o.amax(t["x"], axis=1), lambda t: np.amax(t["x"], axis=1), None),
    "amax_bool": (lambda o, t: o.amax(t["bools"], axis=1), lambda t: np.amax(t["bools"], axis=1), None),
    "amin": (lambda o, t: o.amin(t["ints"], axis=0), lambda t: np.amin(t["ints"], axis=0), None),
    "amin_noaxes": (lambda o, t: o.amin(t["y"], axis=()), lambda t: t["y"], None),
    "ptp": (lambda o, t: o.ptp(t["y"], axis=1), lambda t: np.ptp(t["y"], axis=1), None),
    "ptp_int": (lambda o, t: o.ptp(t["small"], axis=1), lambda t: np.ptp(t["small"], axis=1), "int8"),
    "argmin": (lambda o, t: o.argmin(t["x"], axis=1), lambda t: np.argmin(t["x"], axis=1), None),
    "argmin_all": (lambda o, t: o.argmin(t["y"], keepdims=True), lambda t: np.argmin(t["y"], keepdims=True), None),
    "argmin_int": (lambda o, t: o.argmin(t["ints"], axis=1), lambda t: np.argmin(t["ints"], axis=1), None),
    "argmin_bool": (lambda o, t: o.argmin(t["bools"], axis=1), lambda t: np.argmin(t["bools"], axis=1), None),
    "argsort": (lambda o, t: o.argsort(t["x"]), lambda t: np.argsort(t["x"], kind="stable"), None),
    "argsort_axis0": (lambda o, t: o.argsort(t["ints"], axis=0), lambda t: np.argsort(t["ints"], 0, kind="stable"),
                      None),
    "argsort_none": (lambda o, t: o.argsort(t["bools"], axis=None),
                     lambda t: np.argsort(t["bools"], axis=None, kind="stable"), None),
    "sort": (lambda o, t: o.sort(t["x"]), lambda t: np.sort(t["x"]), None),
    "sort_axis": (lambda o, t: o.sort(t["y"], axis=1), lambda t: np.sort(t["y"], axis=1), None),
    "sort_empty": (lambda o, t: o.sort(t["empty"], axis=0), lambda t: np.sort(t["empty"], axis=0), None),
    "argpartition": (lambda o, t: o.argpartition(t["ints"], 1), lambda t: np.argsort(t["ints"], kind="stable"), None),
    "top_k_values": (lambda o, t: o.top_k(t["x"], 3)[0], lambda t: _top_k(t["x"], 3)[0], None),
    "top_k_indices": (lambda o, t: o.top_k(t["x"], 3)[1], lambda t: _top_k(t["x"], 3)[1], None),
    "top_k_int": (lambda o, t: o.top_k(t["ints"], 2, sorted=False)[1], lambda t: _top_k(t["ints"], 2)[1], None),
    "in_top_k": (lambda o, t: o.in_top_k(np.array([1, 1, 0, 4]), t["x"], 2),
                 lambda t: _in_top_k(np.array([1, 1, 0, 4]), t["x"], 2), None),
    "cumprod": (lambda o, t: o.cumprod(t["x"], axis=1), lambda t: np.cumprod(t["x"], axis=1), None),
    "cumprod_flat": (lambda o, t: o.cumprod(t["y"][0]), lambda t: np.cumprod(t["y"][0]), None),
    "cumprod_int8": (lambda o, t: o.cumprod(t["small"], axis=0), lambda t: np.cumprod(t["small"], 0), "int8"),
    "cumprod_dtype": (lambda o, t: o.cumprod(t["ints"], axis=1, dtype="float64"),
                      lambda t: np.cumprod(t["ints"].astype(np.float64), axis=1), "float64"),
    "count_nonzero": (lambda o, t: o.count_nonzero(t["x"], axis=1), lambda t: np.count_nonzero(t["x"], axis=1),
                      None),
    "count_nonzero_all": (lambda o, t: o.count_nonzero(t["bools"]), lambda t: np.count_nonzero(t["bools"]), None),
    "average": (lambda o, t: o.average(t["x"], axis=1, weights=t["weights"]),
                lambda t: np.average(t["x"], axis=1, weights=t["weights"]), None),
    "average_plain": (lambda o, t: o.average(t["small"]), lambda t: np.average(t["small"]), None),
    "average_same_shape": (lambda o, t: o.average(t["y"], weights=o.abs(t["y"])),
                           lambda t: np.average(t["y"], weights=np.abs(t["y"])), None),
    "median": (lambda o, t: o.median(t["y"], axis=1), lambda t: np.median(t["y"], axis=1), None),
    "median_nan": (lambda o, t: o.median(t["x"], axis=1, keepdims=True),
                   lambda t: np.median(t["x"], axis=1, keepdims=True), None),
    "median_int": (lambda o, t: o.median(t["small"]), lambda t: np.median(t["small"]), None),
    "quantile_linear": (lambda o, t: o.quantile(t["y"], Q, axis=(0, 2)), lambda t: np.quantile(t["y"], Q, (0, 2)),
                        None),
    "quantile_keepdims": (lambda o, t: o.quantile(t["y"], 0.4, keepdims=True),
                          lambda t: np.quantile(t["y"], 0.4, keepdims=True), None),
    **{f"quantile_{m}": (lambda o, t, m=m: o.quantile(t["y"], Q, axis=-1, method=m),
                         lambda t, m=m: np.quantile(t["y"], Q, axis=-1, method=m), None)
       for m in ("lower", "higher", "midpoint", "nearest")},
    "quantile_infinities": (lambda o, t: o.quantile(t["x"][1], np.array([0.1, 0.5, 0.9])),
                            lambda t: np.array([-np.inf, 4.0, np.inf]), None),
    "percentile": (lambda o, t: o.percentile(t["y"], 30.0, axis=0), lambda t: np.percentile(t["y"], 30.0, axis=0),
                   None),
    # Rows without infinities: NumPy's linear interpolation is NaN next to one (see quantile_infinities).
    "nanquantile": (lambda o, t: o.nanquantile(o.take(t["x"], [0, 2, 3], axis=0), Q, axis=1),
                    lambda t: _nan_quiet(np.nanquantile, t["x"][[0, 2, 3]], Q, 1), None),
    "nanquantile_nearest": (lambda o, t: o.nanquantile(t["x"], 0.3, axis=1, method="nearest"),
                            lambda t: _nan_quiet(np.nanquantile, t["x"], 0.3, 1, method="nearest"), None),
    "nanquantile_infinities": (lambda o, t: o.nanquantile(t["x"][1], np.array([0.0, 0.1, 1.0])),
                               lambda t: np.array([-np.inf, -np.inf, np.inf]), None),
    "nanpercentile": (lambda o, t: o.nanpercentile(t["x"], 60, axis=0),
                      lambda t: _nan_quiet(np.nanpercentile, t["x"], 60, 0), None),
    "nanmedian": (lambda o, t: o.nanmedian(t["x"], axis=1), lambda t: _nan_quiet(np.nanmedian, t["x"], axis=1),
                  None),
    "nansum": (lambda o, t: o.nansum(t["x"], axis=1), lambda t: np.nansum(t["x"], axis=1), None),
    "nansum_int8": (lambda o, t: o.nansum(t["small"]), lambda t: np.nansum(t["small"]), "int32"),
    "nanprod": (lambda o, t: o.nanprod(t["x"], axis=0), lambda t: np.nanprod(t["x"], axis=0), None),
    "nanmax": (lambda o, t: o.nanmax(t["x"], axis=1), lambda t: _nan_quiet(np.nanmax, t["x"], axis=1), None),
    "nanmin": (lambda o, t: o.nanmin(t["x"], axis=0, keepdims=True),
               lambda t: _nan_quiet(np.nanmin, t["x"], axis=0, keepdims=True), None),
    "nanmin_int": (lambda o, t: o.nanmin(t["ints"], axis=1), lambda t: np.nanmin(t["ints"], axis=1), None),
    "nanmean": (lambda o, t: o.nanmean(t["x"], axis=1), lambda t: _nan_quiet(np.nanmean, t["x"], axis=1), None),
    "nanvar": (lambda o, t: o.nanvar(t["x"], axis=1), lambda t: _nan_quiet(np.nanvar, t["x"], axis=1), None),
    "nanstd": (lambda o, t: o.nanstd(t["x"]), lambda t: np.nanstd(t["x"]), None),
    "nanargmax": (lambda o, t: o.nanargmax(t["x"], axis=1), lambda t: _nan_arg(np.nanargmax, t["x"]), None),
    "nanargmin": (lambda o, t: o.nanargmin(t["x"], axis=1, keepdims=True),
                  lambda t: _nan_arg(np.nanargmin, t["x"])[:, None], None),
    "nanargmax_all": (lambda o, t: o.nanargmax(t["x"]), lambda t: np.nanargmax(t["x"]), None),
    "nancumsum": (lambda o, t: o.nancumsum(t["x"], axis=1), lambda t: np.nancumsum(t["x"], axis=1), None),
    "nancumprod": (lambda o, t: o.nancumprod(t["x"]), lambda t: np.nancumprod(t["x"]), None),
    "segment_sum": (lambda o, t: o.segment_sum(t["x"], _ids(t), num_segments=4),
                    lambda t: _SEGMENT_SUM(t["x"], _ids(t), 4), None),
    "segment_sum_known_ids": (lambda o, t: o.segment_sum(t["y"][0], _ids(t)),
                              lambda t: _SEGMENT_SUM(t["y"][0], _ids(t), 3), None),
    "segment_max": (lambda o, t: o.segment_max(t["x"], _ids(t), 4), lambda t: _segment_extreme(_SEGMENT_MAX, t, 4),
                    None),
    "segment_min": (lambda o, t: o.segment_min(t["y"][0], _ids(t), 4, sorted=False),
                    lambda t: _segment_extreme(_SEGMENT_MIN, {"x": t["y"][0]}, 4), None),
    "segment_prod": (lambda o, t: o.segment_prod(t["x"], _ids(t), 3), lambda t: _SEGMENT_PROD(t["x"], _ids(t), 3),
                     None),
    "bincount": (lambda o, t: o.bincount(np.array([1, 1, 4, 0])), lambda t: np.bincount([1, 1, 4, 0]), None),
    "bincount_weights": (lambda o, t: o.bincount(np.array([1, 1, 4, 0]), weights=t["x"][3, :4], minlength=7),
                         lambda t: np.bincount([1, 1, 4, 0], weights=t["x"][3, :4], minlength=7), None),
    "bincount_2d": (lambda o, t: o.bincount(np.array([[0, 2], [2, 2]]), minlength=4),
                    lambda t: np.stack([np.bincount(r, minlength=4) for r in [[0, 2], [2, 2]]]), None),
    "searchsorted": (lambda o, t: o.searchsorted(t["bins"], t["x"]), lambda t: np.searchsorted(t["bins"], t["x"]),
                     None),
    "searchsorted_right": (lambda o, t: o.searchsorted(np.array([1.0, 2.0, 2.0, np.nan]), t["x"], side="right"),
                           lambda t: np.searchsorted(np.array([1.0, 2.0, 2.0, np.nan]), t["x"], side="right"),
                           None),
    "searchsorted_nan_left": (lambda o, t: o.searchsorted(np.array([1.0, 2.0, np.nan]), t["x"]),
                              lambda t: np.searchsorted(np.array([1.0, 2.0, np.nan]), t["x"]), None),
    "digitize": (lambda o, t: o.digitize(t["x"], t["bins"]), lambda t: np.digitize(t["x"], t["bins"]), None),
    "digitize_decreasing": (lambda o, t: o.digitize(t["x"], t["bins"][::-1]),
                            lambda t: np.digitize(t["x"], t["bins"][::-1]), None),
    "digitize_int": (lambda o, t: o.digitize(t["ints"], np.array([0, 3, 7])),
                     lambda t: np.digitize(t["ints"], [0, 3, 7]), None),
    "isin": (lambda o, t: o.isin(t["x"], np.array([4.0, np.nan, -0.0])),
             lambda t: np.isin(t["x"], [4.0, np.nan, -0.0]), None),
    "isin_invert": (lambda o, t: o.isin(t["ints"], [7, 0], invert=True),
                    lambda t: np.isin(t["ints"], [7, 0], invert=True), None),
}


def _top_k(x, k):
    """NumPy's top_k as JAX's lax.top_k gives it: largest first, NaN the largest, ties by index."""
    key = np.where(np.isnan(x), np.inf, x).astype(np.float64)
    order = np.lexsort((np.arange(x.shape[-1]) * np.ones_like(key), -key, ~np.isnan(x)), axis=-1)[..., :k]
    return np.take_along_axis(x, order, -1), order


def _in_top_k(targets, predictions, k):
    at = np.take_along_axis(predictions, targets[:, None], -1)
    at = np.where(np.isnan(at), -np.inf, at)
    return (predictions > at).sum(-1) < k


def _nan_quiet(fn, *args, **kwargs):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


def _nan_arg(fn, x):
    return np.array([fn(row) if not np.all(np.isnan(row)) else -1 for row in x])


def _segment_extreme(reference, t, num):
    """Segments' maxima or minima; a segment with NaN is NaN (NumPy's maximum and minimum propagate it)."""
    return reference(t["x"], INPUTS["ids"], num)


def _expected_dtype(expected: np.ndarray, given: str | None, dtype: str) -> str:
    if given is not None:
        return given
    return {"f": dtype, "b": "bool"}.get(expected.dtype.kind, "int32")


def _run_cases(backend, dtype, names):
    inputs = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in INPUTS.items()}
    results = run(backend, lambda ops, **t: {n: CASES[n][0](ops, t) for n in names}, inputs, dtype)
    failures = []
    for name in names:
        expected = np.asarray(CASES[name][1](inputs))
        found = np.asarray(results[name])
        wanted = _expected_dtype(expected, CASES[name][2], dtype)
        tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL
        try:
            assert found.shape == expected.shape, f"shape {found.shape}, expected {expected.shape}"
            assert found.dtype == np.dtype(wanted), f"dtype {found.dtype}, expected {wanted}"
            if expected.dtype.kind == "f":
                np.testing.assert_allclose(found, expected, rtol=tolerance, atol=tolerance, equal_nan=True)
            else:
                np.testing.assert_array_equal(found, expected)
        except AssertionError as error:
            failures.append(f"ops.{name} ({dtype}): {error}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_against_numpy(backend, dtype):
    _run_cases(backend, dtype, sorted(CASES))


def test_negative_zero_and_ties_keep_their_order(backend):
    """``-0.0`` equals ``0.0`` in sorting (NumPy's stable sort keeps them in order), whichever comes first; argmin
    counts ``-0.0`` below ``0.0``, as Keras' argmin and argmax do on every backend."""
    x = np.array([[0.0, -0.0, 0.0, -0.0], [-0.0, 0.0, -0.0, 0.0]])
    found = run(backend, lambda ops, x: {"argsort": ops.argsort(x), "argmin": ops.argmin(x, axis=1),
                                         "top_k": ops.top_k(x, 2)[1]}, {"x": x})
    np.testing.assert_array_equal(found["argsort"], np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(found["argmin"], [1, 0])
    np.testing.assert_array_equal(found["top_k"], [[0, 1], [0, 1]])


_HOLES = np.eye(3, 5, dtype=bool)

#: The nan* reductions' gradient around NaN entries (their central differences are in tests/test_ops_gradients.py).
NAN_GRADIENT_CASE = (lambda o, x: o.nanstd(o.where(_HOLES, np.nan, x)) + o.nanmean(o.where(_HOLES, np.nan, x), 0),
                     {"x": _RNG.normal(size=(3, 5))})


def test_nan_entries_get_no_gradient(backend_name):
    """The nan* reductions leave NaN out of their gradients too: NaN entries get 0, the others finite values."""
    fn, inputs = NAN_GRADIENT_CASE
    grads = gradients(backend_name, fn, inputs, np.ones(5))["x"]
    assert np.all(grads[_HOLES] == 0) and np.all(np.isfinite(grads)), grads


REFUSALS = {
    "top_k_k_too_large": (lambda o, x, ids: o.top_k(x, 9), ArgumentError, "k=9"),
    "quantile_method": (lambda o, x, ids: o.quantile(x, 0.5, method="cubic"), ArgumentError, "method='cubic'"),
    "quantile_q_range": (lambda o, x, ids: o.quantile(x, 1.5), ArgumentError, "q=1.5"),
    "percentile_q_range": (lambda o, x, ids: o.percentile(x, [10, 150]), ArgumentError, "[0, 100]"),
    "ptp_bool": (lambda o, x, ids: o.ptp(x > 0), DTypeError, "boolean"),
    "axis_out_of_range": (lambda o, x, ids: o.var(x, axis=2), ShapeError, "axis=2"),
    "axis_twice": (lambda o, x, ids: o.prod(x, axis=(1, -1)), ShapeError, "twice"),
    "bincount_sparse": (lambda o, x, ids: o.bincount(np.array([1, 2]), sparse=True), ArgumentError, "sparse=True"),
    "bincount_negative": (lambda o, x, ids: o.bincount(np.array([1, -2])), ArgumentError, "-2"),
    "bincount_float": (lambda o, x, ids: o.bincount(np.array([1.0, 2.0])), DTypeError, "float"),
    "bincount_computed": (lambda o, x, ids: o.bincount(ids + 1), ShapeError, "known when the op is built"),
    "segment_float_ids": (lambda o, x, ids: o.segment_sum(x, np.array([0.0, 1.0]), 2), DTypeError, "float"),
    "segment_ids_per_row": (lambda o, x, ids: o.segment_sum(x, np.array([0, 1, 1]), 2), ShapeError, "one id per row"),
    "segment_num_negative": (lambda o, x, ids: o.segment_max(x, np.array([0, 1]), -1), ArgumentError,
                             "num_segments=-1"),
    "segment_computed_ids": (lambda o, x, ids: o.segment_sum(x, ids + 0), ShapeError, "give num_segments"),
    "searchsorted_2d": (lambda o, x, ids: o.searchsorted(x, 1.0), ShapeError, "1-D"),
    "searchsorted_side": (lambda o, x, ids: o.searchsorted(x[0], 1.0, side="middle"), ArgumentError, "side="),
    "average_weights": (lambda o, x, ids: o.average(x, axis=None, weights=np.ones(3)), ShapeError, "weights"),
    "argpartition_kth": (lambda o, x, ids: o.argpartition(x, 3), ArgumentError, "kth=3"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_typed_refusals(backend, name):
    fn, error, words = REFUSALS[name]
    inputs = {"x": np.arange(6.0).reshape(2, 3), "ids": np.array([0, 1])}
    if name in ("bincount_computed", "segment_computed_ids") and backend.name == "tensorflow":
        # Eager TensorFlow knows every tensor's values; a traced step (tf.function) does not: refused there.
        import tensorflow as tf

        ops = backend.ops("float64")
        traced = tf.function(lambda x, ids: ops.unwrap(fn(ops, ops.wrap(x), ops.wrap(ids))), autograph=False)
        with pytest.raises(error, match=words.replace("[", r"\[")):
            traced(tf.constant(inputs["x"]), tf.constant(inputs["ids"], tf.int32))
        return
    with pytest.raises(error, match=words.replace("[", r"\[")):
        run(backend, fn, inputs)


def test_num_segments_from_known_ids_on_eager_tensorflow():
    """Eager TensorFlow knows its tensors' values, so ``num_segments=None`` works there on a computed tensor, as in
    Keras; graphs (a tf.function step, the Theano family) refuse it (test_typed_refusals)."""
    pytest.importorskip("tensorflow")
    backend = toolkit.get_backend("tensorflow")
    found = run(backend, lambda o, x, ids: o.segment_max(x, ids), {"x": np.arange(6.0).reshape(3, 2),
                                                                   "ids": np.array([1, 1, 0])})
    np.testing.assert_array_equal(found, [[4.0, 5.0], [2.0, 3.0]])


#: keras.ops calls whose values the NumPy references above must equal (a sample of every kind).
KERAS_SAMPLE = {
    "prod": lambda k, t: k.numpy.prod(t["x"], axis=1),
    "var_all": lambda k, t: k.numpy.var(t["y"]),
    "std": lambda k, t: k.numpy.std(t["y"], axis=(1, 2)),
    "argmin_all": lambda k, t: k.numpy.argmin(t["y"], keepdims=True),
    "argsort": lambda k, t: k.numpy.argsort(t["y"], axis=1),
    "sort_axis": lambda k, t: k.numpy.sort(t["y"], axis=1),
    "cumprod_flat": lambda k, t: k.numpy.cumprod(t["y"][0]),
    "count_nonzero": lambda k, t: k.numpy.count_nonzero(t["x"], axis=1),
    "average": lambda k, t: k.numpy.average(t["x"], axis=1, weights=t["weights"]),
    "median": lambda k, t: k.numpy.median(t["y"], axis=1),
    "quantile_linear": lambda k, t: k.numpy.quantile(t["y"], Q, axis=(0, 2)),
    "quantile_nearest": lambda k, t: k.numpy.quantile(t["y"], Q, axis=-1, method="nearest"),
    "nanquantile": lambda k, t: k.numpy.nanquantile(t["x"][[0, 2, 3]], 0.4, axis=1),
    "nanargmax": lambda k, t: k.numpy.nanargmax(t["x"][:2], axis=1),
    "nanvar": lambda k, t: k.numpy.nanvar(t["x"][:2], axis=1),
    "nancumprod": lambda k, t: k.numpy.nancumprod(np.where(_HOLES, np.nan, t["y"][0, :3])),
    "segment_sum": lambda k, t: k.ops.segment_sum(t["x"], t["ids"], num_segments=4),
    "bincount_weights": lambda k, t: k.numpy.bincount(np.array([1, 1, 4, 0]), weights=t["x"][3, :4], minlength=7),
    "searchsorted": lambda k, t: k.numpy.searchsorted(t["bins"], t["y"][0, 0]),
    "digitize": lambda k, t: k.numpy.digitize(t["y"], t["bins"]),
    "isin_invert": lambda k, t: k.numpy.isin(t["ints"], [7, 0], invert=True),
    "in_top_k": lambda k, t: k.ops.in_top_k(np.array([1, 1, 0, 4]), t["y"][0], 2),
    "top_k_values": lambda k, t: k.ops.top_k(t["y"], 3)[0],
}
# Keras on TensorFlow differs from NumPy and JAX next to NaN and infinities (in_top_k of a NaN target, -0 * inf in
# nancumprod, q arrays in nanquantile): the sample keeps to inputs where its backends agree.
_KERAS_REFERENCES = {"nanquantile": lambda t: _nan_quiet(np.nanquantile, t["x"][[0, 2, 3]], 0.4, axis=1),
                     "nancumprod": lambda t: np.nancumprod(np.where(_HOLES, np.nan, t["y"][0, :3])),
                     "in_top_k": lambda t: _in_top_k(np.array([1, 1, 0, 4]), t["y"][0], 2),
                     "nanargmax": lambda t: np.nanargmax(t["x"][:2], axis=1),
                     "nanvar": lambda t: np.nanvar(t["x"][:2], axis=1),
                     "searchsorted": lambda t: np.searchsorted(t["bins"], t["y"][0, 0]),
                     "digitize": lambda t: np.digitize(t["y"], t["bins"]),
                     "quantile_nearest": lambda t: np.quantile(t["y"], Q, axis=-1, method="nearest"),
                     "top_k_values": lambda t: _top_k(t["y"], 3)[0],
                     "argsort": lambda t: np.argsort(t["y"], axis=1)}


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
@pytest.mark.parametrize("name", sorted(KERAS_SAMPLE))
def test_numpy_references_are_keras_ops(name):
    """The references above are what keras.ops computes (float64, Keras' TensorFlow backend)."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras
    from keras import ops as keras_ops

    namespace = type("K", (), {"numpy": keras_ops, "ops": keras_ops})
    reference = _KERAS_REFERENCES.get(name) or CASES[name][1]
    found = keras_ops.convert_to_numpy(KERAS_SAMPLE[name](namespace, INPUTS))
    np.testing.assert_allclose(found, reference(INPUTS), rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=name)
    assert keras.__version__
