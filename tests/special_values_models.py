"""Special-value cases of the linear algebra, activation, loss, normalization, window, signal, control-flow and
function ops (see :mod:`tests.special_values_table`)."""

from __future__ import annotations

import numpy as np

from tests.special_values_common import (
    ANY_ZERO,
    FLOATS,
    INF,
    KINDS,
    NAN,
    NUMERIC,
    _f,
    _one_hot,
    _same,
    _sigmoid,
    _softmax,
    _softplus,
    _sum_dtype,
    _unsupported,
    case,
    unary,
)
from toolkit.errors import ArgumentError, DTypeError


# --- products, linear algebra -------------------------------------------------------------------------------------
def _square(x):
    """A square matrix from x: its first two columns' first two rows (the int kind's is invertible, det -19), or
    (0, 0) from the empty kind."""
    return x[:2, :2] if x.shape[1] else x[:0, :0]


def _spd(x, o=None):
    """A symmetric positive definite matrix from x's integers (or (0, 0) from the empty kind), with ``ops`` ``o``
    (else NumPy)."""
    a = _square(x) * 1.0
    if o is None:
        return a @ a.T + 2 * np.eye(len(a))
    return o.matmul(a, o.transpose(a)) + 2 * o.eye(a.shape[0])


def _trapezoid(y, dx=1.0, axis=-1):
    return (getattr(np, "trapezoid", None) or np.trapz)(y, dx=dx, axis=axis)  # trapz before NumPy 2


def _slogdet(a):
    sign, logdet = np.linalg.slogdet(a)
    return sign, logdet


