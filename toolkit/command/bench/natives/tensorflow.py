"""Native TensorFlow training for ``multigpu bench``: what a user writes without this toolkit, on the same model,
parameters, batches and devices (see :mod:`toolkit.command.bench`).

- ``mirrored-ctl``: the custom training loop of TensorFlow's distributed-training guide: ``MirroredStrategy`` over
  the devices, a distributed ``tf.data`` dataset, ``strategy.run`` of a GradientTape step in a ``tf.function``,
  ``tf.nn.compute_average_loss`` and a Keras optimizer's ``apply_gradients`` (which all-reduces the gradients).
- ``keras-fit``: a ``keras.Model`` holding the same weights, ``compile`` with its defaults and ``fit`` under the same
  strategy.
- ``function`` and ``function-xla`` (one device): the guides' custom step without a strategy, a ``tf.function`` of a
  GradientTape step and a Keras optimizer, without and with ``jit_compile=True``.

The model's math is the toolkit model's, written with the TensorFlow backend's ops (``backend.ops``), whose methods
are single TensorFlow calls; the loop, the distribution, the gradients and the update are TensorFlow's and Keras'.
Model state (batch normalization's moving statistics) is non-trainable variables, assigned after each step; under
``MirroredStrategy`` the replicas' new values are averaged, as Keras' ``BatchNormalization`` does with its
``aggregation="mean"`` moving statistics.
"""

from __future__ import annotations

import os

import numpy as np

import toolkit
from toolkit.backend.registry import REGISTRY
from toolkit.command.bench.measure import Batches
from toolkit.nn import context
from toolkit.nn.model import batch

tf = REGISTRY["tensorflow"].environment().import_framework()  # configured: logical devices, quiet logs

import keras  # noqa: E402  (after TensorFlow is configured)

__all__ = ["PEAK_LIBRARY", "TOOLKIT_OPTIONS", "library", "matmul", "products", "runners"]

#: The toolkit's candidates: name -> options for get_backend.
TOOLKIT_OPTIONS = {"toolkit": {}}
#: The library whose matmul measures the machine's peak for this backend (:mod:`toolkit.command.flops`).
PEAK_LIBRARY = "tensorflow"


def library(name: str, candidate: str) -> str:
    """What computes candidate ``candidate``'s matmuls and convolutions, in words: XLA for the ``jit_compile``
    step, else TensorFlow's CPU kernels, with oneDNN's where ``TF_ENABLE_ONEDNN_OPTS`` turned them on (bench's
    workers set it to 1).

    Args:
        name: the backend's name (``"tensorflow"``).
        candidate: the candidate's name.

    Returns:
        E.g. ``"TensorFlow kernels, oneDNN"``.
    """
    if candidate == "function-xla":
        return "XLA cpu (jit_compile)"
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "") not in ("0", "false", "False")
    return f"TensorFlow kernels{', oneDNN' if onednn else ', Eigen'}"


def matmul(a: np.ndarray, b: np.ndarray):
    """A call that computes ``a @ b`` with TensorFlow on its first CPU device and waits for the result.

    Args:
        a, b: NumPy matrices, placed on the device once, here.

    Returns:
        A function of no arguments, timed by :func:`toolkit.command.flops.matmul_peak`.
    """
    with tf.device("/CPU:0"):
        ta, tb = tf.constant(a), tf.constant(b)
    product = tf.function(lambda p, q: tf.linalg.matmul(p, q))
    return lambda: product(ta, tb).numpy()


def _ops(dtype: str):
    """The TensorFlow backend's ops for ``dtype``: the model's math as single TensorFlow calls."""
    return toolkit.get_backend("tensorflow").ops(dtype)


def _dataset(batches: Batches):
    """The batches, in order, repeated: ``batch(len)`` of their concatenation gives them back exactly."""
    return tf.data.Dataset.from_tensor_slices((batches.x, batches.y)).batch(batches.size).repeat()


