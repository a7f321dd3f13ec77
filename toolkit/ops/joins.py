"""Splitting, stacking and repetition: ``keras.ops.numpy``'s ``split``, ``array_split``, ``hsplit``, ``vsplit``,
``dsplit``, ``unstack``, ``hstack``, ``vstack``, ``dstack``, ``append``, ``tile``, ``repeat``, mixed into
:class:`~toolkit.ops.Ops`.

Composites of slicing, concatenation and broadcasting, with the helpers of :class:`~toolkit.ops.arrays.ArrayOps`
(the rules of the array groups are in :mod:`toolkit.ops.arrays`): where a split's indices or a repetition's
counts come from must be static.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.arrays import normalized_axis
from toolkit.ops.tensor import INT_DTYPE

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): none
#: here.
ARGUMENTS: dict[str, str] = {}


class JoinOps(ABC):  # noqa: B024 (composites only: nothing for a backend to implement)
    """Splitting, stacking and repetition; mixed into :class:`~toolkit.ops.Ops`."""

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
        axis = normalized_axis(axis, max(x.ndim, 1), name)
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
        axis = normalized_axis(axis, x.ndim, "unstack")
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
        axis = normalized_axis(axis, x.ndim, "repeat")
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
