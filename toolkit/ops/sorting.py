"""Sorting, ranks, quantiles and searching: ``argsort``, ``sort``, ``argpartition``, ``top_k``, ``in_top_k``,
``quantile``, ``percentile``, ``median`` and their ``nan*`` forms, ``bincount``, ``searchsorted``, ``digitize``,
``isin`` (``keras.ops.numpy`` and ``keras.ops.math``).

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitive (:meth:`SortingOps._argsort`, listed in
:data:`ARGUMENTS`) on natives; the composites are written once, here, with the reductions' helpers
(:mod:`toolkit.ops.reductions`). The rules they keep are the reductions': NaN is the largest value (``argsort``
and ``sort`` put it last, ``top_k`` first), ``0.0`` and ``-0.0`` are equal and ties keep their order (``argsort``
is stable, ``top_k`` gives the lower index first), indices are int32.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.reductions import accumulation_dtype, normalized_axes

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"_argsort": "t"}
#: The interpolations of :meth:`SortingOps.quantile` (NumPy's and Keras' ``method``).
QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _kind(dtype: str) -> str:
    return np.dtype(dtype).kind


class SortingOps(ABC):
    """Mixed into :class:`~toolkit.ops.Ops`."""

    # --- primitives ------------------------------------------------------------------------------------------------
    @abstractmethod
    def _argsort(self, x, axis: int):
        """int32 indices that sort ``x`` (integers or floats) along ``axis`` (non-negative), ascending, stable (ties
        in their order), NaN after everything else, ``-0.0`` equal to ``0.0``."""

    # --- helpers ---------------------------------------------------------------------------------------------------
    def _flipped(self, x, axis: int):
        return x[(slice(None),) * axis + (slice(None, None, -1),)]

    def _descending_order(self, x, axis: int):
        """Stable indices sorting ``x`` from largest to smallest along ``axis`` (NaN first: it is the largest; ties
        keep their order): the reversed ascending order of the reversed array."""
        size = self.shape(x)[axis]
        return (size - 1) - self._flipped(self._argsort(self._flipped(x, axis), axis), axis)

    def _sortable(self, x):
        """``x`` as a Tensor :meth:`_argsort` takes: booleans as int32 (False before True)."""
        x = self._tensor(x)
        return self.cast(x, "int32") if x.dtype == "bool" else x

    # --- sorting ---------------------------------------------------------------------------------------------------
    def argsort(self, x, axis: int | None = -1):
        """Indices that sort ``x`` along ``axis`` (the flattened array when None), ascending, int32
        (``keras.ops.argsort``): stable (ties keep their order), NaN last, as NumPy's stable sort and JAX."""
        x = self._sortable(x)
        if axis is None or x.ndim == 0:
            x, axis = self.reshape(x, (-1,)), 0
        axis, = normalized_axes(axis, x.ndim, "argsort")
        return self._argsort(x, axis)

    def sort(self, x, axis: int | None = -1):
        """``x`` sorted along ``axis`` (the flattened array when None), ascending, NaN last (``keras.ops.sort``).
        Its gradient goes back to the entries' places."""
        x = self._tensor(x)
        if axis is None or x.ndim == 0:
            x, axis = self.reshape(x, (-1,)), 0
        axis, = normalized_axes(axis, x.ndim, "sort")
        return self.take_along_axis(x, self._argsort(self._sortable(x), axis), axis=axis)

    def argpartition(self, x, kth, axis: int | None = -1):
        """Indices that partition ``x`` along ``axis`` around its ``kth`` smallest entry (``keras.ops
        .argpartition``): the entries before position ``kth`` are no larger, those after no smaller. Any such order
        is a partition; this one is the stable sort (:meth:`argsort`), which NumPy's also is on small inputs.

        Raises:
            ArgumentError: a ``kth`` outside ``[-n, n)`` for an axis of ``n`` entries.
        """
        x = self._sortable(x)
        if axis is None or x.ndim == 0:
            x, axis = self.reshape(x, (-1,)), 0
        axis, = normalized_axes(axis, x.ndim, "argpartition")
        size = x.shape[axis]
        for k in np.ravel(kth):
            if size is not None and not -size <= int(k) < size:
                raise ArgumentError(f"ops.argpartition: kth={kth!r} for an axis of {size} entries; expected "
                                    f"-{size} <= kth < {size}")
        return self._argsort(x, axis)

    def top_k(self, x, k: int, sorted: bool = True):
        """The ``k`` largest entries along the last axis and their int32 indices (``keras.ops.top_k``), largest
        first; ties: the lower index first; NaN counts as the largest (as JAX's ``lax.top_k``). ``sorted=False``
        allows any order: this one is sorted too.

        Raises:
            ArgumentError: ``k`` not an int in ``[0, n]`` for a last axis of ``n`` entries.
        """
        x = self._tensor(x)
        if x.ndim == 0:
            raise ShapeError("ops.top_k: x is a scalar; expected an array with at least one axis")
        size = x.shape[-1]
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 0 <= k <= size:
            raise ArgumentError(f"ops.top_k: k={k!r} for a last axis of {size} entries; expected an int in "
                                f"[0, {size}]")
        indices = self._descending_order(self._sortable(x), x.ndim - 1)[..., :int(k)]
        return self.take_along_axis(x, indices, axis=-1), indices

    def in_top_k(self, targets, predictions, k: int):
        """Whether each row's ``targets`` entry of ``predictions`` is among its ``k`` largest (``keras.ops
        .in_top_k``): fewer than ``k`` entries are strictly larger, so ties count in; a NaN prediction at the target
        counts as the smallest value."""
        predictions = self._tensor(predictions)
        at_target = self.take_along_axis(predictions, self.expand_dims(self._tensor(targets), -1), axis=-1)
        nan = self._nan_mask(at_target)
        if nan is not None:
            at_target = self.where(nan, float("-inf"), at_target)
        larger = self.sum(self.cast(predictions > at_target, "int32"), axis=-1)
        return larger < k

    # --- quantiles -------------------------------------------------------------------------------------------------
    def quantile(self, x, q, axis=None, method: str = "linear", keepdims: bool = False):
        """The ``q``-th quantiles (``q`` in ``[0, 1]``, a number or an array) over ``axis`` (``keras.ops
        .quantile``): the entries sorted, then at position ``q * (n - 1)`` interpolated by ``method`` (NumPy's:
        ``"linear"``, ``"lower"``, ``"higher"``, ``"midpoint"``, ``"nearest"``: to the even position at halves).
        The result's leading axes are ``q``'s. A slice with NaN gives NaN. ``"linear"`` weighs the two neighbours
        as JAX does, ``lower * (1 - f) + upper * f``: next to an infinity it is that infinity (NumPy's formula gives
        NaN there), at a whole position or between equal neighbours the entry itself. The gradient goes to the
        entries interpolated.

        Raises:
            ArgumentError: an unknown ``method``, or a constant ``q`` outside ``[0, 1]``.
            ShapeError: an axis out of range.
        """
        return self._quantile(x, q, axis, method, keepdims, "quantile", ignore_nan=False)

    def percentile(self, x, q, axis=None, method: str = "linear", keepdims: bool = False):
        """:meth:`quantile` of ``q / 100`` (``keras.ops.percentile``; ``q`` in ``[0, 100]``).

        Raises:
            ArgumentError: an unknown ``method``, or a constant ``q`` outside ``[0, 100]``.
        """
        return self._quantile(x, self._percent(q, "percentile"), axis, method, keepdims, "percentile", False)

    def median(self, x, axis=None, keepdims: bool = False):
        """The median over ``axis`` (``keras.ops.median``): :meth:`quantile` at 0.5."""
        return self._quantile(x, 0.5, axis, "linear", keepdims, "median", ignore_nan=False)

    def nanquantile(self, x, q, axis=None, method: str = "linear", keepdims: bool = False):
        """:meth:`quantile` of the entries that are not NaN (``keras.ops.nanquantile``); NaN for a slice of NaN.

        Raises:
            ArgumentError: an unknown ``method``, or a constant ``q`` outside ``[0, 1]``.
        """
        return self._quantile(x, q, axis, method, keepdims, "nanquantile", ignore_nan=True)

    def nanpercentile(self, x, q, axis=None, method: str = "linear", keepdims: bool = False):
        """:meth:`percentile` of the entries that are not NaN (``keras.ops.nanpercentile``).

        Raises:
            ArgumentError: an unknown ``method``, or a constant ``q`` outside ``[0, 100]``.
        """
        return self._quantile(x, self._percent(q, "nanpercentile"), axis, method, keepdims, "nanpercentile", True)

    def nanmedian(self, x, axis=None, keepdims: bool = False):
        """:meth:`median` of the entries that are not NaN (``keras.ops.nanmedian``)."""
        return self._quantile(x, 0.5, axis, "linear", keepdims, "nanmedian", ignore_nan=True)

    def _percent(self, q, name: str):
        known = self._value_when_built(q)
        if known is not None and np.any(~((known >= 0) & (known <= 100))):
            raise ArgumentError(f"ops.{name}: q={known.tolist()!r}; percentiles must be in [0, 100]")
        return q / 100 if known is None else known / 100

    def _quantile(self, x, q, axis, method: str, keepdims: bool, name: str, ignore_nan: bool):
        if method not in QUANTILE_METHODS:
            raise ArgumentError(f"ops.{name}: method={method!r}; expected one of {', '.join(QUANTILE_METHODS)}")
        known = self._value_when_built(q)
        if known is not None and np.any(~((known >= 0) & (known <= 1))):
            raise ArgumentError(f"ops.{name}: q={known.tolist()!r}; quantiles must be in [0, 1]")
        x, q = self._reduction_floats(x, q)
        shape = x.shape
        axes = normalized_axes(axis, x.ndim, name)
        kept = [a for a in range(x.ndim) if a not in axes]
        # The reduced axes last and flattened into one: one sort, one gather.
        rows = self.reshape(self.transpose(x, kept + list(axes)), [shape[a] for a in kept] + [-1])
        n = int(np.prod([shape[a] for a in axes]))
        nan = self._nan_mask(rows)
        ordered = self.sort(rows, axis=-1)
        q_shape, last = list(self.shape(q)), builtins.max(n - 1, 0)
        positions = [shape[a] for a in kept] + [int(np.prod(q_shape))]
        if known is not None and not (ignore_nan and nan is not None):
            # q and n known: the positions are NumPy constants (no graph for the engines to fold).
            position = np.broadcast_to(np.ravel(known).astype(np.float64) * (n - 1), positions)
            below = np.floor(position).astype(np.int32)
            fraction = (position - below).astype(rows.dtype)
            lower_index = np.clip(below, 0, last)
            upper_index = np.clip(lower_index + (fraction > 0), 0, last).astype(np.int32)
        else:
            if ignore_nan and nan is not None:
                count = self.sum(self.cast(self.logical_not(nan), rows.dtype), axis=-1, keepdims=True)
            else:
                count = float(n)
            position = self.broadcast_to(self.reshape(q, (-1,)) * (count - 1.0), positions)  # each row's, [..., m]
            # Positions are >= 0 (but in a slice of NaN, whose result is NaN): the cast is the floor. (Not
            # floor_divide(position, 1): Aesara rewrites x // 1 into x, also for floats.)
            below = self.cast(position, "int32")
            fraction = position - self.cast(below, position.dtype)
            lower_index = self.clip(below, 0, last)
            upper_index = self.clip(lower_index + self.cast(fraction > 0, "int32"), 0, last)
        # One gather for both neighbours: two gathers' gradients, added, trip an Aesara rewrite
        # (local_IncSubtensor_serialize asserts on their types).
        both = self.take_along_axis(ordered, self.concatenate([lower_index, upper_index], axis=-1), axis=-1)
        lower, upper = both[..., :positions[-1]], both[..., positions[-1]:]
        if method == "lower":
            found = lower
        elif method == "higher":
            found = upper
        elif method == "midpoint":
            found = self.where(lower_index == upper_index, lower, (lower + upper) * 0.5)
        elif method == "nearest":
            # NumPy rounds the position half to even.
            found = self.where((fraction > 0.5) | ((fraction == 0.5) & (lower_index % 2 == 1)), upper, lower)
        else:
            # JAX's weighting, exact at both ends, so an infinity weighs in as one (NumPy's lower + (upper - lower)
            # * fraction is NaN next to one); equal neighbours give themselves.
            mixed = lower * (1.0 - fraction) + upper * fraction
            found = self.where((fraction == 0) | (lower == upper), lower, mixed)
        if nan is not None:
            empty = (self.all(nan, axis=-1, keepdims=True) if ignore_nan else
                     self.any(nan, axis=-1, keepdims=True))
            found = self.where(empty, float("nan"), found)
        # [..., m] -> q's axes first, then the kept axes (and the reduced ones as 1 with keepdims).
        found = self.transpose(found, [len(kept)] + list(range(len(kept))))
        if keepdims:
            out_shape = q_shape + [1 if a in axes else shape[a] for a in range(len(shape))]
        else:
            out_shape = q_shape + [shape[a] for a in kept]
        return self.reshape(found, out_shape)

    # --- counting and searching ------------------------------------------------------------------------------------
    def bincount(self, x, weights=None, minlength: int = 0, sparse: bool = False):
        """How often each value ``0..n-1`` occurs in ``x`` (non-negative ints, 1-D, or 2-D counted row by row),
        or the sum of ``weights`` there (``keras.ops.bincount``); ``n = max(max(x) + 1, minlength)``. Counts are
        int32; with weights, the weights' dtype (int32 for narrower integers, as JAX).

        Raises:
            ShapeError: ``x``'s values not known when the op is built (the output's length must be static), or
                ``x`` not 1-D or 2-D, or weights not of ``x``'s shape.
            ArgumentError: ``sparse=True`` (no sparse tensors here), or a negative value in ``x`` or ``minlength``.
            DTypeError: ``x`` not integer.
        """
        if sparse:
            raise ArgumentError("ops.bincount: sparse=True; the toolkit has no sparse tensors (sparse=False only)")
        if not isinstance(minlength, (int, np.integer)) or minlength < 0:
            raise ArgumentError(f"ops.bincount: minlength={minlength!r}; expected an int >= 0")
        known = self._value_when_built(x)
        if known is None:
            raise ShapeError("ops.bincount: x's values must be known when the op is built (the output's length, "
                             "max(x) + 1, must be static)")
        if _kind(known.dtype) not in "iu":
            raise DTypeError(f"ops.bincount: x of dtype {known.dtype}; expected integers")
        if known.ndim not in (1, 2):
            raise ShapeError(f"ops.bincount: x of shape {known.shape}; expected a 1-D or 2-D array")
        if known.size and known.min() < 0:
            raise ArgumentError(f"ops.bincount: x holds {int(known.min())}; expected non-negative values")
        length = builtins.max(int(known.max()) + 1 if known.size else 0, int(minlength))
        hits = self._tensor(known.astype(np.int32)[..., None] == np.arange(length))  # [..., n, length]
        if weights is None:
            return self.cast(self.sum(self.cast(hits, "int32"), axis=-2), "int32")
        weights = self._tensor(weights)
        if weights.shape != known.shape:
            raise ShapeError(f"ops.bincount: weights of shape {weights.shape} for x of shape {known.shape}; "
                             "expected x's shape")
        weights = self.cast(weights, accumulation_dtype(weights.dtype))
        picked = self.where(hits, self.expand_dims(weights, -1), self.zeros_like(self.expand_dims(weights, -1)))
        return self.cast(self.sum(picked, axis=-2), weights.dtype)

    def searchsorted(self, sorted_sequence, values, side: str = "left"):
        """Where each of ``values`` would go into the ascending 1-D ``sorted_sequence`` to keep it sorted, int32
        (``keras.ops.searchsorted``): the count of entries smaller than it (``side="left"``) or not larger
        (``"right"``), NaN the largest value as in NumPy. Compares every value with every entry (memory ``n * m``).

        Raises:
            ShapeError: ``sorted_sequence`` not 1-D.
            ArgumentError: ``side`` not "left" or "right".
        """
        if side not in ("left", "right"):
            raise ArgumentError(f"ops.searchsorted: side={side!r}; expected 'left' or 'right'")
        dtype = self._result_dtype([sorted_sequence, values])
        sequence, values = self._tensor(sorted_sequence, dtype), self._tensor(values, dtype)
        if sequence.ndim != 1:
            raise ShapeError(f"ops.searchsorted: sorted_sequence of shape {sequence.shape}; expected a 1-D array")
        entries, value = sequence, self.expand_dims(values, -1)
        before = entries < value if side == "left" else entries <= value
        value_nan, entry_nan = self._nan_mask(value), self._nan_mask(entries)
        if value_nan is not None:  # NaN after every number, and (left) after NaN entries too
            before = self.logical_or(before, value_nan if side == "right" else
                                     self.logical_and(value_nan, self.logical_not(entry_nan)))
        return self.cast(self.sum(self.cast(before, "int32"), axis=-1), "int32")

    def digitize(self, x, bins):
        """The bin of each entry of ``x`` (``keras.ops.digitize``, NumPy's ``right=False``): ``i`` with
        ``bins[i-1] <= x < bins[i]`` for increasing ``bins``, ``bins[i-1] > x >= bins[i]`` for decreasing ones,
        int32.

        Raises:
            ShapeError: ``bins`` not 1-D.
        """
        dtype = self._result_dtype([x, bins])
        bins = self._tensor(bins, dtype)
        if bins.ndim != 1:
            raise ShapeError(f"ops.digitize: bins of shape {bins.shape}; expected a 1-D array")
        n = bins.shape[0]
        increasing = self.searchsorted(bins, x, side="right")
        if not n:
            return increasing
        decreasing = n - self.searchsorted(self._flipped(bins, 0), x, side="right")
        return self.where(bins[n - 1] >= bins[0], increasing, decreasing)

    def isin(self, x1, x2, assume_unique: bool = False, invert: bool = False):
        """Whether each entry of ``x1`` is in ``x2`` (``keras.ops.isin``; NaN is in nothing); ``invert=True``:
        whether it is not. ``assume_unique`` only promises unique inputs (the result is the same either way)."""
        dtype = self._result_dtype([x1, x2])
        x1, x2 = self._tensor(x1, dtype), self.reshape(self._tensor(x2, dtype), (-1,))
        found = self.any(self.expand_dims(x1, -1) == x2, axis=-1)
        return self.logical_not(found) if invert else found
