"""Small models and data used across the tests."""

from __future__ import annotations

import numpy as np

import toolkit
from toolkit.models import mlp, sparse_softmax_cross_entropy

NUM_CLASSES = 3
FEATURES = 5


def _linear_init(rng):
    return {"w": rng.normal(size=(FEATURES, NUM_CLASSES)), "b": rng.normal(size=NUM_CLASSES) * 0.1}


def _linear_forward(ops, params, x):
    return ops.matmul(x, params["w"]) + params["b"]


#: Softmax regression: small enough to check gradients against a NumPy formula.
LINEAR = toolkit.Model(_linear_init, _linear_forward, sparse_softmax_cross_entropy(NUM_CLASSES), name="linear")

#: A small MLP with every activation kind exercised elsewhere.
SMALL_MLP = mlp([FEATURES, 8, NUM_CLASSES], activation="tanh", name="small-mlp")


def batch(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, FEATURES)), rng.integers(0, NUM_CLASSES, size=n)


def linear_gradient_numpy(params, x, y):
    """The exact mean cross-entropy gradient of softmax regression, in float64 NumPy."""
    logits = x @ params["w"] + params["b"]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    delta = (p - np.eye(NUM_CLASSES)[y]) / len(x)
    return {"w": x.T @ delta, "b": delta.sum(axis=0)}


def max_abs_diff(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)))) for k in a)


def max_abs(a: dict) -> float:
    return max(float(np.max(np.abs(v))) for v in a.values())
