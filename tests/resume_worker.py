"""A training job for the kill-and-resume test: checkpoints every few steps, may SIGKILL itself, may resume.

    python -m tests.resume_worker BACKEND CHECKPOINT OUT --steps 12 --every 3 [--kill-after 8] [--resume]
"""

from __future__ import annotations

import argparse
import os
import signal

import numpy as np

import toolkit


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backend")
    parser.add_argument("checkpoint")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("--kill-after", type=int, default=None)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()

    toolkit.use_logical_devices(2)
    from tests.helpers import SMALL_MLP, batch

    x, y = batch(64, seed=11)
    trainer = toolkit.DataParallel(SMALL_MLP, args.backend, 2, toolkit.optim.Adam(0.02), dtype="float64", seed=4)
    if args.resume:
        trainer.restore(args.checkpoint)
    while trainer.step_count < args.steps:
        index = trainer.rng.choice(len(x), size=9, replace=False)  # the data order depends on the saved RNG state
        trainer.step(x[index], y[index])
        if trainer.step_count % args.every == 0:
            trainer.save(args.checkpoint)
        if trainer.step_count == args.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
    np.savez(args.out, **trainer.params())


if __name__ == "__main__":
    main()
