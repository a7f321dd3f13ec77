"""Theano-family (Aesara, PyTensor) translation of the backend primitives.

Graphs and gradients are built with the engine. With ``linker="jax"`` (the default) they are compiled by its JAX
linker and run with ``jax.device_put`` inputs, one compiled function per input signature, on any JAX device. With
``linker="c"`` they are compiled by its own C linker and run on the host: one device, ``cpu:0``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import optree

from toolkit import backend as interface
from toolkit.errors import LogicalDevicesError
from toolkit.placement.devices import Device, logical_device_count, parse_device

from . import engine
from .environment import import_framework, imported
from .ops import TheanoOps
from .variables import TheanoVariable

theano, jax = import_framework()

import jax.numpy as jnp  # noqa: E402

from toolkit.nn.context import single_replica  # noqa: E402
from toolkit.nn.model import batch  # noqa: E402

tt = theano.tensor
Apply = imported("graph.basic", "Apply")
Op = imported("graph.op", "Op")
jax_funcify = imported("link.jax.dispatch", "jax_funcify")

#: The engine's linkers this backend can compile with.
LINKERS = tuple(engine.MODES)


def _signature(value) -> tuple[str, tuple[int, ...]]:
    """The static type an input is compiled for: its dtype and its whole shape.

    Static shapes let Aesara fold shape arithmetic into constants, so reshapes with -1, their gradients, ``arange(n)``
    and slicing reach ``jax.jit`` as constants, which it requires; and layers can read a kernel's size from its type.
    JAX traces one program per input shape anyway. The cost is one Aesara compilation per distinct batch size
    (about 0.1 s with the JAX linker; the C linker reuses its cached modules).
    """
    return np.dtype(value.dtype).name, tuple(int(size) for size in np.shape(value))


def _symbol(value, name: str | None = None):
    dtype, shape = _signature(value)
    return tt.tensor(dtype=dtype, shape=shape, name=name)


def _building(dtype: str):
    """Build graphs with floatX = the computation dtype: Aesara turns a Python float that float32 cannot hold
    exactly (0.999, 0.1) into a float64 constant unless floatX is float32, which would silently promote a float32
    graph to float64."""
    return theano.config.change_flags(floatX=dtype)


#: The C linker's rewrites the toolkit's functions leave out: ``local_dot22_to_dot22scalar`` turns ``scalar *
#: dot22(a, b)`` into a second product ``dot22scalar(a, b, scalar)`` even where ``dot22(a, b)`` has other clients,
#: and a training step reads each weight gradient twice (the finiteness check, and the update scaled by the learning
#: rate): the digits MLP's step computed 7 products instead of 5. Without it the scaling fuses into the update's
#: elementwise pass, as in a plain function.
C_EXCLUDED_REWRITES = ("local_dot22_to_dot22scalar",)


def _mode(linker: str):
    """The engine's mode for ``linker``, as the toolkit's functions compile with it."""
    if linker == "jax":
        return engine.MODES["jax"]
    return theano.compile.mode.get_mode(engine.MODES[linker]).excluding(*C_EXCLUDED_REWRITES)


class _Function:
    """An Aesara function compiled for the linker, called with native inputs, returning a list of outputs."""

    def __init__(self, inputs, outputs, linker: str) -> None:
        if linker == "jax":
            with warnings.catch_warnings():
                # The JAX linker cannot run Aesara's runtime assertions and warns about each one it drops.
                warnings.filterwarnings("ignore", message="Skipping `CheckAndRaise` Op", category=UserWarning)
                function = theano.function(inputs, outputs, mode=engine.MODES["jax"], on_unused_input="ignore")
            # Calling the Aesara function object copies every input to the host, so all outputs would land on JAX
            # device 0. Its jitted function, called directly with device-placed arrays, runs where they are.
            self._run = function.vm.jit_fn
            self.raw = function.vm.jit_fn.__wrapped__  # the JAX function Aesara made, before jax.jit
            self._dtypes = [np.dtype(o.dtype) for o in outputs]
        else:
            self._run = theano.function(inputs, outputs, mode=_mode(linker), on_unused_input="ignore")
            # Inputs always match the signature compiled for (_BySignature), so Aesara's per-call checks and
            # conversions can go: they were a quarter of a small model's step.
            self._run.trust_input = True

    def __call__(self, *args, device=None) -> list:
        """Run with native inputs. ``device`` (a JAX device) is where outputs that depend on no input (constants,
        ``ones_like`` of a shape) are made; outputs computed from inputs are made where the inputs are."""
        if device is None:
            return list(self._run(*args))
        with jax.default_device(device):
            outputs = list(self._run(*args))
        # An output that Aesara folded to a constant comes back as a float64 host array whatever the graph declares;
        # give it the declared dtype and put it on the device.
        return [o if o.dtype == d else jax.device_put(np.asarray(o, d), device) for o, d in zip(outputs, self._dtypes)]


class _ReplicaSum(Op):
    """The sum of a value over the devices of a mapped step (``lax.psum`` over ``axis``), as an engine op: what
    ``ops.cross_replica_sum`` builds in a multi-device step. Its gradient is the same sum of the gradients: each
    replica differentiates its own share of the loss, and every replica's share depends on every replica's input."""

    __props__ = ("axis",)

    def __init__(self, axis: str) -> None:
        self.axis = axis

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        raise NotImplementedError("a cross-replica sum runs only inside the JAX linker's mapped step")

    def do_constant_folding(self, fgraph, node):
        return False  # a constant input (a shard's count) still differs in sum from itself

    def infer_shape(self, fgraph, node, shapes):
        return shapes

    def grad(self, inputs, output_grads):
        return [self(output_grads[0])]

    def pullback(self, inputs, outputs, output_grads):  # PyTensor 3's gradient method; Aesara calls grad
        return self.grad(inputs, output_grads)


@jax_funcify.register(_ReplicaSum)
def _jax_replica_sum(op, **kwargs):
    return lambda x: jax.lax.psum(x, op.axis)


def _loss_and_grads(model, ops, p, batch, y, reduce=tt.mean, replica_sum=None, metrics=()):
    """The graph of a training run: the loss (per-example losses reduced by ``reduce``), its gradient for each
    parameter, the model state's new values, and each metric's values reduced like the losses. ``replica_sum``
    as in ``Model.train_losses``: None where the run is one device's part of a composed step."""
    losses, model_state, scores = model.train_losses(ops, p, batch, y, replica_sum=replica_sum, metrics=metrics)
    loss = reduce(losses)
    grads = dict(zip(p, theano.grad(loss, list(p.values()), disconnected_inputs="ignore")))
    return loss, grads, model_state, {k: reduce(v) for k, v in scores.items()}


