"""The neutral ops (:class:`toolkit.ops.Ops`) as TensorFlow ops. Arguments arrive as tensors of the dtypes the
core chose (see ``toolkit.ops.interface.ARGUMENTS``)."""

from __future__ import annotations

import functools

import optree

from toolkit.backends.tensorflow.environment import import_framework
from toolkit.nn.context import MIX32_STEPS, UNIFORM_BITS
from toolkit.ops.interface import ARGUMENTS, Ops
from toolkit.ops.window_shapes import check_matmul

from .ops_arrays import TensorFlowArrayOps
from .ops_bits import TensorFlowBitOps
from .ops_core import TensorFlowCoreOps
from .ops_elementwise import TensorFlowElementwiseOps
from .ops_functional import TensorFlowFunctionalOps
from .ops_linalg import TensorFlowLinalgOps
from .ops_math import TensorFlowMathOps
from .ops_nn import TensorFlowNNOps
from .ops_reductions import TensorFlowReductionOps
from .ops_shapes import TensorFlowShapeOps
from .ops_signal import TensorFlowSignalOps
from .ops_sorting import TensorFlowSortingOps
from .ops_windows import TensorFlowWindowOps

tf = import_framework()


class TensorFlowOps(TensorFlowElementwiseOps, TensorFlowShapeOps, TensorFlowMathOps, TensorFlowBitOps,
                    TensorFlowArrayOps, TensorFlowReductionOps, TensorFlowSortingOps, TensorFlowLinalgOps,
                    TensorFlowNNOps, TensorFlowWindowOps, TensorFlowSignalOps, TensorFlowCoreOps,
                    TensorFlowFunctionalOps, Ops):
    def is_native(self, value):
        return isinstance(value, (tf.Tensor, tf.Variable))

    def constant(self, value):
        return tf.constant(value)

    def native_dtype(self, value):
        return value.dtype.name

    def native_shape(self, value):
        return tuple(value.shape.as_list()) if value.shape.rank is not None else ()

    def native_cast(self, value, dtype):
        return tf.cast(value, dtype)

    def _sum(self, x, axes, keepdims):
        return tf.math.reduce_sum(x, axis=list(axes), keepdims=keepdims)

    def _mean(self, x, axes, keepdims):
        return tf.math.reduce_mean(x, axis=list(axes), keepdims=keepdims)

    def _max(self, x, axes, keepdims):
        return tf.math.reduce_max(x, axis=list(axes), keepdims=keepdims)

    def _min(self, x, axes, keepdims):
        return tf.math.reduce_min(x, axis=list(axes), keepdims=keepdims)

    def _argmax(self, x, axis, keepdims):
        if axis is None:
            found = _argmax(tf.reshape(x, [-1]), 0)
            return tf.reshape(found, [1] * x.shape.rank) if keepdims else found
        found = _argmax(x, axis)
        return tf.expand_dims(found, axis) if keepdims else found

    def _cumsum(self, x, axis):
        return tf.math.cumsum(x, axis=axis)

    def matmul(self, x1, x2):
        # tf.linalg.matmul broadcasts batch axes but refuses vectors; NumPy's vector rule is applied around it.
        check_matmul(self.native_shape(x1), self.native_shape(x2))
        a = x1[None, :] if x1.shape.rank == 1 else x1
        b = x2[:, None] if x2.shape.rank == 1 else x2
        if a.dtype == tf.bool:  # no boolean MatMul kernel: NumPy's product of booleans (an or of ands) in int32
            out = tf.linalg.matmul(tf.cast(a, tf.int32), tf.cast(b, tf.int32)) > 0
        else:
            out = tf.linalg.matmul(a, b)
        if x2.shape.rank == 1:
            out = out[..., 0]
        if x1.shape.rank == 1:  # the added row axis: the last one left where x2 is a vector too
            out = out[..., 0] if x2.shape.rank == 1 else out[..., 0, :]
        return out

    def _scan(self, step, init, xs, length, reverse, unroll):
        # One tf.while_loop, so tracing and Grappler see the step once; the step is traced twice in all: the first
        # iteration runs before the loop and gives the outputs' structure, dtypes and shapes for the TensorArrays.
        # Under ReplicatedOps each replica's tensors are loop variables of their own, read and written under the
        # replica's device.
        if unroll >= length:
            return super()._scan(step, init, xs, length, reverse, unroll)  # unrolled into the graph
        order = (lambda t: length - 1 - t) if reverse else (lambda t: t)
        each = functools.partial(_each_part, getattr(self, "devices", None))

        def at(t):
            return [each(x, lambda part: part[order(t)]) for x in xs]

        def write(arrays, t, ys):
            arrays = iter(arrays)
            return [part for y in ys for part in _parts(each(y, lambda part: next(arrays).write(order(t), part)))]

        carry, first = step(init, at(0))
        if any(isinstance(c, Replicated) and not isinstance(i, Replicated) for c, i in zip(carry, init)):
            # A constant init (ctc_loss's) mixed with per-replica values becomes per replica: start from one copy of
            # it per replica, so that every iteration (this first one too) carries and outputs the same kinds.
            init = [Replicated([i] * len(c.values)) if isinstance(c, Replicated) and not isinstance(i, Replicated)
                    else i for c, i in zip(carry, init)]
            carry, first = step(init, at(0))
        arrays = write([tf.TensorArray(part.dtype, size=length, element_shape=part.shape)
                        for y in first for part in _parts(y)], 0, first)

        def body(t, carry_parts, arrays):
            found, ys = step(_rebuilt(carry, carry_parts), at(t))
            return t + 1, [part for c in found for part in _parts(c)], write(arrays, t, ys)

        _, carry_parts, arrays = tf.while_loop(
            lambda t, *_: t < length, body, (tf.constant(1), [part for c in carry for part in _parts(c)], arrays),
            parallel_iterations=1, maximum_iterations=length - 1)
        arrays = iter(arrays)
        return _rebuilt(carry, carry_parts), [each(y, lambda _: next(arrays).stack()) for y in first]

    def all_finite(self, xs):
        # Integers and booleans are finite: tf.math.is_finite has no kernel for them.
        finite = [tf.reduce_all(tf.math.is_finite(x)) for x in xs if x.dtype.is_floating]
        return tf.reduce_all(finite) if finite else tf.constant(True)

    def _hash_uniform(self, keys, counters):
        x = tf.bitwise.bitwise_xor(keys, counters)
        for shift, multiplier in MIX32_STEPS:
            x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(shift, tf.uint32)))
            if multiplier is not None:
                x = x * tf.constant(multiplier, tf.uint32)  # uint32 products wrap modulo 2**32
        top = tf.bitwise.right_shift(x, tf.constant(32 - UNIFORM_BITS, tf.uint32))
        return tf.cast(top, self.dtype) * tf.constant(2.0 ** -UNIFORM_BITS, self.dtype)


