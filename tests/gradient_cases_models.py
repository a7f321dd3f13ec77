"""The gradient entries of the activations, losses, windows, core and control-flow, signal, statistics and
functional ops (see :mod:`tests.gradient_cases`)."""

from __future__ import annotations

import operator

import numpy as np
import scipy.signal
import scipy.special

from tests.gradient_cases_common import _from_table
from tests.test_ops_core import _cumulative, _scattered, _updated
from tests.test_ops_nn import COMPOSITES, _expm1_branch, _log_sigmoid, _relu6
from tests.test_ops_nn import INPUTS as NN_INPUTS
from tests.test_ops_windows import CASES as WINDOW_CASES
from tests.test_ops_windows import INPUTS as WINDOW_INPUTS
from tests.test_ops_windows import _used as _window_inputs_read
from tests.test_ops_windows import np_conv, np_pool
from toolkit.ops.nn import SELU_ALPHA, SELU_SCALE

#: Activations, losses, normalizations (ops_nn).
NN = {
    **{name: (("z",), None, reference) for name, reference in {
        "relu6": _relu6, "elu": _expm1_branch, "selu": lambda z: SELU_SCALE * _expm1_branch(z, SELU_ALPHA),
        "leaky_relu": lambda z: np.where(z >= 0, z, 0.2 * z), "log_sigmoid": _log_sigmoid,
        "hard_sigmoid": lambda z: _relu6(z + 3.0) / 6.0, "hard_silu": lambda z: z * _relu6(z + 3.0) / 6.0,
        "hard_swish": lambda z: z * _relu6(z + 3.0) / 6.0, "swish": lambda z: z * scipy.special.expit(z),
        "hard_tanh": lambda z: np.clip(z, -1.0, 1.0), "hard_shrink": lambda z: np.where(np.abs(z) > 0.5, z, 0.0),
        "soft_shrink": lambda z: np.sign(z) * np.maximum(np.abs(z) - 0.5, 0.0), "tanh_shrink": lambda z: z - np.tanh(z),
        "softsign": lambda z: z / (1.0 + np.abs(z)),
        "sparse_plus": lambda z: np.where(z <= -1, 0.0, np.where(z < 1, (z + 1) ** 2 / 4, z)),
        "sparse_sigmoid": lambda z: np.clip((z + 1.0) / 2.0, 0.0, 1.0)}.items()},
    "elu.alpha": (("z",), lambda o, z: o.elu(z, alpha=0.5), lambda z: _expm1_branch(z, 0.5)),
    "leaky_relu.slope": (("z",), lambda o, z: o.leaky_relu(z, negative_slope=0.01),
                         lambda z: np.where(z >= 0, z, 0.01 * z)),
    "celu": (("z",), lambda o, z: o.celu(z, 2.0), lambda z: np.maximum(z, 0.0) + 2.0 * np.expm1(np.minimum(z, 0) / 2)),
    "threshold": (("z",), lambda o, z: o.threshold(z, 0.5, -2.0), lambda z: np.where(z > 0.5, z, -2.0)),
    "squareplus": (("z",), lambda o, z: o.squareplus(z, b=3), lambda z: (z + np.sqrt(z * z + 3.0)) / 2.0),
}


def _nn_used(name: str) -> list[str]:
    """The float inputs a composite of tests/test_ops_nn.py reads: those that move its reference."""
    moved = {n: v + 1.0 for n, v in NN_INPUTS.items() if v.dtype.kind == "f"}
    reference = COMPOSITES[name][1]
    return [n for n in moved if not np.array_equal(reference(NN_INPUTS), reference({**NN_INPUTS, n: moved[n]}))]


#: The losses and normalizations: every composite of tests/test_ops_nn.py (its variants of axes, from_logits,
#: clipping, mask_index), by op.
NN.update(_from_table("nn", COMPOSITES, NN_INPUTS, {
    "bce": "binary_crossentropy", "bce_clipped": "binary_crossentropy", "bce_logits": "binary_crossentropy",
    "cce": "categorical_crossentropy", "cce_axis0": "categorical_crossentropy",
    "cce_logits": "categorical_crossentropy", "scce": "sparse_categorical_crossentropy",
    "scce_logits": "sparse_categorical_crossentropy", "normalize": "normalize", "normalize_all": "normalize",
    "normalize_l3": "normalize", "normalize_l1_eps": "normalize", "rms": "rms_normalization",
    "rms_axes": "rms_normalization", "layer_norm": "layer_normalization", "layer_norm_axes": "layer_normalization",
    "batch_norm": "batch_normalization", "batch_norm_plain": "batch_normalization", "psnr": "psnr", "glu": "glu",
    "ctc_loss": "ctc_loss", "ctc_loss_blank_2": "ctc_loss", "sparsemax": "sparsemax",
    "sparsemax_rows": "sparsemax"}, _nn_used))