def _variables(values: dict, dtype: str, trainable: bool = True) -> dict:
    return {name: tf.Variable(np.asarray(value, dtype), name=name, trainable=trainable)
            for name, value in values.items()}


def _strategy(native_names: list[str]):
    return tf.distribute.MirroredStrategy(native_names)


class MirroredCustomLoop:
    """``MirroredStrategy`` custom training loop with SGD (a :class:`~toolkit.command.bench.measure.Runner`).

    Args:
        model: the toolkit :class:`~toolkit.Model` benched.
        params: its initial parameters (the toolkit trainer's), by name.
        state: its initial model state, by name.
        batches: the cycle of batches (:class:`~toolkit.command.bench.measure.Batches`).
        native_names: TensorFlow's names of the devices the strategy mirrors over.
        dtype: the computation dtype.
        lr: SGD's learning rate.
    """

    def __init__(self, model, params, state, batches: Batches, native_names, dtype, lr) -> None:
        ops, global_batch = _ops(dtype), batches.size
        self.strategy = strategy = _strategy(native_names)
        with strategy.scope():
            self._vars = _variables(params, dtype)
            self._state = _variables(state, dtype, trainable=False)
            self._optimizer = keras.optimizers.SGD(learning_rate=lr)
            self._optimizer.build(list(self._vars.values()))
        self._iterator = iter(strategy.experimental_distribute_dataset(_dataset(batches)))
        variables = list(self._vars.values())

        def replica_step(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                per_example, new_state, _ = model.train_losses(ops, self._vars, batch(x, None, self._state), y)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            self._optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss, new_state

        @tf.function(autograph=False)  # plain Python model code: nothing to convert, and errors stay as raised
        def train_step(inputs):
            loss, new_state = strategy.run(replica_step, args=(inputs,))
            for name, value in new_state.items():
                self._state[name].assign(strategy.reduce("MEAN", value, axis=None))
            return strategy.reduce("SUM", loss, axis=None)

        self._train_step = train_step

    def run(self, steps: int) -> float:
        for _ in range(steps):
            loss = float(self._train_step(next(self._iterator)))  # the loss, like the toolkit's step returns
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return {name: var.numpy() for name, var in {**self._vars, **self._state}.items()}


class FunctionStep:
    """The custom training step of TensorFlow's own guides on one device, without a strategy: a ``tf.function`` of
    a GradientTape step with a Keras SGD optimizer, the batches fed one by one; with ``jit_compile=True`` the step
    is compiled by XLA (``function-xla``). With ``all_or_nothing=True`` (``function-checked``) the update and the
    new model state are written only if the loss, every gradient and the new state are finite, the guarantee the
    toolkit's step gives (``nan_policy``): the same step with the toolkit's extra work and none of its machinery.

    Args:
        model: the toolkit :class:`~toolkit.Model` benched.
        params: its initial parameters (the toolkit trainer's), by name.
        state: its initial model state, by name.
        batches: the cycle of batches (:class:`~toolkit.command.bench.measure.Batches`).
        native_name: TensorFlow's name of the device.
        dtype: the computation dtype.
        lr: SGD's learning rate.
        jit_compile: compile the step with XLA.
        all_or_nothing: write the update only where everything is finite.
    """

    def __init__(self, model, params, state, batches: Batches, native_name, dtype, lr, jit_compile: bool,
                 all_or_nothing: bool = False) -> None:
        ops, self._batches, self._next = _ops(dtype), batches, 0
        with tf.device(native_name):
            self._vars = _variables(params, dtype)
            self._state = _variables(state, dtype, trainable=False)
            self._optimizer = keras.optimizers.SGD(learning_rate=lr)
            self._optimizer.build(list(self._vars.values()))
            self._inputs = [(tf.constant(x), tf.constant(y)) for x, y in (batches[i] for i in range(len(batches)))]
        variables, self._device = list(self._vars.values()), native_name

        @tf.function(autograph=False, jit_compile=jit_compile)
        def train_step(x, y):
            with tf.GradientTape() as tape:
                per_example, new_state, _ = model.train_losses(ops, self._vars, batch(x, None, self._state), y)
                loss = tf.reduce_mean(per_example)
            gradients = tape.gradient(loss, variables)

            def write():
                self._optimizer.apply_gradients(zip(gradients, variables))
                for name, value in new_state.items():
                    self._state[name].assign(value)
                return tf.constant(True)

            if all_or_nothing:
                # An embedding's gradient is IndexedSlices: its values are all it has.
                values = [g.values if isinstance(g, tf.IndexedSlices) else g for g in gradients]
                finite = ops.call(type(ops).all_finite, [loss, *values, *new_state.values()])
                tf.cond(finite, write, lambda: tf.constant(False))
            else:
                write()
            return loss

        self._train_step = train_step

    def run(self, steps: int) -> float:
        with tf.device(self._device):
            for _ in range(steps):
                loss = float(self._train_step(*self._inputs[self._next]))
                self._next = (self._next + 1) % len(self._inputs)
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return {name: var.numpy() for name, var in {**self._vars, **self._state}.items()}


class ToolkitModel(keras.Model):
    """A Keras model whose weights are the toolkit model's parameters (trainable) and model state (non-trainable,
    ``aggregation="mean"`` as Keras' batch normalization statistics) and whose call is its forward.

    Args:
        model: the toolkit :class:`~toolkit.Model`.
        params: its initial parameters, by name.
        state: its initial model state, by name.
        ops: the TensorFlow backend's ops the forward is written with.
        dtype: the computation dtype.
        integer_inputs: the inputs are ids, which Keras' ``fit`` hands over as floats (cast back in ``call``).
    """

    def __init__(self, model, params, state, ops, dtype, integer_inputs: bool) -> None:
        super().__init__(dtype=dtype, name="toolkit_model")
        self._model, self._ops, self._names = model, ops, list(params)
        self._integer_inputs = integer_inputs

        def weight(name, value, trainable):  # Keras weight names may not contain "/", which layer prefixes use
            made = self.add_weight(shape=np.shape(value), initializer="zeros", dtype=dtype, trainable=trainable,
                                   name=name.replace("/", "."), aggregation="mean" if not trainable else "none")
            made.assign(np.asarray(value, dtype))
            return made

        self._params = {k: weight(k, v, True) for k, v in params.items()}
        self._state = {k: weight(k, v, False) for k, v in state.items()}

    def call(self, x, training=False):
        if self._integer_inputs:  # Keras' fit hands integer inputs (token ids) over as floats under MirroredStrategy
            x = tf.cast(x, "int32")
        params = {k: w.value for k, w in self._params.items()}
        state = {k: w.value for k, w in self._state.items()}
        run = context.RunContext(training=bool(training), state=state)
        with context.running(run):
            outputs = self._ops.call(self._model.forward, {**params, **state}, x)
        for name, value in run.updates.items():
            self._state[name].assign(self._ops.unwrap(value))
        return outputs

    def values(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(w.numpy()) for k, w in {**self._params, **self._state}.items()}


class KerasFit:
    """``model.fit`` under ``MirroredStrategy`` with SGD; ``compile`` keeps its defaults (``jit_compile="auto"``).

    Args:
        model: the toolkit :class:`~toolkit.Model` benched.
        params: its initial parameters (the toolkit trainer's), by name.
        state: its initial model state, by name.
        batches: the cycle of batches (:class:`~toolkit.command.bench.measure.Batches`).
        native_names: TensorFlow's names of the devices the strategy mirrors over.
        dtype: the computation dtype.
        lr: SGD's learning rate.
    """

    def __init__(self, model, params, state, batches: Batches, native_names, dtype, lr) -> None:
        ops = _ops(dtype)
        integer_labels = batches.y.dtype.kind in "iu"

        class Loss(keras.losses.Loss):  # a Loss subclass: a plain function's loss would compute in float32
            def call(self, y_true, y_pred):  # Keras hands the labels over as floats
                return ops.call(model.loss, y_pred, tf.cast(y_true, "int32") if integer_labels else y_true)

        with _strategy(native_names).scope():
            self._model = ToolkitModel(model, params, state, ops, dtype, integer_inputs=batches.x.dtype.kind in "iu")
            self._model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr), loss=Loss(dtype=dtype))
        self._dataset, self._cycle, self._next = _dataset(batches), len(batches), 0

    def run(self, steps: int) -> float:
        # Each fit() iterates the dataset from its start: skip the batches already trained on in this cycle.
        history = self._model.fit(self._dataset.skip(self._next), epochs=1, steps_per_epoch=steps, shuffle=False,
                                  verbose=0)
        self._next = (self._next + steps) % self._cycle
        return float(history.history["loss"][-1])

    def params(self) -> dict[str, np.ndarray]:
        return self._model.values()


