"""Arrays as they are, reordered and indexed: ``keras.ops.numpy``'s ``array``, ``copy``, ``size``, ``ndim``, ``ravel``,
``view``, ``flip``, ``rot90``, ``roll``, ``swapaxes``, ``moveaxis``, ``nonzero``, ``unravel_index``, ``select``,
``diff``, mixed into :class:`~toolkit.ops.Ops`; creation is in :mod:`toolkit.ops.creation`, splitting, stacking
and repetition in :mod:`toolkit.ops.joins`. The helpers here (static values, dtypes, axes) serve all three.

Every op of the three is a composite, written once from the basic primitives (reshape, transpose, basic indexing,
concatenation, broadcasting, ``where``): they are exact (no arithmetic on the values they move), keep static shapes
on every backend, and differentiate through those primitives. Where ``dtype=None``, floats get the computation dtype
(``ops.dtype``, Keras' floatx) and integers int32, as Keras gives them.

What decides an output's shape (``arange``'s bounds, ``split``'s indices, ``repeat``'s counts, a window's length)
must be static: a Python value, a NumPy array, or a tensor whose value the framework knows while the model is traced
(a constant; any tensor in TensorFlow's eager mode). A computed one is refused with a :class:`~toolkit.ShapeError`
naming the argument, on every backend, where Keras would fail with a framework error or not at all.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.tensor import INT_DTYPE, Tensor

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"_bitcast": "t"}


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def normalized_axis(axis, ndim: int, name: str, argument: str = "axis") -> int:
    """``axis`` in ``[0, ndim)`` (negative ones counted from the end), or a ShapeError naming ``argument``."""
    if not is_int(axis):
        raise ShapeError(f"ops.{name}: {argument} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"ops.{name}: {argument} {axis} is out of bounds for an array of rank {ndim}")
    return int(axis) % ndim


def _normalized_axes(axis, ndim: int, name: str, argument: str = "axis") -> list[int]:
    axes = [axis] if is_int(axis) else list(axis)
    found = [normalized_axis(a, ndim, name, argument) for a in axes]
    if len(set(found)) != len(found):
        raise ShapeError(f"ops.{name}: repeated {argument} in {axis!r}")
    return found


class ArrayOps(ABC):  # noqa: B024  (its two backend hooks have defaults: a backend without them refuses)
    """Arrays as they are, reordered and indexed, and the helpers of the array groups; mixed into
    :class:`~toolkit.ops.Ops`."""

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
        if is_int(shape) or (isinstance(shape, (Tensor, np.ndarray)) and np.ndim(shape) == 0):
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
        a0, a1 = (normalized_axis(a, x.ndim, "rot90", "axes") for a in axes)
        if a0 == a1:
            raise ShapeError(f"ops.rot90: axes must be two different axes, got {axes!r}")
        if not is_int(k):
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
            axis = normalized_axis(axis, x.ndim, "roll")
            size = self._size(x, axis, "roll")
            positions = self._filled(np.arange(size, dtype=INT_DTYPE))
            return self.take(x, self._mod(positions - self._tensor(shift, INT_DTYPE), size) if size else positions,
                             axis=axis)
        shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))
        if shifts.dtype.kind not in "iu" or axes.dtype.kind not in "iu" or shifts.ndim > 1:
            raise DTypeError(f"ops.roll: shift and axis must be ints or sequences of ints, got {shift!r}, {axis!r}")
        total = [0] * x.ndim
        for s, a in zip(shifts.reshape(-1), axes.reshape(-1)):
            total[normalized_axis(int(a), x.ndim, "roll")] += int(s)
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
        a1, a2 = normalized_axis(axis1, x.ndim, "swapaxes", "axis1"), normalized_axis(axis2, x.ndim, "swapaxes",
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
        if not is_int(n) or n < 0:
            raise ArgumentError(f"ops.diff: n must be an int >= 0, got {n!r}")
        axis = normalized_axis(axis, x.ndim, "diff")
        head = tuple(slice(None) for _ in range(axis))
        for _ in range(n):
            later, earlier = x[(*head, slice(1, None))], x[(*head, slice(None, -1))]
            x = self.not_equal(later, earlier) if x.dtype == "bool" else later - earlier
        return x