class Replicated:
    """A value of every replica of a step traced as one program (:class:`ReplicatedOps`), in replica order."""

    __slots__ = ("values",)

    def __init__(self, values) -> None:
        self.values = tuple(values)


def replicated(*trees):
    """Pytrees of the same structure, one per replica, as one pytree of :class:`Replicated` leaves."""
    return optree.tree_map(lambda *leaves: Replicated(leaves), *trees)


def per_replica(value, count: int) -> tuple:
    """Each replica's value: a :class:`Replicated`'s own, or a tensor every replica shares."""
    return value.values if isinstance(value, Replicated) else (value,) * count


def _parts(value) -> tuple:
    """The tensors of a native: a Replicated's, one per replica, or the tensor itself."""
    return value.values if isinstance(value, Replicated) else (value,)


def _rebuilt(likes, flat) -> list:
    """Natives of the kinds of ``likes`` from their tensors in a flat list."""
    flat, found = iter(flat), []
    for like in likes:
        parts = [next(flat) for _ in _parts(like)]
        found.append(Replicated(parts) if isinstance(like, Replicated) else parts[0])
    return found


def _each_part(devices, value, fn):
    """``fn`` of each tensor of a native (a Replicated's under its replica's device), as a native of its kind."""
    if not isinstance(value, Replicated):
        return fn(value)
    found = []
    for part, device in zip(value.values, devices):
        with tf.device(device):
            found.append(fn(part))
    return Replicated(found)


