"""How the TensorFlow backend compiles: ``tf.function`` traced as plain Python, one per device with the device scope
inside, called with flat tensors where it can; and NumPy inputs made eager tensors on a device cheaply."""

from __future__ import annotations

import functools

from toolkit.backends.tensorflow import environment

tf = environment.import_framework()


def traced(fn):
    """``fn`` as a ``tf.function`` that traces it as plain Python, once per exact input signature. Model code is
    written against the neutral ops, with Python control flow on Python values only, so AutoGraph has nothing to
    convert; left on, it reads each function's source and warns for every one it cannot find (code typed into a
    REPL, piped through stdin, lambdas).

    Exact shapes, not ``reduce_retracing``: that generalizes a signature's shapes (a None batch axis) at the second
    shape it meets, and a generalized graph rounds differently, so which shape a process traced first decided the
    last bits of a step (a fit resumed in a new process at an epoch's smaller last batch ended 5e-12 off the
    uninterrupted one). Traced per shape, the graph for a shape is the same in every process whatever ran before.
    A fit meets two batch shapes (the full one and the last), which cost two traces either way (measured); only a
    third distinct shape and after trace again, as ``jax.jit`` does. TensorFlow's frequent-retracing warning counts
    traces per code object, and every per-device function shares one body's code, so each new device or model
    looked like a retrace; Keras silences its own functions the same way."""
    function = tf.function(fn, reduce_retracing=False, autograph=False)
    function._omit_frequent_tracing_warning = True
    return function


def call_concrete(concrete, flat: list, args: tuple):
    """Call a traced step's concrete function with its inputs already flat tensors. A ``tf.function`` call
    canonicalizes its nested arguments against every signature it has traced, and a concrete function's structured
    call binds and flattens them again, a large part of a dispatch-bound step (docs/guides/benchmarks.md has the
    measurement). The flat call skips both; where TensorFlow lacks it or the inputs do not match it, the structured
    call."""
    call_flat = getattr(concrete, "_call_flat", None)
    if call_flat is None or len(flat) != len(concrete.inputs) - len(concrete.captured_inputs):
        return concrete(*args)
    return call_flat(flat, concrete.captured_inputs)


@functools.cache
def converter():
    """A NumPy array (or scalar) to an eager tensor on a device, for a step's inputs: ``EagerTensor(value, device,
    None)``, the constructor every conversion ends in. ``tf.convert_to_tensor`` passes through four layers of dispatch
    first and copies the array, about three times the constructor's cost per input, which a small model's step pays for
    each of its inputs. The tensor may share the array's memory: the step is synchronous (its outputs are read before it
    returns, and nothing keeps its inputs), and TensorFlow never writes into a buffer it does not own. Where TensorFlow
    lacks the constructor, ``tf.convert_to_tensor`` under the device's scope. Made on first use: it starts TensorFlow's
    runtime, which must wait until a job of several processes is joined."""
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


def dense(grad, like):
    """A gradient as a dense tensor: zeros where the loss does not use the value (as the Aesara backend gives), and
    ``tf.gather``'s IndexedSlices (the gradient of ``ops.take``) added up into a tensor."""
    return tf.zeros_like(like) if grad is None else tf.convert_to_tensor(grad)


class PerDevice:
    """One ``tf.function`` per device, made on first use. The ``tf.device`` scope sits inside the traced body, so
    every op of the function is pinned to its device whatever the caller's scope; the call is made under the same
    scope because TensorFlow returns a function's outputs on the device it was called from."""

    def __init__(self, backend, body) -> None:
        self._backend, self._body, self._functions = backend, body, {}

    def __call__(self, *args, device):
        function = self._functions.get(device)
        if function is None:
            name = self._backend.native_name(device)

            def placed(*inner):
                with tf.device(name):
                    return self._body(*inner)

            function = self._functions[device] = traced(placed)
        with tf.device(self._backend.native_name(device)):
            return function(*args)


class Part:
    def __init__(self, forward: PerDevice, vjp: PerDevice) -> None:
        self._forward, self._vjp = forward, vjp

    def forward(self, params, inputs, device):
        return self._forward(params, list(inputs), device=device)

    def vjp(self, params, inputs, cotangent, device):
        return self._vjp(params, list(inputs), cotangent, device=device)
