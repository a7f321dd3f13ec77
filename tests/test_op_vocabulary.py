"""The Keras-named op vocabulary: each op's values against NumPy on every backend, float32 and float64; the NumPy
references against ``keras.ops`` where Keras is installed; gradients by central differences on every backend and
across backends (Python operators, constants and refusals: tests/test_op_operators.py)."""

from __future__ import annotations

import functools
import importlib.util

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
