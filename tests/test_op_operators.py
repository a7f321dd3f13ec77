"""Python operators, constants and the ops' refusals mean the same on every backend: NumPy's shapes, the
computation dtype kept, errors naming the user's line, NaN and infinities propagated as NumPy does, and static
shapes kept (the values of the ops themselves: tests/test_op_vocabulary.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import toolkit


def _traced(backend, fn, dtype="float32", **inputs):
    device = backend.list_devices()[0]
    out = backend.call(lambda ops, **t: fn(ops, **t), device, {k: backend.place(v, device) for k, v in
                                                               inputs.items()}, dtype)
    return backend.to_numpy(out)


def test_batched_matmul_has_numpy_shapes(backend):
    a, b = np.ones((4, 2, 5, 3), np.float32), np.ones((4, 2, 3, 6), np.float32)
    assert _traced(backend, lambda o, a, b: o.matmul(a, b), a=a, b=b).shape == (4, 2, 5, 6)
    assert _traced(backend, lambda o, a, b: a @ b[0, 0], a=a, b=b).shape == (4, 2, 5, 6)


def test_comparison_times_a_tensor_is_the_relu_in_the_tensors_dtype(backend):
    a = np.array([-1.5, 0.0, 2.0], np.float32)
    np.testing.assert_array_equal(_traced(backend, lambda o, a: (a > 0) * a, a=a), [0.0, 0.0, 2.0])
    assert _traced(backend, lambda o, a: (a > 0) * a, a=a).dtype == np.float32
    assert _traced(backend, lambda o, a: a > 0, a=a).dtype == np.bool_


def test_constants_never_change_the_computation_dtype(backend):
    a = np.array([1.0, 2.0], np.float32)
    for fn in (lambda o, a: a * np.float64(0.1), lambda o, a: a + np.array([0.1, 0.2]), lambda o, a: np.float64(2) * a,
               lambda o, a: a / 3, lambda o, a: o.maximum(a, np.float64(1.5)), lambda o, a: o.where(a > 1, a, 0.1)):
        assert _traced(backend, fn, a=a).dtype == np.float32
    np.testing.assert_allclose(_traced(backend, lambda o, a: a * np.float64(0.1), a=a), a * np.float32(0.1))


def test_integers_divide_into_the_computation_dtype_and_mix_with_floats(backend):
    i, f = np.array([1, 2, 7], np.int32), np.array([0.5, 0.5, 0.5], np.float32)
    assert _traced(backend, lambda o, i: i / 2, i=i).dtype == np.float32
    np.testing.assert_allclose(_traced(backend, lambda o, i: i / 2, i=i), [0.5, 1.0, 3.5])
    np.testing.assert_array_equal(_traced(backend, lambda o, i: i // 2 + i % 3, i=i), [1, 3, 4])
    assert _traced(backend, lambda o, i: i // 2, i=i).dtype == np.int32
    assert _traced(backend, lambda o, i, f: i + f, i=i, f=f).dtype == np.float32
    assert _traced(backend, lambda o, i: i * 0.5, i=i, dtype="float64").dtype == np.float64
    assert _traced(backend, lambda o, i: (i > 1) + 1, i=i).dtype == np.int32


def test_python_truth_of_a_tensor_is_a_type_error(backend):
    with pytest.raises(TypeError, match="use ops.where"):
        _traced(backend, lambda o, a: a if a > 0 else -a, a=np.ones(2, np.float32))


@pytest.mark.parametrize("fn, error, words", [
    (lambda o, img, ker: o.conv(img, ker, strides=2, dilation_rate=2), ValueError, "above 1 together are not"),
    (lambda o, img, ker: o.conv(img[0], ker), toolkit.ShapeError, "4-D inputs"),
    (lambda o, img, ker: o.conv(img, ker, padding="full"), ValueError, "padding must be one of"),
    (lambda o, img, ker: o.max_pool(img, 0), ValueError, "pool_size must be an int >= 1"),
    (lambda o, img, ker: o.take(img, img[0, 0, 0]), toolkit.DTypeError, "integer indices"),
    (lambda o, img, ker: o.dot_product_attention(img[0], img[0], img[0]), toolkit.ShapeError,
     "[batch, sequence, heads, depth]"),
    (lambda o, img, ker: img[np.array([0, 1])], TypeError, "ops.take"),
    (lambda o, img, ker: o.matmul(ker, img), toolkit.ShapeError, "do not align (2 != 5)"),
    (lambda o, img, ker: o.scan(lambda c, x: (o.cast(c, "float64"), None), img[0, 0], img[0]), toolkit.ShapeError,
     "must return a carry like init"),
    (lambda o, img, ker: o.scan(lambda c, x: (c, None), img[0, 0], (img[0], ker)), toolkit.ShapeError,
     "one known leading size >= 1"),
    (lambda o, img, ker: o.scan(lambda c, x: (c, None), img[0, 0], img[0], unroll=0), ValueError,
     "unroll must be a bool or an int >= 1"),
    (lambda o, img, ker: o.scan(lambda c, x: (c + o.example_uniform((5, 3)), None), img[0, 0], img[0]),
     toolkit.ModelStateError, "inside ops.scan's f"),
])
def test_ops_refuse_what_the_backends_would_do_differently(backend, fn, error, words):
    img, ker = np.zeros((1, 5, 5, 3), np.float32), np.zeros((3, 3, 3, 2), np.float32)
    with pytest.raises(error, match=re.escape(words)):
        _traced(backend, fn, img=img, ker=ker)


def test_a_failure_in_model_code_names_the_line(backend_name):
    def forward(ops, params, x):
        return ops.no_such_op(ops.matmul(x, params["w"]))  # the failing line

    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(4, 3))}, forward, lambda ops, out, y: ops.sum(out, 1))
    trainer = toolkit.DataParallel(model, backend_name, 2, toolkit.optim.SGD(0.1))
    with pytest.raises(toolkit.ComputeError) as info:
        trainer.step(np.ones((4, 4)), np.zeros(4))
    message = str(info.value)
    assert "AttributeError" in message and "no_such_op" in message
    assert f"{Path(__file__).name}:{forward.__code__.co_firstlineno + 1} in forward" in message
    assert trainer.step_count == 0


def test_static_shapes_are_known_on_every_backend(backend):
    seen = {}

    def fn(o, x, w):
        product = o.matmul(x, o.reshape(w, (8, -1)))
        seen.update(product=product.shape, reshaped=o.reshape(product, (-1, 5, 2, 3)).shape,
                    pooled=o.max_pool(o.reshape(product, (2, 5, 6, 1)), 2, padding="same").shape,
                    disjoint=o.max_pool(o.reshape(product, (2, 5, 6, 1)), 2).shape,
                    taken=o.take(w, np.array([[0, 1, 1]]), axis=1).shape,
                    along=o.take_along_axis(x, np.zeros((2, 1, 8), np.int32), axis=1).shape,
                    joined=o.concatenate([x, x[:, :2]], axis=1).shape, last=o.concatenate([x, x], axis=-1).shape,
                    stacked=o.stack([x, x], axis=1).shape)
        return product

    _traced(backend, fn, x=np.ones((2, 5, 8), np.float32), w=np.ones((8, 2, 3), np.float32))
    assert seen == {"product": (2, 5, 6), "reshaped": (2, 5, 2, 3), "pooled": (2, 3, 3, 1), "disjoint": (2, 2, 3, 1),
                    "taken": (8, 1, 3, 3), "along": (2, 1, 8), "joined": (2, 7, 8), "last": (2, 5, 16),
                    "stacked": (2, 2, 5, 8)}


def test_array_arguments_may_come_by_keyword(backend):
    m, ids = np.arange(12, dtype=np.float32).reshape(3, 4), np.array([2, 0], np.int32)
    out = _traced(backend, lambda o, m, ids: o.take(m, indices=ids, axis=0) + o.where(condition=m[:2] > 5, x1=m[:2],
                                                                                        x2=0.0), m=m, ids=ids)
    np.testing.assert_array_equal(out, m[[2, 0]] + np.where(m[:2] > 5, m[:2], 0))


def test_take_counts_negative_indices_from_the_end_and_clips_out_of_range_ones(backend):
    m, ids = np.arange(12, dtype=np.float32).reshape(3, 4), np.array([7, -1, -9, 1], np.int32)
    np.testing.assert_array_equal(_traced(backend, lambda o, m, ids: o.take(m, ids, axis=0), m=m, ids=ids),
                                  m[[2, 2, 0, 1]])
    np.testing.assert_array_equal(_traced(backend, lambda o, m, ids: o.take(m, ids), m=m, ids=ids), [7, 11, 3, 1])
    along = np.array([[5], [-1], [0]], np.int32)
    np.testing.assert_array_equal(_traced(backend, lambda o, m, i: o.take_along_axis(m, i, axis=1), m=m, i=along),
                                  [[3], [7], [8]])


def test_max_pool_gives_a_tied_window_maximum_gradient_to_its_first_entry(backend):
    """Ties are common in max pooling (ReLU outputs of constant image regions): the whole gradient goes to the
    first maximal entry of each window in row-major order, as TensorFlow's MaxPoolGrad gives it, on every backend."""
    image = np.array([[1., 3., 3., 0.], [3., 2., 3., 3.], [5., 5., 1., 1.], [5., 5., 1., 1.]])
    model = toolkit.Model(lambda rng: {"image": image[..., None]},
                          lambda ops, p, x: ops.max_pool(ops.expand_dims(p["image"], 0), 2, strides=1, padding="same"),
                          lambda ops, out, y: ops.sum(ops.reshape(out, (1, -1)), axis=1))
    trainer = toolkit.DataParallel(model, backend, 1, toolkit.optim.SGD(0.1), dtype="float64")
    counts = np.zeros_like(image)  # how many windows pick each entry, first maximum first
    padded = np.pad(image, ((0, 1), (0, 1)), constant_values=-np.inf)
    for i in range(4):
        for j in range(4):
            window = padded[i:i + 2, j:j + 2].ravel()
            di, dj = divmod(int(np.argmax(window)), 2)  # numpy's argmax: the first maximum
            counts[i + di, j + dj] += 1
    np.testing.assert_array_equal(trainer.gradients(np.zeros((1, 1)), np.zeros(1))["image"][..., 0], counts)


