"""Several processes, each with its own devices, training one model: the place of this process in the job, and the
start of the framework's own distributed runtime.

A process learns its place from :func:`initialize`'s arguments or from its environment, looked up in this order:

1. ``MULTIGPU_*`` variables, which ``multigpu launch`` sets: ``MULTIGPU_NUM_PROCESSES``, ``MULTIGPU_PROCESS_ID``,
   ``MULTIGPU_COORDINATOR`` (host:port), ``MULTIGPU_WORKERS`` (host:port per process, comma-separated),
   ``MULTIGPU_DEVICES_PER_PROCESS``, ``MULTIGPU_TIMEOUT`` (seconds), ``MULTIGPU_BACKEND``;
2. ``TF_CONFIG`` (TensorFlow's cluster spec: the ``worker`` addresses and this task's index; the coordinator is
   the first worker's host, port + 1);
3. JAX's ``JAX_COORDINATOR_ADDRESS`` with ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``;
4. SLURM's ``SLURM_NTASKS``, ``SLURM_PROCID`` and ``SLURM_STEP_NODELIST`` (the coordinator on the first node, port
   ``MULTIGPU_PORT`` or :data:`DEFAULT_PORT`; workers' addresses are those nodes' hostnames, one task per node);
5. nothing: one process.

Then :func:`initialize` starts the backend's runtime: TensorFlow's ``MultiWorkerMirroredStrategy`` (from a
``TF_CONFIG`` it writes when there is none), or ``jax.distributed`` for Aesara's and PyTensor's JAX path, with gloo
collectives on CPU. :class:`~toolkit.DataParallel` then averages gradients over every device of every process, and
each process passes :meth:`~toolkit.DataParallel.step` only its own part of the global batch (:func:`process_slice`).

Waiting is bounded: a process that dies, or never joins, makes the others raise :class:`PeerLostError` naming it
within ``timeout`` seconds (plus the framework's own detection delay, a few seconds).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from toolkit.errors import DistributedError, PeerLostError, ToolkitError
from toolkit.placement.splitting import shard_bounds, split_sizes

#: Seconds a process waits for the others (to join, and at each step's reduction) before PeerLostError.
DEFAULT_TIMEOUT = 60.0
#: The coordinator's port under SLURM when MULTIGPU_PORT is not set.
DEFAULT_PORT = 29500


@dataclass(frozen=True)
class Cluster:
    """This process's place in a job.

    Attributes:
        process_id: this process's index, 0 <= process_id < num_processes.
        num_processes: the job's count of processes.
        coordinator: ``host:port`` where process 0 runs JAX's coordination service.
        workers: ``host:port`` of every process (TensorFlow's servers), or empty where the source gives none.
        devices_per_process: logical CPU devices each process makes, or None to use what the machine has.
        timeout: seconds to wait for the others before :class:`PeerLostError`.
        source: where this came from ("arguments", "multigpu launch", "TF_CONFIG", "JAX", "SLURM", "single").
    """

    process_id: int
    num_processes: int
    coordinator: str | None
    workers: tuple[str, ...]
    devices_per_process: int | None
    timeout: float
    source: str


def _int(value, what: str, low: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < low or (isinstance(value, float) and value != number):
        raise DistributedError(f"{what} must be an integer >= {low}, got {value!r}")
    return number


def _address(value, what: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[^\s:]+:\d{1,5}", value):
        raise DistributedError(f"{what} must look like host:port, got {value!r}")
    return value


def _check(cluster: Cluster) -> Cluster:
    n = _int(cluster.num_processes, "the number of processes", 1)
    i = _int(cluster.process_id, "the process id", 0)
    if i >= n:
        raise DistributedError(f"process id {i} is out of range for {n} process(es) (ids 0..{n - 1})")
    if cluster.workers and len(cluster.workers) != n:
        raise DistributedError(f"{len(cluster.workers)} worker addresses for {n} processes ({cluster.source})")
    for k, worker in enumerate(cluster.workers):
        _address(worker, f"worker {k}'s address")
    if n > 1 and cluster.coordinator is None:
        raise DistributedError(f"{n} processes need a coordinator address (host:port of process 0)")
    if cluster.coordinator is not None:
        _address(cluster.coordinator, "the coordinator address")
    if cluster.devices_per_process is not None:
        _int(cluster.devices_per_process, "devices per process", 1)
    if not (isinstance(cluster.timeout, (int, float)) and cluster.timeout > 0):
        raise DistributedError(f"timeout must be a number of seconds > 0, got {cluster.timeout!r}")
    return Cluster(i, n, cluster.coordinator, tuple(cluster.workers), cluster.devices_per_process,
                   float(cluster.timeout), cluster.source)


def _slurm_hosts(nodelist: str) -> list[str]:
    """Hostnames of a SLURM node list such as ``node[01-03,07],gpu5`` (ranges expanded)."""
    hosts = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", nodelist):
        if plain:
            hosts.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            hosts += [f"{prefix}{k:0{len(low)}d}" for k in range(int(low), int(high or low) + 1)]
    return hosts


def resolve(process_id: int | None = None, num_processes: int | None = None, coordinator: str | None = None,
            workers: Sequence[str] | None = None, devices_per_process: int | None = None,
            timeout: float | None = None, environ: Mapping[str, str] | None = None) -> Cluster:
    """This process's :class:`Cluster`, from the arguments, or else from the environment (see the module doc).

    Args:
        process_id: this process's index, 0 <= process_id < num_processes; give both ``process_id`` and
            ``num_processes``, or neither (to read the environment).
        num_processes: the job's count of processes.
        coordinator: ``host:port`` where process 0 runs JAX's coordination service.
        workers: ``host:port`` of every process (TensorFlow's servers).
        devices_per_process: logical CPU devices each process makes, or None to use what the machine has.
        timeout: seconds to wait for the others; default ``MULTIGPU_TIMEOUT``, else :data:`DEFAULT_TIMEOUT`.
        environ: the environment to read; default ``os.environ``.

    Returns:
        The :class:`Cluster` (one process, ``source="single"``, where nothing describes a job).

    Raises:
        DistributedError: what was found cannot describe a job; the message says which setting and where from.
    """
    env = os.environ if environ is None else environ
    timeout = timeout if timeout is not None else float(env.get("MULTIGPU_TIMEOUT", DEFAULT_TIMEOUT))
    devices = devices_per_process if devices_per_process is not None else (
        _int(env["MULTIGPU_DEVICES_PER_PROCESS"], "MULTIGPU_DEVICES_PER_PROCESS", 1)
        if env.get("MULTIGPU_DEVICES_PER_PROCESS") else None)
    if process_id is not None or num_processes is not None:
        if process_id is None or num_processes is None:
            raise DistributedError("pass both process_id and num_processes, or neither (to read the environment)")
        cluster = Cluster(process_id, num_processes, coordinator, tuple(workers or ()), devices, timeout, "arguments")
    elif "MULTIGPU_NUM_PROCESSES" in env:
        cluster = Cluster(_int(env["MULTIGPU_PROCESS_ID"] if "MULTIGPU_PROCESS_ID" in env else None,
                               "MULTIGPU_PROCESS_ID", 0),
                          _int(env["MULTIGPU_NUM_PROCESSES"], "MULTIGPU_NUM_PROCESSES", 1),
                          env.get("MULTIGPU_COORDINATOR"),
                          tuple(w for w in env.get("MULTIGPU_WORKERS", "").split(",") if w), devices, timeout,
                          "multigpu launch")
    elif "TF_CONFIG" in env:
        try:
            config = json.loads(env["TF_CONFIG"])
            found = tuple(config["cluster"]["worker"])
            index = config["task"]["index"]
            assert config["task"].get("type", "worker") == "worker"
        except (ValueError, KeyError, TypeError, AssertionError) as error:
            raise DistributedError(f"TF_CONFIG must hold cluster.worker addresses and a worker task index: "
                                   f"{env['TF_CONFIG']!r} ({type(error).__name__})") from error
        host, _, port = _address(found[0], "TF_CONFIG's first worker").rpartition(":")
        cluster = Cluster(index, len(found), f"{host}:{int(port) + 1}", found, devices, timeout, "TF_CONFIG")
    elif "JAX_COORDINATOR_ADDRESS" in env:
        cluster = Cluster(_int(env.get("JAX_PROCESS_ID"), "JAX_PROCESS_ID", 0),
                          _int(env.get("JAX_NUM_PROCESSES"), "JAX_NUM_PROCESSES", 1),
                          env["JAX_COORDINATOR_ADDRESS"], (), devices, timeout, "JAX")
    elif "SLURM_NTASKS" in env and "SLURM_PROCID" in env:
        hosts = _slurm_hosts(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", ""))
        if not hosts:
            raise DistributedError("SLURM_NTASKS is set but no node list (SLURM_STEP_NODELIST) was found")
        port = _int(env.get("MULTIGPU_PORT", DEFAULT_PORT), "MULTIGPU_PORT", 1)
        n = _int(env["SLURM_NTASKS"], "SLURM_NTASKS", 1)
        workers = tuple(f"{h}:{port + 1}" for h in hosts) if len(hosts) == n else ()
        cluster = Cluster(_int(env["SLURM_PROCID"], "SLURM_PROCID", 0), n, f"{hosts[0]}:{port}", workers, devices,
                          timeout, "SLURM")
    else:
        cluster = Cluster(0, 1, None, (), devices, timeout, "single")
    return _check(cluster)


_current: tuple[str, Cluster] | None = None


def initialize(backend: str | None = None, *, process_id: int | None = None, num_processes: int | None = None,
               coordinator: str | None = None, workers: Sequence[str] | None = None,
               devices_per_process: int | None = None, timeout: float | None = None) -> Cluster:
    """Join a job of several processes (or a job of one), before the backend's framework starts.

    Args:
        backend: ``"tensorflow"``, ``"aesara"`` or ``"pytensor"``: whose runtime to start; default ``MULTIGPU_BACKEND``.
        process_id: this process's index, as :func:`resolve` takes it; without ``process_id`` and
            ``num_processes`` the environment says (see the module doc).
        num_processes: the job's count of processes.
        coordinator: ``host:port`` where process 0 runs JAX's coordination service.
        workers: ``host:port`` of every process (TensorFlow's servers).
        devices_per_process: logical CPU devices each process makes, or None to use what the machine has.
        timeout: seconds to wait for the others before :class:`PeerLostError`.

    Makes ``devices_per_process`` logical CPU devices (:func:`toolkit.use_logical_devices`) and, with more than one
    process, starts the framework's distributed runtime, waiting at most ``timeout`` seconds for the others.

    Raises:
        DistributedError: a bad job description, or initialize called twice with another one.
        PeerLostError: a process did not join within the timeout (the message names it).
        BackendUnavailableError: the backend is not installed.
    """
    global _current
    from toolkit.backend.logical_devices import use_logical_devices
    from toolkit.backend.registry import REGISTRY, backend_class

    backend = backend or os.environ.get("MULTIGPU_BACKEND")
    if backend not in REGISTRY:
        raise DistributedError(f"initialize needs a backend, one of {', '.join(REGISTRY)}; got {backend!r}")
    cluster = resolve(process_id, num_processes, coordinator, workers, devices_per_process, timeout)
    if _current is not None:
        if _current == (backend, cluster):
            return cluster
        raise DistributedError(f"initialize was already called for {_current[0]} process {_current[1].process_id} "
                               f"of {_current[1].num_processes}; a process joins one job")
    if cluster.devices_per_process is not None:
        use_logical_devices(cluster.devices_per_process)
    if cluster.num_processes > 1:
        backend_class(backend).join(cluster)
    _current = (backend, cluster)
    return cluster


def current() -> tuple[str, Cluster] | None:
    """``(backend, Cluster)`` after :func:`initialize`, else None."""
    return _current


def process_slice(batch_size: int, cluster: Cluster | None = None) -> slice:
    """This process's rows of a global batch of ``batch_size``: contiguous, sizes as :func:`toolkit.split_sizes`
    gives (uneven when the batch does not divide), so the processes together read each row once.

    Args:
        batch_size: the global batch's number of rows (>= 0).
        cluster: the job; default: the one this process joined (:func:`initialize`), else one process.

    Returns:
        A ``slice`` of the global batch's rows.

    Raises:
        ArgumentError: ``batch_size`` is not an int >= 0.
    """
    cluster = cluster or (_current[1] if _current else Cluster(0, 1, None, (), None, DEFAULT_TIMEOUT, "single"))
    sizes = split_sizes(batch_size, cluster.num_processes)
    low, high = shard_bounds(sizes)[cluster.process_id]
    return slice(low, high)


# ----------------------------------------------------------------------------------------------------------------------
# Bounded waiting, and naming the process that is missing: used by the backends' distributed modules.

def unreachable(cluster: Cluster) -> list[int]:
    """Ids of the other processes whose address accepts no connection (not started, or dead). Each process listens
    on its worker address: TensorFlow's server does, and the JAX path opens a socket there (see ``beacon``)."""
    missing = []
    for k, address in enumerate(cluster.workers):
        if k == cluster.process_id:
            continue
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                pass
        except OSError:
            missing.append(k)
    return missing


def beacon(cluster: Cluster) -> socket.socket | None:
    """Listen on this process's worker address for the life of the process, so that others can tell it is alive."""
    if not cluster.workers:
        return None
    host, _, port = cluster.workers[cluster.process_id].rpartition(":")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, int(port)))
    except OSError as error:
        listener.close()
        raise DistributedError(f"process {cluster.process_id} cannot listen on its address {host}:{port}: {error}") \
            from error
    listener.listen(16)
    threading.Thread(target=_accept_forever, args=(listener,), daemon=True).start()
    return listener


def _accept_forever(listener: socket.socket) -> None:
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        connection.close()


def lost(cluster: Cluster, what: str, ids: Sequence[int], detail: str = "") -> PeerLostError:
    """The error for a lost process: which one (by id and address, where known), while doing what, after how long.
    Once raised, the process cannot leave cleanly through the frameworks' shutdown (it would wait for the lost
    process), so it exits with status 1 at interpreter exit without running it."""
    if ids:
        names = ", ".join(f"process {k}" + (f" ({cluster.workers[k]})" if cluster.workers else "") for k in ids)
        who = f"{names} {'is' if len(ids) == 1 else 'are'} missing"
    else:
        who = "another process did not respond"
    _exit_hard_at_exit()
    return PeerLostError(f"process {cluster.process_id} of {cluster.num_processes}: {who}: {what} did not complete "
                         f"within {cluster.timeout:g} s" + (f" ({detail})" if detail else ""))


def bounded(cluster: Cluster, what: str, call: Callable[[], object]):
    """``call()``, waiting at most the cluster's timeout; on a timeout, or when ``call`` raises a framework error,
    a :class:`PeerLostError` naming the missing process(es): the tasks the error names (TensorFlow's and JAX's
    coordination services both write ``/task:N``), else those :func:`unreachable` finds."""
    result: dict = {}

    def run():
        try:
            result["value"] = call()
        except BaseException as error:  # handed to the waiting thread
            result["error"] = error

    worker = threading.Thread(target=run, daemon=True, name=f"multigpu: {what}")
    worker.start()
    worker.join(cluster.timeout)
    error = result.get("error")
    if "value" in result:
        return result["value"]
    if isinstance(error, ToolkitError):
        raise error
    named = {int(k) for k in re.findall(r"task:(\d+)", str(error or ""))} - {cluster.process_id}
    ids = sorted(named) or unreachable(cluster)
    detail = "" if error is None else str(error).strip().splitlines()[0][:300]
    raise lost(cluster, what, ids, detail) from error


def watched(cluster: Cluster, what: str, call: Callable[[], object]):
    """``call()`` for framework calls that block while holding Python's lock (TensorFlow's cluster start does), so
    that no thread of this process can time them out: a separate watchdog process waits ``timeout`` seconds and, if
    ``call`` has not returned by then, prints the :class:`PeerLostError` naming the missing process(es) and ends
    this process with SIGKILL."""
    state = json.dumps({"cluster": [cluster.process_id, cluster.num_processes, cluster.coordinator,
                                    list(cluster.workers), cluster.timeout], "what": what, "parent": os.getpid()})
    watchdog = subprocess.Popen([sys.executable, "-c", f"import {__name__} as d; d._watchdog()", state],
                                stdin=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                    p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)})
    try:
        return call()
    finally:
        watchdog.stdin.close()  # done (or failed on its own): the watchdog leaves
        watchdog.wait()


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds toolkit/


