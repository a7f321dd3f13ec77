"""The NumPy references of the activations, losses and normalizations (toolkit/ops/nn.py) and the tables
tests/test_ops_nn.py runs: each activation's reference, the inputs that reach its special values and its kinks (with
JAX's gradients there), and each composite's op call beside its reference."""

from __future__ import annotations

import itertools

import numpy as np

from toolkit.ops.nn import EPSILON, SELU_ALPHA, SELU_SCALE


# --- NumPy references (Keras' formulas: its NumPy backend, JAX's for the kinks and for logits) ---------------------
def _expm1_branch(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _relu6(x):
    return np.minimum(np.maximum(x, 0.0), 6.0)


def _sparsemax(x, axis=-1):
    """The projection onto the simplex by sorting (Martins and Astudillo, 2016, algorithm 1)."""
    z = np.moveaxis(x, axis, -1)
    ordered = -np.sort(-z, axis=-1)
    ranks = np.arange(1, z.shape[-1] + 1)
    cumulative = np.cumsum(ordered, axis=-1)
    size = np.sum(1 + ranks * ordered > cumulative, axis=-1, keepdims=True)
    tau = (np.take_along_axis(cumulative, size - 1, axis=-1) - 1) / size
    return np.moveaxis(np.maximum(z - tau, 0.0), -1, axis)


def _glu(x, axis=-1):
    first, second = np.split(x, 2, axis=axis)
    return first / (1.0 + np.exp(-second))


#: name: (the toolkit's call, the NumPy reference); elementwise activations of one array.
ACTIVATIONS = {
    "relu6": (lambda ops, x: ops.relu6(x), _relu6),
    "elu": (lambda ops, x: ops.elu(x), _expm1_branch),
    "elu_alpha": (lambda ops, x: ops.elu(x, alpha=0.5), lambda x: _expm1_branch(x, 0.5)),
    "selu": (lambda ops, x: ops.selu(x), lambda x: SELU_SCALE * _expm1_branch(x, SELU_ALPHA)),
    "celu": (lambda ops, x: ops.celu(x, 2.0),
             lambda x: np.maximum(x, 0.0) + 2.0 * np.expm1(np.minimum(x, 0.0) / 2.0)),
    "leaky_relu": (lambda ops, x: ops.leaky_relu(x), lambda x: np.where(x >= 0, x, 0.2 * x)),
    "leaky_relu_slope": (lambda ops, x: ops.leaky_relu(x, negative_slope=0.01),
                         lambda x: np.where(x >= 0, x, 0.01 * x)),
    "log_sigmoid": (lambda ops, x: ops.log_sigmoid(x), _log_sigmoid),
    "hard_sigmoid": (lambda ops, x: ops.hard_sigmoid(x), lambda x: _relu6(x + 3.0) / 6.0),
    "hard_silu": (lambda ops, x: ops.hard_silu(x), lambda x: x * _relu6(x + 3.0) / 6.0),
    "hard_swish": (lambda ops, x: ops.hard_swish(x), lambda x: x * _relu6(x + 3.0) / 6.0),
    "swish": (lambda ops, x: ops.swish(x), lambda x: x / (1.0 + np.exp(-x))),
    "hard_tanh": (lambda ops, x: ops.hard_tanh(x), lambda x: np.clip(x, -1.0, 1.0)),
    "hard_shrink": (lambda ops, x: ops.hard_shrink(x), lambda x: np.where(np.abs(x) > 0.5, x, 0.0)),
    "soft_shrink": (lambda ops, x: ops.soft_shrink(x, threshold=1.0),
                    lambda x: np.where(x > 1.0, x - 1.0, np.where(x < -1.0, x + 1.0, 0.0))),
    "tanh_shrink": (lambda ops, x: ops.tanh_shrink(x), lambda x: x - np.tanh(x)),
    "threshold": (lambda ops, x: ops.threshold(x, 0.5, -2.0), lambda x: np.where(x > 0.5, x, -2.0)),
    "softsign": (lambda ops, x: ops.softsign(x), lambda x: x / (1.0 + np.abs(x))),
    "sparse_plus": (lambda ops, x: ops.sparse_plus(x),
                    lambda x: np.where(x <= -1, 0.0, np.where(x < 1, (x + 1) ** 2 / 4, x))),
    "sparse_sigmoid": (lambda ops, x: ops.sparse_sigmoid(x), lambda x: np.clip((x + 1.0) / 2.0, 0.0, 1.0)),
    "squareplus": (lambda ops, x: ops.squareplus(x, b=3), lambda x: (x + np.sqrt(x * x + 3.0)) / 2.0),
}

#: Values with NaN, infinities, kinks and both tails (where stable formulas matter).
SPECIAL = np.array([np.nan, -np.inf, -800.0, -40.0, -6.0, -3.0, -2.5, -1.0, -0.5, -1e-10, 0.0, 1e-10, 0.5, 1.0, 2.5,
                    3.0, 6.0, 7.0, 40.0, 800.0, np.inf])
#: Points away from every kink, for central differences.
SMOOTH = np.array([-7.0, -3.6, -2.2, -1.3, -0.8, -0.3, 0.2, 0.7, 1.4, 2.7, 4.6, 6.4, 9.0])
#: JAX's gradients (jax.nn, the same in jax 0.4.30 and 0.10) at the kinks: name: [(x, dy/dx)].
KINKS = {
    "relu6": [(0.0, 0.0), (6.0, 0.0)], "leaky_relu": [(0.0, 1.0)], "elu": [(0.0, 1.0)], "elu_alpha": [(0.0, 0.5)],
    "selu": [(0.0, SELU_SCALE * SELU_ALPHA)], "celu": [(0.0, 1.0)], "hard_tanh": [(-1.0, 1.0), (1.0, 1.0)],
    "hard_sigmoid": [(-3.0, 0.0), (3.0, 0.0)], "hard_silu": [(-3.0, 0.0), (3.0, 1.0)],
    "sparse_sigmoid": [(-1.0, 0.25), (1.0, 0.25)], "sparse_plus": [(-1.0, 0.0), (1.0, 1.0)],
    "soft_shrink": [(-1.0, 0.0), (1.0, 0.0)], "hard_shrink": [(-0.5, 0.0), (0.5, 0.0)], "threshold": [(0.5, 0.0)],
    "softsign": [(0.0, 1.0)], "log_sigmoid": [(0.0, 0.5)],
}


# --- losses, normalizations and the other composites ----------------------------------------------------------------
def _upper(dtype="float64"):
    """The upper clip bound of the probabilities, ``1 - EPSILON`` rounded to the computation dtype."""
    return float(np.asarray(1 - EPSILON, dtype))


def _bce(target, output, dtype="float64"):
    output = np.clip(output, EPSILON, _upper(dtype))
    return -(target * np.log(output) + (1 - target) * np.log(1 - output))


def _bce_logits(target, logits):
    return -target * _log_sigmoid(logits) - (1 - target) * _log_sigmoid(-logits)


def _cce(target, output, axis=-1, dtype="float64"):
    output = np.clip(output / output.sum(axis, keepdims=True), EPSILON, _upper(dtype))
    return -np.sum(target * np.log(output), axis=axis)


def _log_softmax(x, axis=-1):
    shifted = x - x.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def _one_hot(labels, classes):
    return (labels[..., None] == np.arange(classes)).astype(np.float64)


def _normalize(x, axis=-1, order=2, epsilon=EPSILON):
    norm = np.sum(np.abs(x) ** order, axis=axis, keepdims=True) ** (1 / order)
    return x / np.maximum(norm, epsilon)


def _ctc(target, logits, target_length, output_length, blank=0):
    """CTC losses by brute force: minus the log of the summed probability of every path (one class per step, of
    the first output_length steps) that spells the first target_length labels once repeats merge and blanks go."""
    losses = []
    for labels, scores, n, steps in zip(target, logits, target_length, output_length):
        logp = _log_softmax(scores[:steps])
        total = 0.0
        for path in itertools.product(range(scores.shape[-1]), repeat=int(steps)):
            spelled = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
            if spelled == list(labels[:n]):
                total += np.exp(sum(logp[t, c] for t, c in enumerate(path)))
        losses.append(-np.log(total))
    return np.array(losses)


def _layer_norm(x, gamma, beta, axis):
    mean = x.mean(axis, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis, keepdims=True) + EPSILON) * gamma + beta