#: Rows with NaN and infinities, and an image whose first two 2x2 windows hold a NaN.
NON_FINITE = np.array([[np.nan, -1.0, 0.0, 2.0], [1.0, np.nan, 3.0, -2.0], [0.5, 0.25, np.inf, -np.inf],
                       [-np.inf] * 4])
NON_FINITE_IMAGE = np.array([[1.0, np.nan, 0.5, 2.0], [0.0, 3.0, -1.0, np.nan], [1.0, 1.0, 1.0, 1.0],
                             [2.0, -np.inf, 0.0, 0.0]])[None, :, :, None]
NON_FINITE_CASES = {
    "relu": (lambda o, a: o.relu(a), lambda a: np.maximum(a, 0.0)),
    "maximum": (lambda o, a: o.maximum(a, 0.0), lambda a: np.maximum(a, 0.0)),
    "maximum_second": (lambda o, a: o.maximum(o.zeros_like(a), a), lambda a: np.maximum(0.0, a)),
    "minimum": (lambda o, a: o.minimum(a, 0.0), lambda a: np.minimum(a, 0.0)),
    "minimum_second": (lambda o, a: o.minimum(o.zeros_like(a), a), lambda a: np.minimum(0.0, a)),
    "clip": (lambda o, a: o.clip(a, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5)),
    "max": (lambda o, a: o.max(a, axis=1), lambda a: np.max(a, axis=1)),
    "min": (lambda o, a: o.min(a, axis=1), lambda a: np.min(a, axis=1)),
    "argmax": (lambda o, a: o.argmax(a, axis=1), lambda a: np.argmax(a, axis=1)),
    "argmax_all": (lambda o, a: o.argmax(a), lambda a: np.argmax(a)),
    "logsumexp": (lambda o, a: o.logsumexp(a, axis=1), lambda a: _logsumexp(a, axis=1)),
    "max_pool": (lambda o, img: o.max_pool(img, 2), lambda img: _max_pool_2x2(img)),
}