def products(found: list, operands: list, cotangents: list, dtype: str):
    """A call that runs a step's matmuls and convolutions alone (:func:`toolkit.command.flops.products_alone`) with
    TensorFlow on its first CPU device: one ``tf.function`` of their forward and a GradientTape's gradients for both
    operands of each (TensorFlow's eager call returns when the work is done).

    Args:
        found: the step's products (:class:`toolkit.command.flops.Product`), in the order they ran.
        operands: each product's two operands, NumPy arrays.
        cotangents: each product's output cotangent, NumPy arrays.
        dtype: the computation dtype.

    Returns:
        A function of no arguments, timed by :func:`toolkit.command.flops.products_alone`.
    """
    ops = _ops(dtype)
    with tf.device("/CPU:0"):
        operands = [tuple(tf.constant(v) for v in pair) for pair in operands]
        cotangents = [tf.constant(c) for c in cotangents]

    @tf.function(autograph=False)
    def gradients(operands, cotangents):
        with tf.GradientTape() as tape:
            tape.watch(operands)
            outputs = [ops.call(product.apply, a, b) for product, (a, b) in zip(found, operands)]
        # The outputs are returned too: the gradients of a product do not read them, and unreturned, Grappler would
        # prune the forward products.
        return outputs, tape.gradient(outputs, operands, output_gradients=cotangents)

    return lambda: gradients(operands, cotangents)