def _mapped(name: str):
    single = getattr(TensorFlowOps, name).__wrapped__  # the primitive on natives, before Ops' boundary

    @functools.wraps(single)  # keeps its signature, which the boundary reads for keyword arguments
    def op(self, *args, **kwargs):
        return self._each(single, *args, **kwargs)

    return op


class _ReplicatedBase(TensorFlowOps):
    """The ops of a data-parallel step traced once for all its replicas: every per-replica value is a
    :class:`Replicated`, and every op runs once per replica under that replica's device. Replicas can then meet inside
    the model (:meth:`replica_sum`, for ``ops.cross_replica_sum``) and one tape differentiates the whole step.
    Constants stay one tensor that every replica reads. A shape is the replicas' shape, None on axes where unequal
    shards differ."""

    def __init__(self, dtype: str, devices, across_processes=None) -> None:
        super().__init__(dtype)
        self.devices = tuple(devices)
        self._across_processes = across_processes  # the sum over the processes of a multi-process step, or None

    def is_native(self, value):
        return isinstance(value, Replicated) or super().is_native(value)

    def native_dtype(self, value):
        return super().native_dtype(value.values[0] if isinstance(value, Replicated) else value)

    def native_shape(self, value):
        if not isinstance(value, Replicated):
            return super().native_shape(value)
        shapes = [super(_ReplicatedBase, self).native_shape(v) for v in value.values]
        return tuple(sizes[0] if len(set(sizes)) == 1 else None for sizes in zip(*shapes))

    def native_cast(self, value, dtype):
        return self._each(TensorFlowOps.native_cast, value, dtype)

    def _index(self, native, key):
        return self._each(lambda _, value: value[key], native)

    def _each(self, single, *args, **kwargs):
        """``single(self, *args, **kwargs)`` once per replica under its device, with each replica's values of the
        Replicated arguments; on shared tensors alone, once."""
        is_replicated = lambda value: isinstance(value, Replicated)  # noqa: E731
        if not any(map(is_replicated, optree.tree_leaves((args, kwargs), is_leaf=is_replicated))):
            return single(self, *args, **kwargs)
        results = []
        for index, device in enumerate(self.devices):
            own_args, own_kwargs = optree.tree_map(
                lambda value, index=index: value.values[index] if is_replicated(value) else value, (args, kwargs),
                is_leaf=is_replicated)
            with tf.device(device):
                results.append(single(self, *own_args, **own_kwargs))
        return replicated(*results)

    def replica_sum(self, value):
        """The sum of the replicas' values (this process's, then over every process of a multi-process step), one
        copy on each replica's device; TensorFlow's gradient of ``add_n``, of the collective all-reduce and of the
        copies is the same sum of the replicas' gradients."""
        with tf.device(self.devices[0]):
            total = tf.add_n(list(per_replica(value, len(self.devices))))
            if self._across_processes is not None:
                total = self._across_processes(total)
        copies = []
        for device in self.devices:
            with tf.device(device):
                copies.append(tf.identity(total))
        return Replicated(copies)


ReplicatedOps = type("ReplicatedOps", (_ReplicatedBase,), {"__module__": __name__, "__doc__": _ReplicatedBase.__doc__,
                                                           **{name: _mapped(name) for name in ARGUMENTS}})


def _argmax(x, axis: int):
    """``tf.math.argmax`` with NaN as the largest value (its first one wins), as NumPy and JAX count it: TensorFlow's
    own skips NaN."""
    found = tf.math.argmax(x, axis=axis, output_type=tf.int32)
    if not x.dtype.is_floating:
        return found
    nan = tf.math.is_nan(x)
    first_nan = tf.math.argmax(tf.cast(nan, tf.int32), axis=axis, output_type=tf.int32)
    return tf.where(tf.reduce_any(nan, axis=axis), first_nan, found)
