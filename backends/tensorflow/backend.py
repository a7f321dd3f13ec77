"""TensorFlow translation of the backend primitives: ``tf.device`` scopes, eager copies, a ``tf.function`` per
device for the gradient and the update (:mod:`.compiling`), one for a whole data-parallel step (:mod:`.step`), and
MultiWorkerMirroredStrategy across processes (:mod:`.distributed`)."""

from __future__ import annotations

import numpy as np

from toolkit import backend as interface
from toolkit.backend.interface import scored_mean
from toolkit.backend.logical_devices import logical_device_count
from toolkit.backends.tensorflow import distributed, environment
from toolkit.backends.tensorflow.compiling import Part, PerDevice, dense, traced
from toolkit.backends.tensorflow.fused import compile_fused_step
from toolkit.backends.tensorflow.ops import TensorFlowOps
from toolkit.backends.tensorflow.variables import TensorFlowVariable
from toolkit.errors import DeviceParseError, LogicalDevicesError
from toolkit.placement.devices import parse_device
from toolkit.training import rules

tf = environment.import_framework()


class Backend(interface.Backend):
    name = "tensorflow"

    def __init__(self) -> None:
        self._table = []
        with environment.filtered_stderr():  # the first device query starts the runtime, which may log noise
            logical_devices = tf.config.list_logical_devices()
        task = distributed.local_task()  # across processes TensorFlow also lists the other workers' devices
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
        name = self.native_name(device)
        if isinstance(value, tf.Tensor) and value.device == name:
            return value  # already there: tf.identity would still cost an eager op
        with tf.device(name):
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
                    # one replica of a step composed per device: no cross-replica sums
                    loss, model_state, scores = rules.replica_objective(ops, model, params, batch, y, metrics)
                grads = tape.gradient(loss, params)
                # A parameter the loss does not use gets a zero gradient, as in the Theano family's backend.
                return loss, {k: dense(g, params[k]) for k, g in grads.items()}, model_state, scores

            per_device = PerDevice(self, loss_and_gradients)
            self._compiled[key] = lambda params, batch, y, device: per_device(params, batch, y, device=device)
        return self._compiled[key]

    def compile_predict(self, model, dtype):
        key = ("predict", model, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)
            per_device = PerDevice(self, lambda params, batch: model.infer(ops, params, batch))
            self._compiled[key] = lambda params, batch, device: per_device(params, batch, device=device)
        return self._compiled[key]

    def compile_update(self, optimizer, dtype):
        key = ("update", optimizer, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def update(params, grads, state, step, checked):
                return ops.call(rules.apply_update, optimizer, params, grads, state, step, checked)

            per_device = PerDevice(self, update)
            self._compiled[key] = lambda params, grads, state, step, checked, device: per_device(
                params, grads, state, step, checked, device=device)
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
                grads = {k: dense(g, params[k]) for k, g in grads.items()}
                float_grads = iter(dense(g, x) for x, g in zip(floats, float_grads))
                return output, grads, [next(float_grads) if x.dtype.is_floating else None for x in inputs]

            forward = PerDevice(self, lambda params, inputs: ops.call(fn, params, *inputs))
            backward = PerDevice(self, vjp)
            self._compiled[key] = Part(forward, backward)
        return self._compiled[key]

    def compile_fused_step(self, model, optimizer, dtype, training_state, metrics=(), across_processes=False):
        return compile_fused_step(self, model, optimizer, dtype, training_state, metrics, across_processes)

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
                return scored, {k: dense(g, params[k]) for k, g in grads.items()}

            function = traced(loss_and_gradients)

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

    def _sum(self, values, device):
        with tf.device(self.native_name(device)):
            return tf.add_n(list(values))

    @classmethod
    def join(cls, cluster):
        distributed.start(cluster)

    def _all_reduce_sum(self, array, what):
        return distributed.all_reduce_sum(array, what)

    def _concat(self, values, device):
        with tf.device(self.native_name(device)):
            return tf.concat(list(values), axis=0)
