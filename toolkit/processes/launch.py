"""``multigpu launch``: start N processes of one job on this machine (127.0.0.1), with the environment
:func:`toolkit.processes.distributed.initialize` reads, stream their output with a ``[k]`` prefix, and fail if
any fails.

Each process gets ``MULTIGPU_NUM_PROCESSES``, ``MULTIGPU_PROCESS_ID``, ``MULTIGPU_COORDINATOR`` and
``MULTIGPU_WORKERS`` (free ports on 127.0.0.1), ``MULTIGPU_TIMEOUT``, and, when asked,
``MULTIGPU_DEVICES_PER_PROCESS`` and ``MULTIGPU_BACKEND``; with a backend, also that framework's own variables
(``TF_CONFIG``; ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``), for scripts that start the
framework's runtime themselves.

When a process fails, the others are given the job's timeout plus :data:`GRACE` seconds to stop by themselves (they
raise :class:`~toolkit.processes.distributed.PeerLostError` naming it); any still running then is killed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from toolkit.processes.distributed import DistributedError

#: Seconds beyond the job's timeout that the other processes get to stop by themselves after one failed.
GRACE = 15.0
#: The only address a launch uses: every process of the job runs on this machine.
HOST = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now (bound together, so distinct).

    Args:
        count: how many ports.

    Returns:
        ``count`` distinct port numbers.
    """
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def environments(n: int, devices_per_process: int | None, backend: str | None, timeout: float) -> list[dict]:
    """The environment variables of each of ``n`` processes (see the module's docstring for the names).

    Args:
        n: the number of processes.
        devices_per_process: given to each process as ``MULTIGPU_DEVICES_PER_PROCESS``, or None.
        backend: a backend name: its framework's own variables are added; None for none.
        timeout: seconds a process waits for the others (``MULTIGPU_TIMEOUT``).

    Returns:
        ``n`` dicts of variables, process ``k``'s at index ``k``.
    """
    ports = free_ports(n + 1)
    coordinator, workers = f"{HOST}:{ports[0]}", [f"{HOST}:{p}" for p in ports[1:]]
    out = []
    for k in range(n):
        env = {"MULTIGPU_NUM_PROCESSES": str(n), "MULTIGPU_PROCESS_ID": str(k), "MULTIGPU_COORDINATOR": coordinator,
               "MULTIGPU_WORKERS": ",".join(workers), "MULTIGPU_TIMEOUT": f"{timeout:g}", "PYTHONUNBUFFERED": "1"}
        if devices_per_process is not None:
            env["MULTIGPU_DEVICES_PER_PROCESS"] = str(devices_per_process)
        if backend == "tensorflow":
            env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": k}})
        elif backend in ("aesara", "pytensor"):  # the Theano family's devices are JAX's
            env.update(JAX_COORDINATOR_ADDRESS=coordinator, JAX_NUM_PROCESSES=str(n), JAX_PROCESS_ID=str(k))
        if backend is not None:
            env["MULTIGPU_BACKEND"] = backend
        out.append(env)
    return out


def _stream(k: int, pipe, lock: threading.Lock) -> None:
    for line in iter(pipe.readline, ""):
        with lock:
            sys.stdout.write(f"[{k}] {line}" if line.endswith("\n") else f"[{k}] {line}\n")
            sys.stdout.flush()
    pipe.close()


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def launch(command: Sequence[str], n: int, devices_per_process: int | None = None, backend: str | None = None,
           timeout: float = 60.0) -> int:
    """Run ``command`` as ``n`` processes of one job, their output on this process's stdout prefixed ``[k]``.

    Args:
        command: the program and its arguments, run once per process.
        n: the number of processes, >= 1.
        devices_per_process: the devices each process uses (``MULTIGPU_DEVICES_PER_PROCESS``), or None.
        backend: a backend name, to add its framework's variables, or None.
        timeout: seconds a process waits for the others, > 0; after a failure the others get this plus
            :data:`GRACE` to stop before they are killed.

    Returns:
        The exit status: 0 if all succeeded, else the first failure's (1 for a process killed by a signal).

    Raises:
        DistributedError: ``n`` < 1, no command, a bad timeout or device count, or a command that cannot start.
    """
    if not command:
        raise DistributedError("no command to launch; usage: multigpu launch -n N -- python train.py ...")
    if n < 1:
        raise DistributedError(f"-n must be >= 1, got {n}")
    if devices_per_process is not None and devices_per_process < 1:
        raise DistributedError(f"--devices-per-process must be >= 1, got {devices_per_process}")
    if not timeout > 0:
        raise DistributedError(f"--timeout must be > 0 seconds, got {timeout}")
    lock, processes, streams = threading.Lock(), [], []
    for k, extra in enumerate(environments(n, devices_per_process, backend, timeout)):
        try:
            process = subprocess.Popen(list(command), env={**os.environ, **extra}, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, bufsize=1)
        except OSError as error:
            for started in processes:
                started.kill()
            raise DistributedError(f"cannot start {command[0]!r}: {error}") from error
        processes.append(process)
        streams.append(threading.Thread(target=_stream, args=(k, process.stdout, lock), daemon=True))
        streams[-1].start()
    first_failure: tuple[int, int] | None = None
    deadline = None
    while any(p.poll() is None for p in processes):
        for k, p in enumerate(processes):
            if p.returncode not in (None, 0) and first_failure is None:
                first_failure, deadline = (k, p.returncode), time.monotonic() + timeout + GRACE
        if deadline is not None and time.monotonic() > deadline:
            for k, p in enumerate(processes):
                if p.poll() is None:
                    p.kill()
                    print(f"multigpu launch: process {k} still running {timeout + GRACE:g} s after process "
                          f"{first_failure[0]} failed: killed", file=sys.stderr)
            break
        time.sleep(0.05)
    for p in processes:
        p.wait()
    for thread in streams:
        thread.join(timeout=5)
    statuses = [p.returncode for p in processes]
    if first_failure is None:
        failed = [(k, s) for k, s in enumerate(statuses) if s != 0]
        first_failure = failed[0] if failed else None
    if first_failure is None:
        return 0
    for k, status in enumerate(statuses):
        if status != 0:
            print(f"multigpu launch: process {k} {_describe(status)}", file=sys.stderr)
    return first_failure[1] if first_failure[1] > 0 else 1
