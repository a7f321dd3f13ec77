"""Activations, losses and normalizations (:class:`toolkit.ops.nn.NNOps`) as Theano-family graphs."""

from __future__ import annotations

from .graphs import tt


class TheanoNNOps:
    def relu6(self, x):
        # Switches, not clip: clip's gradient at its bounds is 1, JAX's and TensorFlow's is 0; NaN falls through both.
        return tt.switch(tt.le(x, 0), 0, tt.switch(tt.ge(x, 6), 6, x)).astype(x.dtype)

    def log_sigmoid(self, x):
        # The engine's softplus is piecewise (exp, log1p(exp), x + exp(-x), x) so that it neither overflows nor loses
        # digits; its gradient is the sigmoid.
        return -tt.softplus(-x)
