"""The Theano family's translation of a training step (the rules are the core's, :mod:`toolkit.training.rules`):
engine graphs of each replica's part and its gradient and of the update, and the fused steps that run them.

- one device, JAX linker (:class:`HostStep`): the replica's part, its gradient and the update in one compiled
  call, the outputs written after it;
- one device, C linker (:class:`SharedStep`): the same graph with the parameters in shared variables, each
  update under ``switch(finite, new, old)``;
- several devices (:class:`MeshStep`): one ``jax.jit`` of a ``shard_map`` over the devices (every process's, in a
  job of several), each device running its replica's part and gradient, ``lax.psum`` summing them, every device
  computing the update.
"""

from __future__ import annotations

import numpy as np
import optree

from toolkit.errors import DistributedError
from toolkit.nn.context import single_replica
from toolkit.placement.variables import replicas_of
from toolkit.training import rules

from .compiling import BySignature, building, mode, symbol
from .environment import import_framework
from .mesh import Mesh, ReplicaSum, psum_flat

theano, jax = import_framework()

import jax.numpy as jnp  # noqa: E402

tt = theano.tensor


def replica_loss_and_gradients(model, ops, params, batch, y, metrics=(), replica_sum=None):
    """Rules 2 and 3 as a graph: a replica's part of the loss, its gradient for each parameter, and its parts of the
    new model state and of each metric's mean (:func:`toolkit.training.rules.replica_objective`)."""
    loss, model_state, scores = rules.replica_objective(ops, model, params, batch, y, metrics, replica_sum)
    grads = dict(zip(params, theano.grad(loss, list(params.values()), disconnected_inputs="ignore")))
    return loss, grads, model_state, scores


def update_graph(optimizer, ops, params, grads, slots, step, checked, constraints=None):
    """Rule 5 as a graph: the new parameters (constrained) and optimizer state, and whether the step may be
    written."""
    return ops.call(rules.apply_update, optimizer, params, grads, slots, step, checked, constraints)


def _one_replica_step(model, optimizer, ops, params, batch, y, slots, step, metrics):
    """The graph of a step of one replica (nothing to sum): the loss, the new parameters and optimizer state,
    whether to write them, the new model state and the metrics' means."""
    loss, grads, model_state, scores = replica_loss_and_gradients(model, ops, params, batch, y, metrics,
                                                                  single_replica)
    new_params, new_state, finite = update_graph(optimizer, ops, params, grads, slots, step,
                                                [loss, *model_state.values()], model.constraints)
    return loss, new_params, new_state, finite, model_state, scores


def compile_fused_step(backend, model, optimizer, dtype, training_state, metrics, across_processes):
    """:meth:`toolkit.Backend.compile_fused_step` for the Theano family."""
    replicas = {name: var.replicas for name, var in training_state.params.items()}
    used = len(next(iter(replicas.values())))  # the trainer's devices
    if across_processes:
        if backend.linker == "c":
            return None  # the C linker's host step has no collectives: composed, summed between processes
        local = len(backend.select_devices("all"))
        if used != local:  # the mesh spans every device of every process, each process giving one shard a device
            raise DistributedError(
                f"a {backend.name} trainer in a job of several processes trains on every device of its process: "
                f"got {used} of this process's {local} devices; pass devices=\"all\", or start each process with "
                f"{used} logical device(s)")
        return MeshStep(backend, model, optimizer, dtype, training_state, metrics, across_processes)
    if used > 1:
        return MeshStep(backend, model, optimizer, dtype, training_state, metrics)
    if backend.linker == "c":
        return SharedStep(backend, model, optimizer, dtype, training_state, metrics)
    return HostStep(backend, model, optimizer, dtype, training_state, metrics)


