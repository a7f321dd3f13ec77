"""TensorFlow translation of :class:`toolkit.ops.functional.FunctionalOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowFunctionalOps:
    def _custom_gradient(self, inputs, forward):
        @tf.custom_gradient
        def run(*xs):
            outs, backward = forward(list(xs))

            # tf.custom_gradient asks for the gradients of the variables f reads only when it reads some; they are
            # constants to f, as every tensor it does not take as an argument.
            def gradient(*upstream, variables=None):
                upstream = [tf.zeros_like(o) if u is None else u for u, o in zip(upstream, outs)]  # integer outputs
                grads = [g if x.dtype.is_floating else None for g, x in zip(backward(upstream), xs)]
                return (grads, [None] * len(variables)) if variables else grads

            return outs, gradient

        return list(run(*inputs))
