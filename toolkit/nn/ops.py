"""The neutral op namespace that model code is written against.

A model's ``forward(ops, params, x)`` and ``loss(ops, outputs, y)`` use these methods, Python operators and basic
indexing on the :class:`~toolkit.nn.tensor.Tensor` values they receive (the rules of operators, constants and dtypes
are in :mod:`toolkit.nn.tensor`). Each backend implements the primitives with its framework's native ops, so one
Python function builds a TensorFlow computation or an Aesara graph with the same shapes, dtypes and values.

Names, signatures and semantics are ``keras.ops``' wherever Keras has the op (``tests/test_ops.py`` checks them
against Keras' values where Keras is installed, and against NumPy everywhere). Shapes follow NumPy: axes may be
negative, ``keepdims`` keeps reduced axes, elementwise ops broadcast. Ops the two frameworks would do differently
are either made the same here or refused with a typed error (:class:`~toolkit.ShapeError`, a ``ValueError``).

How a backend implements the interface: every method in :data:`ARGUMENTS` receives native arrays, already converted
(constants made, dtypes promoted) and returns natives; the base class wraps it so model code sees ``Tensor`` values
(``__init_subclass__``). The other public methods are written once here, from those primitives.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.errors import DTypeError, ShapeError
from toolkit.nn import (
    context,
    ops_arrays,
    ops_bits,
    ops_control,
    ops_core,
    ops_creation,
    ops_elementwise,
    ops_functional,
    ops_joins,
    ops_linalg,
    ops_losses,
    ops_math,
    ops_nn,
    ops_products,
    ops_reductions,
    ops_shapes,
    ops_signal,
    ops_sorting,
    ops_statistics,
    ops_training,
    ops_windows,
)
from toolkit.nn.tensor import INT_DTYPE, Tensor, constant_dtype, is_weak, result_dtype

Native = Any  # a backend's native array: tf.Tensor, or an Aesara symbolic variable
Axis = int | Sequence[int] | None

#: How each primitive's positional arguments are converted before the backend sees them, one letter per argument:
#: ``e`` promoted together with the op's other ``e`` arguments (elementwise ops, :func:`~toolkit.nn.tensor.
#: result_dtype`), ``f`` the same and then made floating (the computation dtype if integer or boolean), ``t`` one
#: tensor (a constant gets its own dtype), ``i`` integer indices (int32), ``b`` a boolean condition, ``L`` a list of
#: tensors promoted together, ``T`` a list of tensors each as it is. Later arguments are not arrays (shapes, axes).
ARGUMENTS: dict[str, str] = {
    "matmul": "ee", "_mean": "f", **dict.fromkeys(("_sum", "_max", "_min", "_cumsum", "_argmax"), "t"),
}
#: The primitives of the op groups (:mod:`toolkit.nn.ops_math` and the other ``ops_*`` modules), each declared with
#: its group.
for _group in (ops_elementwise, ops_shapes, ops_math, ops_bits, ops_creation, ops_arrays, ops_joins, ops_reductions,
               ops_sorting, ops_products, ops_linalg, ops_nn, ops_losses, ops_windows, ops_signal, ops_core,
               ops_control, ops_training, ops_functional, ops_statistics):
    ARGUMENTS.update(_group.ARGUMENTS)


def _boundary(name: str, spec: str, impl: Callable) -> Callable:
    """Wrap a backend's primitive: convert its array arguments by ``spec`` (see :data:`ARGUMENTS`), call it on
    natives, and hand its results back as Tensors. Array arguments may also come by keyword (``take(x,
    indices=ids)``)."""
    names = list(inspect.signature(impl).parameters)[1:len(spec) + 1]  # after self

    @functools.wraps(impl)
    def op(self: Ops, *args, **kwargs):
        args = list(args)  # the arguments after the spec's are not arrays (shapes, axes, options)
        while len(args) < len(names) and names[len(args)] in kwargs:
            args.append(kwargs.pop(names[len(args)]))
        promoted = [i for i, kind in enumerate(spec[:len(args)]) if kind in "ef"]
        if promoted:
            dtype = self._result_dtype([args[i] for i in promoted], floating=spec[promoted[0]] == "f")
            for i in promoted:
                args[i] = self._native(args[i], dtype)
        for i, kind in enumerate(spec[:len(args)]):
            if kind == "t":
                args[i] = self._native(args[i])
            elif kind == "i":
                args[i] = self._indices(args[i], name)
            elif kind == "b":
                args[i] = self._native(args[i], "bool")
            elif kind == "L":
                dtype = self._result_dtype(list(args[i]))
                args[i] = [self._native(v, dtype) for v in args[i]]
            elif kind == "T":
                args[i] = [self._native(v) for v in args[i]]
        return optree.tree_map(lambda leaf: self.wrap(leaf) if self.is_native(leaf) else leaf,
                               impl(self, *args, **kwargs), is_leaf=self.is_native)

    op.boundary = True
    return op


class Ops(ops_elementwise.ElementwiseOps, ops_shapes.ShapeOps, ops_math.MathOps, ops_bits.BitOps,
          ops_creation.CreationOps, ops_arrays.ArrayOps, ops_joins.JoinOps, ops_reductions.ReductionOps,
          ops_sorting.SortingOps, ops_products.ProductOps, ops_linalg.LinalgOps, ops_nn.NNOps, ops_losses.LossOps,
          ops_windows.WindowOps, ops_signal.SignalOps, ops_core.CoreOps, ops_control.ControlFlowOps,
          ops_training.TrainingOps, ops_statistics.StatisticsOps, ops_functional.FunctionalOps, ABC):
    """Neutral ops. ``dtype`` is the floating dtype of the computation (``"float32"`` or ``"float64"``).

    The vocabulary is grouped by kind in the ``ops_*`` modules (the groups of :data:`toolkit.nn.op_table.GROUPS`:
    elementwise and shapes for the basic ones, math, bits, arrays, reductions, sorting, products, linalg, nn, losses,
    windows, signal, core, control flow, training...), each a mixin with its primitives and composites; this class
    holds the boundary, the dtype rules, the basic reductions and matmul.

    Args:
        dtype: the computation's floating dtype (see above).
    """

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __init_subclass__(cls, **kwargs) -> None:
        # A backend's primitives may come from its own class or from the mixins it inherits (one per op group): each
        # implementation not yet behind the boundary is wrapped once, on the class that first has it.
        super().__init_subclass__(**kwargs)
        for name, spec in ARGUMENTS.items():
            impl = getattr(cls, name, None)
            if impl is None or getattr(impl, "__isabstractmethod__", False) or getattr(impl, "boundary", False):
                continue
            setattr(cls, name, _boundary(name, spec, impl))

    # ----------------------------------------------------------------------------------------------------------------
    # The boundary between model code and the framework.

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """``fn(self, *args, **kwargs)`` with the native arrays of ``args`` (any pytree) given to ``fn`` as Tensors,
        and the Tensors of its result given back as natives: how a backend runs model, layer and optimizer code.

        Args:
            fn: a function of ``ops`` and Tensors.
            *args, **kwargs: its arguments; native arrays anywhere in them reach ``fn`` as Tensors.
        """
        return self.unwrap(fn(self, *self.wrap_tree(args), **self.wrap_tree(kwargs)))

    def wrap(self, native: Native) -> Tensor:
        """A native array as the Tensor model code sees.

        Args:
            native: a native array of this backend (a Tensor is returned as it is).
        """
        return native if isinstance(native, Tensor) else Tensor(native, self)

    def wrap_tree(self, tree: Any) -> Any:
        """:meth:`wrap` applied to every native array of a pytree; other leaves are kept.

        Args:
            tree: a pytree (dicts, lists, tuples) of native arrays and other values.
        """
        return optree.tree_map(lambda leaf: self.wrap(leaf) if self.is_native(leaf) else leaf, tree,
                               is_leaf=self.is_native)

    @staticmethod
    def unwrap(tree: Any) -> Any:
        """Every Tensor of a pytree replaced by its native array; other leaves are kept.

        Args:
            tree: a pytree of Tensors and other values.
        """
        return optree.tree_map(lambda leaf: leaf.native if isinstance(leaf, Tensor) else leaf, tree,
                               is_leaf=lambda leaf: isinstance(leaf, Tensor))

    def _dtype_of_value(self, value: Any) -> str:
        if isinstance(value, Tensor):
            value = value.native
        if self.is_native(value):
            return self.native_dtype(value)
        if is_weak(value):
            return result_dtype([], [value], self.dtype)
        return constant_dtype(value, self.dtype)

    def _result_dtype(self, values: Sequence[Any], floating: bool = False) -> str:
        strong = [self._dtype_of_value(v) for v in values if not is_weak(v)]
        dtype = result_dtype(strong, [v for v in values if is_weak(v)], self.dtype)
        return self.dtype if floating and np.dtype(dtype).kind != "f" else dtype

    def _native(self, value: Any, dtype: str | None = None) -> Native:
        """``value`` (a Tensor, a native, a Python number, a NumPy array) as a native of ``dtype`` (default: its
        own; a constant's from :func:`~toolkit.nn.tensor.constant_dtype`)."""
        if isinstance(value, Tensor):
            value = value.native
        if self.is_native(value):
            return value if dtype is None or self.native_dtype(value) == dtype else self.native_cast(value, dtype)
        return self.constant(np.asarray(value, dtype or self._dtype_of_value(value)))

    def _indices(self, value: Any, name: str) -> Native:
        dtype = self._dtype_of_value(value)
        if np.dtype(dtype).kind not in "iu":
            raise DTypeError(f"ops.{name} needs integer indices, got dtype {dtype}")
        return self._native(value, INT_DTYPE)

    # ----------------------------------------------------------------------------------------------------------------
    # What a backend provides besides the ops: natives, constants, shapes and dtypes.

    @abstractmethod
    def is_native(self, value: Any) -> bool:
        """Whether ``value`` is one of the framework's arrays (not a Tensor, not a NumPy array).

        Args:
            value: anything.
        """

    @abstractmethod
    def constant(self, value: np.ndarray) -> Native:
        """A native constant holding ``value`` with its dtype.

        Args:
            value: a NumPy array.
        """

    @abstractmethod
    def native_dtype(self, value: Native) -> str:
        """The NumPy name of a native's dtype.

        Args:
            value: a native array.
        """

    @abstractmethod
    def native_shape(self, value: Native) -> tuple[int | None, ...]:
        """A native's static shape, None where unknown.

        Args:
            value: a native array.
        """

    @abstractmethod
    def native_cast(self, value: Native, dtype: str) -> Native:
        """A native converted to ``dtype``.

        Args:
            value: a native array.
            dtype: a NumPy dtype name.
        """

    def shape(self, x: Any) -> tuple[int | None, ...]:
        """The static shape of ``x`` (a Tensor, a native or a constant)."""
        if isinstance(x, Tensor):
            x = x.native
        return self.native_shape(x) if self.is_native(x) else np.shape(x)

    def dtype_of(self, x: Any) -> str:
        """The dtype of ``x`` as model code sees it (constants: by the rules of :mod:`toolkit.nn.tensor`).

        Args:
            x: a Tensor, a native array, a Python number or a NumPy constant.

        Raises:
            DTypeError: a NumPy constant that is not boolean, integer or floating (strings, objects, complex).
        """
        return self._dtype_of_value(x)

    # --- reductions ------------------------------------------------------------------------------------------------
    def sum(self, x, axis: Axis = None, keepdims: bool = False):
        """Sum over ``axis`` (all axes when None; ``()`` none) (``keras.ops.sum``). Booleans and 8/16-bit integers
        sum in int32 (unsigned ones in uint32), as Keras and JAX do."""
        x = self._tensor(x)
        dtype = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32", "uint16": "uint32"}.get(
            x.dtype, x.dtype)
        x, axes = self.cast(x, dtype) if dtype != x.dtype else x, self._axes(x, axis, "sum")
        return self._sum(x, axes, keepdims) if axes else x

    def mean(self, x, axis: Axis = None, keepdims: bool = False):
        """Mean over ``axis`` (all axes when None; ``()`` none) (``keras.ops.mean``); integers and booleans average
        into the computation dtype; float16 and bfloat16 accumulate in float32 (as NumPy and Keras). The mean over
        an empty axis is NaN."""
        x = self._floating(x)
        axes, dtype = self._axes(x, axis, "mean"), self.dtype_of(x)
        if not axes:
            return x
        if dtype in ("float16", "bfloat16"):
            return self.cast(self._mean(self.cast(x, "float32"), axes, keepdims), dtype)
        return self._mean(x, axes, keepdims)

    def max(self, x, axis: Axis = None, keepdims: bool = False, initial=None):
        """Maximum over ``axis`` (all axes when None; ``()`` none), and ``initial`` when given (``keras.ops.max``).
        Where several entries tie for the maximum, frameworks split the gradient differently (TensorFlow shares it,
        Aesara gives each the whole); ties at a ReLU's zero, the common case, get no gradient on either. NaN
        propagates.

        Raises:
            ShapeError: an axis of size 0 reduced without ``initial`` (NumPy's and Keras' ValueError).
        """
        return self._extremum(x, axis, keepdims, initial, "max")

    def min(self, x, axis: Axis = None, keepdims: bool = False, initial=None):
        """Minimum over ``axis``, and ``initial`` when given (``keras.ops.min``; as :meth:`max`).

        Raises:
            ShapeError: an axis of size 0 reduced without ``initial``.
        """
        return self._extremum(x, axis, keepdims, initial, "min")

    def _extremum(self, x, axis, keepdims, initial, name):
        x = self._tensor(x)
        axes = self._axes(x, axis, name)
        shape = self.shape(x)
        if any(shape[a] == 0 for a in axes):
            if initial is None:
                raise ShapeError(f"{name} over an axis of size 0 (x of shape {shape}, axis={axis!r}) has no value; "
                                 "give initial")
            kept = tuple(1 if a in axes else s for a, s in enumerate(shape) if keepdims or a not in axes)
            return self.broadcast_to(self.cast(self.wrap(self._native(initial, x.dtype)), x.dtype), kept)
        if not axes:
            found = x
        elif x.dtype == "bool":  # any and all: TensorFlow has no boolean Max or Min kernel
            found = (self.any if name == "max" else self.all)(x, axis=axes, keepdims=keepdims)
        else:
            found = (self._max if name == "max" else self._min)(x, axes, keepdims)
        if initial is None:
            return found
        return (self.maximum if name == "max" else self.minimum)(found, self._native(initial, x.dtype))

    def argmax(self, x, axis: int | None = None, keepdims: bool = False):
        """Index of the first maximum along ``axis`` (of the flattened array when None), int32 (``keras.ops.argmax``;
        NaN counts as the largest value, as in NumPy and JAX, and ``-0.0`` as smaller than ``0.0``, as Keras on
        every backend).

        Raises:
            ShapeError: an axis of size 0.
        """
        x = self._tensor(x)
        axes = self._axes(x, axis, "argmax")
        if any(self.shape(x)[a] == 0 for a in axes):
            raise ShapeError(f"argmax over an axis of size 0 (x of shape {self.shape(x)}, axis={axis!r})")
        return self._argmax(self._zeros_ordered(x), None if axis is None else axes[0], keepdims)

    def _zeros_ordered(self, x: Tensor) -> Tensor:
        """Floating ``x`` with ``-0.0`` made the negative of the dtype's smallest normal number (float16 and
        bfloat16 in float32), so that an ordering counts it below ``0.0``: Keras' argmax and argmin on every
        backend (the smallest normal, not a subnormal, survives CPUs that flush subnormals to zero)."""
        if np.dtype(x.dtype).kind != "f":
            return x
        if x.dtype in ("float16", "bfloat16"):
            x = self.cast(x, "float32")
        negative_zero = self.logical_and(x == 0.0, self.signbit(x))
        return self.where(negative_zero, -float(np.finfo(x.dtype).tiny), x)

    def cumsum(self, x, axis: int | None = None, dtype: str | None = None):
        """Running sum along ``axis`` (of the flattened array when None), in ``dtype`` (default ``x``'s; booleans
        sum in int32) (``keras.ops.cumsum``)."""
        x = self._tensor(x)
        dtype = np.dtype(dtype or x.dtype).name
        dtype = INT_DTYPE if dtype == "bool" else dtype
        x = self.cast(x, dtype) if dtype != x.dtype else x
        if axis is None:
            x, axis = self.reshape(x, (-1,)), 0
        return self._cumsum(x, self._axes(x, axis, "cumsum")[0])

    @abstractmethod
    def _sum(self, x, axes: tuple[int, ...], keepdims: bool): """The sum under :meth:`sum` over axes >= 0."""
    @abstractmethod
    def _mean(self, x, axes: tuple[int, ...], keepdims: bool): """The mean under :meth:`mean`."""
    @abstractmethod
    def _max(self, x, axes: tuple[int, ...], keepdims: bool): """The maximum under :meth:`max`, NaN propagating."""
    @abstractmethod
    def _min(self, x, axes: tuple[int, ...], keepdims: bool): """The minimum under :meth:`min`."""
    @abstractmethod
    def _argmax(self, x, axis: int | None, keepdims: bool): """The argmax under :meth:`argmax`, axis >= 0."""
    @abstractmethod
    def _cumsum(self, x, axis: int): """The running sum under :meth:`cumsum`, axis >= 0."""

    def logsumexp(self, x, axis: Axis = None, keepdims: bool = False):
        """``log(sum(exp(x), axis))``, computed stably (the maximum is taken out first, its gradient stopped by
        construction: it cancels). As ``keras.ops.logsumexp``, an infinite maximum is not taken out, so that a
        ``+inf`` entry gives ``+inf`` and a row of ``-inf`` gives ``-inf`` (not ``inf - inf``, NaN); over an empty
        axis it is ``-inf``, the log of an empty sum (NumPy's, SciPy's and JAX's)."""
        x = self._floating(x)
        if any(self.shape(x)[a] == 0 for a in _reduced_axes(axis, self.shape(x))):
            # Static: the engines rewrite log(sum(exp(x))) around a maximum, which an empty axis does not have.
            return self.max(x, axis=axis, keepdims=keepdims, initial=-float("inf"))
        peak = self.max(x, axis=axis, keepdims=True)
        peak = self.where(self.abs(peak) < float("inf"), peak, 0.0)
        total = self.log(self.sum(self.exp(x - peak), axis=axis, keepdims=True)) + peak
        return total if keepdims else self.squeeze(total, axis=_reduced_axes(axis, self.shape(x)))

    def moments(self, x, axes: Axis, keepdims: bool = False, synchronized: bool = False):
        """Mean and (biased) variance over ``axes`` (``keras.ops.moments``): ``(mean(x), mean((x - mean)**2))``.

        ``synchronized=True`` (as Keras' on TensorFlow): in a data-parallel training step, the statistics of the
        global batch rather than of this replica's shard, from two cross-replica sums (:meth:`cross_replica_sum`)::

            n    = sum over replicas of the count of values reduced
            mean = sum over replicas of sum(x) / n
            var  = sum over replicas of sum((x - mean)**2) / n

        so they are the same for any device count and split. Outside a training step (no replicas) it is the
        local statistics. Where a step pads shards to one size (Aesara's multi-device step over uneven shards), the
        padding rows weigh nothing in either kind of statistics over the batch axis.

        Raises:
            ModelStateError: ``synchronized=True`` in a training step whose replicas do not run together
                (see :meth:`cross_replica_sum`).
        """
        x = self._floating(x)
        if self.dtype_of(x) in ("float16", "bfloat16"):
            # As Keras: float16's range is too small for statistics; computed in float32, clipped to the dtype's
            # range (an overflowing variance is its largest finite value, not inf) and cast back.
            dtype, limit = self.dtype_of(x), float(np.finfo(np.float16).max)
            found = self.moments(self.cast(x, "float32"), axes, keepdims, synchronized)
            return tuple(self.cast(self.clip(v, -limit, limit), dtype) for v in found)
        run = context.current()
        reduced = _reduced_axes(axes, self.shape(x))
        rows = run.row_weights if run is not None and run.training and 0 in reduced else None
        synchronized = synchronized and run is not None and run.training
        if rows is None and not synchronized:
            mean = self.mean(x, axis=axes, keepdims=True)
            variance = self.mean(self.square(x - mean), axis=axes, keepdims=True)
        else:
            summed = (lambda v: self._cross_replica_sum(v, run)) if synchronized else (lambda v: v)
            weight = self.ones_like(x)
            if rows is not None:
                weight = weight * self.reshape(self.wrap(rows), (-1,) + (1,) * (len(self.shape(x)) - 1))
            totals = summed(self.stack([self.sum(x * weight, axis=reduced, keepdims=True),
                                        self.sum(weight, axis=reduced, keepdims=True)]))
            # A shard of padding only (fewer examples than devices) counts 0: its statistics weigh nothing, but
            # must stay finite, since the padding rows still run through the model.
            count = self.maximum(totals[1], 1.0)
            mean = totals[0] / count
            variance = summed(self.sum(self.square(x - mean) * weight, axis=reduced, keepdims=True)) / count
        if keepdims:
            return mean, variance
        return self.squeeze(mean, axis=reduced), self.squeeze(variance, axis=reduced)

    # --- linear algebra -------------------------------------------------------------------------------------------
    @abstractmethod
    def matmul(self, x1, x2):
        """Matrix product with NumPy's rules: the last two axes multiply, leading (batch) axes broadcast; a 1-D
        operand is a vector (its axis is added, then removed from the result)."""

    # --- what the composites share ---------------------------------------------------------------------------------
    def _tensor(self, x, dtype: str | None = None) -> Tensor:
        """``x`` (a Tensor, native, list or number) as a Tensor of ``dtype`` (default: its own)."""
        return x if isinstance(x, Tensor) and dtype is None else self.wrap(self._native(x, dtype))

    def _floating(self, x) -> Tensor:
        """``x`` as a Tensor, in the computation dtype if it is not floating."""
        return self.wrap(self._native(x, self._result_dtype([x], floating=True)))

    def _axes(self, x, axis: Axis, name: str) -> tuple[int, ...]:
        """``axis`` of ``x`` (an int, a sequence, or None for all) as non-negative ints."""
        ndim = len(self.shape(x))
        if axis is None:
            return tuple(range(ndim))
        return self._check_axes((axis,) if isinstance(axis, (int, np.integer)) else tuple(axis), ndim, name)

    @staticmethod
    def _check_axes(axes: tuple, ndim: int, name: str) -> tuple[int, ...]:
        if not all(isinstance(a, (int, np.integer)) and -ndim <= a < ndim for a in axes) or len(set(
                int(a) % max(ndim, 1) for a in axes)) != len(axes):
            raise ShapeError(f"{name}: axis {axes if len(axes) != 1 else axes[0]!r} is not a set of distinct axes of "
                             f"an array of rank {ndim}")
        return tuple(int(a) % ndim for a in axes)



def _reduced_axes(axis: Axis, shape: Sequence[int | None]) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(len(shape)))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % len(shape) for a in axes)
