"""Small models and data used across the tests."""

from __future__ import annotations

import contextlib

import numpy as np

import toolkit
from toolkit.nn.models import mlp, sparse_softmax_cross_entropy

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


def _dropout_forward(ops, params, x):
    from toolkit import layers

    return ops.matmul(layers.dropout(ops, ops.tanh(ops.matmul(x, params["w0"]) + params["b0"]), 0.5),
                      params["w1"]) + params["b1"]


#: SMALL_MLP with dropout (rate 0.5) on its hidden layer.
DROPOUT_MLP = toolkit.Model(SMALL_MLP.init, _dropout_forward, SMALL_MLP.loss, name="dropout-mlp")


def _sync_bn_init(rng):
    from toolkit import layers

    return {**SMALL_MLP.init(rng), **layers.batch_norm_init(rng, 8, "bn")}


def _sync_bn_forward(ops, params, x):
    from toolkit import layers

    h = layers.batch_norm(ops, params, ops.matmul(x, params["w0"]) + params["b0"], "bn", synchronized=True)
    return ops.matmul(ops.tanh(h), params["w1"]) + params["b1"]


#: SMALL_MLP with synchronized batch normalization on its hidden layer.
SYNC_BN_MLP = toolkit.Model(_sync_bn_init, _sync_bn_forward, SMALL_MLP.loss, name="sync-bn-mlp")


def bn_digits_mlp() -> toolkit.Model:
    """A digits classifier (64 inputs, 10 classes) with per-replica batch normalization on its hidden layer: model
    state for ``multigpu bench --model tests.helpers:bn_digits_mlp``."""
    from toolkit import layers

    base = mlp([64, 16, 10], name="bn-digits-mlp")

    def init(rng):
        return {**base.init(rng), **layers.batch_norm_init(rng, 16, "bn")}

    def forward(ops, params, x):
        h = layers.batch_norm(ops, params, ops.matmul(x, params["w0"]) + params["b0"], "bn")
        return ops.matmul(ops.relu(h), params["w1"]) + params["b1"]

    return toolkit.Model(init, forward, base.loss, name="bn-digits-mlp")


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


def check_fused_step_follows_outside_writes(backend, n: int, path) -> None:
    """A backend's fused step (which may keep its own copy of the parameters between steps) equals the composed
    step through set_params, a skipped non-finite step and restore, with every replica equal."""
    from toolkit.tolerances import FLOAT64_ATOL

    x, y = batch(8)  # equal shards on 1, 2 and 4 devices
    fused = toolkit.DataParallel(SMALL_MLP, backend, n, toolkit.optim.Adam(0.05), dtype="float64", nan_policy="skip")
    composed = toolkit.DataParallel(SMALL_MLP, backend, n, toolkit.optim.Adam(0.05), dtype="float64",
                                    nan_policy="skip")
    composed.fused = False
    both = (fused, composed)

    def step():
        first, second = (t.step(x, y) for t in both)
        assert abs(first - second) <= FLOAT64_ATOL

    step()
    step()
    fused.save(path)
    step()
    huge = {k: np.full_like(v, 1e308) for k, v in fused.params().items()}  # logits overflow: NaN loss
    for t in both:
        t.set_params(huge)
    for t in both:
        t.step(x, y)
        assert t.skipped_steps == 1 and max_abs_diff(t.params(), huge) == 0
    for t in both:
        t.restore(path)
    for _ in range(3):
        step()
    assert max_abs_diff(fused.params(), composed.params()) <= FLOAT64_ATOL
    for slot, values in fused.optimizer_state().items():
        assert max_abs_diff(values, composed.optimizer_state()[slot]) <= FLOAT64_ATOL
    for replica in fused.replica_params():
        assert max_abs_diff(replica, fused.params()) == 0.0


@contextlib.contextmanager
def keras_in_float64(keras):
    """Keras' floatx and global dtype policy float64 inside the block, both restored after. Keras freezes its global
    dtype policy from floatx the first time any layer reads it (an earlier test may have), so both are set."""
    floatx, policy = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx("float64")
    keras.config.set_dtype_policy("float64")
    try:
        yield keras
    finally:
        keras.config.set_floatx(floatx)
        keras.config.set_dtype_policy(policy)