def _training_step(model, optimizer, ops, p, batch, y, slots, step, metrics=()):
    """The graph of a one-device step: the loss, the new parameters and optimizer state, whether the loss, every
    gradient and the new model state are finite, the model state's new values and the metrics' means."""
    loss, grads, model_state, scores = _loss_and_grads(model, ops, p, batch, y, replica_sum=single_replica,
                                                       metrics=metrics)
    new_params, new_state, finite = ops.call(optimizer.update, p, grads, slots, step)
    finite = tt.and_(finite, ops.call(type(ops).all_finite, [loss, *model_state.values()]))
    return loss, new_params, new_state, finite, model_state, scores


class _BySignature:
    """Compile ``build(*example_args)`` once per input signature and run it.

    ``build`` returns ``(symbols, outputs)``: ``symbols`` mirrors the arguments' pytree (so both flatten to the same
    input order) and ``outputs`` is any pytree of symbolic results, which calls return with native arrays in it.
    """

    def __init__(self, build: Callable, dtype: str, linker: str) -> None:
        self._build, self._dtype, self._linker, self._compiled = build, dtype, linker, {}

    def __call__(self, *args, device=None):
        leaves, function, spec = self.compiled(*args)
        return optree.tree_unflatten(spec, function(*leaves, device=device))

    def compiled(self, *args):
        """``(leaves of args, _Function, output pytree spec)``, compiling for this signature if needed."""
        leaves, structure = optree.tree_flatten(args)
        key = (structure, tuple((leaf.dtype, leaf.shape) for leaf in leaves))  # names matter too, not only shapes
        if key not in self._compiled:
            with _building(self._dtype):
                symbols, outputs = self._build(*args)
            outputs, spec = optree.tree_flatten(outputs)
            self._compiled[key] = (_Function(optree.tree_leaves(symbols), outputs, self._linker), spec)
        return (leaves, *self._compiled[key])


