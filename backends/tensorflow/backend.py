"""TensorFlow translation of the backend primitives: ``tf.device`` scopes, eager copies, a ``tf.function`` per
device for the gradient and the update."""

from __future__ import annotations

import functools

import numpy as np

from toolkit import backend as interface
from toolkit.backend import scored_mean
from toolkit.backends.tensorflow import environment
from toolkit.backends.tensorflow.ops import Replicated, ReplicatedOps, TensorFlowOps, per_replica, replicated
from toolkit.backends.tensorflow.variables import TensorFlowVariable
from toolkit.errors import DeviceParseError, LogicalDevicesError
from toolkit.placement.devices import Device, logical_device_count, parse_device

tf = environment.import_framework()


def _traced(fn):
    """``fn`` as a ``tf.function`` that traces it as plain Python. Model code is written against the neutral ops,
    with Python control flow on Python values only, so AutoGraph has nothing to convert; left on, it reads each
    function's source and warns for every one it cannot find (code typed into a REPL, piped through stdin, lambdas).
    TensorFlow's frequent-retracing warning counts traces per code object, and every per-device function shares one
    body's code, so each new device or model looked like a retrace; each function traces once per input signature,
    and reduce_retracing bounds that. Keras silences its own functions the same way."""
    function = tf.function(fn, reduce_retracing=True, autograph=False)
    function._omit_frequent_tracing_warning = True
    return function


def _call_concrete(concrete, flat: list, args: tuple):
    """Call a traced step's concrete function with its inputs already flat tensors. A ``tf.function`` call
    canonicalizes its nested arguments against every signature it has traced, and a concrete function's structured
    call binds and flattens them again: 0.2-0.4 ms a step, measured with cProfile on the digits MLP (a 0.3 ms step).
    The flat call skips both; where TensorFlow lacks it or the inputs do not match it, the structured call."""
    call_flat = getattr(concrete, "_call_flat", None)
    if call_flat is None or len(flat) != len(concrete.inputs) - len(concrete.captured_inputs):
        return concrete(*args)
    return call_flat(flat, concrete.captured_inputs)


def _fast_tensor():
    """A NumPy array (or scalar) to an eager tensor on a device, for a step's inputs: ``EagerTensor(value, device,
    None)``, the constructor every conversion ends in. ``tf.convert_to_tensor`` passes through four layers of
    dispatch first and copies the array: 37-46 microseconds an input against 11-15 measured on this machine, and a
    step had five inputs. The tensor may share the array's memory: the step is synchronous (its outputs are read
    before it returns, and nothing keeps its inputs), and TensorFlow never writes into a buffer it does not own.
    Where TensorFlow lacks the constructor, ``tf.convert_to_tensor`` under the device's scope."""
    try:
        from tensorflow.python.eager import context
        from tensorflow.python.framework.ops import EagerTensor

        context.ensure_initialized()
    except (ImportError, AttributeError):
        def convert(value, device):
            with tf.device(device):
                return tf.convert_to_tensor(value)

        return convert

    def convert(value, device):
        return EagerTensor(value, device, None)

    return convert


_to_tensor = _fast_tensor()


def _dense(grad, like):
    """A gradient as a dense tensor: zeros where the loss does not use the value (as the Aesara backend gives), and
    ``tf.gather``'s IndexedSlices (the gradient of ``ops.take``) added up into a tensor."""
    return tf.zeros_like(like) if grad is None else tf.convert_to_tensor(grad)


#: How many splits (shard weights) a fused step keeps as tensors (a run has one or two).
_SPLITS_KEPT = 16


class _PerDevice:
    """One ``tf.function`` per device, made on first use. The ``tf.device`` scope sits inside the traced body, so
    every op of the function is pinned to its device whatever the caller's scope; the call is made under the same
    scope because TensorFlow returns a function's outputs on the device it was called from."""

    def __init__(self, backend: Backend, body) -> None:
        self._backend, self._body, self._functions = backend, body, {}

    def __call__(self, *args, device: Device):
        function = self._functions.get(device)
        if function is None:
            name = self._backend.native_name(device)

            def placed(*inner):
                with tf.device(name):
                    return self._body(*inner)

            function = self._functions[device] = _traced(placed)
        with tf.device(self._backend.native_name(device)):
            return function(*args)