LINALG = [
    case("einsum", lambda o, x, y: (o.einsum("ij,ij->i", x, y), o.einsum("ij->j", x), o.einsum("ij,kj->ik", x, x)),
         lambda x, y: (np.einsum("ij,ij->i", x, y), np.einsum("ij->j", x, dtype=_sum_dtype(x)),
                       np.einsum("ij,kj->ik", x, x)), kinds=("float", "int")),
    case("einsum", lambda o, x, y: (o.einsum("ij->j", x), o.einsum("ij,kj->ik", x, x), o.einsum("i,i", y, y)),
         lambda x, y: (np.einsum("ij->j", x), np.einsum("ij,kj->ik", x, x), np.einsum("i,i", y, y)),
         kinds=("empty",), variant="empty"),
    case("tensordot", lambda o, x, y: (o.tensordot(x, y, 2), o.tensordot(x, y, ([1], [1]))),
         lambda x, y: (np.tensordot(x, y, 2), np.tensordot(x, y, ([1], [1]))), kinds=("float", "int")),
    case("tensordot", lambda o, x, y: o.tensordot(x, x, ([1], [1])), lambda x, y: np.tensordot(x, x, ([1], [1])),
         kinds=("empty",), variant="empty"),
    case("dot", lambda o, x, y: (o.dot(x, o.transpose(y)), o.dot(x[0], y[0])),
         lambda x, y: (np.dot(x, y.T), np.dot(x[0], y[0])), kinds=("float", "int")),
    case("dot", lambda o, x, y: (o.dot(x, o.transpose(x)), o.dot(y, y)),
         lambda x, y: (np.dot(x, x.T), np.dot(y, y)), kinds=("empty",), variant="empty"),
    case("vdot", lambda o, x, y: o.vdot(x, x), lambda x, y: np.vdot(x, x), kinds=NUMERIC),
    case("inner", lambda o, x, y: (o.inner(x, y), o.inner(x[0], y[0])),
         lambda x, y: (np.inner(x, y), np.inner(x[0], y[0])), kinds=("float", "int")),
    case("inner", lambda o, x, y: o.inner(y, y), lambda x, y: np.inner(y, y), kinds=("empty",), variant="empty"),
    case("outer", lambda o, x, y: o.outer(x, y), lambda x, y: np.outer(x, y), kinds=NUMERIC),
    case("kron", lambda o, x, y: o.kron(x[:2], y[:2]), lambda x, y: np.kron(x[:2], y[:2]), kinds=NUMERIC),
    case("cross", lambda o, x, y: o.cross(x[:, :3], y[:, :3]), lambda x, y: np.cross(x[:, :3], y[:, :3]),
         kinds=("float", "int"), refuses={"bool": DTypeError}),
    case("correlate", lambda o, x, y: (o.correlate(x[0], y[0], "full"), o.correlate(x[1], y[1][:2])),
         lambda x, y: (np.correlate(_f(x[0]), _f(y[0]), "full"), np.correlate(_f(x[1]), _f(y[1][:2]))),
         kinds=("float", "int")),
    case("trapezoid", lambda o, x, y: (o.trapezoid(x), o.trapezoid(x, dx=0.5, axis=0)),
         lambda x, y: (_trapezoid(_f(x)), _trapezoid(_f(x), dx=0.5, axis=0)), kinds=("float", "empty", "int")),
    case("cdist", lambda o, x, y: o.cdist(x, y), lambda x, y: np.sqrt(np.sum((_f(x)[:, None] - _f(y)[None]) ** 2,
                                                                             -1)), kinds=("float", "int")),
    case("norm", lambda o, x, y: (o.norm(x), o.norm(x, axis=-1), o.norm(x, 1, axis=0), o.norm(x[0], INF)),
         lambda x, y: (np.linalg.norm(_f(x)), np.linalg.norm(_f(x), axis=-1), np.linalg.norm(_f(x), 1, axis=0),
                       np.linalg.norm(_f(x[0]), INF)), kinds=("float", "int", "bool")),
    case("det", lambda o, x, y: o.det(_square(x)), lambda x, y: np.linalg.det(_f(_square(x))),
         kinds=("empty", "int")),
    case("inv", lambda o, x, y: o.inv(_square(x)), lambda x, y: np.linalg.inv(_f(_square(x))),
         kinds=("empty", "int")),
    case("slogdet", lambda o, x, y: o.slogdet(_square(x)), lambda x, y: _slogdet(_f(_square(x))),
         kinds=("empty", "int")),
    case("logdet", lambda o, x, y: o.logdet(_spd(x, o)), lambda x, y: np.linalg.slogdet(_spd(x))[1],
         kinds=("empty", "int")),
    case("solve", lambda o, x, y: o.solve(_square(x), _square(y)),
         lambda x, y: np.linalg.solve(_f(_square(x)), _f(_square(y))), kinds=("int",)),
    case("solve_triangular", lambda o, x, y: o.solve_triangular(o.triu(_square(x)), _square(y)),
         lambda x, y: np.linalg.solve(np.triu(_f(_square(x))), _f(_square(y))), kinds=("int",)),
    case("cholesky", lambda o, x, y: o.cholesky(_spd(x, o)), lambda x, y: np.linalg.cholesky(_spd(x)),
         kinds=("empty", "int")),
    case("qr", lambda o, x, y: o.matmul(*o.qr(_spd(x, o))), lambda x, y: _spd(x), kinds=("empty", "int")),
    case("svd", lambda o, x, y: o.svd(_spd(x, o), compute_uv=False),
         lambda x, y: np.linalg.svd(_spd(x), compute_uv=False), kinds=("empty", "int")),
    case("eigh", lambda o, x, y: o.eigh(_spd(x, o))[0], lambda x, y: np.linalg.eigh(_spd(x))[0],
         kinds=("empty", "int")),
    case("lstsq", lambda o, x, y: o.lstsq(_spd(x, o), _square(y) * 1.0),
         lambda x, y: np.linalg.lstsq(_spd(x), _f(_square(y)), rcond=None)[0], kinds=("int",)),
]

# --- activations, losses, normalization ---------------------------------------------------------------------------
#: Keras' epsilon of the losses and normalizations (``toolkit.ops.nn.EPSILON``, Keras' ``backend.epsilon()``).
EPSILON = 1e-7
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _hard_sigmoid(x):
    return np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _sparsemax(x):
    """The Euclidean projection onto the simplex along the last axis, by sorting (Martins and Astudillo)."""
    if not x.shape[-1]:
        return x
    z = -np.sort(-x, axis=-1)
    k = np.arange(1, x.shape[-1] + 1)
    cumulative = np.cumsum(z, -1)
    support = 1 + k * z > cumulative
    size = np.sum(support, -1, keepdims=True)
    tau = (np.take_along_axis(cumulative, size - 1, -1) - 1) / size
    return np.maximum(x - tau, 0.0)