def _psum_flat(tree, axis):
    """``lax.psum`` of a pytree as one flat vector: on CPU each operand of a psum is an all-reduce of its own, and
    five of them took 0.9 ms where one of their concatenation took 0.3 ms (4 devices, jax 0.4.30)."""
    leaves, spec = optree.tree_flatten(tree)
    total = jax.lax.psum(jnp.concatenate([jnp.ravel(leaf) for leaf in leaves]), axis)
    ends = np.cumsum([leaf.size for leaf in leaves])
    return optree.tree_unflatten(spec, [total[end - leaf.size:end].reshape(leaf.shape)
                                        for leaf, end in zip(leaves, ends)])


class _SharedStep:
    """A one-device step with the C linker as Theano users wrote it: the parameters and optimizer state in
    ``aesara.shared`` variables, one ``aesara.function(updates=...)`` per batch signature, each update under
    ``switch(finite, new, old)`` so a non-finite step changes nothing. The variables hold the shared variables'
    arrays; one written from outside (``set_params``, ``restore``) is given back to its shared variable before the
    next step. Passing parameters in and out of the function instead cost 25% more than the native step."""

    def __init__(self, backend, model, optimizer, dtype, params, state, model_state, metrics) -> None:
        self._model, self._optimizer, self._dtype, self._ops = model, optimizer, dtype, backend.ops(dtype)
        self._metrics = metrics
        self._params, self._slots, self._model_state = params, state, model_state
        self._pairs = [(var, theano.shared(var.value, name=name, borrow=True)) for name, var in params.items()]
        self._pairs += [(var, theano.shared(var.value, name=f"{slot}/{name}", borrow=True))
                        for slot, values in state.items() for name, var in values.items()]
        self._functions: dict = {}

    def _function(self, batch, y):
        leaves, structure = optree.tree_flatten((batch, y))
        key = (structure, tuple((leaf.dtype, leaf.shape) for leaf in leaves))
        if key not in self._functions:
            shared = iter(s for _, s in self._pairs)
            p = {name: next(shared) for name in self._params}
            slots = {slot: {name: next(shared) for name in values} for slot, values in self._slots.items()}
            with _building(self._dtype):
                symbols = optree.tree_map(_symbol, (batch, y))
                step = tt.scalar("step", dtype=self._dtype)
                # A shared variable's type has no static shape; the model sees the parameters with theirs (layers
                # read sizes from them), and the updates go to the shared variables.
                typed = {k: tt.specify_shape(v, self._params[k].shape) for k, v in p.items()}
                loss, new_params, new_state, ok, model_state, scores = _training_step(
                    self._model, self._optimizer, self._ops, typed, *symbols, slots, step, self._metrics)
                updates = [(p[k], tt.switch(ok, v, p[k])) for k, v in new_params.items()]
                updates += [(slots[slot][k], tt.switch(ok, v, slots[slot][k]))
                            for slot, values in new_state.items() for k, v in values.items()]
                function = theano.function([*optree.tree_leaves(symbols), step],
                                           [loss, ok, *(model_state[k] for k in self._model_state),
                                            *scores.values()],
                                           updates=updates, mode=_mode("c"),
                                           on_unused_input="ignore")  # SGD does not read the step
            function.trust_input = True  # the signature is the one compiled for
            self._functions[key] = function
        return leaves, self._functions[key]

    def __call__(self, indices, xs, ys, weights, step):
        leaves, function = self._function(xs[0], ys[0])
        for var, shared in self._pairs:
            if shared.get_value(borrow=True) is not var.value:
                shared.set_value(var.value, borrow=True)
        loss, ok, *outputs = function(*leaves, step)
        for var, shared in self._pairs:
            var._value = shared.get_value(borrow=True)  # the new value, or the old one if not ok
        if ok:
            for var, value in zip(self._model_state.values(), outputs):
                var._write(value)
        return loss, ok, {m.name: value for m, value in zip(self._metrics, outputs[len(self._model_state):])}


