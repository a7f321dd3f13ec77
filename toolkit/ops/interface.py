"""The neutral op namespace that model code is written against.

A model's ``forward(ops, params, x)`` and ``loss(ops, outputs, y)`` use these methods, Python operators and basic
indexing on the :class:`~toolkit.ops.tensor.Tensor` values they receive (the rules of operators, constants and dtypes
are in :mod:`toolkit.ops.tensor`). Each backend implements the primitives with its framework's native ops, so one
Python function builds a TensorFlow computation or an Aesara graph with the same shapes, dtypes and values.

Names, signatures and semantics are ``keras.ops``' wherever Keras has the op (``tests/test_ops.py`` checks them
against Keras' values where Keras is installed, and against NumPy everywhere). Shapes follow NumPy: axes may be
negative, ``keepdims`` keeps reduced axes, elementwise ops broadcast. Ops the two frameworks would do differently
are either made the same here or refused with a typed error (:class:`~toolkit.ShapeError`, a ``ValueError``).

How a backend implements the interface: every method in :data:`ARGUMENTS` receives native arrays, already converted
(constants made, dtypes promoted) and returns natives; the base class wraps it so model code sees ``Tensor`` values
(``__init_subclass__``, with the conversions of :mod:`toolkit.ops.boundary`). The other public methods are
written once here, from those primitives.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from toolkit.errors import ShapeError
from toolkit.nn import context
from toolkit.ops import (
    arrays,
    bits,
    control,
    core,
    creation,
    elementwise,
    functional,
    joins,
    linalg,
    losses,
    math,
    nn,
    products,
    reductions,
    shapes,
    signal,
    sorting,
    statistics,
    training,
    windows,
)
from toolkit.ops.boundary import Axis, OpsBoundary, wrap_primitive
from toolkit.ops.tensor import INT_DTYPE, Tensor

#: How each primitive's positional arguments are converted before the backend sees them, one letter per argument:
#: ``e`` promoted together with the op's other ``e`` arguments (elementwise ops, :func:`~toolkit.ops.tensor.
#: result_dtype`), ``f`` the same and then made floating (the computation dtype if integer or boolean), ``t`` one
#: tensor (a constant gets its own dtype), ``i`` integer indices (int32), ``b`` a boolean condition, ``L`` a list of
#: tensors promoted together, ``T`` a list of tensors each as it is. Later arguments are not arrays (shapes, axes).
ARGUMENTS: dict[str, str] = {
    "matmul": "ee", "_mean": "f", **dict.fromkeys(("_sum", "_max", "_min", "_cumsum", "_argmax"), "t"),
}
#: The primitives of the op groups (:mod:`toolkit.ops.math` and the other modules of the package), each declared with
#: its group.
for _group in (elementwise, shapes, math, bits, creation, arrays, joins, reductions,
               sorting, products, linalg, nn, losses, windows, signal, core,
               control, training, functional, statistics):
    ARGUMENTS.update(_group.ARGUMENTS)


class Ops(elementwise.ElementwiseOps, shapes.ShapeOps, math.MathOps, bits.BitOps,
          creation.CreationOps, arrays.ArrayOps, joins.JoinOps, reductions.ReductionOps,
          sorting.SortingOps, products.ProductOps, linalg.LinalgOps, nn.NNOps, losses.LossOps,
          windows.WindowOps, signal.SignalOps, core.CoreOps, control.ControlFlowOps,
          training.TrainingOps, statistics.StatisticsOps, functional.FunctionalOps, OpsBoundary):
    """Neutral ops. ``dtype`` is the floating dtype of the computation (``"float32"`` or ``"float64"``).

    The vocabulary is grouped by kind in the modules of :mod:`toolkit.ops` (the groups of
    :data:`toolkit.ops.table.GROUPS`:
    elementwise and shapes for the basic ones, math, bits, arrays, reductions, sorting, products, linalg, nn, losses,
    windows, signal, core, control flow, training...), each a mixin with its primitives and composites; this class
    holds the basic reductions and matmul, on the boundary, dtype rules and axis checks of
    :class:`~toolkit.ops.boundary.OpsBoundary`.

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
            setattr(cls, name, wrap_primitive(name, spec, impl))

    def shape(self, x: Any) -> tuple[int | None, ...]:
        """The static shape of ``x`` (a Tensor, a native or a constant)."""
        if isinstance(x, Tensor):
            x = x.native
        return self.native_shape(x) if self.is_native(x) else np.shape(x)

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
        Where several entries tie for the maximum (an infinite one included), they share its gradient equally on
        every backend (as TensorFlow's ``reduce_max`` and JAX's ``max`` do, so Keras' on either); ``min`` likewise.
        NaN propagates (its gradient is the backend's: the loss it reaches is NaN).

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




def _reduced_axes(axis: Axis, shape: Sequence[int | None]) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(len(shape)))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % len(shape) for a in axes)
