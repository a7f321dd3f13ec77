"""Theano translation of :class:`toolkit.ops.signal.SignalOps`: each Fourier transform is one
:class:`~.graphs.JaxFunction` calling ``jax.numpy.fft`` on the complex array made from the (real, imag) pair (neither
engine converts its FFT ops to JAX, and Aesara's has no complex transform), its gradient ``jax.vjp`` of the same
function; framing, windows and overlap-add are composites of the neutral layer."""

from __future__ import annotations

from .graphs import JaxFunction, jax


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


class _Spectral(JaxFunction):
    """A transform of :func:`_transforms` as an op (its gradient ``jax.vjp`` of the same function)."""

    functions = staticmethod(_transforms)


class TheanoSignalOps:
    def _fft(self, real, imag, rank, inverse):
        return tuple(_Spectral("fft", rank, inverse)(real, imag))

    def _rfft(self, x):
        return tuple(_Spectral("rfft")(x))

    def _irfft(self, real, imag, n):
        return _Spectral("irfft", n)(real, imag)