class _Mesh:
    """A one-axis mesh over the step's devices and the arrays a mapped step takes and gives.

    ``devices`` are every device of the step (every process's, in order); ``local`` this process's, in replica order.
    Arrays are either split along their first axis, one row per device, or whole on every device (replicated).
    """

    def __init__(self, devices, local, axis: str) -> None:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.local_devices, self._axis = list(local), axis
        self._mesh = Mesh(np.asarray(devices, dtype=object), (axis,))
        self.specs = (PartitionSpec(), PartitionSpec(axis))  # whole, split
        self._whole, self._split = (NamedSharding(self._mesh, spec) for spec in self.specs)
        self._count = len(devices)
        self._one_process = len(self.local_devices) == self._count

    def map(self, fn, in_specs, out_specs):
        """``fn`` run on every device with its shards, named axis ``axis`` (``shard_map``; JAX checks nothing of
        replication: the psums make the outputs equal, and ``fn`` does not use JAX's variance typing)."""
        if hasattr(jax, "shard_map"):  # jax >= 0.7
            return jax.shard_map(fn, mesh=self._mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
        from jax.experimental.shard_map import shard_map  # jax 0.4.30, under Aesara

        return shard_map(fn, self._mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)

    def split(self, stacked: np.ndarray):
        """This process's rows (one per local device) as the step's array split over every device."""
        if self._one_process:
            return jax.device_put(stacked, self._split)
        rows = [jax.device_put(stacked[i:i + 1], device) for i, device in enumerate(self.local_devices)]
        return jax.make_array_from_single_device_arrays((self._count, *stacked.shape[1:]), self._split, rows)

    def whole(self, value):
        """A host value, whole on every device."""
        if self._one_process:
            return jax.device_put(value, self._whole)
        return self.replicated([value] * len(self.local_devices))

    def replicated(self, values: list):
        """One array whole on every device, made of ``values[i]`` on local device ``i`` (no copy where it is there
        already): the replicas of a variable."""
        values = [jax.device_put(v, device) for v, device in zip(values, self.local_devices)]
        return jax.make_array_from_single_device_arrays(np.shape(values[0]), self._whole, values)

    def local(self, array) -> list:
        """An output's buffer on each local device, in replica order (its row where it is split)."""
        shards = {shard.device: shard.data for shard in array.addressable_shards}
        return [shards[device] for device in self.local_devices]


class _StackedStep:
    """A data-parallel step over several JAX devices as one ``jax.jit`` of a ``shard_map`` over a one-axis mesh (what
    JAX recommends over ``pmap``, which current JAX keeps in maintenance only): one dispatch for all devices, the
    gradients summed by ``lax.psum`` and the update computed on every device, so the replicas stay equal without a
    copy. Calling a jitted function per device instead cost a dispatch each, and every cross-device copy (the
    gradients to the first device, the new parameters back) about 40 microseconds in jax 0.4.30.

    The parameters, optimizer state and model state go in and out as replicated arrays made of each device's own
    buffer (no copy: each replica's variable holds its device's buffer), the batch as one array split on its first
    axis, one shard per device. Each device's loss is ``sum(loss) / batch``, so that the psum is the full-batch mean.
    The mesh needs equal shards:
    uneven ones (a weighted split, a batch that does not divide) are padded to the largest by repeating a row, with
    row weights 0 that leave the padding out of the losses, the metrics and ``ops.moments`` (see
    :attr:`toolkit.nn.context.RunContext.row_weights`). A model whose replicas must run together (synchronized
    statistics) or that says it is ``rows_independent`` (the built-in and imported Keras models) takes that path;
    a model of one's own may mix rows in its own code, which would see the padding, so for it an uneven split
    returns None and the trainer composes the step. Between steps the parameters
    and optimizer state stay stacked across the devices; the variables get their values on first read
    (:meth:`TheanoVariable._defer`), and a value written from outside (``set_params``, ``restore``) is noticed by
    its version and stacked again.
    """

    _AXIS = "devices"

    def __init__(self, backend, model, optimizer, dtype, replicas, state, model_state, metrics,
                 processes=None) -> None:
        self._dtype, self._replicas, self._state, self._model_state = dtype, replicas, state, model_state
        self._rows_independent = model.rows_independent
        self._names = list(replicas)
        self._devices = [backend._jax_device(r.device) for r in replicas[self._names[0]]]  # this process's
        # Across processes (``processes``: the backend's distributed module) the pmap spans every process's device
        # and each process passes its own; the psums then reach every process.
        self._processes = processes
        self._mesh = _Mesh(jax.devices() if processes is not None else self._devices, self._devices, self._AXIS)
        ops = backend.ops(dtype)

        def build_gradient(params, x, y, scale):
            symbols = optree.tree_map(_symbol, (params, x, y, scale))
            p, x, y, scale = symbols
            rows = x.get("rows")

            def replica_sum(value):
                self._synchronized = True
                return _ReplicaSum(self._AXIS)(value)

            self._synchronized = False
            return symbols, _loss_and_grads(model, ops, p, x, y, replica_sum=replica_sum, metrics=metrics,
                                            reduce=lambda v: tt.sum(v if rows is None else v * rows) * scale)

        def build_update(params, grads, slots, step):
            symbols = optree.tree_map(_symbol, (params, grads, slots, step))
            return symbols, ops.call(optimizer.update, *symbols)

        self._gradient = _BySignature(build_gradient, dtype, "jax")
        self._update = _BySignature(build_update, dtype, "jax")
        self._mapped: dict = {}
        self._stacked = None  # (params, state, versions) as last written by this step
        self._synchronized: bool | None = None  # whether the model sums over replicas; known once a graph is built

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

    def _mapped_step(self, params, x, y, scale, state, share, step):
        """The mapped step for these shapes, made from the engine's functions' own JAX code."""
        leaves, structure = optree.tree_flatten((params, x, y, state))
        key = (structure, tuple((a.dtype, a.shape) for a in leaves))
        if key not in self._mapped:
            shard = optree.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), (x, y))
            _, gradient, gradient_spec = self._gradient.compiled(params, *shard, scale)
            _, update, update_spec = self._update.compiled(params, params, state, step)  # grads: params' shapes

            def run(function, spec, *args):
                outputs = function.raw(*optree.tree_leaves(args))
                return optree.tree_unflatten(spec, [jnp.asarray(o, d) for o, d in zip(outputs, function._dtypes)])

            def replica(params, x, y, scale, state, share, step):
                x, y, share = optree.tree_map(lambda a: a[0], (x, y, share))  # this device's shard, of one
                loss, grads, model_state, scores = run(gradient, gradient_spec, params, x, y, scale)
                # The loss and the metrics are already each replica's share of the batch's mean; the new model state
                # is weighted by the replica's share of the batch.
                loss, grads, model_state, scores = _psum_flat(
                    (loss, grads, {k: v * share for k, v in model_state.items()}, scores), self._AXIS)
                new_params, new_state, finite = run(update, update_spec, params, grads, state, step)
                for value in (loss, *model_state.values()):
                    finite = jnp.logical_and(finite, jnp.all(jnp.isfinite(value)))
                return loss, new_params, new_state, finite, model_state, scores

            whole, split = self._mesh.specs
            self._mapped[key] = jax.jit(self._mesh.map(replica, in_specs=(whole, split, split, whole, whole, split,
                                                                          whole), out_specs=whole))
        return self._mapped[key]

    def _padded(self, indices, xs, ys, size):
        """Every device's shard padded to ``size`` rows by repeating its last row (a device without a shard repeats
        the batch's first row), each with its ``rows`` weights, and each device's example count."""
        shards = dict(zip(indices, zip(xs, ys)))
        padded, counts = [], []
        for index in range(len(self._devices)):
            x, y = shards.get(index, (xs[0], ys[0][:0]))
            taken = np.minimum(np.arange(size), max(len(y), 1) - 1)
            shard = batch(optree.tree_map(lambda a, taken=taken: a[taken], x["x"]), x["keys"][taken], x["state"],
                          rows=(np.arange(size) < len(y)).astype(self._dtype))
            padded.append((shard, (y if len(y) else ys[0])[taken]))
            counts.append(len(y))
        return [shard for shard, _ in padded], [y for _, y in padded], counts

    def _sizes(self, indices, ys) -> list[int]:
        """Every device's shard size, over every process of the step (learnt by an all-reduce across processes, so
        that every process pads alike and decides alike)."""
        local = np.zeros(len(self._devices))
        local[list(indices)] = [len(y) for y in ys]
        if self._processes is None:
            return [int(n) for n in local]
        cluster = self._processes.cluster()
        table = np.zeros((cluster.num_processes, len(local)))
        table[cluster.process_id] = local
        return [int(round(n)) for n in self._processes.all_reduce_sum(table.ravel(), "the shard sizes of a step")]

    def __call__(self, indices, xs, ys, weights, step):
        sizes = self._sizes(indices, ys)
        counts = [len(y) for y in ys]
        if len(set(sizes)) != 1:
            if self._synchronized is False and not self._rows_independent:
                return None
            xs, ys, counts = self._padded(indices, xs, ys, max(sizes))
        mesh = self._mesh
        x, y = optree.tree_map(lambda *a: mesh.split(np.stack(a)), *xs), mesh.split(np.stack(ys))
        params, state = self._stack()
        total = sum(sizes)
        scale, step = mesh.whole(np.asarray(1.0 / total, self._dtype)), mesh.whole(step)
        share = mesh.split(np.asarray(counts, self._dtype) / np.asarray(total, self._dtype))
        mapped = self._mapped_step(params, x, y, scale, state, share, step)
        if "rows" in xs[0] and not (self._synchronized or self._rows_independent):
            return None  # a model that may mix rows in its own code: compose the step (exact for any model)
        loss, new_params, new_state, finite, model_state, scores = mapped(params, x, y, scale, state, share, step)
        written = bool(mesh.local(finite)[0])
        if written:
            for name, var in self._model_state.items():
                for i, replica in enumerate(var.replicas):
                    replica._defer(lambda a=model_state[name], i=i: mesh.local(a)[i])
            for name in self._names:
                for i, replica in enumerate(self._replicas[name]):
                    replica._defer(lambda a=new_params[name], i=i: mesh.local(a)[i])
            for slot, values in self._state.items():
                for name, var in values.items():
                    var._defer(lambda a=new_state[slot][name]: mesh.local(a)[0])
            self._stacked = (new_params, new_state, self._versions())
        return mesh.local(loss)[0], np.asarray(written), {k: mesh.local(v)[0] for k, v in scores.items()}


