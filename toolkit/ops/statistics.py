"""``keras.ops``' statistics of whole arrays: ``corrcoef`` (Pearson correlation) and ``unique`` (the distinct values
or subarrays, their first indices, the inverse map and the counts).

``unique``'s output shape depends on ``x``'s values, and every backend compiles steps of static shapes: with
``size`` (Keras' argument, as JAX's) the shape is fixed and the op is part of any step; without it, the values of
``x`` must be known when the op is built (an eager TensorFlow tensor, a constant of the graph), which fixes the
size there. Both are one computation: a stable lexicographic sort, the starts of the runs of equal entries, and
gathers (no backend primitive), so the backends cannot differ.

Part of :class:`~toolkit.ops.Ops`; written once, from the other groups' ops.
"""

from __future__ import annotations

import numpy as np

from toolkit.errors import ArgumentError, ShapeError
from toolkit.ops.tensor import INT_DTYPE

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): none,
#: the group is composites only.
ARGUMENTS: dict[str, str] = {}

#: ``unique``'s index of first occurrence in the padding beyond the unique values when ``size`` is given: Keras pads
#: it with 1 on every backend its tests run (``test_unique``'s ``return_index`` with ``size``).
UNIQUE_INDEX_PADDING = 1


class StatisticsOps:
    """Mixed into :class:`~toolkit.ops.Ops`."""

    def corrcoef(self, x):
        """The Pearson correlation coefficients of the rows of ``x`` (``keras.ops.corrcoef``, ``numpy.corrcoef``): ``x``
        of shape ``(N, D)`` holds ``N`` variables observed ``D`` times; the result, ``(N, N)``, is their covariance
        divided by the product of their standard deviations, clipped to ``[-1, 1]``. As NumPy and JAX, a single
        variable (``x`` 1-D, or ``N == 1``) gives a scalar (its variance over itself: 1, or NaN for a constant), a
        constant row gives NaN, one observation NaN everywhere. The dtype is Keras' (JAX's): floats keep theirs
        (float16 and bfloat16 computed in float32), 64-bit integers give float64, other integers and booleans the
        computation dtype.

        Raises:
            ShapeError: ``x`` of rank above 2.
        """
        x = self._tensor(x)
        dtype = x.dtype
        if np.dtype(dtype).kind != "f" and dtype != "bfloat16":
            dtype = "float64" if dtype in ("int64", "uint64") else self.dtype
        if self.ndim(x) > 2:
            raise ShapeError(f"ops.corrcoef needs x of rank 2 at most (variables, observations); got shape "
                             f"{self.shape(x)}")
        inner = "float32" if dtype in ("float16", "bfloat16") else dtype
        rows = self.reshape(self.cast(x, inner), (-1, self.shape(x)[-1] if self.ndim(x) else 1))
        centred = rows - self.mean(rows, axis=1, keepdims=True)
        covariance = self.matmul(centred, self.transpose(centred)) / (self.shape(rows)[1] - 1)
        if self.shape(rows)[0] == 1:  # NumPy's covariance of one variable is a scalar, its correlation c / c
            variance = self.reshape(covariance, ())
            return self.cast(variance / variance, dtype)
        deviation = self.sqrt(self.diagonal(covariance))
        correlation = covariance / deviation[:, None] / deviation[None, :]
        return self.cast(self.clip(correlation, -1.0, 1.0), dtype)

    def unique(self, x, sorted=True, return_index=False, return_inverse=False, return_counts=False, axis=None,
               size=None, fill_value=None):
        """The distinct entries of ``x`` (``keras.ops.unique``): of the flattened array when ``axis`` is None, else
        the distinct subarrays along ``axis`` (compared entry by entry), in ascending (lexicographic) order; NaN
        entries are all distinct and come last (NumPy's ``equal_nan=False``, as Keras).

        Returns the values and, as asked, int32 arrays of: the index in ``x`` (along ``axis``) of each value's first
        occurrence (``return_index``), the position in the values of each entry of ``x`` (``return_inverse``; of
        ``x``'s shape when ``axis`` is None, else one per subarray) and how often each value occurs
        (``return_counts``); a tuple in that order when any is asked.

        ``size`` fixes the number of values (a static shape, so ``unique`` runs in any compiled step): fewer are
        padded with ``fill_value`` (default 0), counts with 0, first indices with 1 (as Keras); more are truncated
        to the ``size`` smallest (the inverse still numbers them all). Without ``size``, ``x``'s values must be
        known when the op is built. ``sorted=False`` is accepted (Keras' argument, which promises no order): the
        values are sorted all the same, as NumPy and JAX give them. The values' gradient goes back to the entries
        they were taken from.

        Raises:
            ShapeError: no ``size`` where ``x`` is a computed tensor (its number of distinct values is unknown
                until the step runs); an ``axis`` out of range.
            ArgumentError: ``size`` not a non-negative integer.
        """
        x = self._tensor(x)
        shape = tuple(self.shape(x))
        if axis is not None:
            axis = self._axes(x, axis, "unique")[0] if shape else self._check_axes((axis,), 0, "unique")[0]
        if size is None:
            known = self._value_when_built(x)
            if known is None:
                raise ShapeError("ops.unique of a computed tensor needs size=: its number of distinct values decides "
                                 "the output's shape, which a compiled step fixes when it is built (pass size=, and "
                                 "fill_value= for the padding; or give x as a constant)")
            size = np.unique(known, axis=axis, equal_nan=False).shape[axis or 0]
        elif isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ArgumentError(f"ops.unique: size must be a non-negative integer; got size={size!r}")
        found = self._unique(x, int(size), axis, 0 if fill_value is None else fill_value)
        asked = [True, return_index, return_inverse, return_counts]
        results = [value for value, wanted in zip(found, asked) if wanted]
        return results[0] if len(results) == 1 else tuple(results)

    def _unique(self, x, size: int, axis: int | None, fill_value) -> tuple:
        """``unique``'s values, first indices, inverse and counts, ``size`` of each (padded or truncated)."""
        shape = tuple(self.shape(x))
        moved = self.reshape(x, (-1,)) if axis is None else self.moveaxis(x, axis, 0)
        count = self.shape(moved)[0]
        rest = tuple(self.shape(moved)[1:])
        rows = self.reshape(moved, (count, int(np.prod(rest))))
        inverse_shape = shape if axis is None else (count,)
        if count == 0:
            values = self.cast(self.full((size, *rest), fill_value, x.dtype), x.dtype)
            return (self._unmoved(values, axis), self.full((size,), UNIQUE_INDEX_PADDING, INT_DTYPE),
                    self.zeros(inverse_shape, INT_DTYPE), self.zeros((size,), INT_DTYPE))
        keys = self.stop_gradient(self._sortable(rows))  # the order carries no gradient; the values' gathers do
        order = self.arange(count, dtype=INT_DTYPE)
        for column in reversed(range(self.shape(rows)[1])):  # stable sorts, last column first: lexicographic
            order = self.take(order, self.argsort(self.take(keys[:, column], order), axis=0))
        ordered = self.take(keys, order, axis=0)
        starts = self.any(self.not_equal(ordered[1:], ordered[:-1]), axis=1)  # NaN differs from itself
        starts = self.concatenate([self.ones((1,), "bool"), starts], axis=0)
        group = self.cumsum(self.cast(starts, INT_DTYPE)) - 1  # each sorted entry's value, ascending
        # Where each value's run starts, and its length: counts over (size, count) comparisons with the ascending
        # group numbers (what searchsorted computes, in fewer graph nodes: the Theano family rewrites every one).
        wanted = self.reshape(self.arange(size, dtype=INT_DTYPE), (size, 1))
        first = self.sum(self.cast(self.less(group, wanted), INT_DTYPE), axis=1)
        counts = self.sum(self.cast(self.equal(group, wanted), INT_DTYPE), axis=1)
        present = counts > 0
        first = self.minimum(first, count - 1)
        picked = self.take(rows, self.take(order, first), axis=0)
        fill = self.cast(self.full((), fill_value, x.dtype), x.dtype)
        values = self.where(self.reshape(present, (size, 1)), picked, fill)
        values = self._unmoved(self.reshape(values, (size, *rest)), axis)
        index = self.where(present, self.take(order, first), UNIQUE_INDEX_PADDING)
        inverse = self.reshape(self.take(group, self.argsort(order)), inverse_shape)
        return values, self.cast(index, INT_DTYPE), inverse, counts

    def _unmoved(self, values, axis: int | None):
        return values if axis is None else self.moveaxis(values, 0, axis)
