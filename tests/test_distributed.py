"""Training across processes on 127.0.0.1: where a process learns its place, parity with one process, a killed or
missing process named within the bound, and ``multigpu launch``. Every process runs under a timeout."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_backend
from tests.distributed_worker import (
    FIT,
    LR,
    MODELS,
    REFUSED_FIT,
    SMALL_MLP,
    STEP_CHECKS,
    fit_data,
    global_batches,
    train,
)
from tests.helpers import max_abs_diff
from toolkit.command.main import main
from toolkit.processes.distributed import Cluster, DistributedError, process_slice, resolve
from toolkit.processes.launch import environments
from toolkit.tolerances import FLOAT64_ATOL

ROOT = Path(__file__).resolve().parent.parent
WORKER = str(ROOT / "tests" / "distributed_worker.py")
#: What a job of these tests may take at most (start-up of two frameworks included).
JOB_LIMIT = 240
#: The job timeout where no process is to fail: long, so that one process's compiling on a loaded machine does not.
JOB_TIMEOUT = 60.0
#: The job timeout for the failure tests, and how long past it the survivors may take to stop (after the kill; for a
#: process that never joins, after its framework's import: the runtime's start, the framework noticing, the
#: launcher's polling). From the process's start it took 11-14 s on an idle machine and 48-56 s on a loaded one.
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
# Jobs of two processes. Each costs 10-20 s of CPU to start two frameworks, so one job runs several checks (see
# distributed_worker's phases) and a test per check reads its results.

#: Each backend's step-path checks (distributed_worker.STEP_CHECKS and REFUSED_FIT) by the devices per process of the
#: job that runs them. The first count's job also resumes the killed fit, so the killed job has that many devices per
#: process too. TensorFlow runs every check in one job of 2 devices per process (a one-device check's trainer uses the
#: first). On the Theano family's JAX path a trainer across processes spans every device of its process (the mesh is
#: every process's devices), so the checks of one and of two devices take a job each (the killed fit keeps one device
#: per process) where the engine's jax runs several devices per process (PyTensor's 0.10), and the one-device checks
#: alone where it runs one (jax 0.4.30: Aesara's, and PyTensor's where it is installed with that jax).
CHECKS = {"tensorflow": {2: (REFUSED_FIT, *STEP_CHECKS)},
          "one device": {1: (REFUSED_FIT, "dropout-1dev", "sync-bn-1dev")},
          "several devices": {1: ("dropout-1dev", "sync-bn-1dev"), 2: (REFUSED_FIT, "mlp-2dev", "sync-bn-2dev")}}
ONE_DEVICE_JAX = "jax 0.4.30's CPU collectives run one device per process (openxla/xla#16430)"


def _one_device_jax(backend_name: str) -> bool:
    """Whether the backend trains one device per process across processes (a Theano-family engine on jax 0.4)."""
    if backend_name == "tensorflow":
        return False
    from importlib import import_module

    return not import_module(f"toolkit.backends.{backend_name}.distributed").several_devices_per_process()


def _checks(backend_name: str) -> dict:
    """:data:`CHECKS` of the backend."""
    if backend_name == "tensorflow":
        return CHECKS["tensorflow"]
    return CHECKS["one device" if _one_device_jax(backend_name) else "several devices"]


#: Rows of the killed fit (8 per process), the step after which its process 1 is killed, and the step before which
#: the resuming job's process 1 is killed at its end (the survivor names it in the bound).
FIT_ROWS, KILL_AT, DIE_STEP = 16, 5, 3
#: Where the killed job's backup is copied (the resuming job deletes it).
BACKUP_AT_KILL = "backup_at_kill.npz"


@dataclass
class Job:
    """A finished job of two processes: its output folder and the launcher's result."""

    out: Path
    done: subprocess.CompletedProcess
    argv: tuple
    ended: float  # time.time() as the launcher returned

    def output(self) -> str:
        return self.done.stdout[-3000:] + self.done.stderr[-3000:]

    def read(self, check: str, kind: str, k: int):
        """Process ``k``'s ``kind`` ("params", "state": a dict of arrays; "refused-fit": text) of ``check``; fails
        naming the check, with its error or the job's output, where the process wrote none."""
        path = self.out / (f"{kind}_{k}.txt" if kind == REFUSED_FIT else f"{kind}_{check}_{k}.npz")
        if not path.exists():
            error = self.out / f"error_{check}_{k}.txt"
            pytest.fail(f"check {check}: process {k} wrote no {kind}:\n"
                        + (error.read_text()[-3000:] if error.exists() else self.output()))
        return path.read_text() if kind == REFUSED_FIT else dict(np.load(path))


