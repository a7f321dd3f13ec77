"""TensorFlow across processes: ``tf.distribute.MultiWorkerMirroredStrategy`` from ``TF_CONFIG``, used for its
collective all-reduce between the processes (each process averages over its own devices first).

Quirks: the strategy's constructor waits for every worker with no deadline of its own, holding Python's lock, so a
watchdog process bounds it (:func:`toolkit.processes.distributed.watched`); once the cluster is up,
``list_logical_devices`` also lists the other workers' devices (the backend keeps this task's); a value handed to
``all_reduce`` must be made inside ``strategy.run`` (else "destinations can not be empty"); a dead peer surfaces as
an ``OpError`` naming ``/task:N`` after the collective timeout or the coordination service's missed heartbeats.
"""

from __future__ import annotations

import json
import os

import numpy as np

from toolkit.backends.tensorflow import environment
from toolkit.errors import DistributedError
from toolkit.processes.distributed import Cluster, bounded, watched

_state: dict = {}


def start(cluster: Cluster) -> None:
    if not cluster.workers:
        raise DistributedError(f"TensorFlow needs every process's address (TF_CONFIG or MULTIGPU_WORKERS); "
                               f"{cluster.source} gave only the coordinator {cluster.coordinator}")
    config = {"cluster": {"worker": list(cluster.workers)}, "task": {"type": "worker", "index": cluster.process_id}}
    os.environ["TF_CONFIG"] = json.dumps(config)
    tf = environment.import_framework()
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=cluster.timeout)

    def join():
        # Not under environment.filtered_stderr: it swaps file descriptor 2 for the whole process, and a
        # PeerLostError's traceback, printed from the main thread while this join still waits, would be lost.
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)

        @tf.function
        def reduce(value):
            replica = lambda v: tf.distribute.get_replica_context().all_reduce("SUM", tf.identity(v))  # noqa: E731
            return strategy.run(replica, args=(value,))

        _state.update(tf=tf, strategy=strategy, reduce=reduce, cluster=cluster)
        _reduce(np.zeros(1))  # every process takes part once: the join is complete

    watched(cluster, "joining the TensorFlow cluster", join)  # the strategy's start holds the GIL while it waits


def _reduce(array: np.ndarray) -> np.ndarray:
    tf, strategy = _state["tf"], _state["strategy"]
    return strategy.experimental_local_results(_state["reduce"](tf.constant(array)))[0].numpy()


def all_reduce_sum(array: np.ndarray, what: str) -> np.ndarray:
    """The elementwise sum of ``array`` over every process."""
    cluster = _state["cluster"]
    return bounded(cluster, what, lambda: _reduce(array))


def local_task() -> str | None:
    """This process's device-name prefix once the cluster is up (its devices are named ``/job:worker/...``)."""
    return f"/job:worker/replica:0/task:{_state['cluster'].process_id}/" if _state else None


def in_step(fn):
    """``fn(*args)`` traced inside the strategy's replica context, within the caller's ``tf.function``, so that
    :func:`step_sum` can reduce across the processes there; its result as this process's value."""
    strategy = _state["strategy"]
    return lambda *args: strategy.experimental_local_results(strategy.run(lambda: fn(*args)))[0]


def step_sum(value):
    """Inside :func:`in_step`: the sum of a (nested) value over every process, one collective all-reduce whose
    gradient is the same sum of the gradients."""
    return _state["tf"].distribute.get_replica_context().all_reduce("SUM", value)
