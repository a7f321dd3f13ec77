"""The Theano family's JAX path across processes: ``jax.distributed`` (process 0 runs the coordination service) with
gloo collectives on CPU, and a jitted ``shard_map`` psum over every process's devices for the all-reduce between
processes.

Quirks: CPU collectives need ``jax_cpu_collectives_implementation="gloo"``; jax 0.4.30 (Aesara's, and PyTensor's
``pytensor-jax04`` extra) runs one device per process (two abort after 30 s, openxla/xla#16430), jax 0.10 several;
``initialize`` waits without a deadline on process 0 when a process never joins, so it runs under
:func:`toolkit.processes.distributed.bounded`; a gloo all-reduce with a dead peer aborts the process (a fatal check,
not an exception), so every reduction first meets the others at a coordination-service barrier, whose timeout names
the missing task; and the shutdown at exit waits for every process, so after a lost process the toolkit leaves
without it.
"""

from __future__ import annotations

import numpy as np

from toolkit.errors import DistributedError
from toolkit.processes.distributed import Cluster, beacon, bounded

from . import engine
from .environment import import_framework
from .mesh import Mesh

_state: dict = {}
#: Seconds JAX's own join deadline exceeds the toolkit's timeout.
_JAX_DEADLINE_MARGIN = 30


#: The first jax whose CPU collectives run several devices per process (0.4.30 aborts: openxla/xla#16430; 0.10 runs).
SEVERAL_DEVICES_JAX = (0, 5)


def _jax_version() -> tuple[int, ...]:
    from importlib.metadata import version

    return tuple(int(part) for part in version("jax").split(".")[:2])


def several_devices_per_process() -> bool:
    """Whether this engine's jax trains several devices per process across processes.

    Returns:
        True from :data:`SEVERAL_DEVICES_JAX`; before it :func:`start` refuses more than one device per process.
    """
    return _jax_version() >= SEVERAL_DEVICES_JAX


def start(cluster: Cluster) -> None:
    if cluster.devices_per_process not in (None, 1) and not several_devices_per_process():
        raise DistributedError(f"the {engine.TITLE} backend runs one device per process across processes with jax "
                               f"{'.'.join(map(str, _jax_version()))} (its CPU collectives, openxla/xla#16430); got "
                               f"{cluster.devices_per_process} per process")
    from toolkit.backend.logical_devices import logical_device_count, use_logical_devices

    wanted = cluster.devices_per_process or 1
    if logical_device_count() != wanted:
        use_logical_devices(wanted)

    _, jax = import_framework()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    _state["beacon"] = beacon(cluster)  # lets the others tell this process is alive

    def join():
        # JAX's own deadline aborts the process (a fatal check) where the coordinator is missing: give it more time
        # than the toolkit's, which raises a PeerLostError naming the missing process.
        jax.distributed.initialize(cluster.coordinator, cluster.num_processes, cluster.process_id,
                                   initialization_timeout=int(cluster.timeout) + _JAX_DEADLINE_MARGIN)
        mesh = Mesh(jax.devices(), jax.local_devices(), "processes")
        whole, split = mesh.specs
        psum = jax.jit(mesh.map(lambda x: jax.lax.psum(x, "processes"), in_specs=split, out_specs=whole))
        _state.update(jax=jax, cluster=cluster, mesh=mesh, psum=psum, client=_client(), count=0)

    bounded(cluster, "joining the JAX coordination service", join)


def _client():
    from jax._src import distributed  # the coordination-service client jax.distributed made

    return distributed.global_state.client


def all_reduce_sum(array: np.ndarray, what: str) -> np.ndarray:
    """The elementwise sum of ``array`` over every process."""
    cluster, jax = _state["cluster"], _state["jax"]
    _state["count"] += 1
    barrier = f"multigpu-reduce-{_state['count']}"

    def reduce():
        _state["client"].wait_at_barrier(barrier, int(cluster.timeout * 1000))
        # This process's value on its first device, zeros on its others: the psum over every device is the sum over
        # the processes.
        mesh, value = _state["mesh"], np.asarray(array)
        rows = np.zeros((len(mesh.local_devices), *value.shape), value.dtype)
        rows[0] = value
        return np.asarray(mesh.local(_state["psum"](mesh.split(rows)))[0])[0]

    try:
        return bounded(cluster, what, reduce)
    except Exception:
        _forget_shutdown(jax)
        raise


def _forget_shutdown(jax) -> None:
    """After a lost process, JAX's shutdown at exit would wait for it: drop the client and service instead."""
    from jax._src import distributed

    distributed.global_state.client = None
    distributed.global_state.service = None
