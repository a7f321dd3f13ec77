"""TensorFlow translation of :class:`toolkit.ops.signal.SignalOps`: ``tf.signal``'s Fourier transforms on complex
tensors made from the (real, imag) pairs, with their registered gradients; framing, windows and overlap-add are
composites of the neutral layer."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()

#: ``tf.signal``'s complex transform by (rank, inverse); the inverses divide by the number of points, as NumPy's.
_TRANSFORMS = {(1, False): tf.signal.fft, (1, True): tf.signal.ifft, (2, False): tf.signal.fft2d,
               (2, True): tf.signal.ifft2d}


class TensorFlowSignalOps:
    def _fft(self, real, imag, rank, inverse):
        out = _TRANSFORMS[rank, inverse](tf.complex(real, imag))
        return tf.math.real(out), tf.math.imag(out)

    def _rfft(self, x):
        out = tf.signal.rfft(x)
        return tf.math.real(out), tf.math.imag(out)

    def _irfft(self, real, imag, n):
        return tf.signal.irfft(tf.complex(real, imag), fft_length=[n])