class _Part:
    """A model part compiled twice: its forward, and its vector-Jacobian product with Aesara's ``known_grads``."""

    def __init__(self, backend: Backend, forward: _BySignature, vjp: _BySignature) -> None:
        self._backend, self._forward, self._vjp = backend, forward, vjp

    def forward(self, params, inputs, device):
        return self._forward(params, list(inputs), device=self._backend._jax_device(device))

    def vjp(self, params, inputs, cotangent, device):
        output, grads, input_grads = self._vjp(params, list(inputs), cotangent,
                                               device=self._backend._jax_device(device))
        return output, grads, [input_grads.get(str(i)) for i in range(len(inputs))]


class Backend(interface.Backend):
    name = engine.NAME

    def __init__(self, linker: str = "jax") -> None:
        if linker not in LINKERS:
            raise ValueError(f"{engine.NAME} linker must be one of {LINKERS}, got {linker!r}")
        self.linker = linker
        self._jax_devices: dict[Device, object] = {}
        if linker == "c":
            self._table = [(Device("cpu", 0), f"host ({engine.TITLE} C linker)")]
        else:
            self._table = []
            for kind in ("cpu", "gpu"):
                try:
                    found = jax.local_devices(backend=kind)  # this process's, when several run one job
                except RuntimeError:
                    continue  # no such platform in this jaxlib
                for index, native in enumerate(found):
                    self._jax_devices[Device(kind, index)] = native
                    self._table.append((Device(kind, index), str(native)))
            wanted, cpus = logical_device_count(), len(self.list_devices("cpu"))
            if wanted is not None and cpus != wanted:
                raise LogicalDevicesError(f"asked for {wanted} logical CPU devices, JAX has {cpus}")
        self._devices_by_native = {native: device for device, native in self._jax_devices.items()}
        self._shardings = {native: jax.sharding.SingleDeviceSharding(native) for native in self._jax_devices.values()}
        self._known = {device for device, _ in self._table}
        self._ops: dict[str, TheanoOps] = {}
        self._compiled: dict[tuple, object] = {}

    def __repr__(self) -> str:
        return f"<Backend {engine.NAME} (linker={self.linker}): {self._listing()}>"

    def device_table(self):
        return list(self._table)

    def place(self, value, device):
        device = parse_device(device)
        if device not in self._known:
            raise self._not_found(device)
        if self.linker == "c":
            return np.asarray(value)
        native = self._jax_devices[device]
        if isinstance(value, jax.Array) and value.sharding == self._shardings[native]:
            return value  # already there: jax.device_put would still cost tens of microseconds
        return jax.device_put(value, native)

    def _jax_device(self, device):
        return self._jax_devices.get(device)  # None under the C linker

    def to_numpy(self, value):
        return np.asarray(value)

    def device_of(self, value):
        if isinstance(value, np.ndarray):
            return Device("cpu", 0)
        (native,) = value.devices()
        return self._devices_by_native[native]

    def ops(self, dtype):
        if dtype not in self._ops:
            self._ops[dtype] = TheanoOps(dtype, self.linker)
        return self._ops[dtype]

    def call(self, fn, device, inputs, dtype):
        key = ("call", fn, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(inputs):
                symbols = optree.tree_map(_symbol, inputs)
                return symbols, ops.call(fn, **symbols)

            self._compiled[key] = _BySignature(build, dtype, self.linker)
        placed = optree.tree_map(lambda value: self.place(value, device), dict(inputs))
        return self._compiled[key](placed, device=self._jax_device(device))

    def compile_gradient(self, model, dtype, metrics=()):
        key = ("gradient", model, dtype, metrics)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(params, x, y):
                symbols = optree.tree_map(_symbol, (params, x, y))
                p, x, y = symbols
                return symbols, _loss_and_grads(model, ops, p, x, y, metrics=metrics)

            compiled = _BySignature(build, dtype, self.linker)
            self._compiled[key] = lambda params, x, y, device: compiled(params, x, y, device=self._jax_device(device))
        return self._compiled[key]

    def compile_update(self, optimizer, dtype):
        key = ("update", optimizer, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(*args):
                symbols = optree.tree_map(_symbol, args)
                return symbols, ops.call(optimizer.update, *symbols)

            compiled = _BySignature(build, dtype, self.linker)
            self._compiled[key] = lambda params, grads, state, step, device: compiled(
                params, grads, state, step, device=self._jax_device(device))
        return self._compiled[key]

    def compile_part(self, fn, dtype):
        key = ("part", fn, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build_forward(params, inputs):
                symbols = optree.tree_map(_symbol, (params, inputs))
                return symbols, ops.call(fn, symbols[0], *symbols[1])

            def build_vjp(params, inputs, cotangent):
                symbols = optree.tree_map(_symbol, (params, inputs, cotangent))
                p, ins, c = symbols
                output = ops.call(fn, p, *ins)
                floats = [i for i, x in enumerate(ins) if x.dtype.startswith("float")]
                grads = theano.grad(None, [*p.values(), *(ins[i] for i in floats)], known_grads={output: c},
                                    disconnected_inputs="ignore")
                return symbols, (output, dict(zip(p, grads[:len(p)])), dict(zip(map(str, floats), grads[len(p):])))

            self._compiled[key] = _Part(self, _BySignature(build_forward, dtype, self.linker),
                                        _BySignature(build_vjp, dtype, self.linker))
        return self._compiled[key]

    def compile_fused_step(self, model, optimizer, dtype, params, state, model_state, metrics=(),
                           across_processes=False):
        # One device: the loss, the gradient and the update in one compiled call, where composing took a gradient
        # call, eager averaging ops and an update call. Several JAX devices: one jitted shard_map (see _StackedStep).
        replicas = {name: var.replicas for name, var in params.items()}
        if across_processes:
            if self.linker == "c":
                return None  # the C linker's host step has no collectives: composed, reduced between processes
            from . import distributed

            return _StackedStep(self, model, optimizer, dtype, replicas, state, model_state, metrics, distributed)
        if len(next(iter(replicas.values()))) > 1:
            return _StackedStep(self, model, optimizer, dtype, replicas, state, model_state, metrics)
        if self.linker == "c":
            return _SharedStep(self, model, optimizer, dtype, {name: r[0] for name, r in replicas.items()}, state,
                               {name: var.replicas[0] for name, var in model_state.items()}, metrics)
        ops, names = self.ops(dtype), list(params)

        def build(current, x, y, slots, step):
            symbols = optree.tree_map(_symbol, (current, x, y, slots, step))
            p, x, y, slots, step = symbols
            return symbols, _training_step(model, optimizer, ops, p, x, y, slots, step, metrics)

        whole_step = _BySignature(build, dtype, self.linker)
        device = self._jax_device(next(iter(params.values())).devices[0])

        def run(indices, xs, ys, weights, step):
            # NumPy inputs go to jit as they are: it puts them with the parameters, which are committed to their
            # device, faster than a jax.device_put each.
            current = {name: replicas[name][0].value for name in names}
            slots = {slot: {name: var.value for name, var in values.items()} for slot, values in state.items()}
            loss, new_params, new_state, finite, new_model_state, scores = whole_step(current, xs[0], ys[0], slots,
                                                                                      step, device=device)
            written = bool(np.asarray(finite))
            if written:
                for name, value in new_model_state.items():
                    model_state[name].replicas[0]._write(value)
                for name in names:
                    replicas[name][0]._write(new_params[name])
                for slot, values in new_state.items():
                    for name, value in values.items():
                        state[slot][name]._write(value)
            return loss, np.asarray(written), scores

        return run

    def _new_variable(self, value, device, name):
        return TheanoVariable(value, device, lambda v: self.place(v, device), name)

    def _weighted_sum(self, values: Sequence, weights: Sequence[float], device):
        values = [self.place(v, device) for v in values]
        total = weights[0] * values[0]
        for w, v in zip(weights[1:], values[1:]):
            total = total + w * v
        return total

    def _concat(self, values, device):
        values = [self.place(v, device) for v in values]
        return np.concatenate(values) if self.linker == "c" else jnp.concatenate(values)
