"""The array ops (:mod:`toolkit.ops.arrays`): creation, shapes and indexing, on every backend against NumPy in
float32 and float64 (NaN, infinities, empty arrays, integers and booleans included), their typed refusals, and the
same calls on ``keras.ops`` where Keras is installed (their gradients: tests/test_ops_gradients.py).

Each backend compiles few functions: one function computes every case (a dict of results, compared entry by entry,
the message naming the op)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from tests.conftest import MAX_DEVICES
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, gradients, one_device_equals_many, run
from toolkit.errors import ArgumentError, ComputeError, DTypeError, ShapeError

RNG = np.random.default_rng(11)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
INPUTS = {
    "m": np.concatenate([RNG.normal(size=7), SPECIAL]).reshape(3, 4),   # NaN and infinities move with the entries
    "t": RNG.normal(size=(2, 3, 4)),
    "v": np.array([1.5, np.nan, np.inf, -2.0, 0.0]),
    "e": np.zeros((0, 3)),                                                # an empty axis
    "ii": np.array([[1, 2, 3], [3, 0, 1]], np.int32),
    "bb": np.array([[True, False, True], [False, False, True]]),
}

#: name: (the toolkit's call on ``ops`` and inputs ``a``, the NumPy reference). The same call runs on ``keras.ops``.
CASES = {
    "tril": (lambda ops, a: ops.tril(a["t"], -1), lambda a: np.tril(a["t"], -1)),
    "tril_nan": (lambda ops, a: ops.tril(a["m"], 1), lambda a: np.tril(a["m"], 1)),
    "tril_1d": (lambda ops, a: ops.tril(a["v"]), lambda a: np.tril(a["v"])),
    "triu": (lambda ops, a: ops.triu(a["m"], -1), lambda a: np.triu(a["m"], -1)),
    "triu_bool": (lambda ops, a: ops.triu(a["bb"]), lambda a: np.triu(a["bb"])),
    "tril_empty": (lambda ops, a: ops.tril(a["e"]), lambda a: np.tril(a["e"])),
    "diag_vector": (lambda ops, a: ops.diag(a["v"], -2), lambda a: np.diag(a["v"], -2)),
    "diag_matrix": (lambda ops, a: ops.diag(a["m"], 1), lambda a: np.diag(a["m"], 1)),
    "diagflat": (lambda ops, a: ops.diagflat(a["ii"], 1), lambda a: np.diagflat(a["ii"], 1)),
    "diagonal": (lambda ops, a: ops.diagonal(a["t"], 1, 2, 1), lambda a: np.diagonal(a["t"], 1, 2, 1)),
    "diagonal_negative": (lambda ops, a: ops.diagonal(a["m"], -1), lambda a: np.diagonal(a["m"], -1)),
    "diagonal_beyond": (lambda ops, a: ops.diagonal(a["m"], 5), lambda a: np.diagonal(a["m"], 5)),
    "diagonal_empty": (lambda ops, a: ops.diagonal(a["e"]), lambda a: np.diagonal(a["e"])),
    "trace": (lambda ops, a: ops.trace(a["t"], axis1=2, axis2=1), lambda a: np.trace(a["t"], axis1=2, axis2=1)),
    "trace_int": (lambda ops, a: ops.trace(a["ii"]), lambda a: np.trace(a["ii"])),
    "trace_bool": (lambda ops, a: ops.trace(a["bb"], 1), lambda a: np.trace(a["bb"], 1)),
    "vander": (lambda ops, a: ops.vander(a["t"][0, 0], 5), lambda a: np.vander(a["t"][0, 0], 5)),
    "vander_int": (lambda ops, a: ops.vander(a["ii"][0], increasing=True),
                   lambda a: np.vander(a["ii"][0], increasing=True)),
    "meshgrid_xy": (lambda ops, a: ops.meshgrid(a["v"], a["t"][0, 0], a["ii"][0]),
                    lambda a: np.meshgrid(a["v"], a["t"][0, 0], a["ii"][0])),
    "meshgrid_ij": (lambda ops, a: ops.meshgrid(a["v"], a["t"][0, 0], indexing="ij"),
                    lambda a: np.meshgrid(a["v"], a["t"][0, 0], indexing="ij")),
    "full_like": (lambda ops, a: ops.full_like(a["ii"], 2.7), lambda a: np.full_like(a["ii"], 2.7)),
    "full_like_array": (lambda ops, a: ops.full_like(a["t"], a["v"][:4]), lambda a: np.full_like(a["t"], a["v"][:4])),
    "ravel": (lambda ops, a: ops.ravel(a["t"]), lambda a: np.ravel(a["t"])),
    "flip": (lambda ops, a: ops.flip(a["t"], (0, 2)), lambda a: np.flip(a["t"], (0, 2))),
    "flip_all": (lambda ops, a: ops.flip(a["m"]), lambda a: np.flip(a["m"])),
    "flip_bool": (lambda ops, a: ops.flip(a["bb"], -1), lambda a: np.flip(a["bb"], -1)),
    "flip_empty": (lambda ops, a: ops.flip(a["e"], 0), lambda a: np.flip(a["e"], 0)),
    "fliplr": (lambda ops, a: ops.fliplr(a["t"]), lambda a: np.fliplr(a["t"])),
    "flipud": (lambda ops, a: ops.flipud(a["v"]), lambda a: np.flipud(a["v"])),
    "rot90": (lambda ops, a: ops.rot90(a["t"], 1, (2, 0)), lambda a: np.rot90(a["t"], 1, (2, 0))),
    "rot90_3": (lambda ops, a: ops.rot90(a["m"], -1), lambda a: np.rot90(a["m"], -1)),
    "rot90_2": (lambda ops, a: ops.rot90(a["m"], 2), lambda a: np.rot90(a["m"], 2)),
    "roll": (lambda ops, a: ops.roll(a["t"], 5, axis=2), lambda a: np.roll(a["t"], 5, axis=2)),
    "roll_flat": (lambda ops, a: ops.roll(a["m"], -3), lambda a: np.roll(a["m"], -3)),
    "roll_axes": (lambda ops, a: ops.roll(a["t"], (1, -1), axis=(0, 1)), lambda a: np.roll(a["t"], (1, -1), (0, 1))),
    "roll_empty": (lambda ops, a: ops.roll(a["e"], 2, axis=0), lambda a: np.roll(a["e"], 2, axis=0)),
    "swapaxes": (lambda ops, a: ops.swapaxes(a["t"], 0, -1), lambda a: np.swapaxes(a["t"], 0, -1)),
    "moveaxis": (lambda ops, a: ops.moveaxis(a["t"], [0, 1], [2, 0]), lambda a: np.moveaxis(a["t"], [0, 1], [2, 0])),
    "split": (lambda ops, a: ops.split(a["m"], [1, 3], axis=1), lambda a: np.split(a["m"], [1, 3], axis=1)),
    "split_sections": (lambda ops, a: ops.split(a["t"], 2, axis=-1), lambda a: np.split(a["t"], 2, axis=-1)),
    "split_empty": (lambda ops, a: ops.split(a["e"], 2), lambda a: np.split(a["e"], 2)),
    "array_split": (lambda ops, a: ops.array_split(a["v"], 3), lambda a: np.array_split(a["v"], 3)),
    "hsplit": (lambda ops, a: ops.hsplit(a["m"], [1, 3]), lambda a: np.hsplit(a["m"], [1, 3])),
    "vsplit": (lambda ops, a: ops.vsplit(a["m"], 3), lambda a: np.vsplit(a["m"], 3)),
    "dsplit": (lambda ops, a: ops.dsplit(a["t"], [1]), lambda a: np.dsplit(a["t"], [1])),
    "unstack": (lambda ops, a: ops.unstack(a["t"], axis=1), lambda a: list(np.moveaxis(a["t"], 1, 0))),
    "hstack": (lambda ops, a: ops.hstack([a["v"], a["v"][:2]]), lambda a: np.hstack([a["v"], a["v"][:2]])),
    "hstack_int_float": (lambda ops, a: ops.hstack([a["ii"], a["t"][0, :2, :3]]),
                         lambda a: np.hstack([a["ii"], a["t"][0, :2, :3]])),
    "vstack": (lambda ops, a: ops.vstack([a["v"][:3], a["ii"]]), lambda a: np.vstack([a["v"][:3], a["ii"]])),
    "dstack": (lambda ops, a: ops.dstack([a["v"][:3], a["ii"][:1]]), lambda a: np.dstack([a["v"][:3], a["ii"][:1]])),
    "append": (lambda ops, a: ops.append(a["ii"], a["t"]), lambda a: np.append(a["ii"], a["t"])),
    "append_axis": (lambda ops, a: ops.append(a["m"][:2, :3], a["ii"], axis=0),
                    lambda a: np.append(a["m"][:2, :3], a["ii"], axis=0)),
    "tile": (lambda ops, a: ops.tile(a["ii"], [2, 1, 3]), lambda a: np.tile(a["ii"], [2, 1, 3])),
    "tile_short": (lambda ops, a: ops.tile(a["t"], 2), lambda a: np.tile(a["t"], 2)),
    "tile_empty": (lambda ops, a: ops.tile(a["e"], [2, 1]), lambda a: np.tile(a["e"], [2, 1])),
    "repeat": (lambda ops, a: ops.repeat(a["m"], 2), lambda a: np.repeat(a["m"], 2)),
    "repeat_axis": (lambda ops, a: ops.repeat(a["t"], 3, axis=1), lambda a: np.repeat(a["t"], 3, axis=1)),
    "repeat_counts": (lambda ops, a: ops.repeat(a["bb"], [1, 0, 2], axis=-1),
                      lambda a: np.repeat(a["bb"], [1, 0, 2], axis=-1)),
    "diff": (lambda ops, a: ops.diff(a["t"], 2, 1), lambda a: np.diff(a["t"], 2, 1)),
    "diff_nan": (lambda ops, a: ops.diff(a["v"]), lambda a: np.diff(a["v"])),
    "diff_int": (lambda ops, a: ops.diff(a["ii"], axis=0), lambda a: np.diff(a["ii"], axis=0)),
    "diff_bool": (lambda ops, a: ops.diff(a["bb"]), lambda a: np.diff(a["bb"])),
    "diff_zero": (lambda ops, a: ops.diff(a["v"], 0), lambda a: np.diff(a["v"], 0)),
    "select": (lambda ops, a: ops.select([a["v"] > 0, a["v"] < 0], [a["v"], -a["v"]], 42),
               lambda a: np.select([a["v"] > 0, a["v"] < 0], [a["v"], -a["v"]], 42)),
    "unravel_index": (lambda ops, a: ops.unravel_index(a["ii"], (2, 2)), lambda a: np.unravel_index(a["ii"], (2, 2))),
    "copy": (lambda ops, a: ops.copy(a["m"]), lambda a: np.copy(a["m"])),
    "view_same": (lambda ops, a: ops.view(a["ii"], "int32"), lambda a: a["ii"].view("int32")),
    "view_float": (lambda ops, a: ops.view(a["ii"], "float32"), lambda a: a["ii"].view("float32")),
    "view_narrower": (lambda ops, a: ops.view(a["ii"], "int16"), lambda a: a["ii"].view("int16")),
    "view_wider": (lambda ops, a: ops.view(a["ii"][:, :2], "int64"), lambda a: a["ii"][:, :2].view("int64")),
    "linspace_arrays": (lambda ops, a: ops.linspace(a["t"][0], a["t"][1], 5, axis=-1),
                        lambda a: np.linspace(a["t"][0], a["t"][1], 5, axis=-1)),
    "linspace_open": (lambda ops, a: ops.linspace(a["t"][0, 0], 3.0, 4, endpoint=False),
                      lambda a: np.linspace(a["t"][0, 0], 3.0, 4, endpoint=False)),
    "linspace_int": (lambda ops, a: ops.linspace(a["t"][0, 0], 9.0, 4, dtype="int32"),
                     lambda a: np.linspace(a["t"][0, 0], 9.0, 4, dtype="int32")),
    "logspace_arrays": (lambda ops, a: ops.logspace(a["t"][0], a["t"][1], 3, base=2.0),
                        lambda a: np.logspace(a["t"][0], a["t"][1], 3, base=2.0)),
    "geomspace_arrays": (lambda ops, a: ops.geomspace(-1.0 - a["t"][0] ** 2, -2.0 - a["t"][1] ** 2, 4),
                         lambda a: np.geomspace(-1.0 - a["t"][0] ** 2, -2.0 - a["t"][1] ** 2, 4)),
}
#: The dtypes of results NumPy gives wider than Keras: integer results are int32 (NumPy's trace of int32 is int64),
#: but these ask for another.
EXACT_DTYPES = {"view_wider": "int64", "view_narrower": "int16"}


def _expected_dtype(value: np.ndarray, computation: str, name: str = "") -> str:
    """A float64 reference is a result in the computation dtype; a float32 one was asked for; integers int32."""
    dtype = np.asarray(value).dtype
    if name in EXACT_DTYPES:
        return EXACT_DTYPES[name]
    return computation if dtype == np.float64 else "int32" if dtype.kind in "iu" else dtype.name


def _compare(name: str, got, expected, dtype: str) -> None:
    if isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), f"{name}: {len(got)} parts"
        for part, (g, e) in enumerate(zip(got, expected)):
            _compare(f"{name}[{part}]", g, e, dtype)
        return
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{name}: shape {got.shape}, expected {expected.shape}"
    assert got.dtype == _expected_dtype(expected, dtype, name), f"{name}: dtype {got.dtype}"
    tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=name)


def _computation_inputs(dtype: str) -> dict:
    return {n: v.astype(dtype) if v.dtype.kind == "f" else v for n, v in INPUTS.items()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_array_ops_equal_numpy(backend, dtype):
    """Every case in one compiled function, each entry against NumPy: values (NaN where NumPy has NaN), shapes,
    and dtypes (floats in the computation dtype, integers int32, booleans kept)."""
    out = run(backend, lambda ops, **a: {name: fn(ops, a) for name, (fn, _) in CASES.items()}, INPUTS, dtype)
    inputs = _computation_inputs(dtype)
    for name, (_, reference) in CASES.items():
        _compare(name, out[name], reference({n: v.astype(np.float64) if v.dtype.kind == "f" else v
                                             for n, v in inputs.items()}), dtype)


CREATION = {
    "arange": (lambda ops: ops.arange(3, 7, 2), np.arange(3, 7, 2, dtype="int32")),
    "arange_stop": (lambda ops: ops.arange(5), np.arange(5, dtype="int32")),
    "arange_float": (lambda ops: ops.arange(0.0, 1.0, 0.25), np.arange(0.0, 1.0, 0.25)),
    "arange_negative": (lambda ops: ops.arange(5, -3, -3, dtype="float32"), np.arange(5, -3, -3, dtype="float32")),
    "arange_empty": (lambda ops: ops.arange(4, 1), np.arange(4, 1, dtype="int32")),
    "linspace": (lambda ops: ops.linspace(0, 10, 7), np.linspace(0, 10, 7)),
    "linspace_open": (lambda ops: ops.linspace(0, 10, 5, endpoint=False), np.linspace(0, 10, 5, endpoint=False)),
    "linspace_none": (lambda ops: ops.linspace(0, 10, 0), np.linspace(0, 10, 0)),
    "linspace_step": (lambda ops: ops.linspace(1, 2, 5, retstep=True)[1], np.linspace(1, 2, 5, retstep=True)[1]),
    "linspace_int": (lambda ops: ops.linspace(0, 10, 4, dtype="int32"), np.linspace(0, 10, 4, dtype="int32")),
    "logspace": (lambda ops: ops.logspace(0, 3, 4, base=2), np.logspace(0, 3, 4, base=2)),
    "geomspace": (lambda ops: ops.geomspace(1, 1000, 4, endpoint=False), np.geomspace(1, 1000, 4, endpoint=False)),
    "zeros": (lambda ops: ops.zeros((2, 3)), np.zeros((2, 3))),
    "ones_int": (lambda ops: ops.ones(4, "int32"), np.ones(4, "int32")),
    "empty": (lambda ops: ops.empty([2, 0]), np.zeros([2, 0])),
    "full": (lambda ops: ops.full([2, 3], 7), np.full([2, 3], 7.0)),
    "full_array": (lambda ops: ops.full([2, 3], np.array([1, 4, 5]), dtype="int32"), np.full([2, 3], [1, 4, 5])),
    "eye": (lambda ops: ops.eye(4, 3, -2), np.eye(4, 3, -2)),
    "eye_beyond": (lambda ops: ops.eye(3, k=3), np.eye(3, k=3)),
    "identity_bool": (lambda ops: ops.identity(3, dtype="bool"), np.identity(3, dtype=bool)),
    "tri": (lambda ops: ops.tri(3, 4, 1), np.tri(3, 4, 1)),
    "tri_below": (lambda ops: ops.tri(3, k=-5), np.tri(3, k=-5)),
    "bartlett": (lambda ops: ops.bartlett(7), np.bartlett(7)),
    "blackman": (lambda ops: ops.blackman(6), np.blackman(6)),
    "hamming": (lambda ops: ops.hamming(1), np.hamming(1)),
    "hanning": (lambda ops: ops.hanning(5), np.hanning(5)),
    "kaiser": (lambda ops: ops.kaiser(6, 14.0), np.kaiser(6, 14.0)),
    "array_bool": (lambda ops: ops.array([[1, 0], [0, 2]], dtype="bool"), np.array([[1, 0], [0, 2]], bool)),
    "array_int": (lambda ops: ops.array([[1, 0], [0, 2]]), np.array([[1, 0], [0, 2]], "int32")),
    "nonzero": (lambda ops: ops.nonzero(np.array([[0, 3, 0], [2, 0, 1]])),
                tuple(i.astype("int32") for i in np.nonzero(np.array([[0, 3, 0], [2, 0, 1]])))),
    "tril_of_ones": (lambda ops: ops.tril(ops.ones((3, 3)), k=ops.array(-1)), np.tril(np.ones((3, 3)), -1)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_creation_ops_are_numpys_constants(backend, dtype):
    """Creation ops give NumPy's values, in the computation dtype for floats (Keras' floatx) and int32 for
    integer ranges, as Keras gives them; plus the ints that :meth:`size`, :meth:`ndim` and :meth:`shape` return."""
    def fn(ops, x):
        found = {name: make(ops) for name, (make, _) in CREATION.items()}
        assert (ops.size(x), ops.ndim(x), ops.shape(x)) == (6, 2, (2, 3))
        return found

    out = run(backend, fn, {"x": np.zeros((2, 3))}, dtype)
    for name, (_, expected) in CREATION.items():
        _compare(name, out[name], expected, dtype)


REFUSALS = {
    "eye of a float size": (lambda ops, x: ops.eye(3.0), DTypeError),
    "eye of a float M": (lambda ops, x: ops.eye(3, 2.0), DTypeError),
    "diagonal of one axis twice": (lambda ops, x: ops.diagonal(x, axis1=-1, axis2=1), ShapeError),
    "split into unequal sections": (lambda ops, x: ops.split(x, 4, axis=1), ShapeError),
    "hsplit into unequal sections": (lambda ops, x: ops.hsplit(x, 2), ShapeError),
    "vsplit of a vector": (lambda ops, x: ops.vsplit(x[0], 1), ShapeError),
    "view of a scalar as another itemsize": (lambda ops, x: ops.view(x[0, 0], "int8"), DTypeError),
    "view joining bytes that do not divide": (lambda ops, x: ops.view(ops.cast(x, "int16"), "int32"), DTypeError),
    "meshgrid's indexing": (lambda ops, x: ops.meshgrid(x[0], indexing="yx"), ArgumentError),
    "unstack's num": (lambda ops, x: ops.unstack(x, num=3), ShapeError),
    "rot90 of a vector": (lambda ops, x: ops.rot90(x[0]), ShapeError),
    "flip's axis out of range": (lambda ops, x: ops.flip(x, 2), ShapeError),
    "repeat's counts": (lambda ops, x: ops.repeat(x, [1, 2, 3]), ShapeError),
    "diff's n": (lambda ops, x: ops.diff(x, -1), ArgumentError),
    "repeat's negative counts": (lambda ops, x: ops.repeat(x, -1), ArgumentError),
    "tile's repeats": (lambda ops, x: ops.tile(x, [1.5]), DTypeError),
    "split into no sections": (lambda ops, x: ops.split(x, 0), ArgumentError),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_array_op_refusals_are_typed(backend, case):
    fn, error = REFUSALS[case]
    with pytest.raises(error, match=r"ops\.|indexing"):
        run(backend, fn, {"x": np.zeros((2, 3))})


@pytest.mark.parametrize("op", ["repeat", "split", "nonzero", "arange", "linspace", "tile", "hamming"])
def test_shapes_from_computed_values_are_refused_in_a_traced_step(backend_name, op):
    """What decides an output's shape must be static: a value computed in a compiled step (here from a
    parameter) is refused with a ShapeError naming the argument, on every backend."""
    make = {
        "repeat": lambda ops, x, n: ops.repeat(x, n),
        "split": lambda ops, x, n: ops.split(x, ops.stack([n])),
        "nonzero": lambda ops, x, n: ops.nonzero(x)[0],
        "arange": lambda ops, x, n: ops.arange(n),
        "linspace": lambda ops, x, n: ops.linspace(0.0, 1.0, n),
        "tile": lambda ops, x, n: ops.tile(x, n),
        "hamming": lambda ops, x, n: ops.hamming(n),
    }[op]

    def fn(ops, x):
        out = make(ops, x, ops.cast(ops.sum(x) * 0.0 + 2.0, "int32"))
        return ops.cast(ops.ravel(out)[:1], "float64") * 0.0 + x[:1]

    with pytest.raises((ShapeError, ComputeError), match=rf"ops\.{op}") as raised:
        gradients(backend_name, fn, {"x": np.ones(4)}, np.ones(1))
    # The trainer reports an error raised while tracing as a ComputeError, with the op's own as its cause.
    assert isinstance(raised.value if isinstance(raised.value, ShapeError) else raised.value.__cause__, ShapeError)


KERAS_CHECKED = ["tril", "tril_nan", "triu_bool", "diag_vector", "diagflat", "diagonal", "trace_int", "trace_bool",
                 "vander_int", "meshgrid_ij", "full_like", "flip", "rot90", "roll_axes", "moveaxis", "split",
                 "array_split", "dsplit", "unstack", "hstack_int_float", "dstack", "append", "tile", "repeat_counts",
                 "diff_bool", "select", "unravel_index", "linspace_arrays", "geomspace_arrays"]


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
@pytest.mark.parametrize("name", KERAS_CHECKED)
def test_references_are_keras_ops(name):
    """The same calls on ``keras.ops`` (Keras' TensorFlow backend, float64 inputs) give the NumPy references, so
    the toolkit's ops, which equal them, have Keras' semantics."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    fn, reference = CASES[name]
    found, expected = fn(keras.ops, INPUTS), reference(INPUTS)
    for got, want in zip(*(v if isinstance(v, (list, tuple)) else [v] for v in (found, expected))):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=1e-6, atol=1e-6, equal_nan=True)