#: Convolution, pooling, attention (ops_windows): the cases of tests/test_ops_windows.py, by op.
WINDOWS = _from_table("windows", WINDOW_CASES, WINDOW_INPUTS, {
    "conv1d_same_stride": "conv", "conv2d_channels_first": "conv", "conv2d_grouped_strided": "conv",
    "conv3d_same": "conv", "conv2d_dilated": "conv", "depthwise1d_strided_dilated": "depthwise_conv",
    "depthwise2d_unequal_strides": "depthwise_conv", "depthwise3d": "depthwise_conv", "separable2d": "separable_conv",
    "separable1d_channels_first": "separable_conv", "conv_transpose1d_same_wide_stride": "conv_transpose",
    "conv_transpose2d_output_padding": "conv_transpose",
    "conv_transpose2d_same_output_padding_dilated": "conv_transpose", "conv_transpose3d": "conv_transpose",
    "max_pool1d_same": "max_pool", "max_pool2d": "max_pool", "max_pool3d_same": "max_pool",
    "average_pool2d_same": "average_pool", "average_pool3d_same_channels_first": "average_pool",
    "attention_gqa_bias_mask": "dot_product_attention", "attention_causal_scale": "dot_product_attention",
}, lambda name: _window_inputs_read([name]))
WINDOWS.update({
    "conv2d": (("windows:x2", "windows:k2"), lambda o, x, k: o.conv2d(x, k, "same"),
               lambda x, k: np_conv(x, k, 1, "same")),
    "max_pool2d": (("windows:p2",), lambda o, x: o.max_pool2d(x, 2), lambda x: np_pool(x, 2)),
})


def _scan(o, m, v):
    """A recurrence over m's rows: carry' = tanh(carry * row + v[:3]), outputs the carries."""
    return o.scan(lambda c, row: (o.tanh(c * row + v[:3]), c), v[2:], m)[1]


def _np_scan(m, v):
    carry, out = v[2:], []
    for row in m:
        out.append(carry)
        carry = np.tanh(carry * row + v[:3])
    return np.stack(out)


#: Control flow, slices, scatters, conversions (ops_core). Predicates and branch indices come from the data, so each
#: backend traces its conditional, not a Python branch.
CORE = {
    "associative_scan": (("v",), lambda o, v: o.associative_scan(operator.add, v), np.cumsum),
    "associative_scan.pairs": (("m",), lambda o, m: o.associative_scan(
        lambda a, b: (a[0] * b[0], b[0] * a[1] + b[1]), (o.sigmoid(m), m), axis=1, reverse=True)[1],
        lambda m: _cumulative(list(zip(scipy.special.expit(m.T), m.T))[::-1],
                              lambda a, b: (a[0] * b[0], b[0] * a[1] + b[1]))[::-1, 1].T),
    "associative_scan.multiply_reverse": (("x",), lambda o, x: o.associative_scan(o.multiply, x, reverse=True,
                                                                                  axis=1),
                                          lambda x: np.flip(np.cumprod(np.flip(x, 1), axis=1), 1)),
    "cond": (("x",), lambda o, x: o.cond(o.sum(x * x) > 0.0, lambda: o.tanh(x), lambda: x * 2.0), np.tanh),
    "convert_to_tensor": (("x",), None, lambda x: x),
    "fori_loop": (("v",), lambda o, v: o.fori_loop(1, 4, lambda i, a: a * 0.5 + o.cast(i, a.dtype) * a, v),
                  lambda v: v * 1.5 * 2.5 * 3.5),
    "map": (("x",), lambda o, x: o.map(lambda row: o.sum(row * row), x), lambda x: np.sum(x * x, axis=1)),
    "scan": (("m", "v"), _scan, _np_scan),
    # A running logaddexp from -1000: the engines' JAX softplus (logaddexp's log1p(exp(d)), rewritten) had a NaN
    # gradient for d < -709, where a branch it does not take overflows, and a loop is differentiated by JAX.
    "scan.logaddexp": (("m",), lambda o, m: o.scan(lambda c, row: (o.logaddexp(c, row),) * 2,
                                                   np.full(3, -1000.0), m)[1],
                       lambda m: np.logaddexp.accumulate(np.concatenate([np.full((1, 3), -1000.0), m]))[1:]),
    "scatter": (("v",), lambda o, v: o.scatter(np.array([[0, 1], [2, 3], [0, 1]]), v[:3], (3, 4)),
                lambda v: _scattered(np.zeros((3, 4)), np.array([[0, 1], [2, 3], [0, 1]]), v[:3])),
    "scatter_update": (("x", "v"), lambda o, x, v: o.scatter_update(x, np.array([[2, 1], [0, 3]]), v[:2]),
                       lambda x, v: _set(x, [[2, 1], [0, 3]], v[:2])),
    "scatter_update.add": (("x", "v"), lambda o, x, v: o.scatter_update(x, [[1, 2], [1, 2], [0, 3]], v[:3],
                                                                        reduction="add"),
                           lambda x, v: _scattered(x, np.array([[1, 2], [1, 2], [0, 3]]), v[:3])),
    "slice": (("t",), lambda o, t: o.slice(t, (1, 0, 2), (1, -1, 2)), lambda t: t[1:2, :, 2:4]),
    # A start past the end is clamped, as JAX's dynamic_slice clamps it: (1, 3) is (1, 2) here.
    "slice.clamped": (("x",), lambda o, x: o.slice(x, np.array([1, 3], np.int32), (2, 2)), lambda x: x[1:3, 2:4]),
    "slice_update.clamped": (("x", "v"), lambda o, x, v: o.slice_update(x, np.array([1, 3], np.int32),
                                                                        o.reshape(v[:4], (2, 2))),
                             lambda x, v: _updated(x, (1, 2), v[:4].reshape(2, 2))),
    "slice_update": (("x", "v"), lambda o, x, v: o.slice_update(x, (1, 1), o.reshape(v[:4], (2, 2))),
                     lambda x, v: _updated(x, (1, 1), v[:4].reshape(2, 2))),
    "switch": (("x",), lambda o, x: o.switch(o.cast(o.sum(x * x) > 0.0, "int32") * 2,
                                             [lambda a: a + 1.0, lambda a: a * a, lambda a: o.sin(a)], x), np.sin),
    "vectorized_map": (("t", "m"), lambda o, t, m: o.vectorized_map(lambda e: e[0] @ e[1],
                                                                    (t, o.broadcast_to(m, (2, 4, 3)))),
                       lambda t, m: t @ m),
    "while_loop": (("v",), lambda o, v: o.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, o.sin(a)),
                                                     (o.cast(o.sum(v) * 0.0, "int32"), v), maximum_iterations=5)[1],
                   lambda v: np.sin(np.sin(np.sin(v)))),
}