class HostStep:
    """A one-device step as one compiled call, where composing took a gradient call, the sum and an update call."""

    def __init__(self, backend, model, optimizer, dtype, training_state, metrics) -> None:
        ops = backend.ops(dtype)

        def build(current, x, y, slots, step):
            symbols = optree.tree_map(symbol, (current, x, y, slots, step))
            return symbols, _one_replica_step(model, optimizer, ops, *symbols, metrics)

        self._step, self._dtype = BySignature(build, dtype, backend.linker), dtype
        self._device = backend._jax_device(next(iter(training_state.params.values())).devices[0])
        self._training_state = training_state

    def __call__(self, indices, xs, ys, shares, step):
        # NumPy inputs go to jit as they are (it puts them with the parameters, which are committed to their device,
        # faster than a jax.device_put each), but for a large batch, copied first (compiling._ready_on).
        state = self._training_state
        current = {name: var.replicas[0].value for name, var in state.params.items()}
        slots = {slot: {name: var.value for name, var in values.items()} for slot, values in state.slots.items()}
        batch = rules.replica_batch(xs[0], shares[0], self._dtype)
        loss, new_params, new_state, finite, new_model_state, scores = self._step(current, batch, ys[0], slots, step,
                                                                                  device=self._device)
        written = bool(np.asarray(finite))
        if written:  # the step's own outputs, on the device: stored as they are
            state.commit(new_params, new_state, new_model_state, write=_store)
        return loss, np.asarray(written), scores


class SharedStep:
    """A one-device step with the C linker as Theano users wrote it: the parameters and optimizer state in
    ``aesara.shared`` variables, one ``aesara.function(updates=...)`` per batch signature, each update under
    ``switch(finite, new, old)`` so a non-finite step changes nothing. After a written step the trainer's
    variables hold the shared variables' arrays (committed through the trainer's state); before each step, a shared
    variable whose array is not its variable's (one written from outside: ``set_params``, ``restore``; or the
    engine's array of a skipped step, which holds the same values) is given its variable's array. The parameters
    live in shared variables rather than passing in and out of the function, which was slower (the benchmarks
    page)."""

    def __init__(self, backend, model, optimizer, dtype, training_state, metrics) -> None:
        self._model, self._optimizer, self._dtype, self._ops = model, optimizer, dtype, backend.ops(dtype)
        self._metrics, self._training_state = metrics, training_state
        self._params = {name: var.replicas[0] for name, var in training_state.params.items()}
        self._slots, self._model_state = training_state.slots, training_state.model_state
        self._pairs = [(var, theano.shared(var.value, name=name, borrow=True)) for name, var in self._params.items()]
        self._pairs += [(var, theano.shared(var.value, name=f"{slot}/{name}", borrow=True))
                        for slot, values in self._slots.items() for name, var in values.items()]
        self._functions: dict = {}

    @property
    def functions(self) -> tuple:
        """The compiled engine functions, one per batch signature stepped on so far, oldest first: for inspection
        (``aesara.printing.debugprint(function)``, ``function.maker.fgraph``), not to call: a call would update the
        parameters outside the trainer's step (no step count, no model state)."""
        return tuple(self._functions.values())

    def _function(self, batch, y):
        leaves, structure = optree.tree_flatten((batch, y))
        key = (structure, tuple((leaf.dtype, leaf.shape) for leaf in leaves))
        if key not in self._functions:
            shared = iter(s for _, s in self._pairs)
            p = {name: next(shared) for name in self._params}
            slots = {slot: {name: next(shared) for name in values} for slot, values in self._slots.items()}
            with building(self._dtype):
                symbols = optree.tree_map(symbol, (batch, y))
                step = tt.scalar("step", dtype=self._dtype)
                # A shared variable's type has no static shape; the model sees the parameters with theirs (layers
                # read sizes from them), and the updates go to the shared variables.
                typed = {k: tt.specify_shape(v, self._params[k].shape) for k, v in p.items()}
                loss, new_params, new_state, ok, model_state, scores = _one_replica_step(
                    self._model, self._optimizer, self._ops, typed, *symbols, slots, step, self._metrics)
                updates = [(p[k], tt.switch(ok, v, p[k])) for k, v in new_params.items()]
                updates += [(slots[slot][k], tt.switch(ok, v, slots[slot][k]))
                            for slot, values in new_state.items() for k, v in values.items()]
                function = theano.function([*optree.tree_leaves(symbols), step],
                                           [loss, ok, *(model_state[k] for k in self._model_state),
                                            *scores.values()],
                                           updates=updates, mode=mode("c"),
                                           on_unused_input="ignore")  # SGD does not read the step
            function.trust_input = True  # the signature is the one compiled for
            self._functions[key] = function
        return leaves, self._functions[key]

    def __call__(self, indices, xs, ys, shares, step):
        leaves, function = self._function(rules.replica_batch(xs[0], shares[0], self._dtype), ys[0])
        for var, shared in self._pairs:
            if shared.get_value(borrow=True) is not var.value:
                shared.set_value(var.value, borrow=True)
        loss, ok, *outputs = function(*leaves, step)
        if ok:  # the engine wrote the shared variables; the trainer's take their arrays as they are
            arrays = iter([shared.get_value(borrow=True) for _, shared in self._pairs])
            params = {name: next(arrays) for name in self._params}
            slots = {slot: {name: next(arrays) for name in values} for slot, values in self._slots.items()}
            self._training_state.commit(params, slots, dict(zip(self._model_state, outputs)), write=_hold)
        # Not ok: the shared variables hold the old values again (switch), which the next call gives back.
        return loss, ok, {m.name: value for m, value in zip(self._metrics, outputs[len(self._model_state):])}


