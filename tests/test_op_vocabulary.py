"""The Keras-named op vocabulary: each op's values against NumPy on every backend, float32 and float64; the NumPy
references against ``keras.ops`` where Keras is installed; gradients by central differences on every backend and
across backends; and the rules that make Python operators and constants mean the same on both backends."""

from __future__ import annotations

import functools
import importlib.util
import re

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, failures, run
from toolkit.tolerances import FLOAT64_ATOL

RNG = np.random.default_rng(7)
INPUTS = {
    "x": RNG.normal(size=(2, 3, 4, 5)),            # batch axes for matmul, reductions, transposes
    "w": RNG.normal(size=(3, 5, 2)),               # broadcast against x's batch axes
    "m": RNG.normal(size=(3, 4)),
    "v": RNG.normal(size=(4,)),
    "img": RNG.normal(size=(2, 7, 6, 3)),          # NHWC
    "ker": RNG.normal(size=(3, 3, 3, 4)) * 0.3,
    "q": RNG.normal(size=(2, 5, 2, 4)),            # [batch, target, heads, depth]
    "k": RNG.normal(size=(2, 6, 2, 4)),
    "val": RNG.normal(size=(2, 6, 2, 4)),
    "ids": np.array([3, 0, -1, 2, 2], np.int32),     # a negative id counts from the end
    "along": np.array([[2, 0, 1, 3], [1, 1, 0, 2], [3, 2, 2, 0]], np.int32),
}
MASK = np.array([[1, 1, 0, 1, 1, 0]] * 5, bool)  # [target, source]: sources 2 and 5 hidden


def _erf(x):
    from scipy.special import erf

    return erf(x)


def _pool(img, size, stride, padding, reduce, fill):
    """NumPy pooling with TensorFlow's "same" placement; ``fill`` is what padding holds (NaN: not counted)."""
    n, h, w, c = img.shape
    if padding == "same":
        out_h, out_w = -(-h // stride), -(-w // stride)
        ph, pw = max((out_h - 1) * stride + size - h, 0), max((out_w - 1) * stride + size - w, 0)
        img = np.pad(img, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)), constant_values=fill)
    else:
        out_h, out_w = (h - size) // stride + 1, (w - size) // stride + 1
    out = np.empty((n, out_h, out_w, c))
    for i in range(out_h):
        for j in range(out_w):
            out[:, i, j] = reduce(img[:, i * stride:i * stride + size, j * stride:j * stride + size], axis=(1, 2))
    return out