def _set(x, indices, values):
    out = x.copy()
    out[tuple(np.array(indices).T)] = values
    return out


def _complex_parts(z) -> list:
    return [z.real, z.imag]


def _np_stft(x, length, stride, fft, window):
    """Keras' stft (its NumPy backend): reflect-padded signal, sequences of fft points, the window centred."""
    x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(fft // 2, fft // 2)], mode="reflect")
    frames = np.stack([x[..., i:i + fft] for i in range(0, x.shape[-1] - fft + 1, stride)], axis=-2)
    if window is not None:
        frames = frames * np.pad(scipy.signal.get_window(window, length), ((fft - length) // 2,
                                                                           fft - length - (fft - length) // 2))
    return _complex_parts(np.fft.rfft(frames))


def _np_istft(real, imag, stride, fft):
    """The overlap-add of each sequence's inverse transform (no window), fft // 2 points dropped at each end."""
    frames = np.fft.irfft(real + 1j * imag, fft)
    out = np.zeros(frames.shape[:-2] + ((frames.shape[-2] - 1) * stride + fft,))
    for i in range(frames.shape[-2]):
        out[..., i * stride:i * stride + fft] += frames[..., i, :]
    return out[..., fft // 2:out.shape[-1] - fft // 2]


#: Fourier transforms and framing (ops_signal): (real, imag) pairs in and out.
SIGNAL = {
    "extract_sequences": (("x",), lambda o, x: o.extract_sequences(x, 2, 1),
                          lambda x: np.stack([x[:, i:i + 2] for i in range(3)], axis=1)),
    "fft": (("x", "y"), lambda o, x, y: o.fft((x, y)), lambda x, y: _complex_parts(np.fft.fft(x + 1j * y))),
    "fft2": (("t", "t"), lambda o, x, y: o.fft2((x, y)), lambda x, y: _complex_parts(np.fft.fft2(x + 1j * y))),
    "ifft2": (("t", "t"), lambda o, x, y: o.ifft2((x, y)), lambda x, y: _complex_parts(np.fft.ifft2(x + 1j * y))),
    "rfft": (("x",), lambda o, x: o.rfft(x, 6), lambda x: _complex_parts(np.fft.rfft(x, 6))),
    "irfft": (("x", "y"), lambda o, x, y: o.irfft((x, y)), lambda x, y: np.fft.irfft(x + 1j * y)),
    "stft": (("t",), lambda o, t: o.stft(t, 3, 2, 4, "hann"), lambda t: _np_stft(t, 3, 2, 4, "hann")),
    "istft": (("t", "t"), lambda o, x, y: o.istft((x, y), 6, 2, 6, window=None),
              lambda x, y: _np_istft(x, y, 2, 6)),
}

def _cube(x):
    """x**3 with its gradient written by hand: custom_gradient's machinery differentiates, not the engine."""
    return x * x * x, lambda upstream: upstream * 3.0 * x * x


#: Statistics (ops_statistics).
STATISTICS = {"corrcoef": (("x",), None, np.corrcoef)}
#: Function transformations (ops_functional): the transformed functions' gradients.
FUNCTIONAL = {
    "custom_gradient": (("x",), lambda o, x: o.custom_gradient(_cube)(x), lambda x: x ** 3),
    "vectorize": (("x", "y"), lambda o, x, y: o.vectorize(lambda a, b: a * o.sin(b))(x, y), lambda x, y: x * np.sin(y)),
    "vectorize.signature": (("x", "y"), lambda o, x, y: o.vectorize(lambda a, b: o.sum(a * b),
                                                                    signature="(n),(n)->()")(x, y[0]),
                            lambda x, y: x @ y[0]),
}