_rng = np.random.default_rng(3)
#: Named inputs of the composites: probabilities, logits (some large), targets, images, statistics.
INPUTS = {
    "probs": _rng.uniform(0.02, 0.98, (4, 5)), "logits": _rng.normal(0, 3, (4, 5)) * np.array([1, 1, 1, 1, 20.0]),
    "soft": _rng.uniform(0, 1, (4, 5)), "image": _rng.normal(size=(2, 3, 4, 6)), "mean": _rng.normal(size=3),
    "variance": _rng.uniform(0.5, 2, 3), "gamma": _rng.normal(size=6), "beta": _rng.normal(size=6),
    "noisy": _rng.normal(size=(2, 3, 4, 6)), "labels": np.array([0, 4, 2, -1], np.int32),
    "ids": np.array([[0, 3], [2, 2], [-1, 5]], np.int32), "ctc_logits": _rng.normal(size=(3, 4, 3)),
    "ctc_labels": np.array([[1, 2], [1, 1], [2, 1]], np.int32), "ctc_label_lengths": np.array([2, 2, 1], np.int32),
    "ctc_output_lengths": np.array([4, 3, 2], np.int32),
}
#: name: (the toolkit's call on the inputs, the NumPy reference on the same dict); the reference gets float64.
COMPOSITES = {
    "bce": (lambda ops, t: ops.binary_crossentropy(t["soft"], t["probs"]), lambda t: _bce(t["soft"], t["probs"])),
    "bce_clipped": (lambda ops, t: ops.binary_crossentropy(t["soft"], t["logits"] / 10.0),
                    lambda t: _bce(t["soft"], t["logits"] / 10.0, t.get("dtype", "float64"))),
    "bce_logits": (lambda ops, t: ops.binary_crossentropy(t["soft"], t["logits"], from_logits=True),
                   lambda t: _bce_logits(t["soft"], t["logits"])),
    "cce": (lambda ops, t: ops.categorical_crossentropy(t["soft"], t["probs"]), lambda t: _cce(t["soft"], t["probs"])),
    "cce_axis0": (lambda ops, t: ops.categorical_crossentropy(t["soft"], t["probs"], False, 0),
                  lambda t: _cce(t["soft"], t["probs"], 0)),
    "cce_logits": (lambda ops, t: ops.categorical_crossentropy(t["soft"], t["logits"], from_logits=True, axis=0),
                   lambda t: -np.sum(t["soft"] * _log_softmax(t["logits"], 0), 0)),
    "scce": (lambda ops, t: ops.sparse_categorical_crossentropy(t["labels"], t["probs"]),
             lambda t: _cce(_one_hot(t["labels"], 5), t["probs"])),
    "scce_logits": (lambda ops, t: ops.sparse_categorical_crossentropy(ops.reshape(t["labels"], (4, 1)), t["logits"],
                                                                       from_logits=True),
                    lambda t: -np.sum(_one_hot(t["labels"], 5) * _log_softmax(t["logits"]), -1)),
    "normalize": (lambda ops, t: ops.normalize(t["image"]), lambda t: _normalize(t["image"])),
    "normalize_all": (lambda ops, t: ops.normalize(t["image"], axis=None),
                      lambda t: _normalize(t["image"], axis=None)),
    "normalize_l3": (lambda ops, t: ops.normalize(t["image"], axis=1, order=3),
                     lambda t: _normalize(t["image"], axis=1, order=3)),
    "normalize_l1_eps": (lambda ops, t: ops.normalize(t["image"] * 1e-3, axis=0, order=1, epsilon=0.01),
                         lambda t: _normalize(t["image"] * 1e-3, axis=0, order=1, epsilon=0.01)),
    "rms": (lambda ops, t: ops.rms_normalization(t["image"], t["gamma"]),
            lambda t: t["image"] / np.sqrt(np.mean(t["image"] ** 2, -1, keepdims=True) + EPSILON) * t["gamma"]),
    "rms_axes": (lambda ops, t: ops.rms_normalization(t["image"], axis=(1, -1)),
                 lambda t: t["image"] / np.sqrt(np.mean(t["image"] ** 2, (1, 3), keepdims=True) + EPSILON)),
    "layer_norm": (lambda ops, t: ops.layer_normalization(t["image"], t["gamma"], t["beta"]),
                   lambda t: _layer_norm(t["image"], t["gamma"], t["beta"], -1)),
    "layer_norm_axes": (lambda ops, t: ops.layer_normalization(t["image"], t["noisy"][0, 0], axis=(2, 3)),
                        lambda t: _layer_norm(t["image"], t["noisy"][0, 0], 0.0, (2, 3))),
    "batch_norm": (lambda ops, t: ops.batch_normalization(t["image"][:, :, :1, :3], t["mean"], t["variance"], axis=1,
                                                          offset=t["beta"][:3], scale=t["gamma"][:3], epsilon=1e-2),
                   lambda t: (t["image"][:, :, :1, :3] - t["mean"][:, None, None])
                   / np.sqrt(t["variance"][:, None, None] + 1e-2) * t["gamma"][:3, None, None]
                   + t["beta"][:3, None, None]),
    "batch_norm_plain": (lambda ops, t: ops.batch_normalization(t["image"][..., :3], t["mean"], t["variance"], -1),
                         lambda t: (t["image"][..., :3] - t["mean"]) / np.sqrt(t["variance"] + 1e-3)),
    "psnr": (lambda ops, t: ops.psnr(t["image"], t["noisy"], 2.0),
             lambda t: 20 * np.log10(2.0) - 10 * np.log10(np.mean((t["image"] - t["noisy"]) ** 2))),
    "glu": (lambda ops, t: ops.glu(t["image"], axis=2), lambda t: _glu(t["image"], 2)),
    "ctc_loss": (lambda ops, t: ops.ctc_loss(t["ctc_labels"], t["ctc_logits"], t["ctc_label_lengths"],
                                             t["ctc_output_lengths"]),
                 lambda t: _ctc(t["ctc_labels"], t["ctc_logits"], t["ctc_label_lengths"], t["ctc_output_lengths"])),
    "ctc_loss_blank_2": (lambda ops, t: ops.ctc_loss(t["ctc_labels"] - 1, t["ctc_logits"], t["ctc_label_lengths"],
                                                     t["ctc_output_lengths"], mask_index=2),
                         lambda t: _ctc(t["ctc_labels"] - 1, t["ctc_logits"], t["ctc_label_lengths"],
                                        t["ctc_output_lengths"], blank=2)),
    "sparsemax": (lambda ops, t: ops.sparsemax(t["logits"] / 4.0, axis=0), lambda t: _sparsemax(t["logits"] / 4.0, 0)),
    "sparsemax_rows": (lambda ops, t: ops.sparsemax(t["image"]), lambda t: _sparsemax(t["image"])),
}
#: The composites that are not differentiable in their float inputs at these points, or not float (multi_hot).
INTEGER_COMPOSITES = {
    "multi_hot": (lambda ops, t: ops.multi_hot(t["ids"], 6),
                  lambda t: np.array([[1, 0, 0, 1, 0, 0], [0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1]], np.float64)),
    "multi_hot_vector": (lambda ops, t: ops.multi_hot(t["labels"], num_classes=5, dtype="int32"),
                         lambda t: np.array([1, 0, 1, 0, 1], np.int32)),
    "multi_hot_axis0": (lambda ops, t: ops.multi_hot(t["ids"], 6, axis=0),
                        lambda t: _one_hot(t["ids"], 6).transpose(2, 0, 1).max(1)),
}