def _conv(img, ker, stride, padding, dilation=1):
    kh, kw = ker.shape[:2]
    spread = np.zeros(((kh - 1) * dilation + 1, (kw - 1) * dilation + 1, *ker.shape[2:]))
    spread[::dilation, ::dilation] = ker
    n, h, w, _ = img.shape
    if padding == "same":
        out_h, out_w = -(-h // stride), -(-w // stride)
        ph, pw = max((out_h - 1) * stride + spread.shape[0] - h, 0), max((out_w - 1) * stride + spread.shape[1] - w, 0)
        img = np.pad(img, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    out_h, out_w = (img.shape[1] - spread.shape[0]) // stride + 1, (img.shape[2] - spread.shape[1]) // stride + 1
    out = np.zeros((n, out_h, out_w, ker.shape[3]))
    for i in range(spread.shape[0]):
        for j in range(spread.shape[1]):
            patch = img[:, i:i + (out_h - 1) * stride + 1:stride, j:j + (out_w - 1) * stride + 1:stride]
            out += np.einsum("nhwc,cf->nhwf", patch, spread[i, j])
    return out


def _attention(q, k, v, mask=None, causal=False):
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(logits.shape[-2:], bool) if mask is None else mask
    if causal:
        allowed = allowed & np.tril(np.ones(logits.shape[-2:], bool))
    logits = np.where(allowed, logits, np.finfo(q.dtype).min)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("bnts,bsnh->btnh", e / e.sum(-1, keepdims=True), v)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _index(ids, n):
    return np.clip(np.where(ids < 0, ids + n, ids), 0, n - 1)


def _recurrence(o, xs, h0, reverse=False, unroll=1):
    """``scan`` of a tanh recurrence over ``xs``' rows (with ``o`` the toolkit's ops or ``keras.ops``): the last
    state, then each step's output."""
    def f(h, x):
        h = o.tanh(0.5 * h + x)
        return h, h * x

    h, ys = o.scan(f, h0, xs, reverse=reverse, unroll=unroll)
    return o.concatenate([h, o.reshape(ys, (-1,))], axis=0)


def _recurrence_numpy(xs, h0, reverse=False):
    h, ys = h0, []
    for x in xs[::-1] if reverse else xs:
        h = np.tanh(0.5 * h + x)
        ys.append(h * x)
    return np.concatenate([h, np.ravel(ys[::-1] if reverse else ys)])


def _scan_pytrees(o, m, v):
    """A carry dict, a tuple of sequences and no per-step output."""
    def f(carry, xs):
        row, twice = xs
        return {"h": o.tanh(carry["h"] * row + twice), "n": carry["n"] + o.sum(row)}, None

    carry, ys = o.scan(f, {"h": v, "n": o.sum(v) * 0.0}, (m, m * 2.0))
    assert ys is None
    return o.concatenate([carry["h"], o.reshape(carry["n"], (1,))], axis=0)


def _scan_pytrees_numpy(m, v):
    h, n = v, 0.0
    for row in m:
        h, n = np.tanh(h * row + 2 * row), n + row.sum()
    return np.concatenate([h, [n]])


# name -> (the op with the toolkit's ops, the NumPy reference, the same op with keras.ops or None). Each takes a dict
# of the inputs it names. The first element of every case's output is differentiable in its float inputs.
CASES = {
    "matmul_batched": (lambda o, t: o.matmul(t["x"], t["w"]), lambda t: t["x"] @ t["w"],
                       lambda k, t: k.matmul(t["x"], t["w"])),
    "matmul_vector": (lambda o, t: o.matmul(t["m"], t["v"]), lambda t: t["m"] @ t["v"],
                      lambda k, t: k.matmul(t["m"], t["v"])),
    "transpose": (lambda o, t: o.transpose(t["x"], (3, 0, 2, 1)), lambda t: t["x"].transpose(3, 0, 2, 1),
                  lambda k, t: k.transpose(t["x"], (3, 0, 2, 1))),
    "take_rows": (lambda o, t: o.take(t["m"], t["ids"], axis=0), lambda t: t["m"][_index(t["ids"], 3)], None),
    "take_axis1": (lambda o, t: o.take(t["m"], t["ids"][:2], axis=1), lambda t: t["m"][:, _index(t["ids"][:2], 4)],
                   lambda k, t: k.take(t["m"], _index(t["ids"][:2], 4), axis=1)),
    # Two gathers from one tensor along axis 1: their gradients once failed to compile on Aesara.
    "take_axis1_twice": (lambda o, t: o.take(t["m"], t["ids"][:2], axis=1) * o.take(t["m"], t["ids"][2:4], axis=1),
                         lambda t: t["m"][:, _index(t["ids"][:2], 4)] * t["m"][:, _index(t["ids"][2:4], 4)],
                         lambda k, t: k.take(t["m"], _index(t["ids"][:2], 4), axis=1)
                         * k.take(t["m"], _index(t["ids"][2:4], 4), axis=1)),
    "take_along_axis": (lambda o, t: o.take_along_axis(t["m"], t["along"], axis=1),
                        lambda t: np.take_along_axis(t["m"], t["along"], axis=1),
                        lambda k, t: k.take_along_axis(t["m"], t["along"], axis=1)),
    "where": (lambda o, t: o.where(t["m"] > 0, t["m"], 0.5 * t["m"]), lambda t: np.where(t["m"] > 0, t["m"],
                                                                                        0.5 * t["m"]),
              lambda k, t: k.where(t["m"] > 0, t["m"], 0.5 * t["m"])),
    "maximum_minimum": (lambda o, t: o.maximum(t["m"], 0.1) + o.minimum(t["m"], t["v"]),
                        lambda t: np.maximum(t["m"], 0.1) + np.minimum(t["m"], t["v"]),
                        lambda k, t: k.maximum(t["m"], 0.1) + k.minimum(t["m"], t["v"])),
    "abs": (lambda o, t: o.abs(t["m"]), lambda t: np.abs(t["m"]), lambda k, t: k.abs(t["m"])),
    "clip": (lambda o, t: o.clip(t["m"], -0.5, 0.7), lambda t: np.clip(t["m"], -0.5, 0.7),
             lambda k, t: k.clip(t["m"], -0.5, 0.7)),
    "erf": (lambda o, t: o.erf(t["m"]), lambda t: _erf(t["m"]), lambda k, t: k.erf(t["m"])),
    "sin_cos": (lambda o, t: o.sin(t["m"] * 3) + o.cos(t["v"] * 3), lambda t: np.sin(t["m"] * 3) + np.cos(t["v"] * 3),
                lambda k, t: k.sin(t["m"] * 3) + k.cos(t["v"] * 3)),
    "gelu_exact": (lambda o, t: o.gelu(t["m"], approximate=False), lambda t: t["m"] / 2 * (1 + _erf(t["m"] / 2**.5)),
                   lambda k, t: k.gelu(t["m"], approximate=False)),
    "gelu_tanh": (lambda o, t: o.gelu(t["m"]), lambda t: _gelu_tanh(t["m"]), lambda k, t: k.gelu(t["m"])),
    "silu": (lambda o, t: o.silu(t["m"]), lambda t: t["m"] / (1 + np.exp(-t["m"])), lambda k, t: k.silu(t["m"])),
    "softplus": (lambda o, t: o.softplus(t["m"] * 30), lambda t: np.logaddexp(0, t["m"] * 30),
                 lambda k, t: k.softplus(t["m"] * 30)),
    "logsumexp": (lambda o, t: o.logsumexp(t["x"], axis=(1, 3)), lambda t: np.log(np.exp(t["x"]).sum(axis=(1, 3))),
                  lambda k, t: k.logsumexp(t["x"], axis=(1, 3))),
    "moments": (lambda o, t: o.concatenate(o.moments(t["x"], axes=(0, 2)), axis=0),
                lambda t: np.concatenate([t["x"].mean(axis=(0, 2)), t["x"].var(axis=(0, 2))]),
                lambda k, t: k.concatenate(k.moments(t["x"], axes=(0, 2)), axis=0)),
    "pad": (lambda o, t: o.pad(t["m"], ((1, 0), (2, 3)), constant_values=0.5),
            lambda t: np.pad(t["m"], ((1, 0), (2, 3)), constant_values=0.5),
            lambda k, t: k.pad(t["m"], ((1, 0), (2, 3)), constant_values=0.5)),
    "expand_broadcast": (lambda o, t: o.broadcast_to(o.expand_dims(t["v"], 0), (3, 4)) * t["m"],
                         lambda t: np.broadcast_to(t["v"][None], (3, 4)) * t["m"],
                         lambda k, t: k.broadcast_to(k.expand_dims(t["v"], 0), (3, 4)) * t["m"]),
    "cumsum": (lambda o, t: o.cumsum(t["m"], axis=1) + o.reshape(o.cumsum(t["m"]), (3, 4)),
               lambda t: np.cumsum(t["m"], axis=1) + np.cumsum(t["m"]).reshape(3, 4),
               lambda k, t: k.cumsum(t["m"], axis=1) + k.reshape(k.cumsum(t["m"]), (3, 4))),
    "min": (lambda o, t: o.min(t["x"], axis=-1), lambda t: t["x"].min(axis=-1), lambda k, t: k.min(t["x"], axis=-1)),
    "conv_strided_same": (lambda o, t: o.conv(t["img"], t["ker"], strides=2, padding="same"),
                          lambda t: _conv(t["img"], t["ker"], 2, "same"),
                          lambda k, t: k.conv(t["img"], t["ker"], strides=2, padding="same")),
    "conv_dilated": (lambda o, t: o.conv(t["img"], t["ker"], dilation_rate=2),
                     lambda t: _conv(t["img"], t["ker"], 1, "valid", dilation=2),
                     lambda k, t: k.conv(t["img"], t["ker"], dilation_rate=2)),
    "conv_strided_valid": (lambda o, t: o.conv(t["img"], t["ker"], strides=(2, 1)),
                           lambda t: _conv(t["img"], t["ker"], 1, "valid")[:, ::2],
                           lambda k, t: k.conv(t["img"], t["ker"], strides=(2, 1))),
    "max_pool_same": (lambda o, t: o.max_pool(t["img"], 3, strides=2, padding="same"),
                      lambda t: _pool(t["img"], 3, 2, "same", np.max, -np.inf),
                      lambda k, t: k.max_pool(t["img"], 3, strides=2, padding="same")),
    "max_pool_valid": (lambda o, t: o.max_pool(t["img"], 2), lambda t: _pool(t["img"], 2, 2, "valid", np.max, 0),
                       lambda k, t: k.max_pool(t["img"], 2)),
    "average_pool_same": (lambda o, t: o.average_pool(t["img"], 3, strides=2, padding="same"),
                          lambda t: _pool(t["img"], 3, 2, "same", np.nanmean, np.nan),
                          lambda k, t: k.average_pool(t["img"], 3, strides=2, padding="same")),
    "average_pool_valid": (lambda o, t: o.average_pool(t["img"], (2, 3), strides=1),
                           lambda t: np.stack([np.stack([t["img"][:, i:i + 2, j:j + 3].mean(axis=(1, 2))
                                                         for j in range(4)], 1) for i in range(6)], 1),
                           lambda k, t: k.average_pool(t["img"], (2, 3), strides=1)),
    "attention": (lambda o, t: o.dot_product_attention(t["q"], t["k"], t["val"]),
                  lambda t: _attention(t["q"], t["k"], t["val"]),
                  lambda k, t: k.dot_product_attention(t["q"], t["k"], t["val"])),
    "attention_masked_causal": (lambda o, t: o.dot_product_attention(t["q"], t["k"], t["val"], mask=MASK,
                                                                      is_causal=True),
                                lambda t: _attention(t["q"], t["k"], t["val"], MASK, causal=True),
                                lambda k, t: k.dot_product_attention(t["q"], t["k"], t["val"], mask=MASK,
                                                                     is_causal=True)),
    "scan": (lambda o, t: _recurrence(o, t["m"], t["v"]), lambda t: _recurrence_numpy(t["m"], t["v"]),
             lambda k, t: _recurrence(k, t["m"], t["v"])),
    "scan_reverse": (lambda o, t: _recurrence(o, t["m"], t["v"], reverse=True),
                     lambda t: _recurrence_numpy(t["m"], t["v"], reverse=True),
                     lambda k, t: _recurrence(k, t["m"], t["v"], reverse=True)),
    "scan_unrolled": (lambda o, t: _recurrence(o, t["m"], t["v"], reverse=True, unroll=True),
                      lambda t: _recurrence_numpy(t["m"], t["v"], reverse=True),
                      lambda k, t: _recurrence(k, t["m"], t["v"], reverse=True, unroll=True)),
    "scan_length": (lambda o, t: o.reshape(o.scan(lambda c, _: (o.tanh(c) * t["v"], c), t["v"], length=3)[1], (-1,)),
                    lambda t: np.concatenate([t["v"], np.tanh(t["v"]) * t["v"],
                                              np.tanh(np.tanh(t["v"]) * t["v"]) * t["v"]]),
                    lambda k, t: k.reshape(k.scan(lambda c, _: (k.tanh(c) * t["v"], c), t["v"], length=3)[1],
                                           (-1,))),
    "scan_pytrees": (lambda o, t: _scan_pytrees(o, t["m"], t["v"]), lambda t: _scan_pytrees_numpy(t["m"], t["v"]),
                     None),
}
#: Integer-valued ops, checked for values and dtype (no gradient).
INTEGER_CASES = {
    "argmax": (lambda o, t: o.argmax(t["x"], axis=2), lambda t: t["x"].argmax(axis=2),
               lambda k, t: k.argmax(t["x"], axis=2)),
    "argmax_flat": (lambda o, t: o.argmax(t["m"]), lambda t: t["m"].argmax(), lambda k, t: k.argmax(t["m"])),
    "comparisons": (lambda o, t: o.cast(o.logical_and(t["m"] >= 0, o.logical_not(t["m"] == t["m"][0])), "int32")
                    + o.cast(o.logical_or(t["m"] < -1, t["m"] != 0), "int32"),
                    lambda t: ((t["m"] >= 0) & ~(t["m"] == t["m"][0])).astype(np.int32)
                    + ((t["m"] < -1) | (t["m"] != 0)).astype(np.int32), None),
}


def _names(case_fn) -> list[str]:
    import inspect

    return [n for n in INPUTS if f'"{n}"' in inspect.getsource(case_fn)]


def _run(backend, fn, names, dtype):
    device = backend.list_devices()[0]
    inputs = {n: backend.place(INPUTS[n].astype(dtype) if INPUTS[n].dtype.kind == "f" else INPUTS[n], device)
              for n in names}
    return backend.to_numpy(backend.call(lambda ops, **t: fn(ops, t), device, inputs, dtype))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ops_match_numpy(backend, dtype):
    """Every case's values, shape and dtype against its NumPy reference; all cases in one compiled call (on the
    Theano family each distinct graph compiles for seconds: one call instead of one per case)."""
    cases = {**CASES, **INTEGER_CASES}
    results = run(backend, lambda ops, **t: [fn(ops, t) for fn, _, _ in cases.values()], INPUTS, dtype)
    tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL

    def check(name, result):
        expected = cases[name][1](INPUTS)
        assert result.shape == expected.shape, (result.shape, expected.shape)
        assert result.dtype == (np.dtype(dtype) if name in CASES else np.dtype("int32")), result.dtype
        np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)

    failed = failures({name: functools.partial(check, name, np.asarray(result))
                        for name, result in zip(cases, results)})
    assert not failed, failed


#: Where Keras' TensorFlow backend computes a float64 op with float32 somewhere, and how close it then is: tf.nn.gelu
#: casts its Python constants (0.044715, sqrt(2/pi), sqrt(2)) through float32 even for float64 inputs, and Keras'
#: max_pool returns float32 for float64 inputs. The toolkit keeps float64 exact (as Keras' JAX backend does).
KERAS_FLOAT32_CASES = {"gelu_exact": 1e-6, "gelu_tanh": 1e-6, "max_pool_same": 1e-6, "max_pool_valid": 1e-6}


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed "
                    '(pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("name", [n for n, case in {**CASES, **INTEGER_CASES}.items() if case[2] is not None])
def test_numpy_references_are_keras_ops(name):
    """The references above are what keras.ops computes (float64, Keras' TensorFlow backend): so the toolkit's
    ops, which equal the references, have Keras' semantics."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    _, reference, keras_fn = {**CASES, **INTEGER_CASES}[name]
    names = _names(keras_fn)
    inputs = {n: INPUTS[n] for n in names}
    tolerance = KERAS_FLOAT32_CASES.get(name, 1e-10)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras_fn(keras.ops, inputs)), reference(inputs),
                               rtol=tolerance, atol=tolerance)


def test_synchronized_moments_outside_a_training_step_are_the_local_ones(backend):
    """``moments(..., synchronized=True)`` has Keras' signature; outside a data-parallel training step (here,
    a plain call) there are no replicas, so it gives the local statistics, as Keras' does outside a strategy."""
    fn = lambda ops, t: ops.concatenate(ops.moments(t["x"], (1,), True, synchronized=True), axis=1)  # noqa: E731
    expected = np.concatenate([INPUTS["x"].mean(1, keepdims=True), INPUTS["x"].var(1, keepdims=True)], axis=1)
    np.testing.assert_allclose(_run(backend, fn, ["x"], "float64"), expected, rtol=0, atol=1e-12)
    if importlib.util.find_spec("keras") is not None:
        toolkit.get_backend("tensorflow")
        import keras

        np.testing.assert_allclose(keras.ops.convert_to_numpy(fn(keras.ops, {"x": INPUTS["x"]})), expected,
                                   rtol=0, atol=1e-12)


