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
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.nn import (
    context,
    ops_arrays,
    ops_core,
    ops_linalg,
    ops_math,
    ops_nn,
    ops_reductions,
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
    **dict.fromkeys(("add", "subtract", "multiply", "floor_divide", "mod", "power", "maximum", "minimum", "greater",
                     "greater_equal", "less", "less_equal", "equal", "not_equal", "matmul"), "ee"),
    "divide": "ff", "logical_and": "bb", "logical_or": "bb", "logical_not": "b", "_where": "bee",
    **dict.fromkeys(("negative", "abs", "square", "relu"), "e"),
    **dict.fromkeys(("exp", "log", "sqrt", "tanh", "sigmoid", "erf", "sin", "cos", "_softmax", "_log_softmax",
                     "_mean"), "f"),
    **dict.fromkeys(("_sum", "_max", "_min", "_transpose", "_reshape", "_expand_dims", "_squeeze", "broadcast_to",
                     "cast", "_cumsum", "_argmax", "ones_like", "zeros_like", "_pad"), "t"),
    "_concatenate": "L", "stack": "L", "_take": "ti", "_take_along_axis": "ti", "_one_hot": "i",
}
#: The primitives of the op groups (:mod:`toolkit.nn.ops_math` and the other ``ops_*`` modules), each declared with
#: its group.
for _group in (ops_math, ops_arrays, ops_reductions, ops_linalg, ops_nn, ops_windows, ops_core, ops_training):
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


