"""Signal processing: ``keras.ops.math``'s ``extract_sequences``, ``fft``, ``fft2``, ``ifft2``, ``rfft``, ``irfft``,
``stft`` and ``istft``.

Part of :class:`~toolkit.ops.Ops`. Complex values are Keras' ``(real, imag)`` pairs of float tensors of one shape.
A backend implements three primitives on natives (:meth:`SignalOps._fft`, :meth:`SignalOps._rfft`,
:meth:`SignalOps._irfft`: ``tf.signal``'s, ``jax.numpy.fft``'s in the Theano family, each with its gradient); the ops
are written once, here: the checks, cropping and zero-padding to ``fft_length``, framing (basic slices of the
signal, the centring's reflection included), windows, and the overlap-add of ``istft`` (reshapes and a sum), so
every backend frames, windows and adds the same terms.

``istft`` is Keras' on TensorFlow (``tf.signal.inverse_stft``, which its tests' reference ``_istft`` follows):
each frame is weighted by the window divided by the sum of the squared windows that overlap at its position,
periodically (not per sample at the signal's ends, where Keras' JAX and NumPy backends differ); a position no window
covers weighs 0 (TensorFlow's; the tests' reference has 0/0 there, NaN).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): a
#: complex pair is promoted to one floating dtype; rfft's input is made floating.
ARGUMENTS: dict[str, str] = {"_fft": "ff", "_rfft": "f", "_irfft": "ff"}

#: The windows ``stft``/``istft`` accept by name: ``a - (1 - a) cos(2 pi k / n)``, periodic (``scipy.signal.
#: get_window``'s default, TensorFlow's ``periodic=True``), with these ``a``; computed in float64, then cast to the
#: signal's dtype.
WINDOWS = {"hann": 0.5, "hamming": 0.54}
#: The dtypes the frameworks' FFTs take (complex64, complex128 underneath); half-precision inputs are transformed in
#: float32 and cast back.
_SPECTRAL_DTYPE = {"float16": "float32", "bfloat16": "float32"}


class SignalOps(ABC):
    """Framing and Fourier transforms; mixed into :class:`~toolkit.ops.Ops`."""

    # --- the primitives ----------------------------------------------------------------------------------------------
    @abstractmethod
    def _fft(self, real, imag, rank: int, inverse: bool):
        """The discrete Fourier transform of ``real + i imag`` (float32 or float64, one shape) over its last
        ``rank`` axes (1 or 2), or with ``inverse`` its inverse (divided by the number of points); returns
        ``(real, imag)``."""

    @abstractmethod
    def _rfft(self, x):
        """The Fourier transform of real ``x`` (float32 or float64) over its last axis of ``n`` points: the
        ``n // 2 + 1`` non-negative frequencies, as ``(real, imag)``."""

    @abstractmethod
    def _irfft(self, real, imag, n: int):
        """The inverse of :meth:`_rfft`: ``n`` real points from the ``n // 2 + 1`` frequencies of the last axis of
        ``real + i imag``; the imaginary parts of frequency 0 (and ``n / 2`` for an even ``n``) are ignored, as in
        NumPy."""

    # --- framing -----------------------------------------------------------------------------------------------------
    def extract_sequences(self, x, sequence_length: int, sequence_stride: int):
        """Windows of ``sequence_length`` entries along the last axis, every ``sequence_stride`` entries
        (``keras.ops.extract_sequences``): ``[..., n]`` becomes ``[..., 1 + (n - sequence_length) //
        sequence_stride, sequence_length]`` (no sequence when ``n < sequence_length``, as TensorFlow's frame), in
        ``x``'s dtype.

        Raises:
            ArgumentError: a sequence_length or sequence_stride that is not an int >= 1.
            ShapeError: a scalar ``x``, or a last axis of unknown size.
        """
        length = _positive(sequence_length, "sequence_length", "extract_sequences")
        stride = _positive(sequence_stride, "sequence_stride", "extract_sequences")
        x = self._tensor(x)
        size = self._last_axis(x, "extract_sequences")
        return self._frames(x, np.arange(size), length, stride)

    # --- Fourier transforms ------------------------------------------------------------------------------------------
    def fft(self, x):
        """The Fourier transform along the last axis (``keras.ops.fft``) of ``x``, a ``(real, imag)`` pair of float
        tensors; returns the ``(real, imag)`` pair, in their dtype.

        Raises:
            ArgumentError: ``x`` not a pair.
            DTypeError: a part that is not floating (Keras' ValueError).
            ShapeError: parts of different shapes, scalars, or a last axis of unknown size.
        """
        real, imag, dtype = self._complex(x, 1, "fft")
        return self._cast_all(self._fft(real, imag, 1, False), dtype)

    def fft2(self, x):
        """The 2-D Fourier transform over the last two axes (``keras.ops.fft2``) of a ``(real, imag)`` pair.

        Raises:
            ArgumentError: ``x`` not a pair.
            DTypeError: a part that is not floating.
            ShapeError: parts of different shapes, of rank below 2, or last two axes of unknown size.
        """
        real, imag, dtype = self._complex(x, 2, "fft2")
        return self._cast_all(self._fft(real, imag, 2, False), dtype)

    def ifft2(self, x):
        """The inverse 2-D Fourier transform over the last two axes (``keras.ops.ifft2``; divided by the number of
        points, as NumPy's) of a ``(real, imag)`` pair.

        Raises:
            ArgumentError: ``x`` not a pair.
            DTypeError: a part that is not floating.
            ShapeError: parts of different shapes, of rank below 2, or last two axes of unknown size.
        """
        real, imag, dtype = self._complex(x, 2, "ifft2")
        return self._cast_all(self._fft(real, imag, 2, True), dtype)

    def rfft(self, x, fft_length: int | None = None):
        """The Fourier transform of real ``x`` along its last axis (``keras.ops.rfft``): the ``fft_length // 2 + 1``
        non-negative frequencies as a ``(real, imag)`` pair. The axis is cropped or zero-padded to ``fft_length``
        (default: its size). Integers and booleans are transformed in the computation dtype.

        Raises:
            ArgumentError: an fft_length that is not None or an int >= 1.
            ShapeError: a scalar ``x``, a last axis of unknown size, or an empty one without fft_length.
        """
        x = self._floating(x)
        size = self._last_axis(x, "rfft")
        n = size if fft_length is None else _positive(fft_length, "fft_length", "rfft")
        if n < 1:
            raise ShapeError(f"ops.rfft of an empty last axis (x of shape {self.shape(x)}): give fft_length >= 1")
        x, dtype = self._spectral(self._fitted(x, n)), self.dtype_of(x)
        return self._cast_all(self._rfft(x), dtype)

    def irfft(self, x, fft_length: int | None = None):
        """The inverse of :meth:`rfft` (``keras.ops.irfft``): ``fft_length`` real points (default ``2 * (m - 1)``
        for ``m`` frequencies) from the ``(real, imag)`` pair ``x``, whose last axis is cropped or zero-padded to
        ``fft_length // 2 + 1`` frequencies. The imaginary parts of frequency 0 (and ``fft_length / 2`` if even) do
        not count, as in NumPy.

        Raises:
            ArgumentError: ``x`` not a pair, or an fft_length that is not None or an int >= 1.
            DTypeError: a part that is not floating.
            ShapeError: parts of different shapes, scalars, a last axis of unknown size, or of one frequency
                without fft_length (no point to return).
        """
        real, imag, dtype = self._complex(x, 1, "irfft")
        m = self.shape(real)[-1]
        n = 2 * (m - 1) if fft_length is None else _positive(fft_length, "fft_length", "irfft")
        if n < 1:
            raise ShapeError(f"ops.irfft of {m} frequency(ies) gives {n} points: give fft_length >= 1")
        real, imag = self._fitted(real, n // 2 + 1), self._fitted(imag, n // 2 + 1)
        return self._cast_all(self._irfft(real, imag, n), dtype)

    # --- short-time transforms ---------------------------------------------------------------------------------------
    def stft(self, x, sequence_length: int, sequence_stride: int, fft_length: int, window="hann",
             center: bool = True):
        """Short-time Fourier transform along the last axis (``keras.ops.stft``): :meth:`rfft` of ``fft_length``
        points of each sequence of ``sequence_length`` entries every ``sequence_stride``, windowed. Returns the
        ``(real, imag)`` pair ``[..., sequences, fft_length // 2 + 1]`` in ``x``'s dtype.

        Args:
            x: float32 or float64 signals ``[..., n]``.
            sequence_length: the frame's length, an int >= 1.
            sequence_stride: the step between frames, an int >= 1.
            fft_length: the transform's length, an int >= ``sequence_length``.
            window: ``"hann"``, ``"hamming"`` (periodic), an array of ``sequence_length`` entries, or None (no
                window); centred in the ``fft_length`` points (zeros around it).
            center: pad the signal with ``fft_length // 2`` entries reflected at each end (NumPy's ``reflect``, any
                length), so that sequence ``t`` is centred at ``t * sequence_stride``; else sequence ``t`` starts
                there. Sequences: ``1 + (padded n - fft_length) // sequence_stride`` (none if fewer points).

        Raises:
            ArgumentError: a sequence_length, sequence_stride or fft_length that is not an int >= 1, an
                fft_length below sequence_length, or a window name other than "hann" and "hamming".
            DTypeError: ``x`` not float32 or float64 (Keras' TypeError).
            ShapeError: a window not of shape ``(sequence_length,)``, a scalar ``x``, or a last axis of unknown
                size.
        """
        length, stride, fft_length = self._stft_sizes(sequence_length, sequence_stride, fft_length, "stft")
        x = self._tensor(x)
        if self.dtype_of(x) not in ("float32", "float64"):
            raise DTypeError(f"ops.stft needs float32 or float64 signals, got dtype {self.dtype_of(x)}")
        size = self._last_axis(x, "stft")
        positions = np.arange(size)
        if center and size:
            positions = np.pad(positions, fft_length // 2, mode="reflect")
        frames = self._frames(x, positions, fft_length, stride)
        weights = self._stft_window(window, length, fft_length, self.dtype_of(x), "stft")
        return self._rfft(frames if weights is None else frames * weights)

    def istft(self, x, sequence_length: int, sequence_stride: int, fft_length: int, length: int | None = None,
              window="hann", center: bool = True):
        """Inverse short-time Fourier transform (``keras.ops.istft``): the signal whose :meth:`stft` with the same
        arguments is ``x``, a ``(real, imag)`` pair ``[..., sequences, bins]``. Each sequence's :meth:`irfft` of
        ``fft_length`` points is weighted by the window divided by the sum of the squared windows overlapping at
        its position (periodic in ``sequence_stride``; 0 where no window covers a position, as TensorFlow's),
        and the sequences are added where they overlap. The result drops ``fft_length // 2`` entries at each end
        if ``center`` (none for an fft_length of 1, as Keras documents; its backends slice to ``-0`` there and
        return nothing); ``length``, when given, is how many entries to keep after the first dropped ones (fewer if
        the signal is shorter, as in Keras).

        Raises:
            ArgumentError: ``x`` not a pair; a sequence_length, sequence_stride or fft_length that is not an int
                >= 1, an fft_length below sequence_length, a length that is not None or an int >= 0, or a window
                name other than "hann" and "hamming".
            DTypeError: a part that is not floating.
            ShapeError: parts of different shapes, of rank below 2, of unknown last two sizes, with no sequence or
                more than one leading axis of unknown size, or a window not of shape ``(sequence_length,)``.
        """
        sequence_length, stride, fft_length = self._stft_sizes(sequence_length, sequence_stride, fft_length,
                                                               "istft")
        if length is not None and not (is_int(length) and length >= 0):
            raise ArgumentError(f"ops.istft: length must be None or an int >= 0, got {length!r}")
        real, imag, dtype = self._complex(x, 2, "istft")
        if self.shape(real)[-2] < 1:
            raise ShapeError(f"ops.istft needs at least one sequence, got x of shape {self.shape(real)}")
        frames = self._irfft(self._fitted(real, fft_length // 2 + 1), self._fitted(imag, fft_length // 2 + 1),
                             fft_length)
        weights = self._stft_window(window, sequence_length, fft_length, self.dtype_of(frames), "istft")
        if weights is not None:
            squares = self._overlapping_squares(weights, stride)
            uncovered = squares == 0  # weighs 0, with a gradient of 0, not NaN
            frames = frames * self.where(uncovered, 0.0, weights / self.where(uncovered, 1.0, squares))
        signal = self._overlap_add(frames, stride)
        start = fft_length // 2 if center else 0
        if length is not None:
            end = start + int(length)
        else:
            end = self.shape(signal)[-1] - (fft_length // 2 if center else 0)
        return self._cast_all(signal[..., start:max(end, start)], dtype)

    # --- what the ops share ------------------------------------------------------------------------------------------
    def _last_axis(self, x, op: str) -> int:
        shape = self.shape(x)
        if not shape:
            raise ShapeError(f"ops.{op} needs an array of rank >= 1, got a scalar")
        if shape[-1] is None:
            raise ShapeError(f"ops.{op} needs the last axis's size, got shape {shape}")
        return shape[-1]

    def _frames(self, x, positions: np.ndarray, length: int, stride: int):
        """``x[..., positions]`` cut into sequences of ``length`` every ``stride``, ``[..., count, length]``, from
        basic slices only: Aesara fails to compile the gradient of two gathers from one tensor (its
        ``local_IncSubtensor_serialize`` rewrite asserts), and sliced gradients add up on every engine. The
        sequences are stacked (``count`` slices) or the offsets within them (``length`` strided slices), whichever
        is fewer."""
        x = self._gathered(x, positions)
        rank = len(self.shape(x))
        count = max(0, 1 + (len(positions) - length) // stride)
        if count == 0:
            return self.stack([x[..., :0]] * length, axis=rank)
        if count <= length:
            return self.stack([x[..., i * stride:i * stride + length] for i in range(count)], axis=rank - 1)
        return self.stack([x[..., j:j + (count - 1) * stride + 1:stride] for j in range(length)], axis=rank)

    def _gathered(self, x, positions: np.ndarray):
        """``x[..., positions]`` for NumPy-made ``positions`` as the concatenation of their runs of consecutive
        positions (forward or backward), each a basic slice: a reflection at each end is three."""
        if np.array_equal(positions, np.arange(self.shape(x)[-1])):
            return x
        runs, start = [], 0
        for end in range(1, len(positions) + 1):
            if end == len(positions) or abs(positions[end] - positions[end - 1]) != 1 or (
                    end - start > 1 and positions[end] - positions[end - 1] != positions[start + 1] - positions[start]):
                runs.append((int(positions[start]), int(positions[end - 1])))
                start = end
        return self.concatenate([x[..., first:last + 1] if first <= last else
                                 x[..., first:(last - 1 if last else None):-1] for first, last in runs], axis=-1)

    def _complex(self, x, rank: int, op: str):
        """A ``(real, imag)`` pair checked and promoted to one floating dtype (half precision made float32), and
        that dtype (the result's)."""
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise ArgumentError(f"ops.{op} needs x as a (real, imag) pair of float tensors; got {type(x).__name__}"
                                + (f" of length {len(x)}" if isinstance(x, (tuple, list)) else ""))
        real, imag = (self._tensor(part) for part in x)
        for name, part in (("real", real), ("imag", imag)):
            if not self.dtype_of(part).startswith(("float", "bfloat")):
                raise DTypeError(f"ops.{op} needs floating real and imaginary parts, got {name} of dtype "
                                 f"{self.dtype_of(part)}")
        shapes = self.shape(real), self.shape(imag)
        if shapes[0] != shapes[1]:
            raise ShapeError(f"ops.{op}: the real and imaginary parts need one shape, got {shapes[0]} and "
                             f"{shapes[1]}")
        if len(shapes[0]) < rank or None in shapes[0][len(shapes[0]) - rank:]:
            raise ShapeError(f"ops.{op} needs parts of rank >= {rank} whose last {rank} axes have known sizes, got "
                             f"shape {shapes[0]}")
        dtype = self._result_dtype([real, imag])
        return self._spectral(real, dtype), self._spectral(imag, dtype), dtype

    def _spectral(self, x, dtype: str | None = None):
        """``x`` in the dtype an FFT takes for ``dtype`` (default ``x``'s): half precision in float32."""
        dtype = dtype or self.dtype_of(x)
        return self._tensor(x, _SPECTRAL_DTYPE.get(dtype, dtype))

    def _cast_all(self, values, dtype: str):
        if isinstance(values, (tuple, list)):
            return tuple(self._cast_all(v, dtype) for v in values)
        return values if self.dtype_of(values) == dtype else self.cast(values, dtype)

    def _fitted(self, x, size: int):
        """``x``'s last axis cropped or zero-padded (at its end) to ``size``."""
        current = self.shape(x)[-1]
        if current > size:
            return x[..., :size]
        if current < size:
            return self.pad(x, [(0, 0)] * (len(self.shape(x)) - 1) + [(0, size - current)])
        return x

    @staticmethod
    def _stft_sizes(sequence_length, sequence_stride, fft_length, op: str) -> tuple[int, int, int]:
        sizes = tuple(_positive(value, name, op) for value, name in ((sequence_length, "sequence_length"),
                                                                     (sequence_stride, "sequence_stride"),
                                                                     (fft_length, "fft_length")))
        if sizes[2] < sizes[0]:
            raise ArgumentError(f"ops.{op}: fft_length must be >= sequence_length, got fft_length={fft_length} and "
                                f"sequence_length={sequence_length}")
        return sizes

    def _stft_window(self, window, length: int, fft_length: int, dtype: str, op: str):
        """The window of ``length`` entries centred in ``fft_length`` (zeros around it, the extra one after), in
        ``dtype``; None for no window."""
        if window is None:
            return None
        before = (fft_length - length) // 2
        if isinstance(window, str):
            if window not in WINDOWS:
                raise ArgumentError(f"ops.{op}: window must be one of {sorted(WINDOWS)}, an array or None; got "
                                    f"window={window!r}")
            a = WINDOWS[window]
            # One entry is a window of 1, as in scipy and TensorFlow (the formula would give 0).
            values = np.ones(1) if length == 1 else a - (1 - a) * np.cos(2 * np.pi * np.arange(length) / length)
            return self._tensor(np.pad(values, (before, fft_length - length - before)), dtype)
        weights = self._tensor(window, dtype)
        if tuple(self.shape(weights)) != (length,):
            raise ShapeError(f"ops.{op}: the window must have shape ({length},) (sequence_length), got "
                             f"{tuple(self.shape(weights))}")
        return self.pad(weights, [(before, fft_length - length - before)])

    def _overlapping_squares(self, weights, stride: int):
        """For each of the window's ``n`` positions, the sum of the squared window over the positions that
        overlap it when windows are ``stride`` apart (TensorFlow's ``inverse_stft_window_fn``)."""
        n = self.shape(weights)[0]
        overlaps = -(-n // stride)
        squares = self.pad(self.square(weights), [(0, overlaps * stride - n)])
        per_phase = self.sum(self.reshape(squares, (overlaps, stride)), axis=0)
        return self.reshape(self.tile(per_phase, [overlaps]), (-1,))[:n]

    def _overlap_add(self, frames, stride: int):
        """Sequences ``[..., count, n]`` added at ``stride`` apart: ``[..., (count - 1) * stride + n]``. Each
        sequence is cut into ``k = ceil(n / stride)`` pieces of ``stride``; piece ``j`` of every sequence lands
        ``j`` pieces later, which a reshape of the ``[k, count + k, stride]`` pieces (zero rows after) to ``[k,
        (count + k - 1) * stride]`` does for every ``j`` at once; then the ``k`` rows are summed."""
        *batch, count, n = self.shape(frames)
        if sum(size is None for size in batch) > 1:
            raise ShapeError(f"ops.istft needs all but one leading axis of known size, got shape {self.shape(frames)}")
        k = -(-n // stride)
        pieces = self.reshape(self.pad(self.reshape(frames, (-1, count, n)), [(0, 0), (0, 0), (0, k * stride - n)]),
                              (-1, count, k, stride))
        pieces = self.pad(self.transpose(pieces, (0, 2, 1, 3)), [(0, 0), (0, 0), (0, k), (0, 0)])
        flat = self.reshape(pieces, (-1, k * (count + k) * stride))[:, :k * (count + k - 1) * stride]
        added = self.sum(self.reshape(flat, (-1, k, (count + k - 1) * stride)), axis=1)
        size = (count - 1) * stride + n
        return self.reshape(added[:, :size], tuple(-1 if b is None else b for b in batch) + (size,))


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _positive(value, name: str, op: str) -> int:
    if not (is_int(value) and value >= 1):
        raise ArgumentError(f"ops.{op}: {name} must be an int >= 1, got {value!r}")
    return int(value)
