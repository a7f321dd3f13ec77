"""Built-in models, written once with :class:`toolkit.nn.ops.Ops`: they run unchanged on every backend."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.nn.model import Model

ACTIVATIONS = ("relu", "tanh", "sigmoid")


def sparse_softmax_cross_entropy(num_classes: int):
    """Loss ``loss(ops, logits, labels)``: per-example cross-entropy of integer labels against softmax(logits)."""

    def loss(ops, logits, labels):
        return -ops.sum(ops.one_hot(labels, num_classes) * ops.log_softmax(logits, axis=-1), axis=-1)

    return loss


def mlp(sizes: Sequence[int], activation: str = "relu", name: str | None = None) -> Model:
    """A multi-layer perceptron classifier: dense layers of ``sizes`` (inputs first, classes last), ``activation``
    between them, logits out, sparse softmax cross-entropy as the loss.

    Weights use Glorot-uniform initialisation (Keras' default), biases start at 0; parameters are named
    ``w0, b0, w1, b1, ...``.
    """
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"mlp needs at least two sizes >= 1 (inputs and classes), got {list(sizes)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    layers = list(zip(sizes[:-1], sizes[1:]))

    def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
        params = {}
        for i, (fan_in, fan_out) in enumerate(layers):
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            params[f"w{i}"] = rng.uniform(-limit, limit, size=(fan_in, fan_out))
            params[f"b{i}"] = np.zeros(fan_out)
        return params

    def forward(ops, params, x):
        h = x
        for i in range(len(layers)):
            h = ops.matmul(h, params[f"w{i}"]) + params[f"b{i}"]
            if i < len(layers) - 1:
                h = getattr(ops, activation)(h)
        return h

    return Model(init, forward, sparse_softmax_cross_entropy(sizes[-1]),
                 name=name or f"mlp-{'-'.join(map(str, sizes))}")


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of rows whose largest logit is at the label."""
    return float(np.mean(np.argmax(logits, axis=-1) == np.asarray(labels)))
