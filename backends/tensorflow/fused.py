"""TensorFlow's translation of a data-parallel training step (the rules are the core's, :mod:`toolkit.training.rules`):
one ``tf.function`` for the whole step, with the variables captured rather than passed.

TensorFlow's per-call cost (argument canonicalisation, one dispatch per eager op) is most of a small model's step time
when a step is run as several calls. The replicas are traced together (``ReplicatedOps``: each op once per replica,
under its device), so the model can sum over them (synchronized batch normalization), and one gradient of the replicas'
summed parts gives every replica's parameters theirs. Across processes the step runs in MultiWorkerMirroredStrategy's
replica context, whose all-reduce joins the processes' sums inside the graph (differentiably, for the model's
cross-replica sums) and adds up their parts of the loss, gradients, state and metrics before the update.
"""

from __future__ import annotations

import functools

import numpy as np

from toolkit.backends.tensorflow import environment
from toolkit.backends.tensorflow.compiling import call_concrete, converter, dense, traced
from toolkit.backends.tensorflow.ops import Replicated, ReplicatedOps, per_replica, replicated
from toolkit.placement.variables import replicas_of
from toolkit.training import rules

tf = environment.import_framework()

#: How many splits (shares) a fused step keeps as tensors (a run has one or two).
_SPLITS_KEPT = 16


def compile_fused_step(backend, model, optimizer, dtype, training_state, metrics=(), across_processes=False):
    """:meth:`toolkit.Backend.compile_fused_step` for TensorFlow."""
    params, state = training_state.params, training_state.slots
    ops, names = backend.ops(dtype), list(params)
    replica_devices = [backend.native_name(r.device) for r in next(iter(params.values())).replicas]
    home = replica_devices[0]
    if across_processes:
        from toolkit.backends.tensorflow import distributed

        in_step, processes_sum = distributed.in_step, distributed.step_sum
    else:
        in_step, processes_sum = (lambda fn: fn), None

    def step_fn(indices, xs, ys, shares, step):
        replicas = ReplicatedOps(dtype, [replica_devices[i] for i in indices], processes_sum)
        values = {name: Replicated(params[name].replicas[i].value for i in indices) for name in names}
        batches = replicated(*({**x, "share": shares[k]} for k, x in enumerate(xs)))
        loss, new_states, scores = rules.replica_objective(replicas, model, values, batches, replicated(*ys),
                                                           metrics, replicas.replica_sum)
        count = len(indices)
        with tf.device(home):  # rule 4: this process's replicas' parts summed, then the processes'
            loss = tf.add_n(per_replica(loss, count))
            scores = {k: tf.add_n(per_replica(v, count)) for k, v in scores.items()}
            mean_state = {k: tf.add_n(per_replica(v, count)) for k, v in new_states.items()}
        # tf.gradients puts each gradient op on its forward op's device, so every replica's backward pass runs on
        # its own device; a GradientTape would leave them unplaced, and they all ran on the default device.
        variables = [v for name in names for v in values[name].values]
        found = iter(tf.gradients(loss, variables))
        found = {name: [next(found) for _ in values[name].values] for name in names}
        with tf.device(home):
            # A parameter the loss does not use gets a zero gradient, as in the Theano family's backend.
            grads = {k: tf.add_n([dense(g, v) for g, v in zip(found[k], values[k].values)]) for k in names}
            if processes_sum is not None:  # the shares are of the global batch: the processes' parts add up
                loss, grads, mean_state, scores = processes_sum((loss, grads, mean_state, scores))
            current = {name: params[name].replicas[0].value for name in names}
            slots = {slot: {name: var.value for name, var in values.items()} for slot, values in state.items()}
            new_params, new_state, finite = ops.call(rules.apply_update, optimizer, current, grads, slots, step,
                                                     [loss, *mean_state.values()], model.constraints)

        def assign(variable, value):  # traced: each replica's assignment on its device, inside the graph
            for replica in replicas_of(variable):
                with tf.device(backend.native_name(replica.device)):
                    replica.value.assign(value)

        def write():
            training_state.commit(new_params, new_state, mean_state, write=assign)
            return tf.constant(True)

        with tf.device(home):
            written = tf.cond(finite, write, lambda: tf.constant(False))
        return loss, written, scores

    function = traced(in_step(step_fn))
    concrete: dict = {}

    to_tensor = converter()  # the runtime is up: a trainer made this step

    @functools.lru_cache(maxsize=_SPLITS_KEPT)
    def share_tensor(shares: tuple):  # the shares of a split, as one tensor
        return to_tensor(np.asarray(shares, dtype), home)

    def run(indices, xs, ys, shares, step):
        args = (tuple(indices), list(xs), list(ys), share_tensor(tuple(shares)), step)
        leaves = tf.nest.flatten(args[1:])
        # The signature from the arrays before they are converted (a tensor's shape is an object made per call); a
        # variable (model state) keeps its shape, and is a resource input: its handle goes in.
        key = (args[0], tuple((a.shape, a.dtype) if isinstance(a, np.ndarray) else
                              id(a) if isinstance(a, tf.Variable) else (tuple(a.shape), a.dtype) for a in leaves))
        flat = [a.handle if isinstance(a, tf.Variable) else a if isinstance(a, tf.Tensor) else to_tensor(a, home)
                for a in leaves]
        with tf.device(home):  # indices are Python ints: one trace per pattern of non-empty shards
            if key not in concrete:
                concrete[key] = function.get_concrete_function(*args)
            return call_concrete(concrete[key], flat, args)

    run.function = function  # for inspection of the traced graph (DataParallel.fused_step)
    return run
