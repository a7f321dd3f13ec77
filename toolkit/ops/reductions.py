"""Reductions and segments: ``prod``, ``var``, ``std``, ``any``, ``argmin``, ``cumprod``, the ``nan*`` reductions,
``segment_sum`` and their kin (``keras.ops.numpy`` and ``keras.ops.math``); sorting, quantiles and searching are in
:mod:`toolkit.ops.sorting`, with the same rules.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.

The rules every op here keeps on every backend (NumPy's, and Keras' where it has one):

- an ``axis`` is an int, a tuple or list of ints (negative ones count from the end), or None for every axis;
- dtypes are JAX's (as Keras gives them): sums and products of booleans and integers narrower than 32 bits are
  int32 (uint32 if unsigned), running sums and products keep the input's dtype (booleans: int32), statistics
  (``var``, ``quantile``, ``average``...) of integers are in the computation dtype, indices are int32;
- NaN is the largest value: ``argsort``/``sort`` put it last, ``top_k`` first, a maximum, minimum, variance or
  quantile over a NaN is NaN; the ``nan*`` ops leave NaN out (NaN where there is nothing else, and -1 for
  ``nanargmax``/``nanargmin`` of an all-NaN slice, as JAX). ``0.0`` and ``-0.0`` are equal (kept in their order),
  but to ``argmax``/``argmin``, which count ``-0.0`` below ``0.0`` as Keras does on every backend;
- ties keep the order of the input: ``argsort`` is stable, ``top_k`` and ``argmin`` give the lower index first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {
    "_prod": "t", "_reduce_any": "b", "_reduce_all": "b", "_segment_reduce": "ti",
}

#: The reductions ``segment_reduce`` knows. An empty segment is 0 (sum), 1 (prod), -inf (max) or +inf (min) for
#: floats (JAX's, and Keras' on JAX and NumPy), the dtype's lowest or highest value for integers.
SEGMENT_REDUCTIONS = ("sum", "prod", "max", "min")


def _kind(dtype: str) -> str:
    return np.dtype(dtype).kind


def accumulation_dtype(dtype: str) -> str:
    """The dtype a sum or product of ``dtype`` is in (JAX's, as Keras gives it): booleans and integers narrower than
    32 bits widen to int32 (unsigned ones to uint32); others keep theirs."""
    kind, size = _kind(dtype), np.dtype(dtype).itemsize
    if kind == "b" or (kind == "i" and size < 4):
        return "int32"
    if kind == "u" and size < 4:
        return "uint32"
    return dtype


def normalized_axes(axis, ndim: int, name: str) -> tuple[int, ...]:
    """``axis`` (None, an int, or a sequence of ints) as a sorted tuple of axes in ``[0, ndim)``.

    Raises:
        ShapeError: an axis outside ``[-ndim, ndim)`` or one named twice.
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if any(not isinstance(a, (int, np.integer)) or isinstance(a, bool) or not -ndim <= a < ndim for a in axes):
        raise ShapeError(f"ops.{name}: axis={axis!r} for an array of rank {ndim}; expected ints in [{-ndim}, {ndim})")
    found = tuple(sorted(int(a) % ndim for a in axes))
    if len(set(found)) != len(found):
        raise ShapeError(f"ops.{name}: axis={axis!r} names an axis twice")
    return found


class ReductionOps(ABC):
    """Mixed into :class:`~toolkit.ops.Ops`."""

    # --- primitives ------------------------------------------------------------------------------------------------
    @abstractmethod
    def _prod(self, x, axes: tuple[int, ...], keepdims: bool):
        """Product over ``axes`` (a tuple, not empty) in ``x``'s dtype; its gradient is exact where entries are 0."""

    @abstractmethod
    def _reduce_any(self, x, axes: tuple[int, ...], keepdims: bool):
        """Booleans: any true over ``axes``."""

    @abstractmethod
    def _reduce_all(self, x, axes: tuple[int, ...], keepdims: bool):
        """Booleans: all true over ``axes``."""

    @abstractmethod
    def _segment_reduce(self, data, segment_ids, num_segments: int, reduction: str):
        """``reduction`` (one of :data:`SEGMENT_REDUCTIONS`) of ``data``'s rows (axis 0) by ``segment_ids`` (int32,
        one per row) into ``num_segments`` rows; rows whose id is outside ``[0, num_segments)`` are dropped. An empty
        segment is 0 (sum), 1 (prod), -inf (max) or +inf (min) for floats, the dtype's lowest or highest value for
        integers. The gradient of max and
        min goes to the rows that reach them (shared between ties)."""

    # --- helpers ---------------------------------------------------------------------------------------------------
    def _reduction_floats(self, *values):
        """``values`` as Tensors of their common floating dtype (the computation dtype for integers and booleans)."""
        dtype = self._result_dtype(list(values), floating=True)
        return [self._tensor(v, dtype) for v in values]

    def _nan_mask(self, x):
        """Where ``x`` is NaN, or None when it is not floating (no NaN possible)."""
        return self._isnan(x) if _kind(self.dtype_of(x)) == "f" else None

    def _reduce(self, x, axis, keepdims: bool, name: str, fn):
        """``fn(x, axes, keepdims)`` for a non-empty tuple of axes; ``x`` unchanged for ``axis=()`` (nothing to
        reduce)."""
        axes = normalized_axes(axis, len(self.shape(x)), name)
        return fn(x, axes, keepdims) if axes else x

    def _value_when_built(self, x) -> np.ndarray | None:
        """``x``'s values where they are known when the op is built (a NumPy array or list, a Python number, a
        constant of the graph, an eager TensorFlow tensor), else None."""
        if hasattr(x, "native"):
            x = x.native
        if not self.is_native(x):
            return np.asarray(x)
        found = self._constant_value(x)  # the backends' hook (ops_arrays)
        return None if found is None else np.asarray(found)

    # --- reductions ------------------------------------------------------------------------------------------------
    def prod(self, x, axis=None, keepdims: bool = False, dtype: str | None = None):
        """Product over ``axis`` (``keras.ops.prod``), in ``dtype`` (default: :func:`accumulation_dtype` of
        ``x``'s). Its gradient is exact where entries are zero (the product of the others).

        Raises:
            ShapeError: an axis out of range or named twice.
        """
        x = self._tensor(x)
        x = self.cast(x, dtype or accumulation_dtype(x.dtype))
        return self._reduce(x, axis, keepdims, "prod", self._prod)

    def any(self, x, axis=None, keepdims: bool = False):
        """Whether any entry over ``axis`` is true (nonzero; NaN is true) (``keras.ops.any``)."""
        return self._reduce(self._tensor(x, "bool"), axis, keepdims, "any", self._reduce_any)

    def all(self, x, axis=None, keepdims: bool = False):
        """Whether every entry over ``axis`` is true (nonzero; NaN is true) (``keras.ops.all``)."""
        return self._reduce(self._tensor(x, "bool"), axis, keepdims, "all", self._reduce_all)

    def amax(self, x, axis=None, keepdims: bool = False):
        """Maximum over ``axis`` (``keras.ops.amax``; NaN if the slice has one; booleans: :meth:`any`)."""
        x = self._tensor(x)
        if x.dtype == "bool":
            return self.any(x, axis, keepdims)
        return self._reduce(x, axis, keepdims, "amax", lambda v, axes, k: self.max(v, axis=axes, keepdims=k))

    def amin(self, x, axis=None, keepdims: bool = False):
        """Minimum over ``axis`` (``keras.ops.amin``; NaN if the slice has one; booleans: :meth:`all`)."""
        x = self._tensor(x)
        if x.dtype == "bool":
            return self.all(x, axis, keepdims)
        return self._reduce(x, axis, keepdims, "amin", lambda v, axes, k: self.min(v, axis=axes, keepdims=k))

    def ptp(self, x, axis=None, keepdims: bool = False):
        """``amax - amin`` over ``axis`` (``keras.ops.ptp``).

        Raises:
            DTypeError: boolean ``x`` (booleans do not subtract; NumPy and JAX refuse too).
        """
        x = self._tensor(x)
        if x.dtype == "bool":
            raise DTypeError("ops.ptp: x is boolean; ptp needs numbers (cast x to an integer dtype first)")
        return self.amax(x, axis, keepdims) - self.amin(x, axis, keepdims)

    def var(self, x, axis=None, keepdims: bool = False):
        """Variance over ``axis`` (``keras.ops.var``): ``mean((x - mean(x))**2)``, two passes, as NumPy; integers
        in the computation dtype."""
        x, = self._reduction_floats(x)
        axes = normalized_axes(axis, x.ndim, "var")
        centred = x - self.mean(x, axis=axes, keepdims=True)
        return self.mean(self.square(centred), axis=axes, keepdims=keepdims)

    def std(self, x, axis=None, keepdims: bool = False):
        """Standard deviation over ``axis`` (``keras.ops.std``): ``sqrt(var)``."""
        return self.sqrt(self.var(x, axis, keepdims))

    def count_nonzero(self, x, axis=None):
        """How many entries over ``axis`` are not zero (NaN counts), int32 (``keras.ops.count_nonzero``)."""
        x = self._tensor(x)
        nonzero = self.cast(x != 0, "int32")
        axes = normalized_axes(axis, x.ndim, "count_nonzero")
        return self.cast(self.sum(nonzero, axis=axes), "int32") if axes else nonzero

    def average(self, x, axis=None, weights=None):
        """Weighted mean over ``axis`` (``keras.ops.average``): ``sum(x * w) / sum(w)``, the mean without weights.
        ``weights`` has ``x``'s shape, or is 1-D along one ``axis`` (NumPy's rule). Weights summing to 0 give
        ``inf`` or NaN, as JAX (NumPy raises).

        Raises:
            ShapeError: weights of another shape, or 1-D weights without one ``axis`` of their length.
        """
        if weights is None:
            x, = self._reduction_floats(x)
            return self.mean(x, axis=normalized_axes(axis, x.ndim, "average"))
        x, weights = self._reduction_floats(x, weights)
        axes = normalized_axes(axis, x.ndim, "average")
        if weights.shape != x.shape:
            if weights.ndim != 1 or axis is None or len(axes) != 1 or weights.shape[0] != x.shape[axes[0]]:
                raise ShapeError(f"ops.average: weights of shape {weights.shape} for x of shape {x.shape} and "
                                 f"axis={axis!r}; expected x's shape, or 1-D weights as long as x along one axis")
            weights = self.reshape(weights, [-1 if a == axes[0] else 1 for a in range(x.ndim)])
            weights = self.broadcast_to(weights, x.shape)
        return self.sum(x * weights, axis=axes) / self.sum(weights, axis=axes)

    def argmin(self, x, axis: int | None = None, keepdims: bool = False):
        """Index of the first minimum along ``axis`` (of the flattened array when None), int32
        (``keras.ops.argmin``). NaN counts as the smallest value (its first one wins), as NumPy and JAX, and ``-0.0``
        as smaller than ``0.0``, as Keras on every backend."""
        x = self._tensor(x)
        kind = _kind(x.dtype)
        if kind == "b":
            reversed_order = self.cast(self.logical_not(x), "int32")
        elif kind == "f":
            reversed_order = -x  # NaN stays NaN: argmax counts it the largest
        elif kind == "u":
            reversed_order = int(np.iinfo(x.dtype).max) - x
        else:
            reversed_order = -1 - x  # -x would overflow at the dtype's minimum
        return self.argmax(reversed_order, axis=axis, keepdims=keepdims)

    def cumprod(self, x, axis: int | None = None, dtype: str | None = None):
        """Running product along ``axis`` (of the flattened array when None) (``keras.ops.cumprod``), in
        ``dtype`` (default ``x``'s; booleans int32). A parallel prefix product (log2 of the length in steps of
        products), so its gradient is exact where entries are zero; frameworks' own cumprod gradients divide by
        the input and give NaN there.

        Raises:
            ShapeError: an axis out of range.
        """
        x = self._tensor(x)
        x = self.cast(x, dtype or ("int32" if x.dtype == "bool" else x.dtype))
        if axis is None:
            x, axis = self.reshape(x, (-1,)), 0
        axis, = normalized_axes(axis, x.ndim, "cumprod")
        size = x.shape[axis]
        shift = 1
        while size is not None and shift < size:
            lead = (slice(None),) * axis
            ones = self.ones_like(x[lead + (slice(0, shift),)])
            x = x * self.concatenate([ones, x[lead + (slice(0, size - shift),)]], axis=axis)
            shift *= 2
        return x

    # --- the nan* family -------------------------------------------------------------------------------------------
    def _without_nan(self, x, fill):
        x = self._tensor(x)
        nan = self._nan_mask(x)
        return x if nan is None else self.where(nan, fill, x)

    def nansum(self, x, axis=None, keepdims: bool = False):
        """Sum over ``axis`` with NaN as 0 (``keras.ops.nansum``; dtypes as :meth:`prod`)."""
        x = self._tensor(x)
        x = self.cast(self._without_nan(x, 0.0), accumulation_dtype(x.dtype))
        return self._reduce(x, axis, keepdims, "nansum",
                            lambda v, axes, k: self.cast(self.sum(v, axis=axes, keepdims=k), v.dtype))

    def nanprod(self, x, axis=None, keepdims: bool = False):
        """Product over ``axis`` with NaN as 1 (``keras.ops.nanprod``)."""
        return self.prod(self._without_nan(x, 1.0), axis, keepdims)

    def nanmax(self, x, axis=None, keepdims: bool = False):
        """Maximum over ``axis`` of the entries that are not NaN (``keras.ops.nanmax``); NaN for a slice of NaN."""
        return self._nan_extreme(x, axis, keepdims, self.amax, float("-inf"))

    def nanmin(self, x, axis=None, keepdims: bool = False):
        """Minimum over ``axis`` of the entries that are not NaN (``keras.ops.nanmin``); NaN for a slice of NaN."""
        return self._nan_extreme(x, axis, keepdims, self.amin, float("inf"))

    def _nan_extreme(self, x, axis, keepdims, reduce, fill):
        x = self._tensor(x)
        nan = self._nan_mask(x)
        if nan is None:
            return reduce(x, axis, keepdims)
        found = reduce(self.where(nan, fill, x), axis, keepdims)
        return self.where(self.all(nan, axis, keepdims), float("nan"), found)

    def nanmean(self, x, axis=None, keepdims: bool = False):
        """Mean over ``axis`` of the entries that are not NaN (``keras.ops.nanmean``); NaN for a slice of NaN."""
        x, = self._reduction_floats(x)
        axes = normalized_axes(axis, x.ndim, "nanmean")
        return self._nan_moments(x, axes, keepdims)[0]

    def nanvar(self, x, axis=None, keepdims: bool = False):
        """Variance over ``axis`` of the entries that are not NaN (``keras.ops.nanvar``); NaN for a slice of NaN."""
        x, = self._reduction_floats(x)
        axes = normalized_axes(axis, x.ndim, "nanvar")
        return self._nan_moments(x, axes, keepdims)[1]

    def nanstd(self, x, axis=None, keepdims: bool = False):
        """Standard deviation over ``axis`` of the entries that are not NaN (``keras.ops.nanstd``)."""
        return self.sqrt(self.nanvar(x, axis, keepdims))

    def _nan_moments(self, x, axes, keepdims):
        """Mean and variance of the non-NaN entries. NaN entries are replaced before any arithmetic, so that no
        NaN reaches the gradient of the others (``0 * NaN``)."""
        if not axes:
            return x, self.where(self._isnan(x), float("nan"), self.zeros_like(x))
        nan = self._isnan(x)
        count = self.sum(self.cast(self.logical_not(nan), x.dtype), axis=axes, keepdims=True)
        mean = self.sum(self.where(nan, 0.0, x), axis=axes, keepdims=True) / count
        centred = self.where(nan, 0.0, self.where(nan, mean, x) - mean)
        variance = self.sum(self.square(centred), axis=axes, keepdims=True) / count
        if keepdims:
            return mean, variance
        return self.squeeze(mean, axis=axes), self.squeeze(variance, axis=axes)

    def nanargmax(self, x, axis: int | None = None, keepdims: bool = False):
        """Index of the first maximum of the entries that are not NaN along ``axis``, int32 (``keras.ops
        .nanargmax``); -1 for a slice of NaN, as JAX (NumPy raises)."""
        return self._nan_arg(x, axis, keepdims, self.nanmax, self.argmax)

    def nanargmin(self, x, axis: int | None = None, keepdims: bool = False):
        """Index of the first minimum of the entries that are not NaN along ``axis``, int32 (``keras.ops
        .nanargmin``); -1 for a slice of NaN."""
        return self._nan_arg(x, axis, keepdims, self.nanmin, self.argmin)

    def _nan_arg(self, x, axis, keepdims, extreme, arg):
        x = self._tensor(x)
        if self._nan_mask(x) is None:
            return arg(x, axis=axis, keepdims=keepdims)
        if axis is None:
            found = self._nan_arg(self.reshape(x, (-1,)), 0, False, extreme, arg)
            return self.reshape(found, (1,) * x.ndim) if keepdims else found
        axis, = normalized_axes(axis, x.ndim, "nanargmax")
        value = extreme(x, axis, keepdims=True)
        found = self.argmax(self.cast(x == value, "int32"), axis=axis, keepdims=keepdims)  # NaN equals nothing
        every = self.isnan(value) if keepdims else self.squeeze(self.isnan(value), axis=axis)
        return self.where(every, -1, found)

    def nancumsum(self, x, axis: int | None = None, dtype: str | None = None):
        """Running sum along ``axis`` with NaN as 0 (``keras.ops.nancumsum``), in ``dtype`` (default ``x``'s;
        booleans int32)."""
        x = self._tensor(x)
        x = self.cast(self._without_nan(x, 0.0), dtype or ("int32" if x.dtype == "bool" else x.dtype))
        return self.cumsum(x, axis=axis)

    def nancumprod(self, x, axis: int | None = None, dtype: str | None = None):
        """Running product along ``axis`` with NaN as 1 (``keras.ops.nancumprod``)."""
        return self.cumprod(self._without_nan(x, 1.0), axis=axis, dtype=dtype)

    # --- segments --------------------------------------------------------------------------------------------------
    def segment_sum(self, data, segment_ids, num_segments: int | None = None, sorted: bool = False):
        """Sum of ``data``'s rows by segment (``keras.ops.segment_sum``): row ``i`` goes to ``segment_ids[i]``;
        ids outside ``[0, num_segments)`` (-1, say) are dropped. ``sorted=True`` promises sorted ids (the result
        is the same either way).

        Raises:
            ShapeError: ``num_segments=None`` while the ids' values are not known when the op is built (the
                output's size must be static: give ``num_segments``), or ids that are not one per row.
            ArgumentError: a negative or non-integer ``num_segments``.
        """
        return self._segment(data, segment_ids, num_segments, "sum")

    def segment_max(self, data, segment_ids, num_segments: int | None = None, sorted: bool = False):
        """Maximum of ``data``'s rows by segment (``keras.ops.segment_max``); an empty segment holds -inf for
        floats (as JAX and Keras on JAX and NumPy; Keras on TensorFlow gives ``-finfo.max``), the dtype's lowest value
        for integers.

        Raises:
            ShapeError, ArgumentError: as :meth:`segment_sum`.
        """
        return self._segment(data, segment_ids, num_segments, "max")

    def segment_min(self, data, segment_ids, num_segments: int | None = None, sorted: bool = False):
        """Minimum of ``data``'s rows by segment (``keras.ops.segment_min``); an empty segment holds +inf for
        floats, the dtype's highest value for integers.

        Raises:
            ShapeError, ArgumentError: as :meth:`segment_sum`.
        """
        return self._segment(data, segment_ids, num_segments, "min")

    def segment_prod(self, data, segment_ids, num_segments: int | None = None, sorted: bool = False):
        """Product of ``data``'s rows by segment (``keras.ops.segment_prod``); an empty segment is 1.

        Raises:
            ShapeError, ArgumentError: as :meth:`segment_sum`.
        """
        return self._segment(data, segment_ids, num_segments, "prod")

    def _segment(self, data, segment_ids, num_segments, reduction):
        name = f"segment_{reduction}"
        data = self._tensor(data)
        if num_segments is None:
            known = self._value_when_built(segment_ids)
            if known is None:
                raise ShapeError(f"ops.{name}: num_segments=None needs segment_ids whose values are known when the "
                                 "op is built (the output's size must be static); give num_segments")
            num_segments = int(known.max()) + 1 if known.size else 0
        if not isinstance(num_segments, (int, np.integer)) or isinstance(num_segments, bool) or num_segments < 0:
            raise ArgumentError(f"ops.{name}: num_segments={num_segments!r}; expected an int >= 0")
        ids = self._tensor(self._indices(segment_ids, name))
        if data.ndim == 0 or ids.shape != data.shape[:1]:
            raise ShapeError(f"ops.{name}: segment_ids of shape {ids.shape} for data of shape {data.shape}; "
                             "expected one id per row of data (a 1-D array as long as data's axis 0)")
        return self._segment_reduce(data, ids, int(num_segments), reduction)
