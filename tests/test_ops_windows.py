"""The window ops (convolutions, pools, attention: :mod:`toolkit.ops.windows`) against NumPy on every backend,
float32 and float64, 1-D, 2-D and 3-D, both data formats; the typed refusals; the Theano family's C-linker graphs
with their gradients; and a sample against ``keras.ops`` where Keras is installed (the gradients of the cases:
tests/test_ops_gradients.py).

Each table of cases runs in one compiled function per backend and dtype (the Theano family compiles every graph)."""

from __future__ import annotations

import importlib.util
import itertools
import math

import numpy as np
import pytest

import toolkit
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, check_gradients, run
from toolkit.errors import ArgumentError, ShapeError

RNG = np.random.default_rng(11)


# --- NumPy references (channels last; TensorFlow's "same" placement) -----------------------------------------------
def _same(size, k, s, d=1):
    span = (k - 1) * d + 1
    total = max((-(-size // s) - 1) * s + span - size, 0)
    return total // 2, total - total // 2


def np_conv(x, k, strides=1, padding="valid", dilation=1, data_format="channels_last"):
    """Grouped, strided, dilated cross-correlation of ``x`` [n, *spatial, c] with ``k`` [*window, c / g, out]."""
    if data_format == "channels_first":
        return np.moveaxis(np_conv(np.moveaxis(x, 1, -1), k, strides, padding, dilation), -1, 1)
    rank = x.ndim - 2
    strides, dilation = _tuple(strides, rank), _tuple(dilation, rank)
    window, (cin, cout) = k.shape[:-2], k.shape[-2:]
    groups = x.shape[-1] // cin
    if padding == "same":
        pads = [_same(n, kk, s, d) for n, kk, s, d in zip(x.shape[1:-1], window, strides, dilation)]
        x = np.pad(x, [(0, 0), *pads, (0, 0)])
    out_sizes = [(n - (kk - 1) * d - 1) // s + 1 for n, kk, s, d in zip(x.shape[1:-1], window, strides, dilation)]
    out = np.zeros((x.shape[0], *out_sizes, cout))
    per = cout // groups
    for offset in itertools.product(*map(range, window)):
        part = x[(slice(None), *(slice(o * d, o * d + (m - 1) * s + 1, s)
                                 for o, d, m, s in zip(offset, dilation, out_sizes, strides)), slice(None))]
        for g in range(groups):
            out[..., g * per:(g + 1) * per] += part[..., g * cin:(g + 1) * cin] @ k[offset][:, g * per:(g + 1) * per]
    return out


def np_depthwise(x, k, strides=1, padding="valid", dilation=1, data_format="channels_last"):
    return np_conv(x, k.reshape(*k.shape[:-2], 1, -1), strides, padding, dilation, data_format)


def np_conv_transpose(x, k, strides, padding="valid", output_padding=None, dilation=1, data_format="channels_last"):
    """The gradient of a convolution for its input, by scattering: ``full[i * s + j * d] += x[i] k[j]``, then
    Keras' window of it (``keras/src/backend/common/backend_utils.py``)."""
    if data_format == "channels_first":
        return np.moveaxis(np_conv_transpose(np.moveaxis(x, 1, -1), k, strides, padding, output_padding, dilation),
                           -1, 1)
    rank = x.ndim - 2
    strides, dilation = _tuple(strides, rank), _tuple(dilation, rank)
    extra = _tuple(output_padding, rank) if output_padding is not None else (None,) * rank
    spans = [(kk - 1) * d + 1 for kk, d in zip(k.shape[:-2], dilation)]
    full = np.zeros((x.shape[0], *((n - 1) * s + sp for n, s, sp in zip(x.shape[1:-1], strides, spans)), k.shape[-2]))
    for i in itertools.product(*map(range, x.shape[1:-1])):
        for j in itertools.product(*map(range, k.shape[:-2])):
            at = tuple(a * s + b * d for a, b, s, d in zip(i, j, strides, dilation))
            full[(slice(None), *at)] += x[(slice(None), *i)] @ k[j].T
    window = []
    for n, s, sp, more in zip(x.shape[1:-1], strides, spans, extra):
        if padding == "valid":
            before, size = 0, (n - 1) * s + max(sp, s) if more is None else (n - 1) * s + sp + more
        else:
            total = s + sp - 2 if more is None else sp + sp % 2 - 2 + more
            before = sp - 1 - min(total // 2 + total % 2, sp - 1)
            size = (n - 1) * s + 1 + total - sp + 1
        window.append((before, size))
    out = np.zeros((x.shape[0], *(size for _, size in window), k.shape[-2]))
    kept = tuple(slice(0, min(size, f - b)) for (b, size), f in zip(window, full.shape[1:-1]))
    out[(slice(None), *kept)] = full[(slice(None), *(slice(b, b + size) for b, size in window))]
    return out


def np_pool(x, size, strides=None, padding="valid", kind="max", data_format="channels_last"):
    """Max (NaN propagating) or average (entries inside the input) pooling."""
    if data_format == "channels_first":
        return np.moveaxis(np_pool(np.moveaxis(x, 1, -1), size, strides, padding, kind), -1, 1)
    rank = x.ndim - 2
    size = _tuple(size, rank)
    strides = size if strides is None else _tuple(strides, rank)
    inside = np.ones(x.shape)
    if padding == "same":
        pads = [(0, 0), *(_same(n, k, s) for n, k, s in zip(x.shape[1:-1], size, strides)), (0, 0)]
        x = np.pad(x, pads, constant_values=-np.inf if kind == "max" else 0)
        inside = np.pad(inside, pads)
    out_sizes = [(n - k) // s + 1 for n, k, s in zip(x.shape[1:-1], size, strides)]
    out, count = np.zeros((x.shape[0], *out_sizes, x.shape[-1])), 0
    first = True
    for offset in itertools.product(*map(range, size)):
        key = (slice(None), *(slice(o, o + (m - 1) * s + 1, s) for o, m, s in zip(offset, out_sizes, strides)))
        if kind == "max":
            part = x[key]
            out = part if first else np.where(np.isnan(part) | (part > out), part, out)
        else:
            out, count = out + x[key], count + inside[key]
        first = False
    return out if kind == "max" else out / count


def np_attention(q, k, v, bias=None, mask=None, scale=None, is_causal=False):
    heads, kv_heads = q.shape[2], k.shape[2]
    k, v = np.repeat(k, heads // kv_heads, axis=2), np.repeat(v, heads // kv_heads, axis=2)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + bias
    allowed = np.ones(logits.shape, bool)
    if mask is not None:
        allowed &= mask.astype(bool)
    if is_causal:
        allowed &= np.tril(np.ones(logits.shape[-2:], bool))
    logits = np.where(allowed, logits, -0.7 * np.finfo(np.float64).max)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", weights, v)


def _tuple(value, rank):
    return (value,) * rank if isinstance(value, int) else tuple(value)


# --- inputs and cases ----------------------------------------------------------------------------------------------
INPUTS = {
    "x1": RNG.normal(size=(2, 9, 4)), "k1": RNG.normal(size=(3, 4, 6)) * 0.3,
    "x2": RNG.normal(size=(2, 7, 6, 4)), "k2": RNG.normal(size=(3, 2, 4, 6)) * 0.3,
    "x3": RNG.normal(size=(1, 5, 6, 4, 2)), "k3": RNG.normal(size=(2, 3, 2, 2, 3)) * 0.3,
    "x2cf": RNG.normal(size=(2, 4, 7, 6)),                       # channels first
    "g2": RNG.normal(size=(2, 2, 2, 6)) * 0.3,                   # 2 groups of 2 channels (of x2's 4)
    "dw1": RNG.normal(size=(2, 4, 2)) * 0.3, "dw2": RNG.normal(size=(3, 2, 4, 2)) * 0.3,
    "dw3": RNG.normal(size=(2, 2, 2, 2, 2)) * 0.3,
    "pw2": RNG.normal(size=(1, 1, 8, 5)) * 0.3, "pw1": RNG.normal(size=(1, 8, 3)) * 0.3,
    "t1": RNG.normal(size=(2, 4, 3)), "tk1": RNG.normal(size=(3, 5, 3)) * 0.3,
    "t2": RNG.normal(size=(2, 3, 4, 3)), "tk2": RNG.normal(size=(2, 3, 5, 3)) * 0.3,
    "t3": RNG.normal(size=(1, 2, 3, 2, 2)), "tk3": RNG.normal(size=(2, 2, 3, 3, 2)) * 0.3,
    "q": RNG.normal(size=(2, 5, 4, 3)), "k": RNG.normal(size=(2, 6, 2, 3)), "v": RNG.normal(size=(2, 6, 2, 2)),
    "kf": RNG.normal(size=(2, 6, 4, 3)), "vf": RNG.normal(size=(2, 6, 4, 2)),
    "bias": RNG.normal(size=(1, 4, 5, 6)),
    "mask": RNG.random(size=(2, 1, 5, 6)) > 0.3,
    "p1": RNG.normal(size=(2, 9, 3)), "p2": RNG.normal(size=(2, 7, 6, 3)), "p3": RNG.normal(size=(1, 5, 4, 5, 2)),
}
INPUTS["nomask"] = np.zeros((1, 4, 5, 6), bool)
INPUTS["xint"], INPUTS["kint"] = RNG.integers(-3, 4, size=(2, 6, 5, 2)).astype(np.int32), \
    RNG.integers(-2, 3, size=(2, 2, 2, 3)).astype(np.int32)
INPUTS["pbool"] = RNG.random(size=(2, 6, 5, 2)) > 0.5
INPUTS["x2empty"], INPUTS["qempty"] = np.zeros((0, 7, 6, 4)), np.zeros((0, 5, 4, 3))
INPUTS["pnan"] = INPUTS["p2"].copy()
INPUTS["pnan"][0, 1, 1, 0], INPUTS["pnan"][1, 4, 2, 2], INPUTS["pnan"][0, 6, 5, 1] = np.nan, np.inf, -np.inf

#: name -> (the toolkit's op on Tensors or NumPy values, the NumPy reference), both of the inputs dict.
CASES = {
    "conv1d_valid": (lambda o, t: o.conv(t["x1"], t["k1"]), lambda t: np_conv(t["x1"], t["k1"])),
    "conv1d_same_stride": (lambda o, t: o.conv(t["x1"], t["k1"], 2, "same"),
                           lambda t: np_conv(t["x1"], t["k1"], 2, "same")),
    "conv1d_dilated_same": (lambda o, t: o.conv(t["x1"], t["k1"], padding="same", dilation_rate=2),
                            lambda t: np_conv(t["x1"], t["k1"], 1, "same", 2)),
    "conv2d_strided_same": (lambda o, t: o.conv(t["x2"], t["k2"], (2, 1), "same"),
                            lambda t: np_conv(t["x2"], t["k2"], (2, 1), "same")),
    "conv2d_dilated": (lambda o, t: o.conv(t["x2"], t["k2"], dilation_rate=(2, 1)),
                       lambda t: np_conv(t["x2"], t["k2"], 1, "valid", (2, 1))),
    "conv2d_channels_first": (lambda o, t: o.conv(t["x2cf"], t["k2"], 2, "same", "channels_first"),
                              lambda t: np_conv(t["x2cf"], t["k2"], 2, "same", data_format="channels_first")),
    "conv2d_grouped": (lambda o, t: o.conv(t["x2"], t["g2"], 1, "same"),
                       lambda t: np_conv(t["x2"], t["g2"], 1, "same")),
    "conv2d_grouped_strided": (lambda o, t: o.conv(t["x2"], t["g2"], 2),
                               lambda t: np_conv(t["x2"], t["g2"], 2)),
    "conv3d_same": (lambda o, t: o.conv(t["x3"], t["k3"], (1, 2, 1), "same"),
                    lambda t: np_conv(t["x3"], t["k3"], (1, 2, 1), "same")),
    "conv3d_channels_first": (lambda o, t: o.conv(o.transpose(t["x3"], (0, 4, 1, 2, 3)), t["k3"],
                                                  data_format="channels_first"),
                              lambda t: np.moveaxis(np_conv(t["x3"], t["k3"]), -1, 1)),
    "depthwise1d_strided_dilated": (lambda o, t: o.depthwise_conv(t["x1"], t["dw1"], 2, "same", dilation_rate=2),
                                    lambda t: np_depthwise(t["x1"], t["dw1"], 2, "same", 2)),
    "depthwise2d": (lambda o, t: o.depthwise_conv(t["x2"], t["dw2"], padding="same"),
                    lambda t: np_depthwise(t["x2"], t["dw2"], 1, "same")),
    "depthwise2d_strided_dilated": (lambda o, t: o.depthwise_conv(t["x2"], t["dw2"], (2, 2), "valid", None, 2),
                                    lambda t: np_depthwise(t["x2"], t["dw2"], 2, "valid", 2)),
    "depthwise2d_unequal_strides": (lambda o, t: o.depthwise_conv(t["x2"], t["dw2"], (1, 2), "same"),
                                    lambda t: np_depthwise(t["x2"], t["dw2"], (1, 2), "same")),
    "depthwise3d": (lambda o, t: o.depthwise_conv(t["x3"], t["dw3"], 1, "same"),
                    lambda t: np_depthwise(t["x3"], t["dw3"], 1, "same")),
    "separable2d": (lambda o, t: o.separable_conv(t["x2"], t["dw2"], t["pw2"], 2, "same"),
                    lambda t: np_conv(np_depthwise(t["x2"], t["dw2"], 2, "same"), t["pw2"])),
    "separable1d_channels_first": (
        lambda o, t: o.separable_conv(o.transpose(t["x1"], (0, 2, 1)), t["dw1"], t["pw1"], 1, "same",
                                      "channels_first", 2),
        lambda t: np.moveaxis(np_conv(np_depthwise(t["x1"], t["dw1"], 1, "same", 2), t["pw1"]), -1, 1)),
    "conv_transpose1d_valid": (lambda o, t: o.conv_transpose(t["t1"], t["tk1"], 2),
                               lambda t: np_conv_transpose(t["t1"], t["tk1"], 2)),
    "conv_transpose1d_same_wide_stride": (lambda o, t: o.conv_transpose(t["t1"], t["tk1"], 4, "same"),
                                          lambda t: np_conv_transpose(t["t1"], t["tk1"], 4, "same")),
    "conv_transpose2d_same": (lambda o, t: o.conv_transpose(t["t2"], t["tk2"], (2, 3), "same"),
                              lambda t: np_conv_transpose(t["t2"], t["tk2"], (2, 3), "same")),
    "conv_transpose2d_output_padding": (
        lambda o, t: o.conv_transpose(t["t2"], t["tk2"], 3, "valid", output_padding=(1, 2)),
        lambda t: np_conv_transpose(t["t2"], t["tk2"], 3, "valid", (1, 2))),
    "conv_transpose2d_same_output_padding_dilated": (
        lambda o, t: o.conv_transpose(t["t2"], t["tk2"], 2, "same", 1, dilation_rate=2),
        lambda t: np_conv_transpose(t["t2"], t["tk2"], 2, "same", 1, 2)),
    "conv_transpose2d_channels_first": (
        lambda o, t: o.conv_transpose(o.transpose(t["t2"], (0, 3, 1, 2)), t["tk2"], 2, data_format="channels_first"),
        lambda t: np.moveaxis(np_conv_transpose(t["t2"], t["tk2"], 2), -1, 1)),
    "conv_transpose3d": (lambda o, t: o.conv_transpose(t["t3"], t["tk3"], (2, 1, 2), "same"),
                         lambda t: np_conv_transpose(t["t3"], t["tk3"], (2, 1, 2), "same")),
    "max_pool1d_same": (lambda o, t: o.max_pool(t["p1"], 2, 2, "same"), lambda t: np_pool(t["p1"], 2, 2, "same")),
    "max_pool2d": (lambda o, t: o.max_pool(t["p2"], (3, 2), (2, 1)), lambda t: np_pool(t["p2"], (3, 2), (2, 1))),
    "max_pool2d_nan_inf_same": (lambda o, t: o.max_pool(t["pnan"], 3, 2, "same"),
                                lambda t: np_pool(t["pnan"], 3, 2, "same")),
    "max_pool2d_channels_first": (lambda o, t: o.max_pool(o.transpose(t["p2"], (0, 3, 1, 2)), 2, 1, "same",
                                                          "channels_first"),
                                  lambda t: np.moveaxis(np_pool(t["p2"], 2, 1, "same"), -1, 1)),
    "max_pool3d_same": (lambda o, t: o.max_pool(t["p3"], (2, 3, 2), (2, 2, 1), "same"),
                        lambda t: np_pool(t["p3"], (2, 3, 2), (2, 2, 1), "same")),
    "average_pool1d": (lambda o, t: o.average_pool(t["p1"], 3, 2),
                       lambda t: np_pool(t["p1"], 3, 2, kind="average")),
    "average_pool2d_same": (lambda o, t: o.average_pool(t["p2"], (2, 3), (3, 3), "same"),
                            lambda t: np_pool(t["p2"], (2, 3), (3, 3), "same", "average")),
    "average_pool2d_nan_inf": (lambda o, t: o.average_pool(t["pnan"], 2, 1),
                               lambda t: np_pool(t["pnan"], 2, 1, kind="average")),
    "average_pool3d_same_channels_first": (
        lambda o, t: o.average_pool(o.transpose(t["p3"], (0, 4, 1, 2, 3)), 2, (1, 2, 2), "same", "channels_first"),
        lambda t: np.moveaxis(np_pool(t["p3"], 2, (1, 2, 2), "same", "average"), -1, 1)),
    "conv2d_int_inputs": (lambda o, t: o.conv(t["xint"], t["kint"], 1, "same"),  # in the computation dtype
                          lambda t: np_conv(t["xint"].astype(float), t["kint"].astype(float), 1, "same")),
    "max_pool2d_bool": (lambda o, t: o.max_pool(t["pbool"], 2), lambda t: np_pool(t["pbool"].astype(float), 2)),
    "average_pool2d_int": (lambda o, t: o.average_pool(t["xint"], 2, 1, "same"),
                           lambda t: np_pool(t["xint"].astype(float), 2, 1, "same", "average")),
    "conv2d_empty_batch": (lambda o, t: o.conv(t["x2empty"], t["k2"], 2, "same"),
                           lambda t: np_conv(t["x2empty"], t["k2"], 2, "same")),
    "max_pool2d_empty_batch": (lambda o, t: o.max_pool(t["x2empty"], 2, padding="same"),
                               lambda t: np_pool(t["x2empty"], 2, padding="same")),
    "attention_empty_batch": (lambda o, t: o.dot_product_attention(t["qempty"], t["k"][:0], t["v"][:0]),
                              lambda t: np_attention(t["qempty"], t["k"][:0], t["v"][:0])),
    "attention_gqa_bias_mask": (lambda o, t: o.dot_product_attention(t["q"], t["k"], t["v"], t["bias"], t["mask"]),
                                lambda t: np_attention(t["q"], t["k"], t["v"], t["bias"], t["mask"])),
    "attention_causal_scale": (
        lambda o, t: o.dot_product_attention(t["q"], t["kf"], t["vf"], scale=0.7, is_causal=True,
                                             flash_attention=False),
        lambda t: np_attention(t["q"], t["kf"], t["vf"], scale=0.7, is_causal=True)),
    "attention_mqa_masked_rows": (  # key/value of one head; a fully masked row attends uniformly
        lambda o, t: o.dot_product_attention(t["q"], t["k"][:, :, :1], t["v"][:, :, :1], mask=t["nomask"]),
        lambda t: np_attention(t["q"], t["k"][:, :, :1], t["v"][:, :, :1], mask=t["nomask"])),
}


def _inputs(names, dtype):
    return {n: INPUTS[n].astype(dtype) if INPUTS[n].dtype.kind == "f" else INPUTS[n] for n in names}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_window_ops_equal_numpy(backend, dtype):
    """Every case in one compiled function: values, shapes and dtypes against the float64 NumPy references."""
    names = sorted({n for n in INPUTS})
    results = run(backend, lambda ops, **t: {name: fn(ops, t) for name, (fn, _) in CASES.items()},
                  _inputs(names, dtype), dtype)
    tolerance = FLOAT32_RTOL * 10 if dtype == "float32" else FLOAT64_RTOL
    for name, (_, reference) in CASES.items():
        expected, got = reference(INPUTS), np.asarray(results[name])
        assert got.shape == expected.shape, (name, got.shape, expected.shape)
        assert got.dtype == np.dtype(dtype), (name, got.dtype)
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=name)


def _group(names):
    """The toolkit function and NumPy reference of a gradient group, and the inputs they read."""
    used = _used(names)

    def fn(ops, **t):
        return ops.concatenate([ops.reshape(CASES[name][0](ops, t), (-1,)) for name in names], axis=0)

    def reference(**t):
        return np.concatenate([CASES[name][1]({**INPUTS, **t}).reshape(-1) for name in names])

    return fn, reference, {n: INPUTS[n] for n in used}


def _used(names) -> list[str]:
    """The inputs the cases' references read."""
    seen = set()

    class Recording(dict):
        def __getitem__(self, key):
            seen.add(key)
            return super().__getitem__(key)

    for name in names:
        CASES[name][1](Recording(INPUTS))
    return sorted(seen)


#: Cases Keras' TensorFlow backend cannot run on a CPU (its kernels refuse them): channels-first 2-D convolutions and
#: transposed ones, depthwise strides that differ per axis, 3-D depthwise convolutions, dilated transposed
#: convolutions, float64 3-D pools, integer and boolean pools, empty batches, and key/value of one head; and where it
#: differs from Keras' JAX and NumPy backends, which the toolkit follows: its max_pool drops NaN. The references of
#: these are checked against Keras where it runs a case of the same kind.
KERAS_TF_REFUSES = {"conv2d_channels_first", "depthwise2d_unequal_strides", "depthwise3d",
                    "conv_transpose2d_same_output_padding_dilated", "conv_transpose2d_channels_first",
                    "max_pool3d_same", "average_pool3d_same_channels_first", "attention_mqa_masked_rows",
                    "max_pool2d_bool", "average_pool2d_int", "conv2d_empty_batch", "attention_empty_batch",
                    "max_pool2d_nan_inf_same"}
#: Keras on TensorFlow rounds max_pool's output and the attention softmax through float32.
KERAS_FLOAT32 = {"max_pool2d": 1e-6, "max_pool2d_nan_inf_same": 1e-6, "max_pool2d_empty_batch": 1e-6,
                 "attention_gqa_bias_mask": 1e-6, "attention_causal_scale": 1e-6}


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
@pytest.mark.parametrize("name", sorted(set(CASES) - KERAS_TF_REFUSES))
def test_numpy_references_are_keras_ops(name):
    """The references above are what keras.ops computes (float64, Keras' TensorFlow backend), with the same call:
    the toolkit's cases are written against ``ops`` and run here with ``keras.ops`` in its place, so the toolkit's
    ops, which equal the references, have Keras' signatures and semantics."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    fn, reference = CASES[name]
    tolerance = KERAS_FLOAT32.get(name, 1e-10)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(fn(keras.ops, dict(INPUTS))), reference(INPUTS),
                               rtol=tolerance, atol=tolerance, equal_nan=True)


x2, k2 = INPUTS["x2"], INPUTS["k2"]
#: Calls refused on every backend while the model is traced: (call, error type, part of the message).
REFUSALS = [
    (lambda o: o.conv(x2, k2, strides=2, dilation_rate=2), ArgumentError, "above 1 together are not supported"),
    (lambda o: o.conv(x2, k2, padding="full"), ArgumentError, "padding must be one of"),
    (lambda o: o.conv(x2, k2, data_format="NHWC"), ArgumentError, "data_format must be one of"),
    (lambda o: o.conv(x2, k2, strides=(1, 2, 1)), ArgumentError, "strides must be an int >= 1 or 2 of them"),
    (lambda o: o.conv(x2, k2, dilation_rate=0), ArgumentError, "dilation_rate must be an int >= 1"),
    (lambda o: o.conv(x2[0], k2), ShapeError, "4-D kernel needs 4-D inputs"),
    (lambda o: o.conv(x2[:, :, :, :3], k2), ShapeError, "must be a multiple of the kernel's 4 input channels"),
    (lambda o: o.conv(x2, INPUTS["g2"][..., :5]), ShapeError, "output channels must be a multiple of the 2 groups"),
    (lambda o: o.conv(x2[:, :2], k2), ShapeError, "smaller than the window"),
    (lambda o: o.conv(x2[0, 0], k2[0, 0]), ShapeError, "rank 3, 4 or 5"),
    (lambda o: o.depthwise_conv(x2, INPUTS["dw2"][:, :, :3]), ShapeError, "must equal the inputs' 4"),
    (lambda o: o.conv_transpose(INPUTS["t2"], INPUTS["tk2"][..., :2], 2), ShapeError, "must equal the inputs' 3"),
    (lambda o: o.conv_transpose(INPUTS["t2"], INPUTS["tk2"], 2, output_padding=2), ArgumentError,
     "must be smaller than the strides"),
    (lambda o: o.max_pool(x2, 0), ArgumentError, "pool_size must be an int >= 1"),
    (lambda o: o.average_pool(x2, 2, padding="causal"), ArgumentError, "padding must be one of"),
    (lambda o: o.max_pool(x2[0, 0], 2), ShapeError, "rank 3, 4 or 5"),
    (lambda o: o.average_pool(x2, 8), ShapeError, "smaller than the window"),
    (lambda o: o.dot_product_attention(INPUTS["q"], INPUTS["kf"], INPUTS["vf"], flash_attention=True), ArgumentError,
     "flash_attention=True is not supported"),
    (lambda o: o.dot_product_attention(INPUTS["q"], INPUTS["kf"], INPUTS["vf"], attn_logits_soft_cap=20.0),
     ArgumentError, "attn_logits_soft_cap=20.0 is not supported"),
    (lambda o: o.dot_product_attention(INPUTS["q"][0], INPUTS["kf"][0], INPUTS["vf"][0]), ShapeError,
     "needs \\[batch, sequence, heads, depth\\] arrays"),
    (lambda o: o.dot_product_attention(INPUTS["q"], INPUTS["kf"][:, :, :3], INPUTS["vf"][:, :, :3]), ShapeError,
     "a multiple of theirs"),
]


def test_window_op_refusals_are_typed(backend):
    """Each refusal is the toolkit's typed error, raised while the function is traced, on every backend."""
    for call, error, message in REFUSALS:
        with pytest.raises(error, match=message):
            run(backend, lambda ops, call=call: call(ops), {})


#: One case of each kind of Theano-family C-linker graph: the im2col convolution (grouped here), the slice-chain
#: pools, and the transposed convolution that runs its JAX function on the host. Few and 2-D: each new C graph
#: compiles for seconds on a cold cache (1-D and 3-D im2col and pools are the same code with other index tuples).
C_LINKER_CASES = ["conv2d_grouped_strided", "conv_transpose2d_output_padding", "max_pool2d", "average_pool2d_same"]
#: The C-linker gradients checked (the engine differentiates the im2col and slice graphs; the transposed convolution's
#: gradient is the JAX function checked under the JAX linker).
C_LINKER_GRADIENTS = ["conv2d_grouped_strided", "max_pool2d"]


@pytest.mark.parametrize("engine", ["aesara", "pytensor"])
def test_theano_c_linker_window_ops_equal_numpy_with_gradients(engine):
    """The C linker's own graphs (not the JAX linker's XLA ops): values in one function, and gradients."""
    if engine not in toolkit.available_backends():
        pytest.skip(f"{engine} is not installed")
    backend = toolkit.get_backend(engine, linker="c")
    inputs = _inputs(_used(C_LINKER_CASES), "float64")
    results = run(backend, lambda ops, **t: {name: CASES[name][0](ops, t) for name in C_LINKER_CASES}, inputs)
    for name in C_LINKER_CASES:
        np.testing.assert_allclose(results[name], CASES[name][1](INPUTS), rtol=FLOAT64_RTOL, atol=FLOAT64_RTOL,
                                   equal_nan=True, err_msg=name)
    fn, reference, inputs = _group(C_LINKER_GRADIENTS)
    check_gradients(backend, fn, reference, inputs)