class Jobs:
    """The jobs of two processes of each backend, each launched once, at the first test that reads it: the killed
    fit, the job that resumes it (then runs the checks of its device count and ends with a process killed mid-step),
    and the job of the checks of another device count (PyTensor's two-device ones)."""

    def __init__(self, tmp_path_factory) -> None:
        self._folders, self._jobs = tmp_path_factory, {}

    def _launch(self, key: tuple, per_process: int, timeout: float, *argv: str) -> Job:
        if key not in self._jobs:
            out = self._folders.mktemp("-".join(map(str, key)))
            argv = ("--", sys.executable, WORKER, "--backend", key[0], "--out", str(out), *argv)
            done = _launch("-n", "2", "--devices-per-process", str(per_process), "--timeout", str(timeout), *argv)
            self._jobs[key] = Job(out, done, argv, time.time())
        return self._jobs[key]

    def _fit(self, backend_name: str) -> tuple:
        return "--fit-rows", str(FIT_ROWS), "--backup", str(self._folders.getbasetemp() / f"backup-{backend_name}")

    def killed(self, backend_name: str) -> Job:
        """A fit across 2 processes through BackupAndRestore (process 0 writes, both read), whose process 1 is
        SIGKILLed after step KILL_AT (the backup of step 4, mid-epoch, written: step 5 needed process 0 past it);
        the same fit run first, uninterrupted, by the same trainer put back to its start after (out/*_ref_*)."""
        per_process, key = next(iter(_checks(backend_name))), (backend_name, "killed")
        if key not in self._jobs:
            job = self._launch(key, per_process, FAILURE_TIMEOUT, *self._fit(backend_name), "--reference",
                               "--kill-at", str(KILL_AT))
            backup = Path(job.argv[job.argv.index("--backup") + 1]) / toolkit.callbacks.BackupAndRestore.FILENAME
            if backup.exists():  # kept for its test: the resuming job deletes it
                shutil.copy(backup, job.out / BACKUP_AT_KILL)
        return self._jobs[key]

    def resumed(self, backend_name: str) -> Job:
        """The killed job's fit run again (it resumes), then the checks of its device count, then process 1 killed
        before step DIE_STEP of more steps of the last check's trainer."""
        self.killed(backend_name)
        per_process, checks = next(iter(_checks(backend_name).items()))
        return self._launch((backend_name, "resumed"), per_process, FAILURE_TIMEOUT, *self._fit(backend_name),
                            "--checks", ",".join(checks), "--die-step", str(DIE_STEP))

    def ran(self, backend_name: str, check: str) -> Job:
        """The job that ran ``check``."""
        per_process = next(n for n, checks in _checks(backend_name).items() if check in checks)
        if per_process == next(iter(_checks(backend_name))):
            return self.resumed(backend_name)
        return self._launch((backend_name, f"{per_process}dev"), per_process, JOB_TIMEOUT, "--checks",
                            ",".join(_checks(backend_name)[per_process]))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Jobs:
    return Jobs(tmp_path_factory)


@functools.cache  # the synchronized statistics' two checks compare with the same one
def _reference(backend_name: str, devices: int, model=SMALL_MLP) -> toolkit.DataParallel:
    """A trainer in this process after the steps a step-path check takes across processes."""
    trainer = toolkit.DataParallel(model, backend_name, devices, toolkit.optim.Adam(LR), dtype="float64")
    train(trainer)
    return trainer


def test_two_processes_of_two_devices_train_like_one(backend_name, jobs):
    """Steps across 2 processes of 2 devices each (parts of 4 and 3 rows) train like 1 and 4 devices in one process.
    One device per process is the dropout check's (the same steps), which jax 0.4's engines run too."""
    if _one_device_jax(backend_name):
        pytest.skip(ONE_DEVICE_JAX)
    job = jobs.ran(backend_name, "mlp-2dev")
    first, second = (job.read("mlp-2dev", "params", k) for k in range(2))
    assert max_abs_diff(first, second) == 0.0  # every process holds the same parameters
    for devices in (1, 4):  # 10 Adam steps on batches of 7, float64
        assert max_abs_diff(first, _reference(backend_name, devices).params()) <= FLOAT64_ATOL, f"{devices} device(s)"


def test_two_processes_draw_the_dropout_masks_of_one(backend_name, jobs):
    """Each example's dropout mask comes from its index in the global batch, which a process learns from the
    others' part sizes (4 and 3 rows here, one device each): two processes train like one process."""
    first = jobs.ran(backend_name, "dropout-1dev").read("dropout-1dev", "params", 0)
    assert max_abs_diff(first, _reference(backend_name, 1, MODELS["dropout-mlp"]).params()) <= FLOAT64_ATOL


