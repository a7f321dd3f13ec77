"""Array creation: ``keras.ops.numpy``'s ``arange``, ``linspace``, ``logspace``, ``geomspace``, ``zeros``,
``ones``, ``empty``, ``full``, ``full_like``, ``eye``, ``identity``, ``tri``, ``tril``, ``triu``, ``diagonal``,
``trace``, ``diag``, ``diagflat``, ``vander``, ``meshgrid`` and the window functions (``hamming`` ...), mixed into
:class:`~toolkit.ops.Ops`.

Composites of the basic primitives, with the helpers of :class:`~toolkit.ops.arrays.ArrayOps` (the rules of the
array groups are in :mod:`toolkit.ops.arrays`). Creation ops take no array input (or only static ones): their
result is a NumPy constant in the computation's graph, the same bits on every backend.
"""

from __future__ import annotations

import math
from abc import ABC

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.arrays import is_int, normalized_axis
from toolkit.ops.tensor import INT_DTYPE, Tensor

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): none
#: here.
ARGUMENTS: dict[str, str] = {}
#: ``indexing`` values of :meth:`CreationOps.meshgrid`.
INDEXINGS = ("xy", "ij")


class CreationOps(ABC):  # noqa: B024 (composites only: nothing for a backend to implement)
    """Array creation; mixed into :class:`~toolkit.ops.Ops`."""

    # ----------------------------------------------------------------------------------------------------------------
    # Creation.

    def arange(self, start, stop=None, step=None, dtype=None):
        """``[start, start + step, ...)`` below ``stop`` (``keras.ops.arange``; one argument is ``stop``). The default
        dtype is int32 for integer bounds, the computation dtype when any is a float.

        Raises:
            ShapeError: a bound computed in the traced model (the output's length depends on it).
        """
        bounds = [self._static(v, "arange", n) for v, n in ((start, "start"), (stop, "stop"), (step, "step"))
                  if v is not None]
        floating = any(b.dtype.kind == "f" for b in bounds)
        dtype = self._dtype_name(dtype, self.dtype if floating else INT_DTYPE, "arange")
        start, stop, step = (bounds[0].item(), None if stop is None else bounds[1].item(),
                             1 if step is None else bounds[-1].item())
        if stop is None:
            start, stop = 0, start
        return self._filled(np.arange(start, stop, step, dtype=dtype))

    def linspace(self, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
        """``num`` evenly spaced values from ``start`` to ``stop`` (``keras.ops.linspace``; arrays of bounds give
        one sequence per entry along ``axis``). ``retstep=True`` also returns the spacing. Static bounds give NumPy's
        values exactly; tensor bounds compute NumPy's formula in the graph (``start + i * step``, the last value
        ``stop``), floored for an integer ``dtype``.

        Raises:
            ShapeError: ``num`` computed in the traced model (it is the output's length).
        """
        num = self._static_int(num, "linspace", "num")
        if num < 0:
            raise ArgumentError(f"ops.linspace: num must be >= 0, got {num}")
        default = self._result_dtype([start, stop, 0.0])
        dtype = self._dtype_name(dtype, default if np.dtype(default).kind == "f" else self.dtype, "linspace")
        if not any(isinstance(v, Tensor) or self.is_native(v) for v in (start, stop)):
            values, step = np.linspace(np.asarray(start), np.asarray(stop), num, endpoint, retstep=True,
                                       dtype=np.float64, axis=axis)
            out = self._filled(_as_dtype(values, dtype))
            return (out, self._filled(np.asarray(step, dtype if np.dtype(dtype).kind == "f" else self.dtype))) \
                if retstep else out
        out, step = self._linspace_graph(start, stop, num, endpoint, axis)
        out = self.cast(self._floor(out), dtype) if np.dtype(dtype).kind != "f" else self.cast(out, dtype)
        return (out, step) if retstep else out

    def _linspace_graph(self, start, stop, num: int, endpoint: bool, axis: int):
        compute = self._result_dtype([start, stop], floating=True)
        start, stop = self._tensor(start, compute), self._tensor(stop, compute)
        shape = tuple(np.broadcast_shapes(self.shape(start), self.shape(stop)))
        start, stop = self.broadcast_to(start, shape), self.broadcast_to(stop, shape)
        div = num - 1 if endpoint else num
        delta = stop - start
        steps = self._filled(np.arange(num, dtype=compute).reshape((-1,) + (1,) * len(shape)))
        if div > 0:
            step = delta / float(div)
            # NumPy's formula, and its fallback where the step underflows to 0: (i / div) * delta.
            out = self.where(step == 0, steps / float(div) * delta, steps * step) + start
        else:
            step = delta * float("nan")
            out = steps * delta + start
        if endpoint and num > 1:
            out = self.concatenate([out[:-1], self.expand_dims(stop, 0)], axis=0)
        return self.moveaxis(out, 0, axis), step

    def _floor(self, x):
        """Floor of a float tensor from the primitives (``x - mod(x, 1)``: exact for floats)."""
        return x - self._mod(x, 1.0)

    def logspace(self, start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
        """``base ** linspace(start, stop, ...)`` (``keras.ops.logspace``)."""
        default = self._result_dtype([start, stop, 0.0])
        dtype = self._dtype_name(dtype, default if np.dtype(default).kind == "f" else self.dtype, "logspace")
        if not any(isinstance(v, Tensor) or self.is_native(v) for v in (start, stop, base)):
            num = self._static_int(num, "logspace", "num")
            return self._filled(_as_dtype(np.logspace(np.asarray(start), np.asarray(stop), num, endpoint,
                                                      np.asarray(base), np.float64, axis), dtype))
        exponents = self.linspace(start, stop, num, endpoint, dtype=self._result_dtype([start, stop], True),
                                  axis=axis)
        out = self.power(self._tensor(base, self.dtype_of(exponents)), exponents)
        return self.cast(self._floor(out), dtype) if np.dtype(dtype).kind != "f" else self.cast(out, dtype)

    def geomspace(self, start, stop, num=50, endpoint=True, dtype=None, axis=0):
        """``num`` values from ``start`` to ``stop`` evenly spaced on a log scale (``keras.ops.geomspace``; the
        bounds may be negative, of one sign, never 0). The default dtype is the computation dtype."""
        num = self._static_int(num, "geomspace", "num")
        dtype = self._dtype_name(dtype, self.dtype, "geomspace")
        if not any(isinstance(v, Tensor) or self.is_native(v) for v in (start, stop)):
            if np.any(np.asarray(start) == 0) or np.any(np.asarray(stop) == 0):
                raise ArgumentError(f"ops.geomspace: start and stop must be nonzero, got {start!r} and {stop!r}")
            return self._filled(_as_dtype(np.geomspace(np.asarray(start, np.float64), np.asarray(stop, np.float64),
                                                       num, endpoint, np.float64, axis), dtype))
        compute = self._result_dtype([start, stop], floating=True)
        start, stop = self._tensor(start, compute), self._tensor(stop, compute)
        # NumPy's: the sign taken out, logspace between the logarithms, the end points exactly start and stop.
        sign = self.where(start < 0, -1.0, 1.0)
        start, stop = start * sign, stop * sign
        log10 = math.log(10.0)
        out = self.logspace(self.log(start) / log10, self.log(stop) / log10, num, endpoint, 10.0, compute, axis=0)
        shape = tuple(np.broadcast_shapes(self.shape(start), self.shape(stop)))
        if num > 0:
            ends = [self.expand_dims(self.broadcast_to(start, shape), 0)]
            middle = out[1:num - 1] if endpoint and num > 1 else out[1:]
            ends_after = [self.expand_dims(self.broadcast_to(stop, shape), 0)] if endpoint and num > 1 else []
            out = self.concatenate([*ends, middle, *ends_after], axis=0)
        out = self.moveaxis(out * sign, 0, axis)
        return self.cast(self._floor(out), dtype) if np.dtype(dtype).kind != "f" else self.cast(out, dtype)

    def zeros(self, shape, dtype=None):
        """Zeros of ``shape`` (``keras.ops.zeros``; default dtype the computation dtype)."""
        return self._filled(np.zeros(self._static_shape(shape, "zeros"), self._dtype_name(dtype, self.dtype, "zeros")))

    def ones(self, shape, dtype=None):
        """Ones of ``shape`` (``keras.ops.ones``)."""
        return self._filled(np.ones(self._static_shape(shape, "ones"), self._dtype_name(dtype, self.dtype, "ones")))

    def empty(self, shape, dtype=None):
        """An array of ``shape`` whose values are not to be read (``keras.ops.empty``): zeros here, so that every
        backend gives the same bits."""
        return self._filled(np.zeros(self._static_shape(shape, "empty"), self._dtype_name(dtype, self.dtype, "empty")))

    def full(self, shape, fill_value, dtype=None):
        """``fill_value`` (a number or an array broadcast to ``shape``) in an array of ``shape``
        (``keras.ops.full``; default dtype the computation dtype, as Keras')."""
        shape = self._static_shape(shape, "full")
        dtype = self._dtype_name(dtype, self.dtype, "full")
        if isinstance(fill_value, Tensor) or self.is_native(fill_value):
            return self.broadcast_to(self.cast(fill_value, dtype), shape)
        return self._filled(np.full(shape, fill_value, dtype))

    def full_like(self, x, fill_value, dtype=None):
        """``fill_value`` broadcast to ``x``'s shape, in ``x``'s dtype unless ``dtype`` is given
        (``keras.ops.full_like``)."""
        x = self._tensor(x)
        dtype = self._dtype_name(dtype, x.dtype, "full_like")
        fill = self.cast(self._tensor(fill_value), dtype)
        if None not in x.shape:
            return self.broadcast_to(fill, x.shape)
        # An axis of unknown size: a where on an all-true mask of x's shape broadcasts the fill, bits unchanged.
        return self.where(self.cast(self.ones_like(x), "bool"), fill, fill)

    def _matrix_sizes(self, N, M, k, name: str) -> tuple[int, int, int]:
        for value, argument in ((N, "N"), (M, "M"), (k, "k")):
            if value is not None and not is_int(value) and not (
                    (isinstance(value, Tensor) or self.is_native(value) or isinstance(value, np.ndarray))
                    and np.dtype(self.dtype_of(value)).kind in "iu"):
                raise DTypeError(f"ops.{name}: {argument} must be an integer, got {value!r}")
        n = self._static_int(N, name, "N")
        return n, n if M is None else self._static_int(M, name, "M"), self._static_int(k, name, "k")

    def eye(self, N, M=None, k=0, dtype=None):
        """An ``N x M`` array with ones on the ``k``-th diagonal (``keras.ops.eye``).

        Raises:
            DTypeError: a float ``N``, ``M`` or ``k`` (a TypeError, as Keras raises).
        """
        n, m, k = self._matrix_sizes(N, M, k, "eye")
        return self._filled(np.eye(n, m, k, dtype=self._dtype_name(dtype, self.dtype, "eye")))

    def identity(self, n, dtype=None):
        """The ``n x n`` identity matrix (``keras.ops.identity``)."""
        return self.eye(n, dtype=dtype)

    def tri(self, N, M=None, k=0, dtype=None):
        """Ones at and below the ``k``-th diagonal of an ``N x M`` array, zeros above (``keras.ops.tri``)."""
        n, m, k = self._matrix_sizes(N, M, k, "tri")
        return self._filled(np.tri(n, m, k, dtype=self._dtype_name(dtype, self.dtype, "tri")))

    def _triangle(self, x, k, lower: bool, name: str):
        """``x`` where its last two axes' entry is on the kept side of the ``k``-th diagonal, else 0 (NumPy's: a
        1-D ``x`` is a row broadcast to a square). ``k`` may be a tensor."""
        x = self._tensor(x)
        if x.ndim < 1:
            raise ShapeError(f"ops.{name} needs an array of rank >= 1, got a scalar")
        rows, cols = (self._size(x, -1, name),) * 2 if x.ndim == 1 else (self._size(x, -2, name),
                                                                          self._size(x, -1, name))
        offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]  # column minus row: the diagonal's index
        if isinstance(k, Tensor) or self.is_native(k):
            k = self._tensor(k, INT_DTYPE)
            keep = self.less_equal(self._filled(offset.astype(INT_DTYPE)), k) if lower else \
                self.greater_equal(self._filled(offset.astype(INT_DTYPE)), k)
        else:
            if not is_int(k):
                raise DTypeError(f"ops.{name}: k must be an integer, got {k!r}")
            keep = offset <= k if lower else offset >= k
        return self.where(keep, x, self.zeros((), self.dtype_of(x)))

    def tril(self, x, k=0):
        """``x`` with the entries above the ``k``-th diagonal of its last two axes zeroed (``keras.ops.tril``)."""
        return self._triangle(x, k, True, "tril")

    def triu(self, x, k=0):
        """``x`` with the entries below the ``k``-th diagonal of its last two axes zeroed (``keras.ops.triu``)."""
        return self._triangle(x, k, False, "triu")

    def diagonal(self, x, offset=0, axis1=0, axis2=1):
        """The ``offset``-th diagonal of the planes of ``axis1`` and ``axis2``, as a new last axis
        (``keras.ops.diagonal``, NumPy's order). It is a strided slice of the plane flattened: no gather.

        Raises:
            ShapeError: ``axis1`` and ``axis2`` name the same axis (a ValueError, as Keras raises).
        """
        x = self._tensor(x)
        if x.ndim < 2:
            raise ShapeError(f"ops.diagonal needs an array of rank >= 2, got shape {x.shape}")
        a1, a2 = (normalized_axis(a, x.ndim, "diagonal", n) for a, n in ((axis1, "axis1"), (axis2, "axis2")))
        if a1 == a2:
            raise ShapeError(f"ops.diagonal: axis1 and axis2 must differ, got {axis1} and {axis2} (both axis {a1})")
        if not is_int(offset):
            raise DTypeError(f"ops.diagonal: offset must be an int, got {offset!r}")
        rest = [a for a in range(x.ndim) if a not in (a1, a2)]
        plane = self.transpose(x, (*rest, a1, a2))
        rows, cols = self._size(x, a1, "diagonal"), self._size(x, a2, "diagonal")
        count = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
        flat = self._reshaped(plane, (*plane.shape[:-2], rows * cols), "diagonal")
        first = max(-offset, 0) * cols + max(offset, 0)
        return flat[..., first:first + (count - 1) * (cols + 1) + 1:cols + 1] if count else flat[..., :0]

    def trace(self, x, offset=0, axis1=0, axis2=1):
        """The sum of :meth:`diagonal` (``keras.ops.trace``); booleans and 8/16-bit integers sum in int32, as
        Keras'."""
        found = self.diagonal(x, offset, axis1, axis2)
        if found.dtype in ("bool", "int8", "int16", "uint8", "uint16"):
            found = self.cast(found, INT_DTYPE)
        return self.cast(self.sum(found, axis=-1), found.dtype)  # the Theano family sums int32 into int64

    def diag(self, x, k=0):
        """A 1-D ``x`` as a square matrix with it on the ``k``-th diagonal; a 2-D ``x``'s ``k``-th diagonal
        (``keras.ops.diag``)."""
        x = self._tensor(x)
        if x.ndim == 2:
            return self.diagonal(x, k)
        if x.ndim != 1:
            raise ShapeError(f"ops.diag needs a 1-D or 2-D array, got shape {x.shape}")
        if not is_int(k):
            raise DTypeError(f"ops.diag: k must be an int, got {k!r}")
        n = self._size(x, 0, "diag")
        size = n + abs(k)
        # Row i holds x[i] (k >= 0) or x[i + k] (k < 0): each row's value, then kept only on the diagonal.
        rows = self.pad(x, [(0, k)] if k >= 0 else [(-k, 0)])
        on_diagonal = np.eye(size, size, k, dtype=bool)
        return self.where(on_diagonal, self.expand_dims(rows, 1), self.zeros((), x.dtype))

    def diagflat(self, x, k=0):
        """``x`` flattened, on the ``k``-th diagonal of a square matrix (``keras.ops.diagflat``)."""
        return self.diag(self.ravel(x), k)

    def vander(self, x, N=None, increasing=False):
        """The Vandermonde matrix of a 1-D ``x``: columns ``x**(N-1), ..., x**0`` (reversed when ``increasing``),
        ``N`` defaulting to ``len(x)`` (``keras.ops.vander``). Powers are repeated products, as NumPy makes them
        (exact, and the gradient of ``x**0`` is 0 where ``x`` is 0); integer ``x`` is computed as a float and cast
        back, as Keras does."""
        x = self._tensor(x)
        if x.ndim != 1:
            raise ShapeError(f"ops.vander needs a 1-D array, got shape {x.shape}")
        n = self._size(x, 0, "vander") if N is None else self._static_int(N, "vander", "N")
        if n < 0:
            raise ArgumentError(f"ops.vander: N must be >= 0, got {n}")
        result = x.dtype
        compute = result if np.dtype(result).kind == "f" else self.dtype
        x = self.cast(x, compute)
        columns, power = [], self.ones_like(x)
        for _ in range(n):
            columns.append(power)
            power = power * x
        out = self.stack(columns[::1 if increasing else -1], axis=1) if n else self.zeros((x.shape[0], 0), compute)
        return self.cast(out, result) if result != compute else out

    def meshgrid(self, *x, indexing="xy"):
        """Coordinate arrays from 1-D coordinate vectors (``keras.ops.meshgrid``; inputs of other ranks are
        flattened, as NumPy's). ``indexing="xy"`` (Cartesian) swaps the first two output axes of ``"ij"``."""
        if indexing not in INDEXINGS:
            raise ArgumentError(f"ops.meshgrid: indexing must be one of {INDEXINGS}, got {indexing!r}")
        xs = [self.ravel(v) for v in x]
        sizes = [self._size(v, 0, "meshgrid") for v in xs]
        if indexing == "xy" and len(xs) > 1:
            sizes[0], sizes[1] = sizes[1], sizes[0]
        out = []
        for i, v in enumerate(xs):
            position = (1 - i if i < 2 else i) if indexing == "xy" and len(xs) > 1 else i
            shape = [1] * len(xs)
            shape[position] = -1
            out.append(self.broadcast_to(self.reshape(v, shape), sizes))
        return out

    def _window(self, x, name: str) -> int:
        return self._static_int(x, name, "x (the window's length)")

    def bartlett(self, x):
        """The Bartlett (triangular) window of length ``x`` (``keras.ops.bartlett``), a constant."""
        return self._filled(np.bartlett(self._window(x, "bartlett")).astype(self.dtype))

    def blackman(self, x):
        """The Blackman window of length ``x`` (``keras.ops.blackman``), a constant."""
        return self._filled(np.blackman(self._window(x, "blackman")).astype(self.dtype))

    def hamming(self, x):
        """The Hamming window of length ``x`` (``keras.ops.hamming``), a constant."""
        return self._filled(np.hamming(self._window(x, "hamming")).astype(self.dtype))

    def hanning(self, x):
        """The Hann window of length ``x`` (``keras.ops.hanning``), a constant."""
        return self._filled(np.hanning(self._window(x, "hanning")).astype(self.dtype))

    def kaiser(self, x, beta):
        """The Kaiser window of length ``x`` and shape ``beta`` (``keras.ops.kaiser``), a constant."""
        beta = self._static(beta, "kaiser", "beta")
        return self._filled(np.kaiser(self._window(x, "kaiser"), float(beta)).astype(self.dtype))


def _as_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """NumPy's ``linspace(..., dtype=int)`` rule: floor, then cast."""
    return (np.floor(values) if np.dtype(dtype).kind in "iu" else values).astype(dtype)
