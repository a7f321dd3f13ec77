"""Shapes, joins, padding, indexing, gathering and the constructors of :class:`~toolkit.ops.Ops` (``reshape``,
``transpose``, ``expand_dims``, ``squeeze``, ``broadcast_to``, ``cast``, ``concatenate``, ``stack``, ``pad``, basic
indexing, ``take``, ``take_along_axis``, ``ones_like``, ``zeros_like``, ``one_hot``). A backend implements the
primitives (abstract here) on natives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError, ShapeError
from toolkit.ops.tensor import Tensor

Native = Any  # a backend's native array
Axis = int | Sequence[int] | None

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {
    **dict.fromkeys(("_transpose", "_reshape", "_expand_dims", "_squeeze", "broadcast_to", "cast", "_ones_like",
                     "_zeros_like", "_pad"), "t"),
    "_concatenate": "L", "stack": "L", "_take": "ti", "_take_along_axis": "ti", "_one_hot": "i",
}


class ShapeOps(ABC):
    """Mixed into :class:`~toolkit.ops.Ops`."""

    # --- shapes ----------------------------------------------------------------------------------------------------
    def reshape(self, x, newshape):
        """``x`` with shape ``newshape`` (an int or a sequence; one entry may be -1: the size that keeps the number
        of entries) (``keras.ops.reshape``).

        Raises:
            ShapeError: an entry below -1, more than one -1, or a size that does not hold ``x``'s entries (Keras'
                ValueError).
        """
        x = self._tensor(x)
        shape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(newshape)
        if not all(isinstance(s, (int, np.integer)) and s >= -1 for s in shape):
            raise ShapeError(f"reshape's newshape must hold non-negative integers or -1 (one unknown size); got "
                             f"newshape={shape}")
        shape = tuple(int(s) for s in shape)
        if shape.count(-1) > 1:
            raise ShapeError(f"reshape's newshape can have at most one unknown dimension (-1); got newshape={shape}")
        known = self.shape(x)
        if None not in known:
            count, rest = int(np.prod(known)), int(np.prod([s for s in shape if s != -1]))
            if (count != rest) if -1 not in shape else (rest == 0 or count % rest):
                raise ShapeError(f"cannot reshape x of shape {known} ({count} entries) to newshape={shape}")
        return self._reshape(x, shape)

    def transpose(self, x, axes: Sequence[int] | None = None):
        """``x`` with its axes permuted by ``axes`` (reversed when None; negative axes count from the end)
        (``keras.ops.transpose``).

        Raises:
            ShapeError: ``axes`` not a permutation of ``x``'s axes.
        """
        x = self._tensor(x)
        ndim = len(self.shape(x))
        perm = tuple(range(ndim))[::-1] if axes is None else self._axes(x, tuple(axes), "transpose")
        if sorted(perm) != list(range(ndim)):
            raise ShapeError(f"transpose's axes must be a permutation of x's {ndim} axes; got axes={axes!r}")
        return self._transpose(x, perm)

    def expand_dims(self, x, axis: Axis):
        """``x`` with new axes of size 1 at ``axis`` (an int or a tuple; positions in the result)
        (``keras.ops.expand_dims``)."""
        x = self._tensor(x)
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        ndim = len(self.shape(x)) + len(axes)
        for a in sorted(self._check_axes(axes, ndim, "expand_dims")):
            x = self._expand_dims(x, a)
        return x

    def squeeze(self, x, axis: Axis = None):
        """``x`` without its size-1 axes ``axis`` (every size-1 axis when None) (``keras.ops.squeeze``).

        Raises:
            ShapeError: an axis of ``axis`` whose size is not 1.
        """
        x = self._tensor(x)
        shape = self.shape(x)
        axes = tuple(a for a, s in enumerate(shape) if s == 1) if axis is None else self._axes(x, axis, "squeeze")
        if any(shape[a] not in (1, None) for a in axes):
            raise ShapeError(f"squeeze: axis {axis!r} of x of shape {shape} is not of size 1")
        return self._squeeze(x, axes) if axes else x

    @abstractmethod
    def broadcast_to(self, x, shape: Sequence[int]): """``x`` broadcast to ``shape`` (NumPy's rules)."""
    @abstractmethod
    def cast(self, x, dtype: str): """``x`` converted to ``dtype`` (floats to integers round towards zero)."""

    def concatenate(self, xs, axis: int | None = 0):
        """Join arrays along an existing axis (of the flattened arrays when None), dtypes promoted
        (``keras.ops.concatenate``).

        Raises:
            ShapeError: arrays of different ranks.
        """
        xs = [self._tensor(v) for v in xs]
        if axis is None:
            xs, axis = [self.reshape(v, (-1,)) for v in xs], 0
        if len({len(self.shape(v)) for v in xs}) != 1:
            raise ShapeError(f"concatenate needs arrays of one rank; got shapes {[self.shape(v) for v in xs]}")
        return self._concatenate(xs, self._axes(xs[0], axis, "concatenate")[0])

    @abstractmethod
    def stack(self, xs, axis: int = 0): """Join arrays along a new axis (dtypes promoted)."""

    def concat(self, xs, axis: int = 0):
        """The toolkit's earlier name of :meth:`concatenate`."""
        return self.concatenate(xs, axis=axis)

    #: ``pad``'s modes that repeat entries of ``x`` (NumPy's index pattern, any width), and the constant ones.
    PAD_MODES = ("reflect", "symmetric", "edge", "wrap")

    def pad(self, x, pad_width, mode: str = "constant", constant_values=None):
        """``x`` with ``pad_width[i] = (before, after)`` entries around axis ``i`` (``keras.ops.pad``; a single
        pair or number applies to every axis, as in NumPy). ``mode``: ``"constant"`` (``constant_values``, default
        0, in ``x``'s dtype), or NumPy's ``"reflect"``, ``"symmetric"``, ``"edge"``, ``"wrap"`` (entries of ``x``
        repeated, any width).

        Raises:
            ArgumentError: another mode (``"mean"``, ``"linear_ramp"``...), ``constant_values`` with a mode other
                than constant, or ``constant_values`` a tensor (a number is expected).
            ShapeError: negative widths, or a repeating mode on an empty axis.
        """
        x = self._tensor(x)
        shape = self.shape(x)
        try:
            pads = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (len(shape), 2))
        except ValueError as error:
            raise ShapeError(f"pad_width {pad_width!r} does not fit x of shape {shape}: expected (before, after) "
                             "per axis, one pair or one number") from error
        if (pads < 0).any():
            raise ShapeError(f"pad_width must not be negative; got {pad_width!r}")
        if mode == "constant" or mode == "empty":
            if isinstance(constant_values, Tensor) or self.is_native(constant_values):
                raise ArgumentError("pad's constant_values must be a number, got a tensor")
            value = np.asarray(0 if constant_values is None else constant_values).astype(x.dtype)
            return self._pad(x, tuple(map(tuple, pads.tolist())), value[()])
        if mode not in self.PAD_MODES:
            raise ArgumentError(f"pad's mode must be one of {('constant', *self.PAD_MODES)}; got mode={mode!r}")
        if constant_values is not None:
            raise ArgumentError(f"Argument `constant_values` can only be provided when `mode == 'constant'`. "
                                f"Received: mode={mode!r}")
        for axis, (before, after) in enumerate(pads.tolist()):
            if before or after:
                if not shape[axis]:
                    raise ShapeError(f"pad mode {mode!r} repeats entries of axis {axis}, which is empty")
                x = self.take(x, np.pad(np.arange(shape[axis]), (before, after), mode=mode), axis=axis)
        return x


    @abstractmethod
    def _reshape(self, x, shape: tuple[int, ...]): """The reshape under :meth:`reshape`, shape checked."""
    @abstractmethod
    def _transpose(self, x, axes: tuple[int, ...]): """The permutation under :meth:`transpose`, axes >= 0."""
    @abstractmethod
    def _expand_dims(self, x, axis: int): """One new axis at ``axis`` >= 0."""
    @abstractmethod
    def _squeeze(self, x, axes: tuple[int, ...]): """Size-1 axes ``axes`` (>= 0, not empty) dropped."""
    @abstractmethod
    def _concatenate(self, xs, axis: int): """The join under :meth:`concatenate`, axis >= 0."""
    @abstractmethod
    def _pad(self, x, pad_width: tuple, value):
        """``x`` inside a frame of ``value`` (a NumPy scalar of ``x``'s dtype), ``pad_width[i] = (before, after)``
        for every axis."""

    def getitem(self, x, key):
        """Basic indexing: ints, slices (with steps), ``None`` and ``...``, the same native indexing on every backend.
        Indexing with arrays is :meth:`take` / :meth:`take_along_axis` (a TypeError says so)."""
        for part in key if isinstance(key, tuple) else (key,):
            if not (part is None or part is Ellipsis or isinstance(part, slice) or
                    (isinstance(part, (int, np.integer)) and not isinstance(part, bool))):
                raise TypeError(f"indexing with {type(part).__name__} {part!r}: only ints, slices, None and ... "
                                "index a tensor; indexing with arrays is ops.take or ops.take_along_axis")
        return self.wrap(self._index(self._native(x), key))

    def _index(self, native: Native, key) -> Native:
        """Basic indexing of a native, the key already checked."""
        return native[key]

    # --- gathering ------------------------------------------------------------------------------------------------
    def take(self, x, indices, axis: int | None = None):
        """Entries of ``x`` at ``indices`` along ``axis`` (of the flattened array when None): an embedding lookup
        is ``take(table, ids, axis=0)``. The gradient adds up into the rows taken. Indices are int32 in
        ``[-n, n)``; negative ones count from the end, and out-of-range ones are clipped to the nearest row on every
        backend (TensorFlow would fail, JAX would clip: the toolkit clips on both)."""
        x, axis = self._gather_axis(x, axis)
        return self._take(x, self._clipped(indices, x.shape[axis], "take"), axis)

    def take_along_axis(self, x, indices, axis: int | None = None):
        """``x``'s entries at ``indices`` along ``axis``, ``indices`` shaped like ``x`` but along that axis
        (``numpy.take_along_axis``); indices as in :meth:`take`."""
        if axis is None:
            indices = self.reshape(self.wrap(self._indices(indices, "take_along_axis")), (-1,))
        x, axis = self._gather_axis(x, axis)
        return self._take_along_axis(x, self._clipped(indices, x.shape[axis], "take_along_axis"), axis)

    def _gather_axis(self, x, axis: int | None):
        """``x`` as a Tensor, flattened when ``axis`` is None, and the axis to gather along."""
        x = self.wrap(self._native(x))
        return (self.reshape(x, (-1,)), 0) if axis is None else (x, axis)

    def _clipped(self, indices, size: int, name: str):
        """Indices into an axis of ``size``: negative ones counted from the end, out-of-range ones clipped."""
        indices = self.wrap(self._indices(indices, name))
        return self.clip(self.where(indices < 0, indices + size, indices), 0, size - 1)

    @abstractmethod
    def _take(self, x, indices, axis: int):
        """The gather under :meth:`take`: ``indices`` already in range."""

    @abstractmethod
    def _take_along_axis(self, x, indices, axis: int):
        """The gather under :meth:`take_along_axis`: ``indices`` already in range."""

    # --- constructors ----------------------------------------------------------------------------------------------
    def ones_like(self, x, dtype: str | None = None):
        """Ones with the shape of ``x``, in ``dtype`` (default: ``x``'s) (``keras.ops.ones_like``)."""
        ones = self._ones_like(x)
        return ones if dtype is None else self.cast(ones, dtype)

    def zeros_like(self, x, dtype: str | None = None):
        """Zeros with the shape of ``x``, in ``dtype`` (default: ``x``'s) (``keras.ops.zeros_like``)."""
        zeros = self._zeros_like(x)
        return zeros if dtype is None else self.cast(zeros, dtype)

    @abstractmethod
    def _ones_like(self, x): """Ones with the shape and dtype of ``x``."""
    @abstractmethod
    def _zeros_like(self, x): """Zeros with the shape and dtype of ``x``."""

    def one_hot(self, x, num_classes: int, axis: int = -1, dtype: str | None = None, sparse: bool = False):
        """``x`` (integer class ids) as one-hot vectors of length ``num_classes`` along a new axis ``axis``, in
        ``dtype`` (default the computation dtype) (``keras.ops.one_hot``); ids out of ``[0, num_classes)``
        (negative ones too) give all zeros.

        Raises:
            ArgumentError: ``sparse=True`` (the toolkit has no sparse tensors).
            DTypeError: ``x`` not integers.
        """
        if sparse:
            raise ArgumentError("one_hot(sparse=True): the toolkit has no sparse tensors; use sparse=False")
        found = self._one_hot(x, int(num_classes), np.dtype(dtype or self.dtype).name)
        ndim = len(self.shape(found))
        axis = self._check_axes((axis,), ndim, "one_hot")[0]
        if axis == ndim - 1:
            return found
        return self.transpose(found, (*range(axis), ndim - 1, *range(axis, ndim - 1)))

    @abstractmethod
    def _one_hot(self, x, num_classes: int, dtype: str):
        """``x`` as one-hot rows along a new last axis, in ``dtype``; out-of-range ids give zeros."""