@pytest.mark.parametrize("check", ["sync-bn-1dev", "sync-bn-2dev"], ids=["1dev-each", "2dev-each"])
def test_synchronized_statistics_span_the_processes(backend_name, check, jobs):
    """Synchronized batch normalization across two processes (parts of 4 and 3 rows, each split over its devices):
    the statistics are the global batch's, so the job trains like one device, parameters and moving statistics."""
    if _one_device_jax(backend_name) and STEP_CHECKS[check][1] > 1:
        pytest.skip(ONE_DEVICE_JAX)
    job = jobs.ran(backend_name, check)
    reference = _reference(backend_name, 1, MODELS["sync-bn-mlp"])
    for k in range(2):
        assert max_abs_diff(job.read(check, "params", k), reference.params()) <= FLOAT64_ATOL, f"process {k}"
        assert max_abs_diff(job.read(check, "state", k), reference.state()) <= FLOAT64_ATOL, f"process {k}"


def test_processes_with_different_part_sizes_are_refused_by_fit(backend_name, jobs):
    """Arrays of 8 and 7 examples; a source of unknown length in one process (known in the other) without
    steps_per_epoch; sources of 8 and 7 batches a pass, 4 epochs of 2 steps (the shorter pass would end the last
    epoch early): each refused in every process alike (none left waiting in a collective), before any step, the
    counts named."""
    job = jobs.ran(backend_name, REFUSED_FIT)
    for k in range(2):
        arrays, unknown, passes = job.read(REFUSED_FIT, REFUSED_FIT, k).split("\n")
        assert arrays.startswith("ShapeError: fit across processes needs the same number of examples, batch"), arrays
        assert "8 examples / batch 3 / 2 epochs / steps_per_epoch=None, 7 examples / batch 3 / 2 epochs" in arrays
        assert unknown.startswith("ArgumentError: fit across processes from a source of unknown length needs "
                                  "steps_per_epoch"), unknown
        assert passes.startswith("ShapeError: fit across processes needs the same steps_per_epoch, batches a pass "
                                 "and epochs"), passes
        assert "steps_per_epoch=2 / batches a pass=8 / 4 epochs, steps_per_epoch=2 / batches a pass=7" in passes


def test_two_processes_fit_from_their_parts_of_a_source_like_one(backend_name, jobs):
    """Both processes fitting on their ProcessPart of the same source of global batches (6 rows, 3 each; 16 rows:
    the last batch of 4) got the same history and parameters, equal to one process of one device fitting on the
    global batches themselves, with validation from a source too."""
    out = jobs.killed(backend_name).out
    histories = [json.loads((out / f"history_stream_{k}.json").read_text()) for k in range(2)]
    assert histories[0] == histories[1]
    params = [dict(np.load(out / f"params_stream_{k}.npz")) for k in range(2)]
    assert max_abs_diff(params[0], params[1]) == 0.0
    (x, y), (vx, vy) = fit_data(FIT_ROWS)
    size = 2 * FIT["batch_size"]
    one = toolkit.DataParallel(SMALL_MLP, backend_name, 1, toolkit.optim.Adam(LR), dtype="float64")
    expected = one.fit(global_batches(x, y, size), epochs=FIT["epochs"], metrics=FIT["metrics"], verbose=0,
                       shuffle=False,
                       validation_data=global_batches(vx, vy, size)).history
    assert histories[0].keys() == expected.keys()
    for name, values in expected.items():
        np.testing.assert_allclose(histories[0][name], values, rtol=0, atol=FLOAT64_ATOL, err_msg=name)
    assert max_abs_diff(params[0], one.params()) <= FLOAT64_ATOL


def test_two_processes_fit_like_one(backend_name, jobs):
    """Both processes of a fit across 2 processes (8 rows each) got the same history and parameters, equal to one
    process of one device fitting on global batches made of the two parts' batches (each process draws the same
    order of its own rows)."""
    out = jobs.killed(backend_name).out
    histories = [json.loads((out / f"history_ref_{k}.json").read_text()) for k in range(2)]
    assert histories[0] == histories[1]
    first = dict(np.load(out / "params_ref_0.npz"))
    assert max_abs_diff(first, dict(np.load(out / "params_ref_1.npz"))) == 0.0
    (x, y), (vx, vy) = fit_data(FIT_ROWS)
    one = toolkit.DataParallel(SMALL_MLP, backend_name, 1, toolkit.optim.Adam(LR), dtype="float64")
    part, losses, accuracies = FIT_ROWS // 2, [], []
    for _ in range(FIT["epochs"]):
        order, total, correct = one.rng.permutation(part), 0.0, 0.0
        for start in range(0, part, FIT["batch_size"]):
            rows = order[start:start + FIT["batch_size"]]
            both = np.concatenate([rows, rows + part])  # process 0's rows of this step, then process 1's
            correct += one.evaluate(x[both], y[both], metrics=["accuracy"])["accuracy"] * len(rows)  # training
            total += one.step(x[both], y[both]) * len(rows)  # metrics score the batch before its update
        losses.append(total / part)
        accuracies.append(correct / part)
        scores = one.evaluate(vx, vy, metrics=["accuracy"])
        assert abs(histories[0]["val_accuracy"][len(losses) - 1] - scores["accuracy"]) <= FLOAT64_ATOL
    np.testing.assert_allclose(histories[0]["loss"], losses, rtol=0, atol=FLOAT64_ATOL)
    np.testing.assert_allclose(histories[0]["accuracy"], accuracies, rtol=0, atol=FLOAT64_ATOL)
    assert max_abs_diff(first, one.params()) <= FLOAT64_ATOL


