"""One process of a multi-process test job, started by ``multigpu launch``: SMALL_MLP (or ``--model dropout-mlp``),
Adam, float64, a new
global batch each step of which this process reads only its part; writes its parameters to OUT/params_<id>.npz.
``--die-process K --die-step S``: process K kills itself (SIGKILL) before step S."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import toolkit  # noqa: E402
from tests.helpers import DROPOUT_MLP, SMALL_MLP, batch  # noqa: E402
from toolkit import distributed  # noqa: E402

STEPS, BATCH, LR = 10, 7, 0.05  # 7 examples: parts of 4 and 3 on two processes
MODELS = {"mlp": SMALL_MLP, "dropout-mlp": DROPOUT_MLP}


def train(trainer, part=slice(None), die_step=None):
    for step in range(STEPS):
        if step == die_step:
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch(BATCH, seed=100 + step)
        trainer.step(x[part], y[part])
    return trainer.params()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--die-process", type=int, default=None)
    parser.add_argument("--die-step", type=int, default=None)
    parser.add_argument("--model", choices=MODELS, default="mlp")
    args = parser.parse_args()
    cluster = distributed.initialize(args.backend)
    trainer = toolkit.DataParallel(MODELS[args.model], args.backend, "all", toolkit.optim.Adam(LR), dtype="float64")
    die = args.die_step if args.die_process == cluster.process_id else None
    params = train(trainer, distributed.process_slice(BATCH), die)
    np.savez(args.out / f"params_{cluster.process_id}.npz", **params)
    print(f"process {cluster.process_id} of {cluster.num_processes} on {len(trainer.devices)} device(s): done")
