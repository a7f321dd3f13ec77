"""Training across processes on 127.0.0.1: where a process learns its place, parity with one process, a killed or
missing process named within the bound, and ``multigpu launch``. Every process runs under a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import toolkit
from tests.distributed_worker import FIT, LR, MODELS, SMALL_MLP, fit_data, train
from tests.helpers import max_abs_diff
from toolkit.command.main import main
from toolkit.processes.distributed import DistributedError, process_slice, resolve
from toolkit.processes.launch import environments
from toolkit.tolerances import FLOAT64_ATOL

ROOT = Path(__file__).resolve().parent.parent
WORKER = str(ROOT / "tests" / "distributed_worker.py")
#: What a job of these tests may take at most (start-up of two frameworks included).
JOB_LIMIT = 240
#: The job timeout for the failure tests, and how long past it the survivors may take to stop (process start-up,
#: the framework noticing, the launcher's polling).
FAILURE_TIMEOUT, FAILURE_SLACK = 5.0, 40.0


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the workers make their own devices


def _launch(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolkit", "launch", *argv], capture_output=True, text=True,
                          timeout=JOB_LIMIT, env=_env(), cwd=ROOT)


# ----------------------------------------------------------------------------------------------------------------------
# Where a process learns its place (no framework starts).

def test_explicit_arguments():
    cluster = resolve(1, 3, "10.0.0.1:1234", environ={})
    assert (cluster.process_id, cluster.num_processes, cluster.coordinator, cluster.source) == (
        1, 3, "10.0.0.1:1234", "arguments")


@pytest.mark.parametrize("kwargs, words", [
    ({"process_id": 3, "num_processes": 3, "coordinator": "h:1"}, "process id 3 is out of range for 3"),
    ({"process_id": 0, "num_processes": 2}, "need a coordinator address"),
    ({"process_id": 0, "num_processes": 2, "coordinator": "nohostport"}, "must look like host:port"),
    ({"process_id": 0, "num_processes": 2, "coordinator": "h:1", "workers": ["h:2"]}, "1 worker addresses for 2"),
    ({"process_id": 0}, "pass both process_id and num_processes"),
    ({"process_id": 0, "num_processes": 1, "timeout": 0}, "timeout must be a number of seconds > 0"),
    ({"process_id": -1, "num_processes": 1}, "the process id must be an integer >= 0"),
])
def test_bad_job_descriptions(kwargs, words):
    with pytest.raises(DistributedError, match=words.replace("(", r"\(")):
        resolve(**kwargs, environ={})


def test_from_the_launcher_environment():
    env = environments(3, 2, None, 7.0)[2]
    cluster = resolve(environ=env)
    assert (cluster.process_id, cluster.num_processes, cluster.devices_per_process, cluster.timeout) == (2, 3, 2, 7.0)
    assert len(cluster.workers) == 3 and cluster.source == "multigpu launch"
    assert cluster.coordinator.startswith("127.0.0.1:") and cluster.coordinator not in cluster.workers


def test_from_tf_config_jax_and_slurm():
    tf_config = {"cluster": {"worker": ["a:2000", "b:2000"]}, "task": {"type": "worker", "index": 1}}
    cluster = resolve(environ={"TF_CONFIG": json.dumps(tf_config)})
    assert (cluster.process_id, cluster.num_processes, cluster.workers, cluster.coordinator) == (
        1, 2, ("a:2000", "b:2000"), "a:2001")
    cluster = resolve(environ={"JAX_COORDINATOR_ADDRESS": "c:5", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"})
    assert (cluster.process_id, cluster.num_processes, cluster.coordinator, cluster.source) == (3, 4, "c:5", "JAX")
    cluster = resolve(environ={"SLURM_NTASKS": "3", "SLURM_PROCID": "2", "SLURM_STEP_NODELIST": "gpu[07-08],cpu1"})
    assert cluster.coordinator == "gpu07:29500" and cluster.workers == ("gpu07:29501", "gpu08:29501", "cpu1:29501")
    assert resolve(environ={}).num_processes == 1
    with pytest.raises(DistributedError, match="TF_CONFIG must hold"):
        resolve(environ={"TF_CONFIG": "{not json"})


def test_each_row_of_a_global_batch_goes_to_one_process():
    jobs = [resolve(k, 3, "h:1", environ={}) for k in range(3)]
    slices = [process_slice(7, job) for job in jobs]
    assert [(s.start, s.stop) for s in slices] == [(0, 3), (3, 5), (5, 7)]


@pytest.mark.parametrize("argv, words", [
    (["launch", "-n", "0", "--", "python"], "-n must be >= 1"),
    (["launch", "-n", "2"], "no command to launch"),
    (["launch", "-n", "2", "--timeout", "-1", "--", "python"], "--timeout must be > 0"),
])
def test_bad_launch_requests_are_one_line_and_exit_2(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_launch_prefixes_output_and_fails_when_a_process_fails():
    code = "import os, sys; print('hello from', os.environ['MULTIGPU_PROCESS_ID']); " \
           "sys.exit(3 if os.environ['MULTIGPU_PROCESS_ID'] == '1' else 0)"
    done = _launch("-n", "2", "--timeout", "5", "--", sys.executable, "-c", code)
    assert done.returncode == 3
    assert "[0] hello from 0" in done.stdout and "[1] hello from 1" in done.stdout
    assert "multigpu launch: process 1 exited with status 3" in done.stderr


# ----------------------------------------------------------------------------------------------------------------------
# Jobs of two processes.

def _reference(backend_name: str, devices: int) -> dict:
    return train(toolkit.DataParallel(SMALL_MLP, backend_name, devices, toolkit.optim.Adam(LR), dtype="float64"))


def test_two_processes_of_two_devices_train_like_one(backend_name, tmp_path):
    """Steps across 2 processes of 2 devices each train like 1 and 4 devices in one process. One device per process
    is the dropout test's below (the same steps, uneven parts), which Aesara runs too."""
    if backend_name == "aesara":
        pytest.skip("jax 0.4.30's CPU collectives run one device per process (openxla/xla#16430)")
    per_process = 2
    done = _launch("-n", "2", "--devices-per-process", str(per_process), "--timeout", "60", "--",
                   sys.executable, WORKER, "--backend", backend_name, "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    first, second = (dict(np.load(tmp_path / f"params_{k}.npz")) for k in range(2))
    assert max_abs_diff(first, second) == 0.0  # every process holds the same parameters
    for devices in {1, 2 * per_process}:  # 10 Adam steps on batches of 7 (4 + 3 rows per process), float64
        assert max_abs_diff(first, _reference(backend_name, devices)) <= FLOAT64_ATOL


def test_two_processes_draw_the_dropout_masks_of_one(backend_name, tmp_path):
    """Each example's dropout mask comes from its index in the global batch, which a process learns from the
    others' part sizes (4 and 3 rows here): two processes train like one process."""
    done = _launch("-n", "2", "--timeout", "60", "--", sys.executable, WORKER, "--backend", backend_name, "--out",
                   str(tmp_path), "--model", "dropout-mlp")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    first = dict(np.load(tmp_path / "params_0.npz"))
    reference = train(toolkit.DataParallel(MODELS["dropout-mlp"], backend_name, 1, toolkit.optim.Adam(LR),
                                           dtype="float64"))
    assert max_abs_diff(first, reference) <= FLOAT64_ATOL


@pytest.mark.parametrize("per_process", [1, 2], ids=["1dev-each", "2dev-each"])
def test_synchronized_statistics_span_the_processes(backend_name, per_process, tmp_path):
    """Synchronized batch normalization across two processes (parts of 4 and 3 rows, each split over its devices):
    the statistics are the global batch's, so the job trains like one device, parameters and moving statistics."""
    if backend_name == "aesara" and per_process > 1:
        pytest.skip("jax 0.4.30's CPU collectives run one device per process (openxla/xla#16430)")
    done = _launch("-n", "2", "--devices-per-process", str(per_process), "--timeout", "60", "--",
                   sys.executable, WORKER, "--backend", backend_name, "--out", str(tmp_path), "--model", "sync-bn-mlp")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    reference = toolkit.DataParallel(MODELS["sync-bn-mlp"], backend_name, 1, toolkit.optim.Adam(LR), dtype="float64")
    params = train(reference)
    for k in range(2):
        assert max_abs_diff(dict(np.load(tmp_path / f"params_{k}.npz")), params) <= FLOAT64_ATOL
        assert max_abs_diff(dict(np.load(tmp_path / f"state_{k}.npz")), reference.state()) <= FLOAT64_ATOL


def _check_fit_like_one(backend_name: str, out: Path) -> None:
    """Both processes of a fit across 2 processes (8 rows each, out/*_ref_*) got the same history and parameters,
    equal to one process fitting on global batches made of the two parts' batches (each process draws the same
    order of its own rows)."""
    histories = [json.loads((out / f"history_ref_{k}.json").read_text()) for k in range(2)]
    assert histories[0] == histories[1]
    first = dict(np.load(out / "params_ref_0.npz"))
    assert max_abs_diff(first, dict(np.load(out / "params_ref_1.npz"))) == 0.0
    (x, y), (vx, vy) = fit_data(16)
    one = toolkit.DataParallel(SMALL_MLP, backend_name, 1, toolkit.optim.Adam(LR), dtype="float64")
    losses, accuracies = [], []
    for _ in range(FIT["epochs"]):
        order, total, correct = one.rng.permutation(8), 0.0, 0.0
        for start in range(0, 8, FIT["batch_size"]):
            rows = order[start:start + FIT["batch_size"]]
            both = np.concatenate([rows, rows + 8])  # process 0's rows of this step, then process 1's
            correct += one.evaluate(x[both], y[both], metrics=["accuracy"])["accuracy"] * len(rows)  # training
            total += one.step(x[both], y[both]) * len(rows)  # metrics score the batch before its update
        losses.append(total / 8)
        accuracies.append(correct / 8)
        scores = one.evaluate(vx, vy, metrics=["accuracy"])
        assert abs(histories[0]["val_accuracy"][len(losses) - 1] - scores["accuracy"]) <= FLOAT64_ATOL
    np.testing.assert_allclose(histories[0]["loss"], losses, rtol=0, atol=FLOAT64_ATOL)
    np.testing.assert_allclose(histories[0]["accuracy"], accuracies, rtol=0, atol=FLOAT64_ATOL)
    assert max_abs_diff(first, one.params()) <= FLOAT64_ATOL


def test_two_processes_fit_like_one_and_resume_after_a_kill(backend_name, tmp_path):
    """fit across 2 processes trains like one process (see _check_fit_like_one); and through BackupAndRestore
    (process 0 writes, both read), a job whose process 1 is SIGKILLed after step 5 (the backup of step 4, mid-epoch,
    written: step 5 needed process 0 past it) and run again with the same call resumes and ends equal, bit for bit,
    to the job's uninterrupted fit, run first in the killed job by a trainer of its own (one job for both checks:
    each job of two processes costs 10-20 s of CPU)."""
    backup = tmp_path / "backup"
    job = ["--", sys.executable, WORKER, "--backend", backend_name, "--out", str(tmp_path), "--fit-rows", "16",
           "--backup", str(backup)]
    killed = _launch("-n", "2", "--timeout", str(FAILURE_TIMEOUT), *job, "--reference", "--kill-at", "5")
    assert "process 1 was killed by SIGKILL" in killed.stderr, killed.stdout[-3000:] + killed.stderr[-3000:]
    _check_fit_like_one(backend_name, tmp_path)
    fit_progress = toolkit.load_checkpoint(backup / toolkit.callbacks.BackupAndRestore.FILENAME).metadata["fit"]
    assert (fit_progress["epoch"], fit_progress["batch"]) == (1, 1)
    done = _launch("-n", "2", "--timeout", "60", *job)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expected = dict(np.load(tmp_path / "params_ref_0.npz"))
    for k in range(2):
        params = dict(np.load(tmp_path / f"params_{k}.npz"))
        assert params.keys() == expected.keys()
        assert all(np.array_equal(params[name], expected[name]) for name in expected)
        assert json.loads((tmp_path / f"history_{k}.json").read_text()) == json.loads(
            (tmp_path / "history_ref_0.json").read_text())
    assert not backup.exists()


def test_processes_with_different_part_sizes_are_refused_by_fit(backend_name, tmp_path):
    done = _launch("-n", "2", "--timeout", "60", "--", sys.executable, WORKER, "--backend", backend_name, "--out",
                   str(tmp_path), "--fit-rows", "15")
    assert done.returncode != 0
    for k in range(2):
        assert f"process {k}: ShapeError: fit across processes needs the same number of examples" in done.stdout
    assert "8 examples / batch 3 / 2 epochs, 7 examples / batch 3 / 2 epochs" in done.stdout


def test_a_killed_process_is_named_by_the_others_within_the_bound(backend_name, tmp_path):
    began = time.monotonic()
    done = _launch("-n", "2", "--timeout", str(FAILURE_TIMEOUT), "--", sys.executable, WORKER, "--backend",
                   backend_name, "--out", str(tmp_path), "--die-process", "1", "--die-step", "3")
    elapsed = time.monotonic() - began
    assert done.returncode != 0
    survivor = [line for line in done.stdout.splitlines() if line.startswith("[0]") and "PeerLostError" in line]
    assert survivor and "process 1 (127.0.0.1:" in survivor[-1] and "is missing" in survivor[-1], done.stdout[-3000:]
    assert "step 4" in survivor[-1]
    assert "multigpu launch: process 1 was killed by SIGKILL" in done.stderr
    assert elapsed < FAILURE_TIMEOUT + FAILURE_SLACK


@pytest.mark.parametrize("alone", [0, 1])
def test_a_process_that_never_joins_is_named_within_the_bound(backend_name, alone, tmp_path):
    env = {**_env(), **environments(2, None, None, FAILURE_TIMEOUT)[alone]}
    began = time.monotonic()
    done = subprocess.run([sys.executable, WORKER, "--backend", backend_name, "--out", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=JOB_LIMIT, cwd=ROOT)
    elapsed = time.monotonic() - began
    assert done.returncode != 0
    missing = 1 - alone
    assert f"PeerLostError: process {alone} of 2: process {missing} (127.0.0.1:" in done.stderr, done.stderr[-3000:]
    assert "did not complete within 5 s" in done.stderr
    assert elapsed < FAILURE_TIMEOUT + FAILURE_SLACK

