"""``keras.ops.core`` but its control flow (:mod:`toolkit.ops.control`): ``stop_gradient``,
``slice``/``slice_update``, ``scatter``/``scatter_update``, casts and the conversions that make sense inside model
code.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import optree

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.tensor import INT_DTYPE, Tensor

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"stop_gradient": "t", "_scatter_rows": "tit"}

#: ``scatter_update``'s reductions where indices repeat (None: the update replaces the entry).
SCATTER_REDUCTIONS = (None, "add")


class CoreOps(ABC):
    """Mixed into :class:`~toolkit.ops.Ops`."""

    # --- conversions -----------------------------------------------------------------------------------------------
    @abstractmethod
    def stop_gradient(self, variable):
        """``variable`` itself, through which no gradient flows (``keras.ops.stop_gradient``): its gradient is 0."""

    def convert_to_tensor(self, x, dtype: str | None = None, sparse: bool | None = None, ragged: bool | None = None):
        """``x`` (a tensor, a NumPy array, a list or a number) as a tensor of ``dtype`` (default: its own; a
        constant's by the rules of :mod:`toolkit.ops.tensor`) (``keras.ops.convert_to_tensor``). Inside model code a
        constant becomes part of the compiled step. There is no ``convert_to_numpy``: a traced tensor has no value
        until the step runs (the backend's ``to_numpy`` reads a step's results).

        Raises:
            ArgumentError: ``sparse=True`` or ``ragged=True`` (the toolkit has neither).
        """
        if sparse or ragged:
            raise ArgumentError(f"convert_to_tensor(sparse={sparse!r}, ragged={ragged!r}): the toolkit has no sparse "
                                "or ragged tensors")
        if isinstance(x, (list, tuple)) and any(isinstance(v, Tensor) or self.is_native(v)
                                                for v in optree.tree_leaves(x)):
            return self.stack([self.convert_to_tensor(v, dtype) for v in x])
        x = self.wrap(self._native(x, None if dtype is None else np.dtype(dtype).name))
        return x

    def is_tensor(self, x) -> bool:
        """Whether ``x`` is a tensor of model code (``keras.ops.is_tensor``): NumPy arrays and numbers are not."""
        return isinstance(x, Tensor) or self.is_native(x)

    def saturate_cast(self, x, dtype: str):
        """``x`` cast to ``dtype`` with values outside ``dtype``'s range set to its limits (``keras.ops.saturate_cast``;
        as Keras, the limits are first brought into ``x``'s dtype, rounded towards zero where it cannot hold them)."""
        x = self._tensor(x)
        dtype = np.dtype(dtype).name

        def limits(name: str) -> tuple:
            if name == "bool":
                return 0, 1
            info = np.iinfo(name) if np.dtype(name).kind in "iu" else np.finfo(name)
            return info.min, info.max

        (in_min, in_max), (out_min, out_max) = limits(x.dtype), limits(dtype)
        low, high = np.asarray(max(in_min, out_min)).astype(x.dtype), np.asarray(min(in_max, out_max)).astype(x.dtype)
        if x.dtype != "bool":
            if low < out_min:
                low = np.nextafter(low, 0, dtype=x.dtype)
            if high > out_max:
                high = np.nextafter(high, 0, dtype=x.dtype)
            x = self.clip(x, low[()], high[()])
        return self.cast(x, dtype)

    # --- slices and scatters ----------------------------------------------------------------------------------------
    def slice(self, inputs, start_indices, shape):
        """The block of ``inputs`` of ``shape`` starting at ``start_indices`` (``keras.ops.slice``, JAX's
        ``dynamic_slice``): a -1 in ``shape`` reaches to the end of the axis. Starts may be tensors; as in JAX, a
        start is clamped so that the block lies inside ``inputs``.

        Raises:
            ShapeError: ``start_indices`` or ``shape`` without one entry per axis, or a block larger than ``inputs``.
        """
        x = self._tensor(inputs)
        sizes, starts = self._block(x, start_indices, shape, "slice")
        if all(isinstance(s, int) for s in starts):
            return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]
        for axis, (start, size) in enumerate(zip(starts, sizes)):
            if not isinstance(start, int) or size != self.shape(x)[axis]:
                x = self.take(x, start + np.arange(size, dtype=INT_DTYPE), axis=axis)
        return x

    def slice_update(self, inputs, start_indices, updates):
        """``inputs`` with the block at ``start_indices`` replaced by ``updates`` (cast to ``inputs``' dtype)
        (``keras.ops.slice_update``, JAX's ``dynamic_update_slice``; starts clamped so the block fits, as there).
        The gradient goes to ``updates`` inside the block and to ``inputs`` outside it.

        Raises:
            ShapeError: ``updates`` of another rank than ``inputs``, or larger.
        """
        x = self._tensor(inputs)
        updates = self.cast(self._tensor(updates), x.dtype)
        sizes, starts = self._block(x, start_indices, self.shape(updates), "slice_update")
        inside, spread = None, updates
        for axis, (start, size) in enumerate(zip(starts, sizes)):
            n = self.shape(x)[axis]
            positions = np.arange(n, dtype=INT_DTYPE).reshape([-1 if a == axis else 1 for a in range(len(sizes))])
            here = self.logical_and(positions >= start, positions < start + size)
            inside = here if inside is None else self.logical_and(inside, here)
            if size != n:
                spread = self.take(spread, self.clip(np.arange(n, dtype=INT_DTYPE) - start, 0, size - 1), axis=axis)
        return self.where(inside, spread, x) if inside is not None else spread

    def _block(self, x, start_indices, shape, name: str) -> tuple[list[int], list]:
        """The sizes of a block of ``x`` (-1 resolved) and its starts, clamped into ``x``: Python ints where
        ``start_indices`` is constant, int32 scalar tensors where not."""
        dims = self.shape(x)
        if isinstance(start_indices, Tensor) or self.is_native(start_indices):
            given = self._tensor(start_indices)
            if self.dtype_of(given) not in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"):
                raise DTypeError(f"{name} needs integer start_indices, got dtype {self.dtype_of(given)}")
            starts = [self.cast(given[i], INT_DTYPE) for i in range(len(given))]
        else:
            starts = [s if isinstance(s, Tensor) or self.is_native(s) else int(s) for s in start_indices]
            starts = [self.cast(self._tensor(s), INT_DTYPE) if not isinstance(s, int) else s for s in starts]
        if isinstance(shape, Tensor) or self.is_native(shape):
            raise ShapeError(f"{name}'s shape must be static (Python or NumPy integers), got a tensor: the block's "
                             "shape is part of the compiled step")
        shape = [int(s) for s in np.asarray(shape).reshape(-1)]
        if len(starts) != len(dims) or len(shape) != len(dims):
            raise ShapeError(f"{name} needs one start and one size per axis of inputs of shape {dims}; got "
                             f"{len(starts)} starts and shape {tuple(shape)}")
        sizes = [d - (s if isinstance(s, int) else 0) if n == -1 else int(n) for d, s, n in zip(dims, starts, shape)]
        if any(n < 0 or n > d for n, d in zip(sizes, dims)):
            raise ShapeError(f"{name}: a block of shape {tuple(sizes)} does not fit in inputs of shape {dims}")
        clamped = [min(max(s, 0), d - n) if isinstance(s, int) else self.clip(s, 0, d - n)
                   for s, d, n in zip(starts, dims, sizes)]
        return sizes, clamped

    def scatter(self, indices, values, shape):
        """Zeros of ``shape`` with ``values`` added at ``indices`` (``keras.ops.scatter``): ``indices[..., :k]``
        index the first ``k`` axes, ``values`` holds the rest; repeated indices add up.

        Raises:
            ShapeError: indices and values that do not fit ``shape``.
        """
        values = self._tensor(values)
        zeros = self.broadcast_to(self.cast(self.wrap(self.constant(np.zeros((), values.dtype))), values.dtype),
                                  tuple(int(s) for s in shape))
        return self.scatter_update(zeros, indices, values, reduction="add")

    def scatter_update(self, inputs, indices, updates, reduction: str | None = None):
        """``inputs`` with ``updates`` written at ``indices`` (``keras.ops.scatter_update``): ``indices`` of shape
        ``(N, k)`` index the first ``k`` axes of ``inputs``, ``updates`` of shape ``(N, *inputs.shape[k:])``.
        ``reduction``: None (an update replaces the entry; where an index repeats, which of its updates remains is
        unspecified, as in TensorFlow and JAX) or ``"add"`` (updates add to the entry). Indices out of range are
        clipped into it.

        Raises:
            ArgumentError: ``reduction`` ``"max"``, ``"min"`` or ``"mul"`` (not implemented on every backend).
            ShapeError: indices and updates that do not fit ``inputs``.
        """
        if reduction not in SCATTER_REDUCTIONS:
            raise ArgumentError(f"scatter_update's reduction must be one of {SCATTER_REDUCTIONS}; got "
                                f"reduction={reduction!r}")
        x = self._tensor(inputs)
        ids = self.wrap(self._indices(indices, "scatter_update"))
        dims, id_shape = self.shape(x), self.shape(ids)
        k = id_shape[-1] if len(id_shape) == 2 else None
        updates = self.cast(self._tensor(updates), x.dtype)
        if k is None or not 1 <= k <= len(dims) or tuple(self.shape(updates)) != (id_shape[0], *dims[k:]):
            raise ShapeError(f"scatter_update needs indices of shape (N, k <= {len(dims)}) and updates of shape "
                             f"(N, *inputs.shape[k:]) for inputs of shape {dims}; got indices {id_shape} and updates "
                             f"{self.shape(updates)}")
        strides = np.cumprod((1, *dims[1:k][::-1]))[::-1].astype(INT_DTYPE)
        rows = self.sum(self.clip(ids, 0, np.asarray(dims[:k], INT_DTYPE) - 1) * strides, axis=1)
        flat = self.reshape(x, (int(np.prod(dims[:k])), *dims[k:]))
        return self.reshape(self._scatter_rows(flat, rows, updates, reduction), dims)

    @abstractmethod
    def _scatter_rows(self, x, rows, updates, reduction: str | None):
        """``x`` with ``updates[i]`` written (None) or added (``"add"``) at row ``rows[i]`` (rows in range)."""

    def _is_array(self, value) -> bool:
        return isinstance(value, (Tensor, np.ndarray)) or self.is_native(value)
