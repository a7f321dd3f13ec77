"""Array creation, shapes and indexing: ``keras.ops.numpy``'s ``arange``, ``linspace``, ``eye``, ``tril``,
``diagonal``, ``split``, ``tile``, ``repeat``, ``roll``, ``flip``, ``moveaxis`` and their kin, mixed into
:class:`~toolkit.nn.ops.Ops`.

Every op here is a composite, written once from the basic primitives (reshape, transpose, basic indexing,
concatenation, broadcasting, ``where``): they are exact (no arithmetic on the values they move), keep static shapes
on every backend, and differentiate through those primitives. Creation ops take no array input (or only static ones):
their result is a NumPy constant in the computation's graph, the same bits on every backend. Where ``dtype=None``,
floats get the computation dtype (``ops.dtype``, Keras' floatx) and integers int32, as Keras gives them.

What decides an output's shape (``arange``'s bounds, ``split``'s indices, ``repeat``'s counts, a window's length)
must be static: a Python value, a NumPy array, or a tensor whose value the framework knows while the model is traced
(a constant; any tensor in TensorFlow's eager mode). A computed one is refused with a :class:`~toolkit.ShapeError`
naming the argument, on every backend, where Keras would fail with a framework error or not at all.
"""

from __future__ import annotations

import math
from abc import ABC
from collections.abc import Sequence

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.nn.tensor import INT_DTYPE, Tensor

#: How each primitive's array arguments are converted (the letters of :data:`toolkit.nn.ops.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"_bitcast": "t"}