def _log_softmax(x, axis=-1):
    return np.log(_softmax(x, axis))


def _target(y):
    return (y > 0).astype(np.float64)


def _bce(target, output):
    output = np.clip(output, EPSILON, 1 - EPSILON)
    return -(target * np.log(output) + (1 - target) * np.log(1 - output))


def _bce_logits(target, logits):
    return -target * -_softplus(-logits) - (1 - target) * -_softplus(logits)


def _cce(target, output):
    return -np.sum(target * np.log(np.clip(output / np.sum(output, -1, keepdims=True), EPSILON, 1 - EPSILON)), -1)


def _layer_norm(x):
    mean = np.mean(x, -1, keepdims=True)
    return (x - mean) / np.sqrt(np.var(x, -1, keepdims=True) + EPSILON)


_LABELS = np.array([0, 3, 1, 2, 3, -1], np.int32)  # one per row of the float kind's x; -1 selects no class


NN = [  # the sign of a zero activation is not Keras' semantics (its backends differ): ANY_ZERO
    unary("relu6", lambda x: np.clip(x, 0.0, 6.0), options=ANY_ZERO),
    unary("log_sigmoid", lambda x: -_softplus(-x), options=ANY_ZERO),
    unary("elu", _elu, options=ANY_ZERO),
    unary("leaky_relu", lambda x: np.where(x >= 0, x, 0.2 * x), options=ANY_ZERO),
    unary("selu", lambda x: SELU_SCALE * _elu(x, SELU_ALPHA), options=ANY_ZERO),
    unary("celu", lambda x: np.where(x > 0, x, 1.0 * np.expm1(np.minimum(x, 0) / 1.0)), options=ANY_ZERO),
    unary("hard_sigmoid", _hard_sigmoid, options=ANY_ZERO),
    unary("hard_silu", lambda x: x * _hard_sigmoid(x), options=ANY_ZERO),
    unary("hard_swish", lambda x: x * _hard_sigmoid(x), options=ANY_ZERO),
    unary("swish", lambda x: x * _sigmoid(x), options=ANY_ZERO),
    unary("hard_tanh", lambda x: np.clip(x, -1.0, 1.0), options=ANY_ZERO),
    unary("hard_shrink", lambda x: np.where(np.abs(x) > 0.5, x, 0.0), options=ANY_ZERO),
    unary("soft_shrink", lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0.0)), options=ANY_ZERO),
    unary("tanh_shrink", lambda x: x - np.tanh(x), options=ANY_ZERO),
    case("threshold", lambda o, x, y: o.threshold(x, 0.5, -1.0), lambda x, y: np.where(_f(x) > 0.5, _f(x), -1.0)),
    unary("softsign", lambda x: x / (1.0 + np.abs(x)), options=ANY_ZERO),
    unary("sparse_plus", lambda x: np.where(x <= -1, 0.0, np.where(x >= 1, x, (x + 1) ** 2 / 4)), options=ANY_ZERO),
    unary("sparse_sigmoid", lambda x: np.where(x <= -1, 0.0, np.where(x >= 1, 1.0, 0.5 * (x + 1))), options=ANY_ZERO),
    unary("squareplus", lambda x: (x + np.sqrt(x * x + 4)) / 2, options=ANY_ZERO),
    case("glu", lambda o, x, y: (o.glu(x), o.glu(x, axis=0)),
         lambda x, y: (_f(x)[:, :2] * _sigmoid(_f(x)[:, 2:]), _f(x)[:len(x) // 2] * _sigmoid(_f(x)[len(x) // 2:]))),
    # Sparsemax of rows with infinities is NaN by any formula; its rows here are the finite ones.
    case("sparsemax", lambda o, x, y: (o.sparsemax(x[-1:]), o.sparsemax(x[3:4])),
         lambda x, y: (_sparsemax(_f(x)[-1:]), _sparsemax(_f(x)[3:4]))),
    case("binary_crossentropy", lambda o, x, y: (o.binary_crossentropy(o.flip(x, 0) > 0, x),
                                                 o.binary_crossentropy(o.flip(x, 0) > 0, x, from_logits=True)),
         lambda x, y: (_bce(_target(np.flip(x, 0)), _f(x)), _bce_logits(_target(np.flip(x, 0)), _f(x))),
         kinds=FLOATS, in_dtype=True),
    case("categorical_crossentropy", lambda o, x, y: (o.categorical_crossentropy(y > 0, x),
                                                      o.categorical_crossentropy(y > 0, x, from_logits=True)),
         lambda x, y: (_cce(_target(y), _f(x)), -np.sum(_target(y) * _log_softmax(_f(x)), -1)),
         kinds=("float", "int"), in_dtype=True),
    case("sparse_categorical_crossentropy",
         lambda o, x, y: (o.sparse_categorical_crossentropy(_LABELS[:len(x)], x),
                          o.sparse_categorical_crossentropy(_LABELS[:len(x)], x, from_logits=True)),
         lambda x, y: (_cce(_one_hot(_LABELS[:len(x)]), _f(x)),
                       -np.sum(_one_hot(_LABELS[:len(x)]) * _log_softmax(_f(x)), -1)), kinds=("float", "int"),
         in_dtype=True),
    case("psnr", lambda o, x, y: (o.psnr(x, y, 1.0), o.psnr(x, x, 2.0)),
         lambda x, y: (20 * np.log10(1.0) - 10 * np.log10(np.mean((_f(x) - _f(y)) ** 2)),
                       20 * np.log10(2.0) - 10 * np.log10(np.mean((_f(x) - _f(x)) ** 2))), kinds=("float", "int")),
    case("normalize", lambda o, x, y: (o.normalize(x), o.normalize(x, order=1, axis=0)),
         lambda x, y: (_f(x) * np.minimum(1 / np.sqrt(np.sum(_f(x) ** 2, -1, keepdims=True)), 1 / EPSILON),
                       _f(x) / np.maximum(np.sum(np.abs(_f(x)), 0, keepdims=True), EPSILON))),
    case("rms_normalization", lambda o, x, y: o.rms_normalization(x, scale=2.0),
         lambda x, y: _same(_f(x) / np.sqrt(np.mean(_f(x) ** 2, -1, keepdims=True) + EPSILON) * 2.0, x)
         if x.dtype.kind == "f" else _same(np.trunc(_f(x) / np.sqrt(np.mean(_f(x) ** 2, -1, keepdims=True)
                                                                     + EPSILON) * 2.0), x)),
    case("layer_normalization", lambda o, x, y: o.layer_normalization(x), lambda x, y: _layer_norm(_f(x)),
         kinds=FLOATS),
    case("batch_normalization",
         lambda o, x, y: o.batch_normalization(x, x[0], o.abs(y[0]), axis=-1, offset=y[1], scale=x[-1]),
         lambda x, y: x * (x[-1] / np.sqrt(np.abs(y[0]) + 1e-3)) + (y[1] - x[0] * (x[-1] / np.sqrt(np.abs(y[0])
                                                                                            + 1e-3))),
         kinds=("float",)),
    case("multi_hot", lambda o, x, y: o.multi_hot(x, 4), lambda x, y: np.max(_one_hot(x), axis=1),
         kinds=("int",), refuses={"float": DTypeError, "bool": DTypeError}),
    case("polar", lambda o, x, y: o.polar(x, y), _unsupported, kinds=(),
         refuses=dict.fromkeys(KINDS, DTypeError)),
    case("ctc_decode", lambda o, x, y: o.ctc_decode(x[None], np.array([4], np.int32)), _unsupported, kinds=(),
         refuses=dict.fromkeys(KINDS, ArgumentError)),
]

# --- convolution, pooling, attention ------------------------------------------------------------------------------
def _batch(x, o=None):
    """x as channels-last inputs ``[batch, length, channels]``: one example of x's rows, or (empty kind) a batch of
    none."""
    if x.shape[1]:
        return x[None]
    return o.reshape(x, (0, 2, 4)) if o is not None else np.reshape(x, (0, 2, 4))


def _windows_of(inputs, k, stride=1):
    """``[batch, positions, k, channels]``: the length-k windows of channels-last 1-D inputs."""
    view = np.lib.stride_tricks.sliding_window_view(inputs, k, axis=1)[:, ::stride]
    return np.moveaxis(view, -1, 2)


_KERNEL = np.array([[[0.5, 1.0, -1.0]] * 4, [[2.0, -0.5, 1.5]] * 4])  # [window 2, channels 4, out 3], no zeros
_DEPTHWISE = np.array([[[0.5], [1.0], [-1.0], [2.0]], [[1.5, ], [-0.5], [0.25], [3.0]]])  # [2, 4, 1]
_POINTWISE = np.array([[[1.0, -2.0, 0.5]] * 4])  # [1, 4, 3]
_ATTENTION_MASK = np.tril(np.ones((6, 6), bool))
_ATTENTION_MASK[2] = False  # a row that attends to nothing: uniform weights, as Keras


def _conv(inputs, kernel):
    return np.einsum("bpkc,kco->bpo", _windows_of(_f(inputs), kernel.shape[0]), kernel)


def _depthwise(inputs, kernel):
    return np.einsum("bpkc,kc->bpc", _windows_of(_f(inputs), kernel.shape[0]), kernel[..., 0])


def _conv_transpose(inputs, kernel):
    """Stride 1, "valid": every input position adds its kernel-weighted values at the positions it reaches."""
    batch, length, _ = inputs.shape
    k, out, _ = kernel.shape
    result = np.zeros((batch, length + k - 1, out))
    for t in range(length):
        for j in range(k):
            result[:, t + j] += np.einsum("bc,oc->bo", _f(inputs)[:, t], kernel[j])
    return result


def _attention(q, k, v, mask=None):
    q, k, v = _f(q), _f(k), _f(v)
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        logits = np.where(mask, logits, -0.7 * np.finfo(np.float64).max)
    weights = _softmax(logits, -1)
    return np.einsum("bnts,bsnh->btnh", weights, v)


WINDOWS = [
    case("conv", lambda o, x, y: o.conv(_batch(x, o), _KERNEL), lambda x, y: _conv(_batch(x), _KERNEL),
         kinds=("float", "empty", "int", "bool")),
    case("conv2d", lambda o, x, y: o.conv2d(_batch(x, o)[..., None], _KERNEL[:, :2, :1, None]),
         lambda x, y: np.einsum("bpqkl,kl->bpq", np.lib.stride_tricks.sliding_window_view(
             _f(_batch(x)), (2, 2), axis=(1, 2)), _KERNEL[:, :2, 0])[..., None], kinds=("float", "int")),
    case("depthwise_conv", lambda o, x, y: o.depthwise_conv(_batch(x, o), _DEPTHWISE),
         lambda x, y: _depthwise(_batch(x), _DEPTHWISE), kinds=("float", "empty", "int")),
    case("separable_conv", lambda o, x, y: o.separable_conv(_batch(x, o), _DEPTHWISE, _POINTWISE),
         lambda x, y: _conv(_depthwise(_batch(x), _DEPTHWISE), _POINTWISE), kinds=("float", "empty", "int")),
    case("conv_transpose", lambda o, x, y: o.conv_transpose(_batch(x, o), np.swapaxes(_KERNEL, 1, 2)),
         lambda x, y: _conv_transpose(_batch(x), np.swapaxes(_KERNEL, 1, 2)), kinds=("float", "empty", "int")),
    case("max_pool", lambda o, x, y: (o.max_pool(_batch(x, o), 2), o.max_pool(_batch(x, o), 2, 1, "same")),
         lambda x, y: (np.max(_windows_of(_f(_batch(x)), 2, 2), 2),
                       np.max(_windows_of(np.pad(_f(_batch(x)), ((0, 0), (0, 1), (0, 0)), constant_values=-INF),
                                          2), 2)), kinds=("float", "empty", "int"), **ANY_ZERO),
    case("average_pool", lambda o, x, y: (o.average_pool(_batch(x, o), 2), o.average_pool(_batch(x, o), 3, 1)),
         lambda x, y: (np.mean(_windows_of(_f(_batch(x)), 2, 2), 2), np.mean(_windows_of(_f(_batch(x)), 3), 2)),
         kinds=("float",)),
    case("max_pool2d", lambda o, x, y: o.max_pool2d(_batch(x, o)[..., None], 2),
         lambda x, y: np.max(np.lib.stride_tricks.sliding_window_view(_f(_batch(x)), (2, 2), axis=(1, 2))[
             :, ::2, ::2], (-2, -1))[..., None], kinds=("float", "int"), **ANY_ZERO),
    case("dot_product_attention",
         lambda o, x, y: (o.dot_product_attention(x[None, :, None], y[None, :, None], x[None, :, None]),
                          o.dot_product_attention(x[None, :, None], y[None, :, None], x[None, :, None],
                                                  mask=_ATTENTION_MASK[:len(x), :len(x)])),
         lambda x, y: (_attention(x[None, :, None], y[None, :, None], x[None, :, None]),
                       _attention(x[None, :, None], y[None, :, None], x[None, :, None],
                                  _ATTENTION_MASK[:len(x), :len(x)])), kinds=("float", "int")),
]

# --- core: control flow, slices, scatter, casts -------------------------------------------------------------------
def _scatter(indices, values, shape):
    out = np.zeros(shape, values.dtype)
    np.add.at(out, tuple(indices.T), values)
    return out


def _scatter_update(x, indices, updates):
    out = x.copy()
    out[tuple(indices.T)] = updates
    return out


def _scan(x):
    carry, ys = np.zeros_like(x[0]), []
    for row in x:
        ys.append(carry * row)
        carry = carry + row
    return carry, np.stack(ys) if ys else np.zeros_like(x)


_POINTS = np.array([[0, 1], [1, 0], [0, 1]], np.int32)  # (0, 1) twice: a scatter adds the two


CORE = [
    unary("stop_gradient", lambda x: x, floating=False),
    case("convert_to_tensor", lambda o, x, y: (o.convert_to_tensor(x), o.convert_to_tensor([NAN, -INF, -0.0]),
                                               o.convert_to_tensor(x, "float32")),
         lambda x, y: (x, np.array([NAN, -INF, -0.0]), x.astype(np.float32))),
    case("is_tensor", lambda o, x, y: (o.is_tensor(x), o.is_tensor(np.asarray(1.0))), lambda x, y: (True, False)),
    case("saturate_cast", lambda o, x, y: o.saturate_cast(o.where(o.isnan(x), 0.0, x), "int8"),
         lambda x, y: np.clip(np.nan_to_num(x, nan=0.0, posinf=127, neginf=-128), -128, 127).astype(np.int8),
         kinds=FLOATS, variant="float"),
    case("saturate_cast", lambda o, x, y: (o.saturate_cast(x * 100, "int8"), o.saturate_cast(y, "uint8")),
         lambda x, y: (np.clip(x.astype(np.int64) * 100, -128, 127).astype(np.int8),
                       np.clip(y, 0, 255).astype(np.uint8)), kinds=("int",), variant="int"),
    case("slice", lambda o, x, y: (o.slice(x, (1, 0), (1, 2)), o.slice(x, (0, 0), (2, 0))),
         lambda x, y: (x[1:2, 0:2], x[0:2, 0:0]), kinds=("float", "int", "bool")),
    case("slice_update", lambda o, x, y: o.slice_update(x, (1, 1), y[:1, :2]),
         lambda x, y: np.concatenate([x[:1], np.concatenate([x[1:2, :1], y[:1, :2].astype(x.dtype), x[1:2, 3:]],
                                                            1), x[2:]]), kinds=("float", "int", "bool")),
    case("scatter", lambda o, x, y: o.scatter(_POINTS, x[0, :3], (2, 2)),
         lambda x, y: _scatter(_POINTS, x[0, :3], (2, 2)), kinds=("float", "int")),
    case("scatter_update", lambda o, x, y: o.scatter_update(x, _POINTS[:2], y[0, :2]),
         lambda x, y: _scatter_update(x, _POINTS[:2], y[0, :2]), kinds=("float", "int", "bool")),
    case("cond", lambda o, x, y: (o.cond(x[0, 0] > 0, lambda: x * 2, lambda: -x), o.cond(True, lambda: y, lambda: x)),
         lambda x, y: (x * 2 if x[0, 0] > 0 else -x, y), kinds=("float", "int")),
    case("switch", lambda o, x, y: (o.switch(1, [lambda a: a, lambda a: a * 2], x), o.switch(7, [lambda a: a,
                                                                                                  lambda a: -a], x)),
         lambda x, y: (x * 2, -x), kinds=NUMERIC),
    case("map", lambda o, x, y: o.map(lambda row: o.sum(row), x), lambda x, y: np.sum(x, -1, dtype=_sum_dtype(x))),
    case("vectorized_map", lambda o, x, y: o.vectorized_map(lambda row: o.max(row, initial=-INF) * 1.0, x),
         lambda x, y: np.max(_f(x), -1, initial=-INF), kinds=FLOATS, **ANY_ZERO),
    case("fori_loop", lambda o, x, y: o.fori_loop(0, 3, lambda i, v: v * 2 + i, x),
         lambda x, y: ((x * 2 + 0) * 2 + 1) * 2 + 2, kinds=NUMERIC),
    case("while_loop", lambda o, x, y: o.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2), (0, x),
                                                  maximum_iterations=5),
         lambda x, y: (np.array(3, np.int32), x * 8), kinds=NUMERIC),
    case("associative_scan", lambda o, x, y: o.associative_scan(lambda a, b: a + b, x, axis=1),
         lambda x, y: np.cumsum(x, 1, dtype=x.dtype), kinds=NUMERIC),
    case("scan", lambda o, x, y: o.scan(lambda c, r: (c + r, c * r), o.zeros_like(x[0]), x),
         lambda x, y: _scan(x), kinds=NUMERIC),
]

