"""A fit with BackupAndRestore that may SIGKILL itself, for the resume tests (tests/test_resume.py).

    python -m tests.backup_worker BACKEND DEVICES BACKUP_DIR OUT [--kill-at STEP] [--examples N]

Runs :func:`fit` (always the same call) on a model with batch normalization and dropout, with shuffling, validation
data and a metric; with ``--kill-at`` it SIGKILLs itself right after that step (its backup of that step, if due, is
written first). Without, it writes the trained state to ``OUT`` (see :func:`outcome`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal

import numpy as np

import toolkit
from toolkit import layers
from toolkit.nn.models import sparse_softmax_cross_entropy

RNG = np.random.default_rng(21)
X, Y = RNG.normal(size=(24, 6)), RNG.integers(0, 3, size=24)
VX, VY = RNG.normal(size=(7, 6)), RNG.integers(0, 3, size=7)
#: 4 epochs of 4 batches: 16 steps; a backup every 3 steps falls mid-epoch. With all 24 examples the batches are all
#: 6 examples; with 23 (``examples=23``) the last of each epoch is 5, a batch shape a resume may meet first.
EPOCHS, BATCH_SIZE, SAVE_FREQ = 4, 6, 3
STEPS = EPOCHS * -(-len(Y) // BATCH_SIZE)
#: The logical devices of a worker process: tests/conftest.py's MAX_DEVICES (not imported: it imports pytest).
LOGICAL_DEVICES = 4


def _init(rng):
    return {**layers.dense_init(rng, 6, 8, "d1"), **layers.batch_norm_init(rng, 8, "bn"),
            **layers.dense_init(rng, 8, 3, "d2")}


def _forward(ops, p, x):
    hidden = ops.relu(layers.batch_norm(ops, p, layers.dense(ops, p, x, "d1"), "bn"))
    return layers.dense(ops, p, layers.dropout(ops, hidden, 0.3), "d2")


MODEL = toolkit.Model(_init, _forward, sparse_softmax_cross_entropy(3), name="bn-dropout-mlp")


def trainer(backend, devices: int):
    return toolkit.DataParallel(MODEL, backend, devices, toolkit.optim.Adam(0.02), dtype="float64", seed=3)


def fit(trainer, backup_dir, callbacks=(), examples: int = len(Y)):
    """The one fit call every run makes (a rerun after a kill makes it again), on the first ``examples``."""
    backup = toolkit.callbacks.BackupAndRestore(backup_dir, save_freq=SAVE_FREQ)
    return trainer.fit(X[:examples], Y[:examples], epochs=EPOCHS, batch_size=BATCH_SIZE, validation_data=(VX, VY),
                       metrics=["accuracy"], verbose=0, callbacks=[backup, *callbacks])


def outcome(trainer, history) -> tuple[dict, dict]:
    """What must equal between runs: every array (parameters, optimizer and model state), and the counts, the RNG
    state and the history."""
    arrays = {**{f"param/{k}": v for k, v in trainer.params().items()},
              **{f"state/{k}": v for k, v in trainer.state().items()},
              **{f"{slot}/{k}": v for slot, values in trainer.optimizer_state().items() for k, v in values.items()}}
    facts = {"step": trainer.step_count, "epoch": trainer.epoch_count, "skipped": trainer.skipped_steps,
             "rng": trainer.rng.bit_generator.state, "history": history.history, "epochs": history.epoch}
    return arrays, json.loads(json.dumps(facts))


class _KillAt(toolkit.callbacks.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, step, logs):
        if step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backend")
    parser.add_argument("devices", type=int)
    parser.add_argument("backup_dir")
    parser.add_argument("out")
    parser.add_argument("--kill-at", type=int, default=None)
    parser.add_argument("--examples", type=int, default=len(Y))
    args = parser.parse_args()
    # As many logical devices as the test process has (tests/conftest.py), though fewer are used: TensorFlow's sums
    # can differ in the last bit with the number of logical CPU devices in the process.
    toolkit.use_logical_devices(LOGICAL_DEVICES)
    fitted = trainer(args.backend, args.devices)
    history = fit(fitted, args.backup_dir, [] if args.kill_at is None else [_KillAt(args.kill_at)], args.examples)
    arrays, facts = outcome(fitted, history)
    np.savez(args.out, **arrays)
    with open(f"{args.out}.json", "w") as file:
        json.dump(facts, file)


if __name__ == "__main__":
    main()
