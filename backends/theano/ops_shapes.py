"""Theano-family translation of :class:`toolkit.ops.shapes.ShapeOps`."""

from __future__ import annotations

import numpy as np

from .graphs import checked_cast, int64_shape, int64_sizes, joined_shape, padded, shape_of, tt


class TheanoShapeOps:
    def _reshape(self, x, shape):
        # A -1 is resolved here when the input's shape is static (as the backend compiles): Aesara would leave that
        # axis unknown, and later ops that need static sizes (matmul's batch axes, conv kernels) could not read it.
        shape, known = [int(s) for s in shape], x.type.shape
        if -1 in shape and None not in known:
            rest = int(np.prod([s for s in shape if s != -1]))
            shape[shape.index(-1)] = int(np.prod(known)) // rest if rest else 0
        return tt.reshape(x, tuple(shape))

    def _transpose(self, x, axes):
        return tt.transpose(x, axes)

    def _expand_dims(self, x, axis):
        return tt.expand_dims(x, axis)

    def _squeeze(self, x, axes):
        return tt.squeeze(x, axis=axes)

    def broadcast_to(self, x, shape):
        return tt.broadcast_to(x, tuple(int64_sizes(shape)))

    def cast(self, x, dtype):
        return checked_cast(x, dtype)

    def _concatenate(self, xs, axis):
        return tt.specify_shape(tt.concatenate(list(xs), axis=axis), joined_shape(xs, axis))  # Join forgets all of it

    def stack(self, xs, axis=0):
        expanded = [tt.expand_dims(x, axis) for x in xs]
        return tt.specify_shape(tt.stack(list(xs), axis=axis), joined_shape(expanded, axis))

    def _pad(self, x, pad_width, value):
        return padded(x, pad_width, value)

    def _take(self, x, indices, axis):
        # Aesara's take forgets the static shape, which later ops (dropout's noise, attention) need.
        axis = axis % x.ndim
        shape = (*shape_of(x)[:axis], *shape_of(indices), *shape_of(x)[axis + 1:])
        # Gathered along axis 0 and moved back: the gradients of two gathers from one tensor along another axis
        # fail to compile in Aesara (local_IncSubtensor_serialize asserts on their types); along axis 0 they work.
        moved = x.dimshuffle(axis, *(a for a in range(x.ndim) if a != axis))
        taken, rank = tt.take(moved, indices, axis=0), indices.ndim
        order = (*range(rank, rank + axis), *range(rank), *range(rank + axis, taken.ndim))
        return tt.specify_shape(taken.dimshuffle(*order) if axis else taken, shape)

    def _take_along_axis(self, x, indices, axis):
        axis = axis % x.ndim
        sizes = shape_of(x)
        shape = [i if a == axis else (s if s != 1 else i) for a, (s, i) in enumerate(zip(sizes, shape_of(indices)))]
        # One gather from the flattened x at positions made of the indices and constant offsets of the other axes:
        # the gradients of two engine take_along_axis of one tensor fail to compile in Aesara
        # (local_IncSubtensor_serialize asserts on their advanced-indexing types); gathers from a vector do not.
        strides = [int(np.prod(sizes[a + 1:], dtype=np.int64)) for a in range(x.ndim)]
        offsets = sum(np.arange(n).reshape([-1 if b == a else 1 for b in range(x.ndim)]) * strides[a]
                      for a, n in enumerate(shape) if a != axis and sizes[a] != 1)
        positions = tt.as_tensor_variable(np.asarray(offsets, np.int64)) + indices.astype("int64") * strides[axis]
        gathered = tt.take(x.flatten(), positions)
        return tt.specify_shape(tt.broadcast_to(gathered, shape), shape)

    def _ones_like(self, x):
        return tt.ones(int64_shape(x), dtype=x.dtype)

    def _zeros_like(self, x):
        return tt.zeros(int64_shape(x), dtype=x.dtype)

    def _one_hot(self, x, num_classes, dtype):
        # A comparison with a constant arange, not indexing with arange(n): the JAX linker needs static arange bounds.
        return tt.eq(tt.shape_padright(x), tt.arange(num_classes)).astype(dtype)
