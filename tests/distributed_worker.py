"""One process of a multi-process test job, started by ``multigpu launch``: SMALL_MLP (or ``--model dropout-mlp`` or
``sync-bn-mlp``), Adam, float64, a new global batch each step of which this process reads only its part; writes its
parameters to OUT/params_<id>.npz and its model state to OUT/state_<id>.npz.
``--die-process K --die-step S``: process K kills itself (SIGKILL) before step S. ``--fit-rows N``: fit on this
process's part of N rows instead (history_<id>.json too; exit 3 with the message if fit refuses); with ``--backup DIR``
through BackupAndRestore(DIR), ``--kill-at S`` SIGKILLing process 1 after step S, ``--reference`` fitting a trainer of
its own without a backup first (params_ref_<id>.npz, history_ref_<id>.json)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import toolkit  # noqa: E402
from tests.helpers import DROPOUT_MLP, SMALL_MLP, SYNC_BN_MLP, batch  # noqa: E402
from toolkit import distributed  # noqa: E402

STEPS, BATCH, LR = 10, 7, 0.05  # 7 examples: parts of 4 and 3 on two processes
MODELS = {"mlp": SMALL_MLP, "dropout-mlp": DROPOUT_MLP, "sync-bn-mlp": SYNC_BN_MLP}


#: fit's arguments in the --fit-rows job: 2 epochs of batches of 3 rows per process, validated with accuracy.
FIT = {"epochs": 2, "batch_size": 3, "metrics": ["accuracy"], "verbose": 0}


def fit_data(rows: int):
    """The training and validation rows a --fit-rows job splits between its processes."""
    return batch(rows, seed=5), batch(rows, seed=6)


#: BackupAndRestore's save_freq in the --backup job: 3 steps an epoch (8 rows per process), so step 4's is mid-epoch.
BACKUP_EVERY = 2


class _KillAt(toolkit.callbacks.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, step, logs):
        if step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


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
    parser.add_argument("--fit-rows", type=int, default=None, help="fit on this process's part of that many rows")
    parser.add_argument("--backup", type=Path, default=None, help="fit through BackupAndRestore in that folder")
    parser.add_argument("--kill-at", type=int, default=None, help="process 1 SIGKILLs itself after that step")
    parser.add_argument("--reference", action="store_true", help="an uninterrupted fit by another trainer first")
    args = parser.parse_args()
    cluster = distributed.initialize(args.backend)
    trainer = toolkit.DataParallel(MODELS[args.model], args.backend, "all", toolkit.optim.Adam(LR), dtype="float64")
    if args.fit_rows is not None:
        part = distributed.process_slice(args.fit_rows)
        (x, y), (vx, vy) = fit_data(args.fit_rows)
        def fit(fitted, callbacks=()):
            return fitted.fit(x[part], y[part], **FIT, validation_data=(vx[part], vy[part]), callbacks=callbacks)

        callbacks = []
        if args.backup is not None:
            callbacks.append(toolkit.callbacks.BackupAndRestore(args.backup, save_freq=BACKUP_EVERY))
        if args.kill_at is not None and cluster.process_id == 1:
            callbacks.append(_KillAt(args.kill_at))
        if args.reference:
            reference = toolkit.DataParallel(MODELS[args.model], args.backend, "all", toolkit.optim.Adam(LR),
                                             dtype="float64")
            history = fit(reference)
            (args.out / f"history_ref_{cluster.process_id}.json").write_text(json.dumps(history.history))
            np.savez(args.out / f"params_ref_{cluster.process_id}.npz", **reference.params())
        try:
            history = fit(trainer, callbacks)
        except toolkit.ShapeError as error:
            print(f"process {cluster.process_id}: ShapeError: {error}")
            sys.exit(3)
        (args.out / f"history_{cluster.process_id}.json").write_text(json.dumps(history.history))
        np.savez(args.out / f"params_{cluster.process_id}.npz", **trainer.params())
        sys.exit(0)
    die = args.die_step if args.die_process == cluster.process_id else None
    params = train(trainer, distributed.process_slice(BATCH), die)
    np.savez(args.out / f"params_{cluster.process_id}.npz", **params)
    np.savez(args.out / f"state_{cluster.process_id}.npz", **trainer.state())
    print(f"process {cluster.process_id} of {cluster.num_processes} on {len(trainer.devices)} device(s): done")