#: Each case's float inputs, and the weights of its output in the loss whose gradients the tests check.
FLOATS = {name: [n for n in _names(fn) if INPUTS[n].dtype.kind == "f"] for name, (fn, _, _) in CASES.items()}
WEIGHTS = {name: np.random.default_rng(1).normal(size=np.shape(reference(INPUTS)))
           for name, (_, reference, _) in CASES.items()}


@functools.cache
def _gradients(backend_name, dtype="float64") -> dict[str, dict[str, np.ndarray]]:
    """Each case's gradients of ``sum(case(inputs) * WEIGHTS[case])`` for its float inputs, through one trainer
    (one compile for every case): each case reads its own copy of its inputs, so the gradient of a copy is that
    case's alone."""
    ints = {n: v for n, v in INPUTS.items() if v.dtype.kind != "f"}

    def forward(ops, p, x):
        outputs = [fn(ops, {**ints, **{n: p[f"{name}__{n}"] for n in FLOATS[name]}}) for name, (fn, _, _) in
                   CASES.items()]
        return ops.concatenate([ops.reshape(out, (-1,)) for out in outputs], axis=0)

    model = toolkit.Model(lambda rng: {f"{name}__{n}": INPUTS[n].copy() for name in CASES for n in FLOATS[name]},
                          forward, lambda ops, out, target: ops.reshape(ops.sum(out * target[0]), (1,)))
    trainer = toolkit.DataParallel(model, backend_name, 1, toolkit.optim.SGD(0.1), dtype=dtype)
    grads = trainer.gradients(np.zeros((1, 1)), np.concatenate([w.ravel() for w in WEIGHTS.values()])[None])
    return {name: {n: grads[f"{name}__{n}"] for n in FLOATS[name]} for name in CASES}


