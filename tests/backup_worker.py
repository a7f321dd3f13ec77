"""A fit with BackupAndRestore that may SIGKILL itself, for the resume tests (tests/test_resume.py).

    python -m tests.backup_worker BACKEND DEVICES BACKUP_DIR OUT [--kill-at STEP | --chain S1,S2,...] [--examples N]

Runs :func:`fit` (always the same call) on a model with batch normalization and dropout, with shuffling, validation
data and a metric; with ``--kill-at`` it SIGKILLs itself right after that step (its backup of that step, if due, is
written first). Without, it writes the trained state to ``OUT`` (see :func:`outcome`). With ``--chain`` it runs a
whole chain of kills in forked processes on the C linker's one device (see :func:`chain`; DEVICES is ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import warnings

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


def _write(out: str, trained: tuple[dict, dict]) -> None:
    np.savez(out, **trained[0])
    with open(f"{out}.json", "w") as file:
        json.dump(trained[1], file)


def chain(backend: str, backup_dir: str, out: str, points: list[int], examples: int) -> None:
    """A chain of SIGKILLs at one compile's cost: the uninterrupted fit (written to ``OUT.straight.npz``); then for
    each point a forked process that runs the same fit on the trainer as it was before that fit (restored from a
    checkpoint of it) and SIGKILLs itself after the point, each resuming from the backup the last one left; then
    the same fit to the end (written to ``OUT``).

    Each killed run is a process of its own that shares nothing with the next but the files, as after a crash; it
    inherits the functions the first fit compiled, which a new process would compile again (8-10 s of CPU a process
    on the Theano family, measured). The Theano family compiles a function once per input shape, whatever was
    compiled before, and test_resume's new processes check that a new process computes the same. On the C linker
    (one device): a forked child must not call JAX, whose threads a fork does not copy (a child running the
    2-device step, a jax.jit over the devices, hung)."""
    fitted = trainer(toolkit.get_backend(backend, linker="c"), 1)
    first = toolkit.checkpoint.trainer_checkpoint(fitted)
    _write(f"{out}.straight.npz", outcome(fitted, fit(fitted, f"{backup_dir}.straight", examples=examples)))
    for point in points:
        with warnings.catch_warnings():  # JAX warns at a fork once it has started; the children do not call it
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
            child = os.fork()
        if child == 0:
            fitted.restore(first)
            fit(fitted, backup_dir, [_KillAt(point)], examples)
            os._exit(1)  # the fit ended before the point: not killed
        _, status = os.waitpid(child, 0)
        if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGKILL:
            raise SystemExit(f"the run to be killed after step {point} ended with status {status}")
    fitted.restore(first)
    _write(out, outcome(fitted, fit(fitted, backup_dir, examples=examples)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backend")
    parser.add_argument("devices", type=int)
    parser.add_argument("backup_dir")
    parser.add_argument("out")
    parser.add_argument("--kill-at", type=int, default=None)
    parser.add_argument("--examples", type=int, default=len(Y))
    parser.add_argument("--chain", default=None, help="steps to SIGKILL a forked run at, in order, comma-separated")
    args = parser.parse_args()
    # As many logical devices as the test process has (tests/conftest.py), though fewer are used: TensorFlow's sums
    # can differ in the last bit with the number of logical CPU devices in the process.
    toolkit.use_logical_devices(LOGICAL_DEVICES)
    if args.chain is not None:
        chain(args.backend, args.backup_dir, args.out, [int(p) for p in args.chain.split(",")], args.examples)
        return
    fitted = trainer(args.backend, args.devices)
    history = fit(fitted, args.backup_dir, [] if args.kill_at is None else [_KillAt(args.kill_at)], args.examples)
    _write(args.out, outcome(fitted, history))


if __name__ == "__main__":
    main()