class MeshStep:
    """A data-parallel step over several JAX devices as one ``jax.jit`` of a ``shard_map`` over a one-axis mesh (what
    JAX recommends over ``pmap``, which current JAX keeps in maintenance only): one dispatch for all devices, the
    replicas' parts summed by ``lax.psum`` and the update computed on every device, so the replicas stay equal
    without a copy. Calling a jitted function per device instead costs a dispatch per device and two cross-device
    copies per parameter (its gradients to the first device, its new value back).

    The parameters, optimizer state and model state go in and out as replicated arrays made of each device's own
    buffer (no copy: each replica's variable holds its device's buffer), the batch as one array split on its first
    axis, one shard per device: the mesh takes shards of one size (the backend's ``equal_shards``), which the
    trainer pads (:mod:`toolkit.training.shards`). Between steps the parameters and optimizer state stay stacked
    across the devices; the variables get their values on first read (:meth:`TheanoVariable.defer`), and a value
    written from outside (``set_params``, ``restore``) is noticed by its version and stacked again.
    """

    _AXIS = "devices"

    def __init__(self, backend, model, optimizer, dtype, training_state, metrics,
                 across_processes: bool = False) -> None:
        replicas = {name: var.replicas for name, var in training_state.params.items()}
        self._dtype, self._replicas, self._training_state = dtype, replicas, training_state
        self._state = training_state.slots
        self._names = list(replicas)
        self._devices = [backend._jax_device(r.device) for r in replicas[self._names[0]]]  # this process's
        # Across processes the mesh spans every process's devices, and each process passes its own shards; the
        # psums then reach every process.
        self._mesh = Mesh(jax.devices() if across_processes else self._devices, self._devices, self._AXIS)
        ops = backend.ops(dtype)

        def build_gradient(params, x, y):
            symbols = optree.tree_map(symbol, (params, x, y))
            return symbols, replica_loss_and_gradients(model, ops, *symbols, metrics, ReplicaSum(self._AXIS))

        def build_update(params, grads, slots, step, checked):
            symbols = optree.tree_map(symbol, (params, grads, slots, step, checked))
            return symbols, update_graph(optimizer, ops, *symbols, model.constraints)

        self._gradient = BySignature(build_gradient, dtype, "jax")
        self._update = BySignature(build_update, dtype, "jax")
        self._mapped: dict = {}
        self._stacked = None  # (params, state, versions) as last written by this step

    def _versions(self) -> tuple:
        return (tuple(r.version for name in self._names for r in self._replicas[name]),
                tuple(var.version for values in self._state.values() for var in values.values()))

    def _stack(self):
        if self._stacked is None or self._stacked[2] != self._versions():
            n, mesh = len(self._devices), self._mesh
            params = {name: mesh.replicated([r.value for r in self._replicas[name]]) for name in self._names}
            state = {slot: {name: mesh.replicated([var.value] * n) for name, var in values.items()}
                     for slot, values in self._state.items()}
            self._stacked = (params, state, self._versions())
        return self._stacked[:2]

    def _mapped_step(self, params, x, y, state, step):
        """The mapped step for these shapes, made from the engine's functions' own JAX code."""
        leaves, structure = optree.tree_flatten((params, x, y, state))
        key = (structure, tuple((a.dtype, a.shape) for a in leaves))
        if key not in self._mapped:
            shard = optree.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), (x, y))
            _, gradient, gradient_spec = self._gradient.compiled(params, *shard)
            checked = [step, *shard[0]["state"].values()]  # the loss (a scalar, as the step) and the new state
            _, update, update_spec = self._update.compiled(params, params, state, step, checked)  # grads: params'

            def run(function, spec, *args):
                outputs = function.raw(*optree.tree_leaves(args))
                return optree.tree_unflatten(spec, [jnp.asarray(o, d) for o, d in zip(outputs, function._dtypes)])

            def replica(params, x, y, state, step):
                x, y = optree.tree_map(lambda a: a[0], (x, y))  # this device's shard, of one
                loss, grads, model_state, scores = psum_flat(run(gradient, gradient_spec, params, x, y), self._AXIS)
                new_params, new_state, finite = run(update, update_spec, params, grads, state, step,
                                                    [loss, *model_state.values()])
                return loss, new_params, new_state, finite, model_state, scores

            whole, split = self._mesh.specs
            self._mapped[key] = jax.jit(self._mesh.map(replica, in_specs=(whole, split, split, whole, whole),
                                                       out_specs=whole))
        return self._mapped[key]

    def __call__(self, indices, xs, ys, shares, step):
        sizes = [len(optree.tree_leaves(y)[0]) for y in ys]
        if len(indices) != len(self._devices) or len(set(sizes)) != 1:
            raise ValueError(f"the mesh step takes one shard of one size per device ({len(self._devices)}); got "
                             f"shards of {sizes} rows for replicas {list(indices)}")
        mesh = self._mesh
        x, y = (optree.tree_map(lambda *a: mesh.split(np.stack(a)), *parts) for parts in (xs, ys))
        x["share"] = mesh.split(np.asarray(shares, self._dtype))  # each device's replica batch
        params, state = self._stack()
        step = mesh.whole(step)
        mapped = self._mapped_step(params, x, y, state, step)
        loss, new_params, new_state, finite, model_state, scores = mapped(params, x, y, state, step)
        written = bool(mesh.local(finite)[0])
        if written:
            def defer(variable, stacked):  # each replica reads its device's part of the stacked array when read
                for i, replica in enumerate(replicas_of(variable)):
                    replica.defer(lambda a=stacked, i=i: mesh.local(a)[i])

            self._training_state.commit(new_params, new_state, model_state, write=defer)
            self._stacked = (new_params, new_state, self._versions())
        return mesh.local(loss)[0], np.asarray(written), {k: mesh.local(v)[0] for k, v in scores.items()}


def _store(variable, value) -> None:
    """The host step's write: the step's output stored on every replica (one, on one device)."""
    variable.store(value)


def _hold(variable, value) -> None:
    """The C-linker step's write: the engine's own array, held as it is (the shared variable keeps it too)."""
    for replica in replicas_of(variable):
        replica.hold(value)