def test_op_gradients_match_central_differences(backend_name):
    """Each case's gradient in a random direction equals the central difference of its NumPy reference."""
    grads, step = _gradients(backend_name), 1e-6

    def check(name):
        reference, floats = CASES[name][1], FLOATS[name]
        direction = {n: np.random.default_rng(2).normal(size=INPUTS[n].shape) for n in floats}

        def value(sign):
            return float(np.sum(reference({**INPUTS, **{n: INPUTS[n] + sign * step * direction[n] for n in floats}})
                                * WEIGHTS[name]))

        numeric = (value(1) - value(-1)) / (2 * step)
        analytic = sum(float(np.sum(grads[name][n] * direction[n])) for n in floats)
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6)

    failed = failures({name: functools.partial(check, name) for name in CASES})
    assert not failed, failed


#: float32 gradients against float64 ones: a few float32 roundings per element through these small graphs, relative
#: to the gradient's largest entry (measured: at most 2.8e-7 over these cases on both backends; the bound leaves room
#: for other BLAS and instruction sets).
FLOAT32_GRADIENT_RTOL = 1e-4


def test_op_gradients_in_float32_follow_float64(backend_name):
    exact, single = _gradients(backend_name), _gradients(backend_name, "float32")

    def check(name):
        for n in FLOATS[name]:
            assert single[name][n].dtype == np.float32
            scale = float(np.max(np.abs(exact[name][n]))) or 1.0
            np.testing.assert_allclose(single[name][n], exact[name][n], rtol=0, atol=FLOAT32_GRADIENT_RTOL * scale)

    failed = failures({name: functools.partial(check, name) for name in CASES})
    assert not failed, failed


@pytest.mark.parity
@needs_all_backends
def test_op_gradients_agree_across_backends():
    tf_grads, theano_grads = _gradients("tensorflow"), _gradients(THEANO)

    def check(name):
        for n in FLOATS[name]:
            np.testing.assert_allclose(tf_grads[name][n], theano_grads[name][n], rtol=0, atol=FLOAT64_ATOL)

    failed = failures({name: functools.partial(check, name) for name in CASES})
    assert not failed, failed


# ---------------------------------------------------------------------------------------------------------------------
# Operators and constants: one behaviour on every backend.

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
    assert f"test_op_vocabulary.py:{forward.__code__.co_firstlineno + 1} in forward" in message
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
    "max_pool": (lambda o, img: o.max_pool(img, 2), lambda img: _pool(img, 2, 2, "valid", np.max, -np.inf)),
}


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