class _Part:
    def __init__(self, forward: _PerDevice, vjp: _PerDevice) -> None:
        self._forward, self._vjp = forward, vjp

    def forward(self, params, inputs, device):
        return self._forward(params, list(inputs), device=device)

    def vjp(self, params, inputs, cotangent, device):
        return self._vjp(params, list(inputs), cotangent, device=device)


class Backend(interface.Backend):
    name = "tensorflow"

    def __init__(self) -> None:
        self._table = []
        with environment.filtered_stderr():  # the first device query starts the runtime, which may log noise
            logical_devices = tf.config.list_logical_devices()
        from toolkit.backends.tensorflow.distributed import local_task

        task = local_task()  # across processes TensorFlow also lists the other workers' devices
        for logical in logical_devices:
            if task is not None and not logical.name.startswith(task):
                continue
            try:
                self._table.append((parse_device(logical.name), logical.name))
            except DeviceParseError:
                continue  # TPUs and pluggable devices are not toolkit devices
        self._names = dict(self._table)
        wanted, cpus = logical_device_count(), len(self.list_devices("cpu"))
        if wanted is not None and cpus != wanted:
            raise LogicalDevicesError(f"asked for {wanted} logical CPU devices, TensorFlow has {cpus}")
        self._ops: dict[str, TensorFlowOps] = {}
        self._compiled: dict[tuple, object] = {}

    def device_table(self):
        return list(self._table)

    def native_name(self, device):
        device = parse_device(device)
        if device not in self._names:
            raise self._not_found(device)
        return self._names[device]

    def place(self, value, device):
        with tf.device(self.native_name(device)):
            return tf.identity(value)

    def to_numpy(self, value):
        return value.numpy() if hasattr(value, "numpy") else np.asarray(value)

    def device_of(self, value):
        return parse_device(value.device)

    def ops(self, dtype):
        if dtype not in self._ops:
            self._ops[dtype] = TensorFlowOps(dtype)
        return self._ops[dtype]

    def call(self, fn, device, inputs, dtype):
        with tf.device(self.native_name(device)):
            return self.ops(dtype).call(fn, **inputs)

    def compile_gradient(self, model, dtype, metrics=()):
        key = ("gradient", model, dtype, metrics)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def loss_and_gradients(params, batch, y):
                with tf.GradientTape() as tape:
                    tape.watch(params)
                    # no cross-replica sums
                    losses, model_state, scores = model.train_losses(ops, params, batch, y, metrics=metrics)
                    loss = tf.reduce_mean(losses)
                grads = tape.gradient(loss, params)
                # A parameter the loss does not use gets a zero gradient, as in the Aesara backend.
                return (loss, {k: _dense(g, params[k]) for k, g in grads.items()}, model_state,
                        {k: tf.reduce_mean(v) for k, v in scores.items()})

            per_device = _PerDevice(self, loss_and_gradients)
            self._compiled[key] = lambda params, x, y, device: per_device(params, x, y, device=device)
        return self._compiled[key]

    def compile_predict(self, model, dtype):
        key = ("predict", model, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)
            per_device = _PerDevice(self, lambda params, batch: model.infer(ops, params, batch))
            self._compiled[key] = lambda params, batch, device: per_device(params, batch, device=device)
        return self._compiled[key]

    def compile_update(self, optimizer, dtype):
        key = ("update", optimizer, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def update(params, grads, state, step):
                return ops.call(optimizer.update, params, grads, state, step)

            per_device = _PerDevice(self, update)
            self._compiled[key] = lambda params, grads, state, step, device: per_device(
                params, grads, state, step, device=device)
        return self._compiled[key]

    def compile_part(self, fn, dtype):
        key = ("part", fn, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def vjp(params, inputs, cotangent):
                floats = [x for x in inputs if x.dtype.is_floating]
                with tf.GradientTape() as tape:
                    tape.watch([params, floats])
                    output = ops.call(fn, params, *inputs)
                grads, float_grads = tape.gradient(output, (params, floats), output_gradients=cotangent)
                grads = {k: _dense(g, params[k]) for k, g in grads.items()}
                float_grads = iter(_dense(g, x) for x, g in zip(floats, float_grads))
                return output, grads, [next(float_grads) if x.dtype.is_floating else None for x in inputs]

            forward = _PerDevice(self, lambda params, inputs: ops.call(fn, params, *inputs))
            backward = _PerDevice(self, vjp)
            self._compiled[key] = _Part(forward, backward)
        return self._compiled[key]

    def compile_fused_step(self, model, optimizer, dtype, params, state, model_state, metrics=(),
                           across_processes=False):
        # One tf.function for the whole step, with the variables captured rather than passed: TensorFlow's per-call
        # cost (argument canonicalisation, one dispatch per eager op) was most of a small model's step time. The
        # replicas are traced together (ReplicatedOps: each op once per replica, under its device), so the model can
        # sum over them (synchronized batch normalization), and one gradient of the weighted mean loss gives every
        # replica's parameters theirs. Across processes the step runs in MultiWorkerMirroredStrategy's replica
        # context, whose all-reduce joins the processes' sums inside the graph (differentiably, for the model's
        # cross-replica sums) and adds up their shares of the loss, gradients, state and metrics before the update.
        ops, names = self.ops(dtype), list(params)
        replica_devices = [self.native_name(r.device) for r in next(iter(params.values())).replicas]
        home = replica_devices[0]
        if across_processes:
            from toolkit.backends.tensorflow import distributed

            in_step, processes_sum = distributed.in_step, distributed.step_sum
        else:
            in_step, processes_sum = (lambda fn: fn), None

        def step_fn(indices, xs, ys, weights, step):
            replicas = ReplicatedOps(dtype, [replica_devices[i] for i in indices], processes_sum)
            values = {name: Replicated(params[name].replicas[i].value for i in indices) for name in names}
            per_example, new_states, per_example_scores = model.train_losses(
                replicas, values, replicated(*xs), replicated(*ys), replica_sum=replicas.replica_sum, metrics=metrics)

            def weighted_mean(replicated_values):
                means = []
                for device, shard_values in zip(replicas.devices, replicated_values.values):
                    with tf.device(device):
                        means.append(tf.reduce_mean(shard_values))
                with tf.device(home):
                    return tf.add_n([weights[i] * mean for i, mean in enumerate(means)])

            loss = weighted_mean(per_example)
            scores = {k: weighted_mean(v) for k, v in per_example_scores.items()}
            # tf.gradients puts each gradient op on its forward op's device, so every replica's backward pass runs
            # on its own device; a GradientTape would leave them unplaced, and they all ran on the default device.
            variables = [v for name in names for v in values[name].values]
            found = iter(tf.gradients(loss, variables))
            found = {name: [next(found) for _ in values[name].values] for name in names}
            with tf.device(home):
                # A parameter the loss does not use gets a zero gradient, as in the Aesara backend.
                mean = {k: tf.add_n([_dense(g, v) for g, v in zip(found[k], values[k].values)]) for k in names}
                mean_state = {k: tf.add_n([weights[i] * v for i, v in
                                           enumerate(per_replica(new_states[k], len(indices)))])
                              for k in model_state}
                if processes_sum is not None:  # the weights are shares of the global batch: the shares add up
                    loss, mean, mean_state, scores = processes_sum((loss, mean, mean_state, scores))
                current = {name: params[name].replicas[0].value for name in names}
                slots = {slot: {name: var.value for name, var in values.items()} for slot, values in state.items()}
                new_params, new_state, finite = ops.call(optimizer.update, current, mean, slots, step)
                finite = tf.logical_and(finite, tf.math.is_finite(loss))
                for value in mean_state.values():
                    finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(value)))

            def assign_everywhere(mirrored, value):
                for replica in mirrored.replicas:
                    with tf.device(self.native_name(replica.device)):
                        replica.value.assign(value)

            def write():
                for name in names:
                    assign_everywhere(params[name], new_params[name])
                for slot, values in new_state.items():
                    for name, value in values.items():
                        state[slot][name].value.assign(value)
                for name, value in mean_state.items():
                    assign_everywhere(model_state[name], value)
                return tf.constant(True)

            with tf.device(home):
                written = tf.cond(finite, write, lambda: tf.constant(False))
            return loss, written, scores

        function = _traced(in_step(step_fn))
        concrete: dict = {}

        @functools.lru_cache(maxsize=_SPLITS_KEPT)
        def shares(weights: tuple):  # the weights of a split, as a tensor
            return _to_tensor(np.asarray(weights, dtype), home)

        def run(indices, xs, ys, weights, step):
            args = (tuple(indices), list(xs), list(ys), shares(tuple(weights)), step)
            leaves = tf.nest.flatten(args[1:])
            # The signature from the arrays before they are converted (a tensor's shape is an object made per
            # call); a variable (model state) keeps its shape, and is a resource input: its handle goes in.
            key = (args[0], tuple((a.shape, a.dtype) if isinstance(a, np.ndarray) else
                                  id(a) if isinstance(a, tf.Variable) else (tuple(a.shape), a.dtype) for a in leaves))
            flat = [a.handle if isinstance(a, tf.Variable) else a if isinstance(a, tf.Tensor) else _to_tensor(a, home)
                    for a in leaves]
            with tf.device(home):  # indices are Python ints: one trace per pattern of non-empty shards
                if key not in concrete:
                    concrete[key] = function.get_concrete_function(*args)
                return _call_concrete(concrete[key], flat, args)

        run.function = function  # for tests that read the traced graph's placement
        return run

    def compile_parted_gradient(self, model, placement, dtype, metrics=()):
        # One gradient across the devices, each part under its tf.device scope, in one tf.function: tf.gradients
        # places each gradient op with its forward op, so the backward pass runs on the devices that own each part
        # (a GradientTape would leave the backward ops unplaced, on the default device).
        key = ("parted", model, tuple(placement.items()), dtype, metrics)
        if key not in self._compiled:
            ops, parts, last = self.ops(dtype), model.parts, model.parts[-1]
            names = {part: self.native_name(device) for part, device in placement.items()}
            homes = {name: names[users[0]] for name, users in model.param_users().items()}

            def loss_and_gradients(params, inputs, y):
                values = dict(inputs)
                for part in parts:
                    with tf.device(names[part.name]):
                        values[part.name] = ops.call(part.fn, {k: params[k] for k in part.params},
                                                     *(values[i] for i in part.inputs))
                with tf.device(names[last.name]):
                    scored = ops.call(scored_mean, model.loss, metrics, values[last.name], y)
                grads = dict(zip(params, tf.gradients(scored[0], list(params.values()))))
                return scored, {k: _dense(g, params[k]) for k, g in grads.items()}

            function = _traced(loss_and_gradients)

            def run(params, inputs, y):
                # A function's outputs come back on the calling device (here the loss's); each gradient then makes
                # one copy to its parameter's home, where the update runs.
                with tf.device(names[last.name]):
                    scored, grads = function(params, inputs, y)
                    loss, scores = scored[0], {metric.name: scored[1 + i] for i, metric in enumerate(metrics)}
                placed = {}
                for name, grad in grads.items():
                    with tf.device(homes[name]):
                        placed[name] = tf.identity(grad)
                return loss, placed, scores

            run.function = function  # for tests that read the traced graph's placement
            self._compiled[key] = run
        return self._compiled[key]

    def _new_variable(self, value, device, name):
        return TensorFlowVariable(value, device, self.native_name(device), name)

    def _weighted_sum(self, values, weights, device):
        with tf.device(self.native_name(device)):
            return tf.add_n([w * v for w, v in zip(weights, values)])

    def _concat(self, values, device):
        with tf.device(self.native_name(device)):
            return tf.concat(list(values), axis=0)
