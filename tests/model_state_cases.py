"""The models the model-state tests share: a dropout MLP and batch-normalized MLPs (per replica and synchronized),
their data, and how a test trains them (tests/test_model_state.py, tests/test_dropout.py)."""

from __future__ import annotations

import numpy as np

import toolkit
from toolkit import layers
from toolkit.nn.models import sparse_softmax_cross_entropy

RNG = np.random.default_rng(5)
X, Y = RNG.normal(size=(12, 6)), RNG.integers(0, 3, size=12)
STEPS = 3


def _dropout_init(rng):
    return {**layers.dense_init(rng, 6, 16, "d1"), **layers.dense_init(rng, 16, 3, "d2")}


def _dropout_forward(ops, p, x):
    h = layers.dropout(ops, ops.relu(layers.dense(ops, p, x, "d1")), 0.4)
    return layers.dense(ops, p, layers.dropout(ops, h, 0.25, noise_shape=(None, 1)), "d2")


def _bn_init(rng):
    return {**layers.dense_init(rng, 6, 8, "d1"), **layers.batch_norm_init(rng, 8, "bn"),
            **layers.dense_init(rng, 8, 3, "d2")}


def _bn_forward(ops, p, x):
    return layers.dense(ops, p, ops.relu(layers.batch_norm(ops, p, layers.dense(ops, p, x, "d1"), "bn")), "d2")


def _sync_bn_forward(ops, p, x):
    return layers.dense(ops, p, ops.relu(layers.batch_norm(ops, p, layers.dense(ops, p, x, "d1"), "bn",
                                                           synchronized=True)), "d2")


DROPOUT = toolkit.Model(_dropout_init, _dropout_forward, sparse_softmax_cross_entropy(3), name="dropout-mlp")
BATCH_NORM = toolkit.Model(_bn_init, _bn_forward, sparse_softmax_cross_entropy(3), name="bn-mlp")
SYNC_BATCH_NORM = toolkit.Model(_bn_init, _sync_bn_forward, sparse_softmax_cross_entropy(3), name="sync-bn-mlp")


def _train(model, backend, devices, fused=True, weights=None, steps=STEPS, **options):
    trainer = toolkit.DataParallel(model, backend, devices, toolkit.optim.Adam(0.01), dtype="float64", seed=7,
                                   weights=weights, **options)
    trainer.fused = fused
    return trainer, [trainer.step(X, Y) for _ in range(steps)]