def test_a_killed_fit_resumes_like_the_uninterrupted_one(backend_name, jobs):
    """The killed job, run again with the same fit, resumes from the backup of step 4 (epoch 1, batch 1) and ends
    equal, bit for bit, to the job's uninterrupted fit; the backup is deleted."""
    killed = jobs.killed(backend_name)
    assert "process 1 was killed by SIGKILL" in killed.done.stderr, killed.output()
    fit_progress = toolkit.load_checkpoint(killed.out / BACKUP_AT_KILL).metadata["fit"]
    assert (fit_progress["epoch"], fit_progress["batch"]) == (1, 1)
    resumed = jobs.resumed(backend_name)
    expected = dict(np.load(killed.out / "params_ref_0.npz"))
    for k in range(2):
        found = resumed.out / f"params_{k}.npz"
        assert found.exists(), resumed.output()
        params = dict(np.load(found))
        assert params.keys() == expected.keys()
        assert all(np.array_equal(params[name], expected[name]) for name in expected)
        assert json.loads((resumed.out / f"history_{k}.json").read_text()) == json.loads(
            (killed.out / "history_ref_0.json").read_text())
    assert not Path(killed.argv[killed.argv.index("--backup") + 1]).exists()


def test_a_killed_process_is_named_by_the_others_within_the_bound(backend_name, jobs):
    """The resuming job ends with process 1 SIGKILLed mid-steps: process 0 names it, and the step it waited in."""
    job = jobs.resumed(backend_name)
    assert "multigpu launch: process 1 was killed by SIGKILL" in job.done.stderr, job.output()
    survivor = [line for line in job.done.stdout.splitlines() if line.startswith("[0]") and "PeerLostError" in line]
    assert survivor and "process 1 (127.0.0.1:" in survivor[-1] and "is missing" in survivor[-1], job.output()
    killed = json.loads((job.out / "killed.json").read_text())
    assert f"step {killed['step']} " in survivor[-1]
    assert job.ended - killed["time"] < FAILURE_TIMEOUT + FAILURE_SLACK


@pytest.mark.parametrize("alone", [0, 1])
def test_a_process_that_never_joins_is_named_within_the_bound(backend_name, alone, tmp_path):
    env = {**_env(), **environments(2, None, None, FAILURE_TIMEOUT)[alone]}
    done = subprocess.run([sys.executable, WORKER, "--backend", backend_name, "--out", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=JOB_LIMIT, cwd=ROOT)
    ended = time.time()
    assert done.returncode != 0
    missing = 1 - alone
    assert f"PeerLostError: process {alone} of 2: process {missing} (127.0.0.1:" in done.stderr, done.stderr[-3000:]
    assert "did not complete within 5 s" in done.stderr
    (joining,) = tmp_path.glob("joining_*.json")  # written once the framework was imported, before it starts
    assert ended - json.loads(joining.read_text())["time"] < FAILURE_TIMEOUT + FAILURE_SLACK


@needs_backend(THEANO)
def test_a_theano_family_trainer_in_a_job_trains_on_every_device_of_its_process(monkeypatch):
    """The Theano family's step across processes is one mesh over every device of every process: a trainer on fewer
    of its process's devices is refused when it is built, naming the counts, rather than failing at its first step
    (TensorFlow's trains on any). In this process: a job of two, as a backend sees one after initialize."""
    backend = toolkit.get_backend(THEANO)
    job = Cluster(process_id=0, num_processes=2, coordinator="127.0.0.1:1", workers=(), devices_per_process=None,
                  timeout=5.0, source="arguments")
    monkeypatch.setattr(backend, "cluster", lambda: job)
    local = len(backend.select_devices("all"))
    with pytest.raises(DistributedError, match=f"got 1 of this process's {local} devices; pass devices=\"all\""):
        toolkit.DataParallel(SMALL_MLP, backend, 1, toolkit.optim.SGD(LR))
    assert len(toolkit.DataParallel(SMALL_MLP, backend, "all", toolkit.optim.SGD(LR)).devices) == local