def runners(model, params, state, batches: Batches, devices, backend, dtype: str, lr: float) -> dict:
    """The native runners for ``devices``, from the toolkit's initial ``params`` and model ``state``.

    Args:
        model: the toolkit :class:`~toolkit.Model` benched.
        params: its initial parameters (the toolkit trainer's), by name.
        state: its initial model state, by name.
        batches: the cycle of batches (:class:`~toolkit.command.bench.measure.Batches`).
        devices: the toolkit devices the toolkit's run uses.
        backend: the TensorFlow backend (for the devices' native names).
        dtype: the computation dtype.
        lr: SGD's learning rate.

    Returns:
        ``{candidate: runner}``: ``mirrored-ctl`` and ``keras-fit``, and on one device the ``function`` steps.
    """
    names = [backend.native_name(d) for d in devices]
    natives = {"mirrored-ctl": MirroredCustomLoop(model, params, state, batches, names, dtype, lr),
               "keras-fit": KerasFit(model, params, state, batches, names, dtype, lr)}
    if len(names) == 1:  # a step without a strategy runs on one device
        for candidate, jit_compile, checked in (("function", False, False), ("function-xla", True, False),
                                                ("function-checked", False, True)):
            natives[candidate] = FunctionStep(model, params, state, batches, names[0], dtype, lr, jit_compile,
                                              all_or_nothing=checked)
    return natives