class Ops(ops_math.MathOps, ops_arrays.ArrayOps, ops_reductions.ReductionOps, ops_linalg.LinalgOps, ops_nn.NNOps,
          ops_windows.WindowOps, ops_core.CoreOps, ops_training.TrainingOps, ABC):
    """Neutral ops. ``dtype`` is the floating dtype of the computation (``"float32"`` or ``"float64"``).

    The vocabulary is grouped by kind in the ``ops_*`` modules (elementwise math, arrays, reductions, linalg, nn,
    windows, core, training), each a mixin with its primitives and composites; this class holds the boundary, the
    basic arithmetic, reductions, shapes and gathering."""

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
        and the Tensors of its result given back as natives: how a backend runs model, layer and optimizer code."""
        return self.unwrap(fn(self, *self.wrap_tree(args), **self.wrap_tree(kwargs)))

    def wrap(self, native: Native) -> Tensor:
        return native if isinstance(native, Tensor) else Tensor(native, self)

    def wrap_tree(self, tree: Any) -> Any:
        return optree.tree_map(lambda leaf: self.wrap(leaf) if self.is_native(leaf) else leaf, tree,
                               is_leaf=self.is_native)

    @staticmethod
    def unwrap(tree: Any) -> Any:
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
        """Whether ``value`` is one of the framework's arrays (not a Tensor, not a NumPy array)."""

    @abstractmethod
    def constant(self, value: np.ndarray) -> Native:
        """A native constant holding ``value`` with its dtype."""

    @abstractmethod
    def native_dtype(self, value: Native) -> str:
        """The NumPy name of a native's dtype."""

    @abstractmethod
    def native_shape(self, value: Native) -> tuple[int | None, ...]:
        """A native's static shape, None where unknown."""

    @abstractmethod
    def native_cast(self, value: Native, dtype: str) -> Native:
        """A native converted to ``dtype``."""

    def shape(self, x: Any) -> tuple[int | None, ...]:
        """The static shape of ``x`` (a Tensor, a native or a constant)."""
        if isinstance(x, Tensor):
            x = x.native
        return self.native_shape(x) if self.is_native(x) else np.shape(x)

    def dtype_of(self, x: Any) -> str:
        """The dtype of ``x`` as model code sees it (constants: by the rules of :mod:`toolkit.nn.tensor`)."""
        return self._dtype_of_value(x)

    # ----------------------------------------------------------------------------------------------------------------
    # Elementwise arithmetic and comparisons (NumPy broadcasting; dtypes by toolkit.nn.tensor's rules).

    @abstractmethod
    def add(self, x1, x2): """``x1 + x2``."""
    @abstractmethod
    def subtract(self, x1, x2): """``x1 - x2``."""
    @abstractmethod
    def multiply(self, x1, x2): """``x1 * x2``."""
    @abstractmethod
    def divide(self, x1, x2): """``x1 / x2``, a true division (integers divide into the computation dtype)."""
    @abstractmethod
    def floor_divide(self, x1, x2): """``x1 // x2`` (NumPy: rounds towards minus infinity)."""
    @abstractmethod
    def mod(self, x1, x2): """``x1 % x2`` (NumPy: the sign of the divisor)."""
    @abstractmethod
    def power(self, x1, x2): """``x1 ** x2``."""
    @abstractmethod
    def negative(self, x): """``-x``."""
    @abstractmethod
    def abs(self, x): """``|x|``; its gradient at 0 is 0 on every backend."""
    @abstractmethod
    def maximum(self, x1, x2): """Elementwise maximum; at a tie the whole gradient goes to ``x1`` on every backend."""
    @abstractmethod
    def minimum(self, x1, x2): """Elementwise minimum; at a tie the whole gradient goes to ``x1``."""
    @abstractmethod
    def greater(self, x1, x2): """``x1 > x2``, booleans."""
    @abstractmethod
    def greater_equal(self, x1, x2): """``x1 >= x2``, booleans."""
    @abstractmethod
    def less(self, x1, x2): """``x1 < x2``, booleans."""
    @abstractmethod
    def less_equal(self, x1, x2): """``x1 <= x2``, booleans."""
    @abstractmethod
    def equal(self, x1, x2): """``x1 == x2``, booleans."""
    @abstractmethod
    def not_equal(self, x1, x2): """``x1 != x2``, booleans."""
    @abstractmethod
    def logical_and(self, x1, x2): """Booleans: both true."""
    @abstractmethod
    def logical_or(self, x1, x2): """Booleans: either true."""
    @abstractmethod
    def logical_not(self, x): """Booleans: not ``x``."""

    def where(self, condition, x1=None, x2=None):
        """``x1`` where ``condition`` holds, else ``x2`` (all broadcast; ``keras.ops.where``). With ``condition``
        alone, the indices of its nonzero entries, one int32 array per axis (``numpy.nonzero``): their number
        depends on the values, so only a constant ``condition`` (a NumPy array or a list) is accepted.

        Raises:
            ArgumentError: only one of ``x1`` and ``x2`` given.
            ShapeError: ``where(condition)`` of a tensor (its result's shape would depend on its values).
        """
        if x1 is None and x2 is None:
            if isinstance(condition, Tensor) or self.is_native(condition):
                raise ShapeError(f"where(condition) of a tensor (shape {self.shape(condition)}): the number of "
                                 "indices depends on its values, and compiled steps need static shapes; give x1 "
                                 "and x2, or a NumPy condition")
            return tuple(self.wrap(self.constant(np.asarray(i, INT_DTYPE))) for i in np.nonzero(condition))
        if x1 is None or x2 is None:
            raise ArgumentError(f"where needs both x1 and x2 or neither; got x1={x1!r}, x2={x2!r}")
        return self._where(condition, x1, x2)

    @abstractmethod
    def _where(self, condition, x1, x2): """The select under :meth:`where`."""

    def clip(self, x, x_min, x_max):
        """``x`` limited to ``[x_min, x_max]`` (``keras.ops.clip``): ``minimum(maximum(x, x_min), x_max)`` in
        ``x``'s dtype (booleans give int32, as Keras)."""
        dtype = self.dtype_of(x)
        dtype = INT_DTYPE if dtype == "bool" else dtype
        return self.cast(self.minimum(self.maximum(x, x_min), x_max), dtype)

    # --- activations and elementwise functions ----------------------------------------------------------------------
    @abstractmethod
    def relu(self, x): """``max(x, 0)``, with gradient 0 at ``x == 0`` on every backend."""
    @abstractmethod
    def tanh(self, x): """Hyperbolic tangent."""
    @abstractmethod
    def sigmoid(self, x): """``1 / (1 + exp(-x))``."""
    @abstractmethod
    def exp(self, x): """Elementwise ``e**x``."""
    @abstractmethod
    def log(self, x): """Elementwise natural logarithm."""
    @abstractmethod
    def sqrt(self, x): """Elementwise square root."""
    @abstractmethod
    def square(self, x): """Elementwise ``x * x``."""
    @abstractmethod
    def erf(self, x): """The error function."""

    @abstractmethod
    def sin(self, x): """Elementwise sine (radians)."""

    @abstractmethod
    def cos(self, x): """Elementwise cosine (radians)."""

    def softmax(self, x, axis: Axis = -1):
        """``exp(x) / sum(exp(x), axis)``, computed stably (``keras.ops.softmax``): ``axis`` an int, a tuple of
        axes normalised together, or None for the whole array."""
        x, axes = self._floating(x), None
        axes = self._axes(x, axis, "softmax")
        if len(axes) == 1:
            return self._softmax(x, axes[0])
        shifted = x - self._finite_peak(x, axes)
        e = self.exp(shifted)
        return e / self.sum(e, axis=axes, keepdims=True)

    def log_softmax(self, x, axis: Axis = -1):
        """``x - logsumexp(x, axis)``, computed stably (``keras.ops.log_softmax``; ``axis`` as in :meth:`softmax`)."""
        x = self._floating(x)
        axes = self._axes(x, axis, "log_softmax")
        if len(axes) == 1:
            return self._log_softmax(x, axes[0])
        shifted = x - self._finite_peak(x, axes)
        return shifted - self.log(self.sum(self.exp(shifted), axis=axes, keepdims=True))

    @abstractmethod
    def _softmax(self, x, axis: int): """The framework's softmax along one (non-negative) axis."""
    @abstractmethod
    def _log_softmax(self, x, axis: int): """The framework's log-softmax along one (non-negative) axis."""

    def _finite_peak(self, x, axes):
        """The maximum over ``axes`` (kept), 0 where it is infinite: what a stable softmax subtracts."""
        peak = self.max(x, axis=axes, keepdims=True)
        return self.stop_gradient(self.where(self.abs(peak) < float("inf"), peak, 0.0))

    def gelu(self, x, approximate: bool = True):
        """Gaussian error linear unit (``keras.ops.gelu``; Keras' default is the tanh approximation):
        exact ``x/2 * (1 + erf(x / sqrt(2)))``; approximate ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``."""
        x = self.wrap(self._native(x, self._result_dtype([x], floating=True)))
        if approximate:
            return 0.5 * x * (1.0 + self.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
        return 0.5 * x * (1.0 + self.erf(x / math.sqrt(2.0)))

    def silu(self, x):
        """``x * sigmoid(x)`` (``keras.ops.silu``, also called swish)."""
        return x * self.sigmoid(x)

    def softplus(self, x):
        """``log(1 + exp(x))``, computed as ``max(x, 0) + log(1 + exp(-|x|))`` so large ``|x|`` neither overflows
        nor loses the gradient."""
        return self.relu(x) + self.log(1.0 + self.exp(-self.abs(x)))

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
        found = (self._max if name == "max" else self._min)(x, axes, keepdims) if axes else x
        if initial is None:
            return found
        return (self.maximum if name == "max" else self.minimum)(found, self._native(initial, x.dtype))

    def argmax(self, x, axis: int | None = None, keepdims: bool = False):
        """Index of the first maximum along ``axis`` (of the flattened array when None), int32 (``keras.ops.argmax``;
        NaN counts as the largest value, as in NumPy and JAX).

        Raises:
            ShapeError: an axis of size 0.
        """
        x = self._tensor(x)
        axes = self._axes(x, axis, "argmax")
        if any(self.shape(x)[a] == 0 for a in axes):
            raise ShapeError(f"argmax over an axis of size 0 (x of shape {self.shape(x)}, axis={axis!r})")
        return self._argmax(x, None if axis is None else axes[0], keepdims)

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
        ``+inf`` entry gives ``+inf`` and a row of ``-inf`` gives ``-inf`` (not ``inf - inf``, NaN)."""
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
    @abstractmethod
    def ones_like(self, x): """Ones with the shape and dtype of ``x``."""
    @abstractmethod
    def zeros_like(self, x): """Zeros with the shape and dtype of ``x``."""

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


def _reduced_axes(axis: Axis, shape: Sequence[int | None]) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(len(shape)))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % len(shape) for a in axes)
