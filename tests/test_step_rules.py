"""The training step's rules are written once (toolkit/training/rules.py): a rule added there reaches every path that
runs a step: the fused step (TensorFlow's tf.function, the Theano family's host step and its mesh over several
devices, padded shards included), the Theano family's C-linker step and the step composed per device."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO_FAMILY
from toolkit.tolerances import FLOAT64_ATOL
from toolkit.training import rules

RNG = np.random.default_rng(11)
#: 7 examples: uneven shards on 2 and 4 devices (padded on the Theano family's mesh), 2 micro-batches of 4 and 3.
X, Y = RNG.normal(size=(7, 3)), RNG.normal(size=7)
LEARNING_RATE = 0.1


def _init(rng):
    return {"w": rng.normal(size=(3,))}


def _squared_error(ops, outputs, y):
    return ops.square(outputs - y)


#: Linear regression: its loss and gradient are a line of NumPy each.
LINEAR = toolkit.Model(_init, lambda ops, p, x: ops.matmul(x, p["w"]), _squared_error, name="rules-linear",
                       rows_independent=True)


def _doubled(mean):
    def doubled_mean(ops, values, rows):  # a per-example weight of 2 on every loss and metric value
        return 2.0 * mean(ops, values, rows)

    return doubled_mean


def _halved(apply_update):
    def halved_update(ops, optimizer, params, grads, slots, step, checked=(), constraints=None):  # of new values
        new_params, new_slots, finite = apply_update(ops, optimizer, params, grads, slots, step, checked,
                                                     constraints)
        return {name: 0.5 * value for name, value in new_params.items()}, new_slots, finite

    return halved_update


def test_a_rule_added_to_the_step_reaches_every_path(backend_name, n_devices, monkeypatch):
    monkeypatch.setattr(rules, "_mean", _doubled(rules._mean))
    monkeypatch.setattr(rules, "apply_update", _halved(rules.apply_update))
    # The backend's fused step and the step composed per device; the C linker's own translation is its fused step
    # (shared variables, switch updates): its composed step is the JAX linker's, compiled again in C.
    paths = [(toolkit.get_backend(backend_name), micro_batches) for micro_batches in (1, 2)]
    if backend_name in THEANO_FAMILY and n_devices == 1:
        paths.append((toolkit.get_backend(backend_name, linker="c"), 1))
    for backend, micro_batches in paths:
        trainer = toolkit.DataParallel(LINEAR, backend, n_devices, toolkit.optim.SGD(LEARNING_RATE),
                                       dtype="float64")
        w = trainer.params()["w"]
        loss = trainer.step(X, Y, micro_batches=micro_batches)
        errors = X @ w - Y
        where = f"{backend!r}, {n_devices} device(s), {micro_batches} micro-batch(es)"
        # Every backend compiles a fused step for one micro-batch (uneven shards padded on the Theano family's
        # mesh: the model's rows are independent): a silent fall back to the composed step fails here.
        assert trainer.last_step_path == ("fused" if micro_batches == 1 else "composed"), where
        assert loss == pytest.approx(2 * np.mean(errors ** 2), abs=FLOAT64_ATOL), where
        expected = 0.5 * (w - LEARNING_RATE * 2 * (2 * X.T @ errors / len(Y)))
        np.testing.assert_allclose(trainer.params()["w"], expected, rtol=0, atol=FLOAT64_ATOL, err_msg=where)


#: Linear regression whose rows the model may mix (not ``rows_independent``): a padded shard is refused.
MIXING = toolkit.Model(_init, lambda ops, p, x: ops.matmul(x, p["w"]), _squared_error, name="rules-mixing")


def test_the_path_is_decided_once_per_batch_layout(backend_name):
    """The first step of a batch layout decides its path: where the model refused padded shards (the Theano
    family's mesh pads the uneven shards of 7 examples on 2 devices), that layout's steps are composed from then on
    without the fused step being traced again; an even batch still runs fused. The numbers are the same."""
    trainer = toolkit.DataParallel(MIXING, backend_name, 2, toolkit.optim.SGD(LEARNING_RATE), dtype="float64")
    reference = toolkit.DataParallel(MIXING, backend_name, 2, toolkit.optim.SGD(LEARNING_RATE), dtype="float64")
    reference.fused = False
    calls = []

    def counted(step):
        def call(*args):
            calls.append(len(args[1][0]["x"]))  # the first shard's rows
            return step(*args)
        return call

    assert trainer.wrap_fused_step(counted)
    padded = trainer.backend.equal_shards
    for expected_calls in (1, 1) if padded else (1, 2):
        assert trainer.step(X, Y) == pytest.approx(reference.step(X, Y), abs=FLOAT64_ATOL)
        assert trainer.last_step_path == ("composed" if padded else "fused")
        assert len(calls) == expected_calls  # padded: tried once, refused as it was traced, never again
    assert trainer.step(X[:6], Y[:6]) == pytest.approx(reference.step(X[:6], Y[:6]), abs=FLOAT64_ATOL)
    assert trainer.last_step_path == "fused" and reference.last_step_path == "composed"  # 3 + 3 rows: no padding
    np.testing.assert_allclose(trainer.params()["w"], reference.params()["w"], rtol=0, atol=FLOAT64_ATOL)