def _watchdog() -> None:
    import select
    import signal

    state = json.loads(sys.argv[1])
    process_id, n, coordinator, workers, timeout = state["cluster"]
    cluster = Cluster(process_id, n, coordinator, tuple(workers), None, timeout, "watchdog")
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    if ready:
        return  # the parent closed the pipe: the call returned
    error = PeerLostError(str(lost(cluster, state["what"], unreachable(cluster))))
    print(f"toolkit.distributed.PeerLostError: {error}", file=sys.stderr, flush=True)
    os.kill(state["parent"], signal.SIGKILL)  # SIGTERM waits for a Python handler, which cannot run now
    os._exit(0)


_hard_exit_registered = False


def _exit_hard_at_exit() -> None:
    """After a lost process the frameworks cannot shut down cleanly: TensorFlow's threads and JAX's shutdown barrier
    wait for the lost process, and the interpreter waits for them. So an uncaught exception from here on prints its
    traceback and ends the process with status 1 at once, and so does a normal exit."""
    global _hard_exit_registered
    if _hard_exit_registered:
        return
    _hard_exit_registered = True

    def leave():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    previous = sys.excepthook

    def report_and_leave(kind, value, traceback):
        previous(kind, value, traceback)
        leave()

    sys.excepthook = report_and_leave
    atexit.register(leave)  # registered last, so it runs first