#: ``indexing`` values of :meth:`ArrayOps.meshgrid`.
INDEXINGS = ("xy", "ij")


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _normalized_axis(axis, ndim: int, name: str, argument: str = "axis") -> int:
    """``axis`` in ``[0, ndim)`` (negative ones counted from the end), or a ShapeError naming ``argument``."""
    if not _is_int(axis):
        raise ShapeError(f"ops.{name}: {argument} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"ops.{name}: {argument} {axis} is out of bounds for an array of rank {ndim}")
    return int(axis) % ndim


def _normalized_axes(axis, ndim: int, name: str, argument: str = "axis") -> list[int]:
    axes = [axis] if _is_int(axis) else list(axis)
    found = [_normalized_axis(a, ndim, name, argument) for a in axes]
    if len(set(found)) != len(found):
        raise ShapeError(f"ops.{name}: repeated {argument} in {axis!r}")
    return found


class ArrayOps(ABC):  # noqa: B024  (its two backend hooks have defaults: a backend without them refuses)
    """Array creation, shapes and indexing; mixed into :class:`~toolkit.nn.ops.Ops`."""

    # ----------------------------------------------------------------------------------------------------------------
    # Helpers: tensors, dtypes and static values.

    def _dtype_name(self, dtype, default: str, name: str) -> str:
        """A ``dtype`` argument as a NumPy name: None is ``default``; Python's ``int``/"int" is int32 and ``float``
        the computation dtype, as Keras reads them (its floatx)."""
        if dtype is None:
            return default
        if dtype is int or dtype == "int":
            return INT_DTYPE
        if dtype is float or dtype == "float":
            return self.dtype
        try:
            found = np.dtype(dtype)
        except TypeError as error:
            raise DTypeError(f"ops.{name}: dtype {dtype!r} is not a dtype") from error
        if found.kind not in "biuf":
            raise DTypeError(f"ops.{name}: dtype {found.name} is not supported; expected bool, an integer or a float")
        return found.name

    def _constant_value(self, native) -> np.ndarray | None:
        """The value of a native known while the model is traced (a constant), or None. Backends override it."""
        return None

    def _static(self, value, name: str, argument: str) -> np.ndarray:
        """``value``'s static value as a NumPy array, or a ShapeError naming the argument."""
        if isinstance(value, Tensor):
            value = value.native
        if self.is_native(value):
            found = self._constant_value(value)
            if found is None:
                raise ShapeError(f"ops.{name}: {argument} decides the output's shape, so it must be known while the "
                                 "model is traced (a Python value, a NumPy array or a constant); got a computed "
                                 "tensor")
            return np.asarray(found)
        return np.asarray(value)

    def _static_int(self, value, name: str, argument: str) -> int:
        found = self._static(value, name, argument)
        if found.ndim != 0 or found.dtype.kind not in "iu":
            raise DTypeError(f"ops.{name}: {argument} must be an integer, got {value!r}")
        return int(found)

    def _static_shape(self, shape, name: str) -> tuple[int, ...]:
        if _is_int(shape) or (isinstance(shape, (Tensor, np.ndarray)) and np.ndim(shape) == 0):
            shape = (shape,)
        sizes = tuple(self._static_int(s, name, "shape") for s in shape)
        if any(s < 0 for s in sizes):
            raise ShapeError(f"ops.{name}: negative size in shape {sizes}")
        return sizes

    def _known_shape(self, x, name: str) -> tuple[int, ...]:
        shape = self.shape(x)
        if None in shape:
            raise ShapeError(f"ops.{name} needs an array of static shape, got {shape}")
        return tuple(shape)

    def _size(self, x, axis: int, name: str) -> int:
        """The static size of one axis: the ops need only the sizes of the axes they act on, so that a batch axis
        of unknown size (TensorFlow's step traced for any batch) passes through."""
        size = self.shape(x)[axis]
        if size is None:
            raise ShapeError(f"ops.{name} needs a static size along axis {axis}, got shape {self.shape(x)}")
        return size

    def _reshaped(self, x, sizes: Sequence[int | None], name: str):
        """``reshape(x, sizes)`` where one size may be unknown (None): it becomes -1."""
        if sum(size is None for size in sizes) > 1:
            raise ShapeError(f"ops.{name}: more than one axis of unknown size in {tuple(sizes)}")
        return self.reshape(x, [-1 if size is None else size for size in sizes])

    def _filled(self, value: np.ndarray) -> Tensor:
        return self.wrap(self.constant(np.asarray(value)))

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
            if value is not None and not _is_int(value) and not (
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
            if not _is_int(k):
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
        a1, a2 = (_normalized_axis(a, x.ndim, "diagonal", n) for a, n in ((axis1, "axis1"), (axis2, "axis2")))
        if a1 == a2:
            raise ShapeError(f"ops.diagonal: axis1 and axis2 must differ, got {axis1} and {axis2} (both axis {a1})")
        if not _is_int(offset):
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
        if not _is_int(k):
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

    # ----------------------------------------------------------------------------------------------------------------
    # Arrays as they are: conversion, sizes, views.

    def array(self, x, dtype=None):
        """``x`` (a tensor, a NumPy array, nested lists) as a tensor of ``dtype`` (``keras.ops.array``; default:
        its own, a constant's by the toolkit's rules)."""
        return self._tensor(x, None if dtype is None else self._dtype_name(dtype, self.dtype, "array"))

    def copy(self, x):
        """``x`` (``keras.ops.copy``): tensors in a traced model are values, never written in place, so the copy is
        ``x`` itself."""
        return self._tensor(x)

    def size(self, x) -> int:
        """The number of entries of ``x``, an int (``keras.ops.size``)."""
        return int(np.prod(self._known_shape(x, "size"), dtype=np.int64))

    def ndim(self, x) -> int:
        """The rank of ``x``, an int (``keras.ops.ndim``)."""
        return len(self.shape(x))

    def ravel(self, x):
        """``x`` flattened in row-major order (``keras.ops.ravel``)."""
        return self.reshape(x, (-1,))

    def view(self, x, dtype=None):
        """``x``'s bits read as ``dtype`` (``keras.ops.view``, NumPy's ``ndarray.view``): the same dtype is ``x``;
        another of the same itemsize reinterprets each entry; a narrower one splits each entry along the last axis
        (int16 to int8 doubles its length, low byte first on a little-endian machine), a wider one joins
        neighbouring entries (the last axis' byte length must divide by the new itemsize).

        Raises:
            DTypeError: booleans, or an itemsize change of a scalar or of a last axis whose bytes do not divide.
        """
        x = self._tensor(x)
        if dtype is None:
            return x
        dtype = self._dtype_name(dtype, self.dtype, "view")
        if dtype == x.dtype:
            return x
        old, new = np.dtype(x.dtype).itemsize, np.dtype(dtype).itemsize
        shape = list(self.shape(x))
        if shape and shape[-1] is None and old != new:
            raise ShapeError(f"ops.view needs a static last axis to change the itemsize, got shape {x.shape}")
        if "bool" in (dtype, x.dtype) or (old != new and (not shape or (shape[-1] * old) % new)):
            raise DTypeError(f"ops.view: {x.dtype} of shape {tuple(shape)} cannot be read as {dtype}: "
                             + ("booleans have no defined bits" if "bool" in (dtype, x.dtype) else
                                "the last axis' bytes do not divide into the new itemsize"))
        if old == new:
            return self._bitcast(x, dtype)
        if old > new:  # each entry becomes old // new entries on a new last axis, merged into the last
            return self._reshaped(self._bitcast(x, dtype), [*shape[:-1], shape[-1] * old // new], "view")
        return self._bitcast(self._reshaped(x, [*shape[:-1], shape[-1] * old // new, new // old], "view"), dtype)

    def _bitcast(self, x, dtype: str):
        """The primitive under :meth:`view`: ``x``'s bits as ``dtype``, TensorFlow's and XLA's convention: a
        narrower dtype adds a last axis of ``old // new`` entries; a wider one needs a last axis of
        ``new // old`` entries and removes it."""
        raise DTypeError(f"ops.view: {type(self).__name__} cannot reinterpret {self.native_dtype(x)} as {dtype}")

    # ----------------------------------------------------------------------------------------------------------------
    # Reordering: flips, rotations, rolls, axes.

    def flip(self, x, axis=None):
        """``x`` reversed along ``axis`` (an int, a sequence; every axis when None) (``keras.ops.flip``)."""
        x = self._tensor(x)
        axes = range(x.ndim) if axis is None else _normalized_axes(axis, x.ndim, "flip")
        if not x.ndim:
            return x
        return x[tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(x.ndim))]

    def fliplr(self, x):
        """``x`` reversed along axis 1 (``keras.ops.fliplr``; rank >= 2)."""
        if self.ndim(x) < 2:
            raise ShapeError(f"ops.fliplr needs an array of rank >= 2, got shape {self.shape(x)}")
        return self.flip(x, 1)

    def flipud(self, x):
        """``x`` reversed along axis 0 (``keras.ops.flipud``; rank >= 1)."""
        if self.ndim(x) < 1:
            raise ShapeError("ops.flipud needs an array of rank >= 1, got a scalar")
        return self.flip(x, 0)

    def rot90(self, array, k=1, axes=(0, 1)):
        """``array`` rotated by ``k`` quarter turns in the plane of ``axes``, from the first axis towards the second
        (``keras.ops.rot90``, NumPy's)."""
        x = self._tensor(array)
        if x.ndim < 2:
            raise ShapeError(f"ops.rot90 needs an array of rank >= 2, got shape {x.shape}")
        if len(axes) != 2:
            raise ShapeError(f"ops.rot90: axes must be two axes, got {axes!r}")
        a0, a1 = (_normalized_axis(a, x.ndim, "rot90", "axes") for a in axes)
        if a0 == a1:
            raise ShapeError(f"ops.rot90: axes must be two different axes, got {axes!r}")
        if not _is_int(k):
            raise DTypeError(f"ops.rot90: k must be an int, got {k!r}")
        k %= 4
        if k == 0:
            return x
        if k == 2:
            return self.flip(x, (a0, a1))
        perm = list(range(x.ndim))
        perm[a0], perm[a1] = perm[a1], perm[a0]
        return self.transpose(self.flip(x, a1), perm) if k == 1 else self.flip(self.transpose(x, perm), a1)

    def roll(self, x, shift, axis=None):
        """``x`` shifted by ``shift`` positions along ``axis``, entries leaving at one end entering at the other
        (``keras.ops.roll``; ``axis=None`` rolls the flattened array; ``shift`` and ``axis`` may be sequences,
        broadcast against each other). A static shift is two slices joined; a tensor shift (one axis) a gather."""
        x = self._tensor(x)
        if axis is None:
            return self._reshaped(self.roll(self.ravel(x), shift, 0), self.shape(x), "roll")
        if isinstance(shift, Tensor) or self.is_native(shift):
            axis = _normalized_axis(axis, x.ndim, "roll")
            size = self._size(x, axis, "roll")
            positions = self._filled(np.arange(size, dtype=INT_DTYPE))
            return self.take(x, self._mod(positions - self._tensor(shift, INT_DTYPE), size) if size else positions,
                             axis=axis)
        shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))
        if shifts.dtype.kind not in "iu" or axes.dtype.kind not in "iu" or shifts.ndim > 1:
            raise DTypeError(f"ops.roll: shift and axis must be ints or sequences of ints, got {shift!r}, {axis!r}")
        total = [0] * x.ndim
        for s, a in zip(shifts.reshape(-1), axes.reshape(-1)):
            total[_normalized_axis(int(a), x.ndim, "roll")] += int(s)
        for a, s in enumerate(total):
            size = self._size(x, a, "roll") if s else 0
            if size and s % size:
                s %= size
                head = tuple(slice(None) for _ in range(a))
                x = self.concatenate([x[(*head, slice(size - s, None))], x[(*head, slice(0, size - s))]], axis=a)
        return x

    def swapaxes(self, x, axis1, axis2):
        """``x`` with ``axis1`` and ``axis2`` exchanged (``keras.ops.swapaxes``)."""
        x = self._tensor(x)
        perm = list(range(x.ndim))
        a1, a2 = _normalized_axis(axis1, x.ndim, "swapaxes", "axis1"), _normalized_axis(axis2, x.ndim, "swapaxes",
                                                                                          "axis2")
        perm[a1], perm[a2] = perm[a2], perm[a1]
        return self.transpose(x, perm)

    def moveaxis(self, x, source, destination):
        """``x`` with the axes ``source`` moved to the positions ``destination``, the others in their order
        (``keras.ops.moveaxis``)."""
        x = self._tensor(x)
        source = _normalized_axes(source, x.ndim, "moveaxis", "source")
        destination = _normalized_axes(destination, x.ndim, "moveaxis", "destination")
        if len(source) != len(destination):
            raise ShapeError(f"ops.moveaxis: source {source} and destination {destination} differ in length")
        order = [a for a in range(x.ndim) if a not in source]
        for dest, src in sorted(zip(destination, source)):
            order.insert(dest, src)
        return x if order == list(range(x.ndim)) else self.transpose(x, order)

    # ----------------------------------------------------------------------------------------------------------------
    # Splitting and joining.

    def _split_at(self, x, bounds: Sequence[int], axis: int) -> list:
        head = tuple(slice(None) for _ in range(axis))
        edges = [None, *bounds, None]
        return [x[(*head, slice(start, stop))] for start, stop in zip(edges[:-1], edges[1:])]

    def split(self, x, indices_or_sections, axis=0):
        """``x`` cut along ``axis`` into ``indices_or_sections`` equal parts (an int: it must divide the axis), or
        at the given indices (a sequence) (``keras.ops.split``); a list.

        Raises:
            ShapeError: sections that do not divide the axis equally; indices computed in the traced model.
        """
        return self._split(x, indices_or_sections, axis, "split", equal=True)

    def array_split(self, x, indices_or_sections, axis=0):
        """:meth:`split` where an int need not divide the axis: the first ``size % sections`` parts are one longer
        (``keras.ops.array_split``)."""
        return self._split(x, indices_or_sections, axis, "array_split", equal=False)

    def _split(self, x, indices_or_sections, axis, name: str, equal: bool) -> list:
        x = self._tensor(x)
        axis = _normalized_axis(axis, max(x.ndim, 1), name)
        if x.ndim == 0:
            raise ShapeError(f"ops.{name} needs an array of rank >= 1, got a scalar")
        size = self._size(x, axis, name)
        cuts = self._static(indices_or_sections, name, "indices_or_sections")
        if cuts.dtype.kind not in "iu" or cuts.ndim > 1:
            raise DTypeError(f"ops.{name}: indices_or_sections must be an int or a sequence of ints, got "
                             f"{indices_or_sections!r}")
        if cuts.ndim == 1:
            return self._split_at(x, [int(c) for c in cuts], axis)
        sections = int(cuts)
        if sections <= 0:
            raise ArgumentError(f"ops.{name}: the number of sections must be > 0, got {sections}")
        if equal and size % sections:
            raise ShapeError(f"ops.{name}: {sections} sections do not divide axis {axis} of size {size} equally "
                             "(ops.array_split allows unequal ones)")
        each, extra = divmod(size, sections)
        lengths = [each + 1] * extra + [each] * (sections - extra)
        return self._split_at(x, list(np.cumsum(lengths)[:-1]), axis)

    def hsplit(self, x, indices_or_sections):
        """:meth:`split` along axis 1 (axis 0 of a 1-D array) (``keras.ops.hsplit``)."""
        return self._split(x, indices_or_sections, 1 if self.ndim(x) > 1 else 0, "hsplit", equal=True)

    def vsplit(self, x, indices_or_sections):
        """:meth:`split` along axis 0 of an array of rank >= 2 (``keras.ops.vsplit``)."""
        if self.ndim(x) < 2:
            raise ShapeError(f"ops.vsplit needs an array of rank >= 2, got shape {self.shape(x)}")
        return self._split(x, indices_or_sections, 0, "vsplit", equal=True)

    def dsplit(self, x, indices_or_sections):
        """:meth:`split` along axis 2 of an array of rank >= 3 (``keras.ops.dsplit``)."""
        if self.ndim(x) < 3:
            raise ShapeError(f"ops.dsplit needs an array of rank >= 3, got shape {self.shape(x)}")
        return self._split(x, indices_or_sections, 2, "dsplit", equal=True)

    def unstack(self, x, num=None, axis=0):
        """The slices of ``x`` along ``axis``, a list (``keras.ops.unstack``); ``num``, when given, must be that
        axis' size."""
        x = self._tensor(x)
        axis = _normalized_axis(axis, x.ndim, "unstack")
        size = self.shape(x)[axis]
        if size is None or (num is not None and num != size):
            raise ShapeError(f"ops.unstack: axis {axis} of shape {x.shape} has no static size"
                             if size is None else f"ops.unstack: num={num} but axis {axis} has size {size}")
        head = tuple(slice(None) for _ in range(axis))
        return [x[(*head, i)] for i in range(size)]

    def _at_least(self, x, rank: int):
        """NumPy's ``atleast_1d/2d/3d``: a 1-D ``(n,)`` becomes ``(1, n)`` and ``(1, n, 1)``, a 2-D one
        ``(m, n, 1)``."""
        x = self._tensor(x)
        shape = tuple(self.shape(x))
        if len(shape) >= rank:
            return x
        new = {0: (1,) * rank, 1: (1, *shape, 1)[:rank], 2: (*shape, 1)}[len(shape)]
        return self._reshaped(x, new, "stack")

    def hstack(self, xs):
        """Arrays joined along axis 1 (axis 0 for 1-D ones) (``keras.ops.hstack``)."""
        xs = [self._at_least(v, 1) for v in xs]
        return self.concatenate(xs, axis=0 if xs[0].ndim == 1 else 1)

    def vstack(self, xs):
        """Arrays joined along axis 0, 1-D ones as rows (``keras.ops.vstack``)."""
        return self.concatenate([self._at_least(v, 2) for v in xs], axis=0)

    def dstack(self, xs):
        """Arrays joined along axis 2 (depth) (``keras.ops.dstack``)."""
        return self.concatenate([self._at_least(v, 3) for v in xs], axis=2)

    def append(self, x1, x2, axis=None):
        """``x2`` after ``x1`` along ``axis``; both flattened when None (``keras.ops.append``)."""
        if axis is None:
            return self.concatenate([self.ravel(x1), self.ravel(x2)], axis=0)
        return self.concatenate([x1, x2], axis=axis)

    # ----------------------------------------------------------------------------------------------------------------
    # Repetition.

    def tile(self, x, repeats):
        """``x`` repeated ``repeats[i]`` times along axis ``i`` (``keras.ops.tile``; an int or a sequence, padded
        with leading 1s to ``x``'s rank or ``x`` padded with leading axes to its length). A broadcast and a
        reshape: no gather.

        Raises:
            ShapeError: ``repeats`` computed in the traced model.
        """
        x = self._tensor(x)
        reps = self._static(repeats, "tile", "repeats")
        if reps.dtype.kind not in "iu" or reps.ndim > 1:
            raise DTypeError(f"ops.tile: repeats must be an int or a sequence of ints, got {repeats!r}")
        if np.any(reps < 0):
            raise ArgumentError(f"ops.tile: repeats must be >= 0, got {repeats!r}")
        reps = [int(r) for r in np.atleast_1d(reps)]
        shape = list(self.shape(x))
        rank = max(len(shape), len(reps))
        shape, reps = [1] * (rank - len(shape)) + shape, [1] * (rank - len(reps)) + reps
        if None not in shape:
            spread = self.reshape(x, [s for size in shape for s in (1, size)])
            out = self.broadcast_to(spread, [s for r, size in zip(reps, shape) for s in (r, size)])
            return self.reshape(out, [r * size for r, size in zip(reps, shape)])
        # An axis of unknown size (a batch axis): copies joined along each tiled axis instead of a broadcast.
        x = self._reshaped(x, shape, "tile") if len(shape) != x.ndim else x
        for axis, r in enumerate(reps):
            x = self._copies(x, axis, r) if r != 1 else x
        return x

    def _copies(self, x, axis: int, count: int):
        """``count`` copies of ``x`` joined along ``axis``."""
        if count == 0:
            return x[(*(slice(None),) * axis, slice(0, 0))]
        return self.concatenate([x] * count, axis=axis)

    def repeat(self, x, repeats, axis=None):
        """Each entry of ``x`` along ``axis`` repeated ``repeats`` times (an int, or one count per entry), the
        flattened array when ``axis`` is None (``keras.ops.repeat``).

        Raises:
            ShapeError: counts computed in the traced model (they decide the output's shape).
        """
        x = self._tensor(x)
        if axis is None:
            x, axis = self.ravel(x), 0
        axis = _normalized_axis(axis, x.ndim, "repeat")
        counts = self._static(repeats, "repeat", "repeats")
        if counts.dtype.kind not in "iu" or counts.ndim > 1:
            raise DTypeError(f"ops.repeat: repeats must be an int or a sequence of ints, got {repeats!r}")
        if np.any(counts < 0):
            raise ArgumentError(f"ops.repeat: repeats must be >= 0, got {repeats!r}")
        shape = list(self.shape(x))
        if counts.size == 1:
            count = int(counts.reshape(()))
            spread = self.expand_dims(x, axis + 1)
            out = self.broadcast_to(spread, [*shape[:axis + 1], count, *shape[axis + 1:]]) if None not in shape \
                else self._copies(spread, axis + 1, count)  # an axis of unknown size: no broadcast to it
            joined = None if shape[axis] is None else shape[axis] * count
            return self._reshaped(out, [*shape[:axis], joined, *shape[axis + 1:]], "repeat")
        shape[axis] = self._size(x, axis, "repeat")
        if counts.size != shape[axis]:
            raise ShapeError(f"ops.repeat: {counts.size} counts for axis {axis} of size {shape[axis]}")
        return self.take(x, np.repeat(np.arange(shape[axis], dtype=INT_DTYPE), counts), axis=axis)

    # ----------------------------------------------------------------------------------------------------------------
    # Indices and selection.

    def nonzero(self, x):
        """The indices of ``x``'s nonzero entries, one int32 array per axis (``keras.ops.nonzero``). How many there
        are depends on the values, so ``x`` must be static (a Python or NumPy value, a constant).

        Raises:
            ShapeError: ``x`` computed in the traced model: a graph cannot have a shape that depends on values.
        """
        found = self._static(x, "nonzero", "x (its nonzero count is the output's shape)")
        return tuple(self._filled(i.astype(INT_DTYPE)) for i in np.nonzero(found))

    def unravel_index(self, indices, shape):
        """The coordinates in an array of ``shape`` of flat (row-major) ``indices``, one array per axis in the
        indices' dtype (``keras.ops.unravel_index``). Indices must lie in ``[0, prod(shape))``: NumPy raises for
        others, here they wrap around modulo the size."""
        indices = self._tensor(indices)
        if np.dtype(indices.dtype).kind not in "iu":
            raise DTypeError(f"ops.unravel_index needs integer indices, got dtype {indices.dtype}")
        sizes = self._static_shape(shape, "unravel_index")
        out = []
        for size in reversed(sizes):
            out.append(self.mod(indices, size))
            indices = self.floor_divide(indices, size)
        return tuple(reversed(out))

    def select(self, condlist, choicelist, default=0):
        """``choicelist[i]`` where ``condlist[i]`` is the first condition that holds, ``default`` where none does
        (``keras.ops.select``); the choices and the default are promoted together."""
        if len(condlist) != len(choicelist):
            raise ShapeError(f"ops.select: {len(condlist)} conditions for {len(choicelist)} choices")
        if not condlist:
            raise ShapeError("ops.select needs at least one condition")
        dtype = self._result_dtype([*choicelist, default])
        out = self._tensor(default, dtype)
        for condition, choice in zip(reversed(condlist), reversed(choicelist)):
            out = self.where(condition, self._tensor(choice, dtype), out)  # broadcasts all three
        return out

    def diff(self, a, n=1, axis=-1):
        """The ``n``-th forward difference along ``axis`` (``keras.ops.diff``): ``a[1:] - a[:-1]``, ``n`` times;
        booleans differ by ``!=``, as NumPy's."""
        x = self._tensor(a)
        if not _is_int(n) or n < 0:
            raise ArgumentError(f"ops.diff: n must be an int >= 0, got {n!r}")
        axis = _normalized_axis(axis, x.ndim, "diff")
        head = tuple(slice(None) for _ in range(axis))
        for _ in range(n):
            later, earlier = x[(*head, slice(1, None))], x[(*head, slice(None, -1))]
            x = self.not_equal(later, earlier) if x.dtype == "bool" else later - earlier
        return x


def _as_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """NumPy's ``linspace(..., dtype=int)`` rule: floor, then cast."""
    return (np.floor(values) if np.dtype(dtype).kind in "iu" else values).astype(dtype)
