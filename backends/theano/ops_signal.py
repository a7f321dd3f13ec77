"""Theano translation of :class:`toolkit.nn.ops_signal.SignalOps`: each Fourier transform is one
:class:`~.graphs.JaxOp` calling ``jax.numpy.fft`` on the complex array made from the (real, imag) pair (neither
engine converts its FFT ops to JAX, and Aesara's has no complex transform), its gradient ``jax.vjp`` of the same
function; framing, windows and overlap-add are composites of the neutral layer."""

from __future__ import annotations

from toolkit.errors import ShapeError

from .graphs import Apply, DisconnectedType, JaxOp, as_outputs, jax, tt


def _transforms() -> dict:
    """Each transform as a JAX function of float arrays and static options, returning a tuple of float arrays."""
    jnp = jax.numpy

    def parts(z):
        return jnp.real(z), jnp.imag(z)

    def fft(real, imag, rank, inverse):
        axes = tuple(range(-rank, 0))
        return parts((jnp.fft.ifftn if inverse else jnp.fft.fftn)(jax.lax.complex(real, imag), axes=axes))

    return {
        "fft": fft,
        "rfft": lambda x: parts(jnp.fft.rfft(x)),
        "irfft": lambda real, imag, n: (jnp.fft.irfft(jax.lax.complex(real, imag), n=n),),
    }


class _Spectral(JaxOp):
    """A transform of :func:`_transforms` as an op: the JAX linker calls it in its compiled step, the C linker on
    the host. Output shapes and dtypes from ``jax.eval_shape`` (inputs of static shape); its gradient is
    :class:`_SpectralGradient`."""

    __props__ = ("name", "options")

    def __init__(self, name: str, *options) -> None:
        self.name, self.options = name, tuple(options)
        self._functions: dict = {}

    def _function(self):
        fn, options = _transforms()[self.name], self.options
        return lambda *xs: fn(*xs, *options)

    def function(self):
        if "forward" not in self._functions:
            fn = self._function()
            self._functions["forward"] = lambda *xs: as_outputs(fn(*xs))
        return self._functions["forward"]

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(x) for x in inputs]
        if any(None in x.type.shape for x in inputs):
            raise ShapeError(f"ops.{self.name} needs inputs of static shape, got {[x.type.shape for x in inputs]}")
        specs = [jax.ShapeDtypeStruct(x.type.shape, x.dtype) for x in inputs]
        outputs = jax.eval_shape(self._function(), *specs)
        return Apply(self, inputs, [tt.tensor(dtype=str(o.dtype), shape=o.shape) for o in outputs])

    def infer_shape(self, fgraph, node, shapes):
        return [tuple(o.type.shape) for o in node.outputs]

    def L_op(self, inputs, outputs, output_grads):
        cotangents = [tt.zeros_like(o) if isinstance(g.type, DisconnectedType) else g
                      for o, g in zip(outputs, output_grads)]
        grads = _SpectralGradient(self, len(inputs))(*inputs, *cotangents)
        return list(grads) if isinstance(grads, (list, tuple)) else [grads]

    pullback = L_op  # PyTensor 3's name for L_op


class _SpectralGradient(JaxOp):
    """The vector-Jacobian product of a :class:`_Spectral` for its inputs (``jax.vjp`` of the same function); the
    inputs are the transform's, then one cotangent per output. Not differentiable again."""

    __props__ = ("op", "count")

    def __init__(self, op: _Spectral, count: int) -> None:
        self.op, self.count = op, count  # the forward op and how many inputs it has
        self._functions: dict = {}

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(x) for x in inputs]
        return Apply(self, inputs, [x.type() for x in inputs[:self.count]])

    def function(self):
        if "vjp" not in self._functions:
            fn, count = self.op._function(), self.count

            def vjp(*values):
                primals, cotangents = values[:count], values[count:]
                return as_outputs(tuple(jax.vjp(fn, *primals)[1](tuple(cotangents))))

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return shapes[:len(node.outputs)]


class TheanoSignalOps:
    def _fft(self, real, imag, rank, inverse):
        return tuple(_Spectral("fft", rank, inverse)(real, imag))

    def _rfft(self, x):
        return tuple(_Spectral("rfft")(x))

    def _irfft(self, real, imag, n):
        return _Spectral("irfft", n)(real, imag)