def _feature_ops(ops, p, x):
    """A model applying array ops along its feature axis: in a data-parallel step the batch axis may have no
    static size (TensorFlow traces the step for any batch; uneven shards), and the ops must not need it."""
    h = x @ p["w"]                                                                        # [batch, 4]
    parts = [ops.tile(h, [1, 2]), ops.repeat(h, 2, axis=1), ops.repeat(h, [1, 0, 2, 1], axis=1),
             ops.roll(h, 1, axis=1), ops.flip(h, 1), ops.diff(h, axis=1), ops.hstack(ops.split(h, 2, axis=1)),
             ops.reshape(ops.tril(ops.expand_dims(h, 2) * ops.ones((4, 4))), (-1, 16)),
             ops.diagonal(ops.expand_dims(h, 2) * ops.eye(4), 0, 1, 2), ops.full_like(h, 0.5) * h,
             ops.moveaxis(ops.expand_dims(h, 1), 1, 2)[..., 0], ops.select([h > 0], [h], 0.1 * h)]
    return ops.sum(ops.concatenate(parts, axis=1) ** 2, axis=1, keepdims=True)


def test_array_ops_in_a_data_parallel_step(backend_name):
    """The same gradients (composed per device) and the same step (the fused data-parallel step) on 1 device and
    on 4 over a batch of 5 (uneven shards), through a model whose array ops act on the feature axis and
    leave the batch axis alone."""
    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(3, 4))}, _feature_ops,
                          lambda ops, out, y: ops.mean(ops.square(out - y), axis=1))
    x, y = np.random.default_rng(5).normal(size=(5, 3)), np.ones((5, 1))
    one_device_equals_many(backend_name, model, x, y, 1e-3, MAX_DEVICES)
