"""BackupAndRestore: a fit interrupted anywhere (an exception, or SIGKILL mid-epoch) and run again with the same call
ends equal, bit for bit, to a fit that was never interrupted: parameters, optimizer and batch-norm state, counts,
RNG and history, with dropout, shuffling and validation; on every backend, 1 and 2 devices."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import toolkit
from tests import backup_worker
from tests.backup_worker import STEPS, X, Y, fit, outcome, trainer

ROOT = Path(__file__).resolve().parents[1]
#: SIGKILL points (steps after which the process dies) per backend, drawn from a seeded generator among steps 1 to
#: STEPS - 1: the issue's 10 on TensorFlow (11 processes: about 90 s of CPU, measured; 621 s of wall time on a
#: shared 2-core machine at load 13), 2 on the Theano family (3 processes: 28-37 s of CPU), which the exception test
#: covers at 6 points on 1 and 2 devices in one process.
KILLS = {"tensorflow": 10, "aesara": 2, "pytensor": 2}
#: Interruptions by an exception in one process (the trainer reused: no recompiles), drawn like KILLS.
RAISES = 6
#: The SIGKILL test fits 24 examples in batches of 6, all of one shape: TensorFlow's traced step rounds differently
#: once it has generalized the batch axis, which happens at the second batch shape it meets, so a new process whose
#: first batch is an epoch's last, smaller one (23 examples: 6, 6, 6, 5) ends 1e-12 off (measured). The in-process
#: test (compiled steps kept) uses 23: a smaller last batch, resumed at exactly.
UNEVEN = 23


def _points(count: int, seed: int) -> list[int]:
    return sorted(int(s) for s in np.random.default_rng(seed).choice(np.arange(1, STEPS), count, replace=False))


def _assert_equal(got: tuple[dict, dict], expected: tuple[dict, dict]) -> None:
    (arrays, facts), (want_arrays, want_facts) = got, expected
    assert arrays.keys() == want_arrays.keys()
    for key, value in arrays.items():
        np.testing.assert_array_equal(value, want_arrays[key], err_msg=key)
    assert facts == want_facts


def _resumes_mid_epoch(backup: Path) -> bool:
    """Whether the backup in ``backup`` (none before the first, at step 3) resumes inside an epoch."""
    path = backup / toolkit.callbacks.BackupAndRestore.FILENAME
    return path.exists() and toolkit.load_checkpoint(path).metadata["fit"]["batch"] > 0


class _RaiseAt(toolkit.callbacks.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, step, logs):
        if step == self.step:
            raise RuntimeError(f"interrupted after step {step}")


@pytest.mark.parametrize("devices", [1, 2], ids=["1dev", "2dev"])
def test_a_fit_interrupted_anywhere_resumes_equal_to_an_uninterrupted_one(backend, devices, tmp_path):
    """Each interruption raises after a step (mid-epoch ones included); the failed fit changes nothing in memory,
    and the same call again resumes from the backup on disk, until a run finishes."""
    expected = outcome(straight := trainer(backend, devices), fit(straight, tmp_path / "straight", examples=UNEVEN))
    assert not (tmp_path / "straight").exists()  # delete_checkpoint: gone once the fit finished
    resumed, backup, mid_epoch = trainer(backend, devices), tmp_path / "backup", 0
    for point in _points(RAISES, seed=devices):
        with pytest.raises(RuntimeError, match=f"interrupted after step {point}"):
            fit(resumed, backup, [_RaiseAt(point)], UNEVEN)
        assert resumed.step_count == 0  # the failed fit put the trainer back; the backup stays for the rerun
        mid_epoch += _resumes_mid_epoch(backup)
    assert mid_epoch > 0
    _assert_equal(outcome(resumed, fit(resumed, backup, examples=UNEVEN)), expected)
    assert not backup.exists()


def _run(backend: str, backup: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "tests.backup_worker", backend, "2", str(backup), str(out), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_sigkill_anywhere_then_the_same_fit_ends_equal(backend_name, tmp_path):
    """A fit on 2 devices SIGKILLed after each of a seeded sample of steps, each time run again with the same call
    (which resumes from the last backup and dies at the next point), ends equal to the uninterrupted fit, computed
    here in this process."""
    straight = trainer(backend_name, 2)
    expected = outcome(straight, fit(straight, tmp_path / "straight"))
    backup, mid_epoch = tmp_path / "backup", 0
    for point in _points(KILLS[backend_name], seed=0):
        killed = _run(backend_name, backup, tmp_path / "never.npz", "--kill-at", str(point))
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        mid_epoch += _resumes_mid_epoch(backup)
    assert mid_epoch > 0  # some resumes start inside an epoch
    finished = _run(backend_name, backup, tmp_path / "resumed.npz")
    assert finished.returncode == 0, finished.stderr
    with np.load(tmp_path / "resumed.npz") as arrays:
        got = ({key: arrays[key] for key in arrays.files}, json.loads(Path(f"{tmp_path / 'resumed.npz'}.json")
                                                                      .read_text()))
    _assert_equal(got, expected)
    assert not backup.exists()


def test_a_backup_of_another_fit_is_refused_and_changes_nothing(backend, tmp_path):
    first = trainer(backend, 1)
    with pytest.raises(RuntimeError):
        fit(first, tmp_path, [_RaiseAt(5)])
    other = trainer(backend, 1)
    state = other.rng.bit_generator.state
    with pytest.raises(toolkit.CheckpointError, match="written by a fit with .*'count': 24.*'count': 22"):
        other.fit(X[:22], Y[:22], epochs=2, batch_size=backup_worker.BATCH_SIZE, verbose=0,
                  callbacks=[toolkit.callbacks.BackupAndRestore(tmp_path, save_freq=3)])
    assert other.step_count == 0 and other.rng.bit_generator.state == state
    toolkit.checkpoint.save_checkpoint(tmp_path / "backup.npz", toolkit.checkpoint.trainer_checkpoint(other))
    with pytest.raises(toolkit.CheckpointError, match="no BackupAndRestore backup"):
        fit(other, tmp_path)