def _max_pool_2x2(img):
    """2x2 max pooling, stride 2, of a (1, 4, 4, 1) image; NaN propagates (NumPy's max)."""
    return img.reshape(1, 2, 2, 2, 2, 1).max(axis=(2, 4))


def _logsumexp(a, axis):
    from scipy.special import logsumexp

    with np.errstate(invalid="ignore"):
        return logsumexp(a, axis=axis)


@pytest.mark.parametrize("name", list(NON_FINITE_CASES))
def test_non_finite_inputs_give_numpys_values_on_every_backend(backend_name, name):
    """NaN propagates through maxima and minima, as in NumPy, JAX and ``tf.maximum`` (Aesara's switch dropped a NaN
    first operand, TensorFlow's MaxPool skips NaN); argmax counts NaN as the largest value, its first one winning, as
    NumPy and JAX do (``tf.math.argmax`` skips NaN); logsumexp of ``+inf`` is ``+inf`` (``keras.ops``). So a NaN
    inside a model reaches the loss, and the step's ``nan_policy``, on every backend alike."""
    fn, reference = NON_FINITE_CASES[name]
    image = "img" in fn.__code__.co_varnames
    value = NON_FINITE_IMAGE if image else NON_FINITE
    variants = [toolkit.get_backend(backend_name)]
    if backend_name != "tensorflow":
        variants.append(toolkit.get_backend(backend_name, linker="c"))
    for variant in variants:
        for dtype in ("float64", "float32"):
            result = _traced(variant, lambda o, v: fn(o, v), dtype=dtype, v=value.astype(dtype))
            np.testing.assert_array_equal(result, reference(value).astype(result.dtype), err_msg=f"{variant} {dtype}")


def test_reductions_keep_the_static_sizes_of_the_axes_they_keep(backend):
    """Layers and the bench's FLOP count read sizes from static shapes: a max, min or argmax (which Aesara 2.9's
    MaxAndArgmax left all unknown) keeps them like a sum does."""
    shapes = {}

    def fn(ops, x):
        for name in ("sum", "mean", "max", "min", "argmax"):
            shapes[name] = (ops.shape(getattr(ops, name)(x, axis=1)),
                            ops.shape(getattr(ops, name)(x, axis=(1, 2) if name != "argmax" else 2, keepdims=True)))
        return x

    backend.call(fn, backend.list_devices()[0], {"x": np.ones((2, 3, 4, 5))}, "float64")
    for name, (reduced, kept) in shapes.items():
        assert reduced == (2, 4, 5), name
        assert kept == ((2, 1, 1, 5) if name != "argmax" else (2, 3, 1, 5)), name