# --- training context ---------------------------------------------------------------------------------------------
TRAINING = [
    case("all_finite", lambda o, x, y: (o.all_finite([x, y]), o.all_finite([y])),
         lambda x, y: (np.asarray(np.isfinite(x).all() & np.isfinite(y).all()), np.asarray(np.isfinite(y).all()))),
]

# --- signals, statistics, function transformations ----------------------------------------------------------------
def _finite(o, x):
    """x with NaN and infinities as 0, by ``ops`` or NumPy ``o``."""
    return o.where(o.isfinite(x), x, 0.0)


def _complex_pair(z):
    return z.real, z.imag


SIGNALS = [
    # Which outputs of a transform a NaN or an infinity reaches, and as NaN or inf, depends on the FFT's algorithm
    # (TensorFlow's, XLA's and NumPy's differ): their inputs are the kinds' finite values, and zeros for the others.
    case("fft", lambda o, x, y: o.fft((_finite(o, x), _finite(o, y))),
         lambda x, y: _complex_pair(np.fft.fft(_finite(np, x) + 1j * _finite(np, y))), kinds=("float",),
         **ANY_ZERO),
    case("fft2", lambda o, x, y: o.fft2((_finite(o, x), _finite(o, y))),
         lambda x, y: _complex_pair(np.fft.fft2(_finite(np, x) + 1j * _finite(np, y))),
         kinds=("float",), **ANY_ZERO),
    case("ifft2", lambda o, x, y: o.ifft2((_finite(o, x), _finite(o, y))),
         lambda x, y: _complex_pair(np.fft.ifft2(_finite(np, x) + 1j * _finite(np, y))),
         kinds=("float",), **ANY_ZERO),
    case("rfft", lambda o, x, y: o.rfft(_finite(o, x)), lambda x, y: _complex_pair(np.fft.rfft(_finite(np, x))),
         kinds=("float", "int"), **ANY_ZERO),
    case("irfft", lambda o, x, y: o.irfft((_finite(o, x), _finite(o, y))),
         lambda x, y: np.fft.irfft(_finite(np, x) + 1j * _finite(np, y)), kinds=("float",), **ANY_ZERO),
    case("extract_sequences", lambda o, x, y: o.extract_sequences(x, 2, 1),
         lambda x, y: np.lib.stride_tricks.sliding_window_view(x, 2, axis=-1), kinds=("float", "int", "bool")),
]
STATISTICS_AND_FUNCTIONS = [
    case("vectorize", lambda o, x, y: o.vectorize(lambda a, b: o.add(a, b) * 2)(x, y),
         lambda x, y: np.add(x, y) * 2, kinds=NUMERIC),
    case("custom_gradient", lambda o, x, y: o.custom_gradient(lambda a: (o.sqrt(a), lambda g: g))(x),
         lambda x, y: np.sqrt(_f(x)), kinds=("float", "empty", "int")),
]
