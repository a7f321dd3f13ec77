"""One process of a multi-process test job, started by ``multigpu launch``: it joins the job, then runs the phases
asked for, in this order (each job of two processes costs 10-20 s of CPU to start, so one job runs several):

1. ``--fit-rows N``: fit SMALL_MLP (Adam, float64, every device of the process) on this process's part of N rows:
   OUT/history_<id>.json and OUT/params_<id>.npz; with ``--backup DIR`` through BackupAndRestore(DIR), ``--kill-at S``
   SIGKILLing process 1 after step S, ``--reference`` fitting without a backup first, then restoring the trainer's
   start (OUT/history_ref_<id>.json, OUT/params_ref_<id>.npz), and the same from this process's part of a source
   of global batches (:func:`global_batches`, through toolkit.data.ProcessPart: OUT/*_stream_<id>.*).
2. ``--checks A,B``: the step-path checks of :data:`STEP_CHECKS` named, each on a trainer of its own taking
   :data:`STEPS` steps of a new global batch of which this process reads its part: OUT/params_<check>_<id>.npz and
   OUT/state_<check>_<id>.npz, or OUT/error_<check>_<id>.txt where the check raised; :data:`REFUSED_FIT` fits on
   parts of different sizes (arrays; sources of one row a batch: of unknown length in process 0 only, and of
   different lengths) and writes fit's refusals to OUT/refused-fit_<id>.txt, one a line.
3. ``--die-step S``: the last check's trainer (a new SMALL_MLP one where no check stepped) takes those steps again,
   and process 1 SIGKILLs itself before the S-th (OUT/killed.json: ``time.time()`` of the kill and the trainer's
   step the others wait in); the others raise PeerLostError naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import toolkit  # noqa: E402
from tests.helpers import DROPOUT_MLP, SMALL_MLP, SYNC_BN_MLP, batch  # noqa: E402
from toolkit import distributed  # noqa: E402
from toolkit.backend.registry import backend_class  # noqa: E402

STEPS, BATCH, LR = 10, 7, 0.05  # 7 examples: parts of 4 and 3 on two processes
MODELS = {"mlp": SMALL_MLP, "dropout-mlp": DROPOUT_MLP, "sync-bn-mlp": SYNC_BN_MLP}
#: The step-path checks: name -> (model, devices of each process's trainer).
STEP_CHECKS = {"mlp-2dev": ("mlp", 2), "dropout-1dev": ("dropout-mlp", 1), "sync-bn-1dev": ("sync-bn-mlp", 1),
               "sync-bn-2dev": ("sync-bn-mlp", 2)}
#: The check whose processes fit on parts of different sizes (8 and 7 of these rows).
REFUSED_FIT, REFUSED_ROWS = "refused-fit", 15


#: fit's arguments in the --fit-rows job: 2 epochs of batches of 3 rows per process, validated with accuracy.
FIT = {"epochs": 2, "batch_size": 3, "metrics": ["accuracy"], "verbose": 0}


def fit_data(rows: int):
    """The training and validation rows a --fit-rows job splits between its processes."""
    return batch(rows, seed=5), batch(rows, seed=6)


def global_batches(x, y, size: int):
    """A source of the global batches of ``size`` rows of ``x, y`` in order (a new pass each epoch), of known length
    (across processes the steps must be known before the first), as every process of a job reads it."""

    class Batches:
        def __iter__(self):
            return iter([(x[i:i + size], y[i:i + size]) for i in range(0, len(y), size)])

        def __len__(self):
            return -(-len(y) // size)

    return Batches()


#: BackupAndRestore's save_freq in the --backup job: 3 steps an epoch (8 rows per process), so step 4's is mid-epoch.
BACKUP_EVERY = 2


class _KillAt(toolkit.callbacks.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, step, logs):
        if step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def train(trainer, part=slice(None), die_step=None, out=None):
    """STEPS steps of a new global batch of BATCH rows, of which the trainer reads rows ``part``; before step
    ``die_step`` this process writes out/killed.json and SIGKILLs itself."""
    for step in range(STEPS):
        if step == die_step:  # the others' bound counts from here
            (out / "killed.json").write_text(json.dumps({"time": time.time(), "step": trainer.step_count + 1}))
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch(BATCH, seed=100 + step)
        trainer.step(x[part], y[part])
    return trainer.params()


def _trainer(backend: str, model=SMALL_MLP, devices="all") -> toolkit.DataParallel:
    return toolkit.DataParallel(model, backend, devices, toolkit.optim.Adam(LR), dtype="float64")


def run_fit(args, process_id: int) -> None:
    """Phase 1 (see the module doc)."""
    part = distributed.process_slice(args.fit_rows)
    (x, y), (vx, vy) = fit_data(args.fit_rows)

    def fit(trainer, callbacks=()):
        return trainer.fit(x[part], y[part], **FIT, validation_data=(vx[part], vy[part]), callbacks=callbacks)

    def write(trainer, history, suffix):
        (args.out / f"history{suffix}_{process_id}.json").write_text(json.dumps(history.history))
        np.savez(args.out / f"params{suffix}_{process_id}.npz", **trainer.params())

    callbacks = []
    if args.backup is not None:
        callbacks.append(toolkit.callbacks.BackupAndRestore(args.backup, save_freq=BACKUP_EVERY))
    if args.kill_at is not None and process_id == 1:
        callbacks.append(_KillAt(args.kill_at))
    trainer = _trainer(args.backend)
    if args.reference:  # by the same trainer, put back to its start after: its functions compile once
        start = args.out / f"start_{process_id}.npz"
        trainer.save(start)
        write(trainer, fit(trainer), "_ref")
        trainer.restore(start)
        size = FIT["batch_size"] * trainer.cluster.num_processes
        streamed = trainer.fit(toolkit.data.ProcessPart(global_batches(x, y, size)), epochs=FIT["epochs"],
                               metrics=FIT["metrics"], verbose=0, shuffle=False,
                               validation_data=toolkit.data.ProcessPart(global_batches(vx, vy, size)))
        write(trainer, streamed, "_stream")
        trainer.restore(start)
    write(trainer, fit(trainer, callbacks), "")


def run_checks(backend: str, process_id: int, names: list[str], out: Path) -> toolkit.DataParallel | None:
    """Phase 2: the checks ``names`` (of STEP_CHECKS, or REFUSED_FIT) in this order, each writing its result or its
    error (the other checks still run; the test of this one shows the error).

    Returns:
        The last trainer that took steps (phase 3 goes on with it: compiled already), or None.
    """
    stepped = None
    for name in names:
        try:
            if name == REFUSED_FIT:
                (x, y), _ = fit_data(REFUSED_ROWS)
                part = distributed.process_slice(REFUSED_ROWS)
                refusals, trainer = [], _trainer(backend)
                one_row = global_batches(x[part], y[part], 1)  # 8 and 7 batches a pass
                for data, options in (((x[part], y[part]), FIT),  # 8 and 7 examples
                                      ((iter(one_row) if process_id == 0 else one_row,), {"verbose": 0}),
                                      ((one_row,), {"steps_per_epoch": 2, "epochs": 4, "verbose": 0})):
                    try:
                        trainer.fit(*data, **options)
                    except (toolkit.ShapeError, toolkit.ArgumentError) as error:
                        refusals.append(f"{type(error).__name__}: {error}")
                (out / f"{name}_{process_id}.txt").write_text("\n".join(refusals))
                continue
            model, devices = STEP_CHECKS[name]
            trainer = _trainer(backend, MODELS[model], devices)
            np.savez(out / f"params_{name}_{process_id}.npz", **train(trainer, distributed.process_slice(BATCH)))
            np.savez(out / f"state_{name}_{process_id}.npz", **trainer.state())
            stepped = trainer
        except distributed.PeerLostError:
            raise  # the job cannot go on
        except Exception:
            (out / f"error_{name}_{process_id}.txt").write_text(traceback.format_exc())
    return stepped


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--fit-rows", type=int, default=None, help="fit on this process's part of that many rows")
    parser.add_argument("--backup", type=Path, default=None, help="fit through BackupAndRestore in that folder")
    parser.add_argument("--kill-at", type=int, default=None, help="process 1 SIGKILLs itself after that fit step")
    parser.add_argument("--reference", action="store_true", help="an uninterrupted fit by another trainer first")
    parser.add_argument("--checks", default="", help="comma-separated names of STEP_CHECKS (or refused-fit) to run")
    parser.add_argument("--die-step", type=int, default=None, help="process 1 SIGKILLs itself before that step")
    args = parser.parse_args()
    # The framework's import (the slow part of a start on a loaded machine) before the clock the never-joins test
    # reads starts: initialize imports it too, then starts the runtime and waits for the others.
    backend_class(args.backend)
    (args.out / f"joining_{os.getpid()}.json").write_text(json.dumps({"time": time.time()}))
    cluster = distributed.initialize(args.backend)
    if args.fit_rows is not None:
        run_fit(args, cluster.process_id)
    stepped = run_checks(args.backend, cluster.process_id, [name for name in args.checks.split(",") if name], args.out)
    if args.die_step is not None:
        train(stepped or _trainer(args.backend), distributed.process_slice(BATCH),
              args.die_step if cluster.process_id == 1 else None, args.out)
    print(f"process {cluster.process_id} of {cluster.num_processes}: done")
