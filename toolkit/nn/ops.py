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

from toolkit.errors import DTypeError, ModelStateError, ShapeError
from toolkit.nn import context, ops_arrays, ops_core, ops_linalg, ops_math, ops_nn, ops_reductions, ops_windows
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
    "divide": "ff", "logical_and": "bb", "logical_or": "bb", "logical_not": "b", "where": "bee",
    **dict.fromkeys(("negative", "abs", "square", "relu"), "e"),
    **dict.fromkeys(("exp", "log", "sqrt", "tanh", "sigmoid", "erf", "sin", "cos", "softmax", "log_softmax"), "f"),
    **dict.fromkeys(("sum", "max", "min", "transpose", "reshape", "expand_dims", "squeeze", "broadcast_to", "cast",
                     "cumsum", "argmax", "ones_like", "zeros_like", "pad"),
                    "t"),
    "mean": "f", "concatenate": "L", "stack": "L", "_take": "ti", "_take_along_axis": "ti", "one_hot": "i",
    "all_finite": "T", "_hash_uniform": "tt",
}
#: The primitives of the op groups (:mod:`toolkit.nn.ops_math` and the other ``ops_*`` modules), each declared with
#: its group.
for _group in (ops_math, ops_arrays, ops_reductions, ops_linalg, ops_nn, ops_windows, ops_core):
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
          ops_windows.WindowOps, ops_core.CoreOps, ABC):
    """Neutral ops. ``dtype`` is the floating dtype of the computation (``"float32"`` or ``"float64"``).

    The vocabulary is grouped by kind in the ``ops_*`` modules (elementwise math, arrays, reductions, linalg, nn,
    windows, core), each a mixin with its primitives and composites; this class holds the boundary, the basic
    arithmetic, shapes, gathering, loops and the training context."""

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
    @abstractmethod
    def where(self, condition, x1, x2): """``x1`` where ``condition`` holds, else ``x2`` (all broadcast)."""

    def clip(self, x, x_min, x_max):
        """``x`` limited to ``[x_min, x_max]`` (``keras.ops.clip``): ``minimum(maximum(x, x_min), x_max)``."""
        return self.minimum(self.maximum(x, x_min), x_max)

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

    @abstractmethod
    def softmax(self, x, axis=-1): """``exp(x) / sum(exp(x), axis)``, computed stably."""
    @abstractmethod
    def log_softmax(self, x, axis=-1): """``x - logsumexp(x, axis)``, computed stably."""

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
    @abstractmethod
    def sum(self, x, axis: Axis = None, keepdims: bool = False): """Sum over ``axis`` (all axes when None)."""
    @abstractmethod
    def mean(self, x, axis: Axis = None, keepdims: bool = False): """Mean over ``axis`` (all axes when None)."""

    @abstractmethod
    def max(self, x, axis: Axis = None, keepdims: bool = False):
        """Maximum over ``axis`` (all axes when None). Where several entries tie for the maximum, frameworks split
        the gradient differently (TensorFlow shares it, Aesara gives each the whole); ties at a ReLU's zero, the
        common case, get no gradient on either."""

    @abstractmethod
    def min(self, x, axis: Axis = None, keepdims: bool = False): """Minimum over ``axis`` (ties: as :meth:`max`)."""

    @abstractmethod
    def argmax(self, x, axis: int | None = None, keepdims: bool = False):
        """Index of the first maximum along ``axis`` (of the flattened array when None), int32."""

    @abstractmethod
    def cumsum(self, x, axis: int | None = None): """Running sum along ``axis`` (of the flattened array when None)."""

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
    @abstractmethod
    def reshape(self, x, shape: Sequence[int]): """Reshape; one entry of ``shape`` may be -1."""
    @abstractmethod
    def transpose(self, x, axes: Sequence[int] | None = None): """Permute axes (reverse them when None)."""
    @abstractmethod
    def expand_dims(self, x, axis: int): """A new axis of size 1 at ``axis``."""
    @abstractmethod
    def squeeze(self, x, axis: Axis = None): """Drop size-1 axes ``axis`` (every size-1 axis when None)."""
    @abstractmethod
    def broadcast_to(self, x, shape: Sequence[int]): """``x`` broadcast to ``shape`` (NumPy's rules)."""
    @abstractmethod
    def cast(self, x, dtype: str): """``x`` converted to ``dtype`` (floats to integers round towards zero)."""
    @abstractmethod
    def concatenate(self, xs, axis: int = 0): """Join arrays along an existing axis (dtypes promoted)."""
    @abstractmethod
    def stack(self, xs, axis: int = 0): """Join arrays along a new axis (dtypes promoted)."""

    def concat(self, xs, axis: int = 0):
        """The toolkit's earlier name of :meth:`concatenate`."""
        return self.concatenate(xs, axis=axis)

    @abstractmethod
    def pad(self, x, pad_width, constant_values=0):
        """``x`` with ``pad_width[i] = (before, after)`` constant entries around axis ``i`` (``keras.ops.pad``,
        constant mode)."""

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

    @abstractmethod
    def one_hot(self, indices, depth: int):
        """``indices`` (ints) as one-hot rows of length ``depth`` in ``self.dtype``; out-of-range rows are all 0."""

    # --- loops -----------------------------------------------------------------------------------------------------
    def scan(self, f: Callable, init, xs=None, length: int | None = None, reverse: bool = False, unroll: int = 1):
        """Scan ``f`` over the leading axis of ``xs`` while carrying a state (``keras.ops.scan``, JAX's
        ``lax.scan``)::

            carry, ys = init, []
            for x in xs:                   # xs[length - 1], ..., xs[0] when reverse
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys)        # in xs' order, also when reverse

        ``init``, ``xs`` and ``f``'s results may be pytrees of tensors (``y`` may be None: nothing is stacked);
        ``xs=None`` scans ``length`` times with ``x`` None. The carry keeps ``init``'s structure, shapes and dtypes.
        Each backend runs it as one loop in the graph (the step is built and compiled once: compile time does not
        grow with ``length``), and differentiates through it. ``unroll`` (Keras' argument: an int >= 1, or True for
        all of ``length``) is how many iterations one loop iteration runs: JAX (the Aesara backend) unrolls that many;
        TensorFlow unrolls the whole loop into the graph when ``unroll`` covers ``length`` (faster steps on short
        sequences, tracing that grows with the length), else runs one step per ``tf.while_loop`` iteration.

        Raises:
            ShapeError, DTypeError: ``xs`` without a common leading size (or neither ``xs`` nor ``length``), or a
                carry from ``f`` whose structure, shapes or dtypes differ from ``init``'s.
            ModelStateError: ``f`` draws noise or updates model state (once per loop, not once per step: refused).
        """
        init_leaves, init_spec = optree.tree_flatten(init, is_leaf=self._is_array)
        init_natives = [self._native(v) for v in init_leaves]
        xs_leaves, xs_spec = optree.tree_flatten(xs, is_leaf=self._is_array)
        xs_natives = [self._native(v) for v in xs_leaves]
        sizes = {self.native_shape(v)[0] if self.native_shape(v) else None for v in xs_natives}
        if length is not None:
            sizes.add(length)
        if (len(sizes) != 1 or None in sizes or not isinstance(next(iter(sizes)), (int, np.integer))
                or next(iter(sizes)) < 1):
            raise ShapeError(f"scan needs xs with one known leading size >= 1 or a length, got leading sizes "
                             f"{sorted(sizes, key=str)} (length={length!r})")
        length = int(next(iter(sizes)))
        if isinstance(unroll, bool):
            unroll = length if unroll else 1
        if not isinstance(unroll, (int, np.integer)) or unroll < 1:
            raise ValueError(f"scan's unroll must be a bool or an int >= 1, got {unroll!r}")
        expected = [(self.native_shape(v), self.native_dtype(v)) for v in init_natives]
        y_spec = []

        def step(carry: list, x: list) -> tuple[list, list]:
            """``f`` on natives: the backend's loop body."""
            self._scan_depth += 1
            try:
                new_carry, y = f(optree.tree_unflatten(init_spec, [self.wrap(v) for v in carry]),
                                 optree.tree_unflatten(xs_spec, [self.wrap(v) for v in x]))
            finally:
                self._scan_depth -= 1
            carry_leaves, carry_spec = optree.tree_flatten(new_carry, is_leaf=self._is_array)
            carry = [self._native(v) for v in carry_leaves]
            found = [(self.native_shape(v), self.native_dtype(v)) for v in carry]
            if carry_spec != init_spec or found != expected:
                raise ShapeError(f"scan's f must return a carry like init: {init_spec} with (shape, dtype) "
                                 f"{expected}; got {carry_spec} with {found}")
            y_leaves, spec = optree.tree_flatten(y, is_leaf=self._is_array)
            y_spec[:] = [spec]
            return carry, [self._native(v) for v in y_leaves]

        carry, ys = self._scan(step, init_natives, xs_natives, length, bool(reverse), min(int(unroll), length))
        return (optree.tree_unflatten(init_spec, [self.wrap(v) for v in carry]),
                optree.tree_unflatten(y_spec[0], [self.wrap(v) for v in ys]))

    _scan_depth = 0  # > 0 while a scan's body is being built

    def _is_array(self, value) -> bool:
        return isinstance(value, (Tensor, np.ndarray)) or self.is_native(value)

    def _scan(self, step: Callable, init: list, xs: list, length: int, reverse: bool,
              unroll: int) -> tuple[list, list]:
        """The loop under :meth:`scan`, on natives: ``step(carry, x) -> (carry, ys)`` on lists of natives; returns
        the last carry and each ``ys`` stacked along a new axis 0, in ``xs``' order. This default unrolls it (one
        copy of the step per iteration); a backend with a loop construct overrides it."""
        carry, outputs = init, []
        for t in (range(length - 1, -1, -1) if reverse else range(length)):
            carry, y = step(carry, [self._index(x, t) for x in xs])
            outputs.append(y)
        if reverse:
            outputs.reverse()
        return carry, [self.stack([y[i] for y in outputs]).native for i in range(len(outputs[0]))]

    # --- training mode, model state and randomness (toolkit.nn.context) -----------------------------------------
    @property
    def training(self) -> bool:
        """Whether the model runs for a training step (True) or for inference (False: predict, evaluation, model
        code called outside a trainer). Layers read it: ``dropout`` is the identity and ``batch_norm`` uses its
        moving statistics in inference."""
        run = context.current()
        return bool(run and run.training)

    def update_state(self, name: str, value) -> None:
        """Give the model state ``name`` (declared with :class:`~toolkit.State` in ``init``) its value after this
        training step. The trainer writes it with the parameters, all or nothing, on every replica (the replicas'
        values averaged, weighted by their share of the batch). Outside a training run it does nothing."""
        run = context.current()
        if run is None or not run.training:
            return
        if self._scan_depth:
            raise ModelStateError(f"update_state({name!r}) inside ops.scan's f: the body is built once for every "
                                  "iteration; return the value in the carry and update the state after the loop")
        if name not in run.state:
            raise ModelStateError(f"update_state({name!r}): the model declares no state of that name; its state is "
                                  f"{sorted(run.state)} (mark an init entry with toolkit.State(array))")
        value = self._native(value, self.dtype)
        new, old = tuple(self.native_shape(value)), tuple(self.shape(run.state[name]))
        if new != old:
            raise ModelStateError(f"update_state({name!r}): the new value has shape {new}, the state has {old}")
        run.updates[name] = value

    def cross_replica_sum(self, x):
        """``x`` summed over the replicas of a data-parallel training step, the same on every replica: each device
        adds the other devices' values of ``x`` to its own (``lax.psum``; ``ReplicaContext.all_reduce(SUM)`` under
        ``MirroredStrategy``). Its gradient is the cross-replica sum of the gradients, so training through it is
        training on the whole batch. With one replica it is ``x``. Synchronized statistics
        (``moments(..., synchronized=True)``, ``batch_norm(..., synchronized=True)``) are made with it.

        Raises:
            ModelStateError: where the step's replicas do not run together: a step composed per device
                (``trainer.gradients``, gradient accumulation), ModelParallel, model code run outside a trainer;
                and where the step pads uneven shards to one size (Aesara), whose padding rows a sum of rows would
                count: make row statistics with ``moments(..., synchronized=True)``, which weighs them out.
        """
        run = context.current()
        if run is not None and run.row_weights is not None:
            raise ModelStateError("cross_replica_sum in a step over uneven shards padded to one size (Aesara's "
                                  "multi-device step): a sum over rows would count the padding rows; make row "
                                  "statistics with ops.moments(..., synchronized=True), which weighs them out")
        return self._cross_replica_sum(x, run)

    def _cross_replica_sum(self, x, run):
        if run is None or run.replica_sum is None:
            raise ModelStateError("cross_replica_sum (synchronized statistics) needs a data-parallel training step "
                                  "that runs its replicas together: DataParallel's step, not trainer.gradients() or "
                                  "accumulated micro-batches; this run is "
                                  + ("outside a trainer's training step" if run is None or not run.training
                                     else "one device's part of a step composed per device"))
        x = self._native(x, self._result_dtype([x], floating=True))
        return self.wrap(run.replica_sum(x))

    def example_uniform(self, shape: Sequence[int]):
        """Uniform numbers in ``[0, 1)`` of ``shape``, whose axis 0 is the batch: each example's numbers come from
        its key (the trainer's seed, the step and the example's index in the global batch) and from how many draws
        this run made before, never from the device it runs on (see :mod:`toolkit.nn.context`). The same on every
        backend, in the computation dtype, multiples of ``2**-24``.

        Raises:
            ModelStateError: outside a training run of a trainer (no keys).
        """
        if self._scan_depth:
            raise ModelStateError("example_uniform (dropout, noise) inside ops.scan's f: the body is built once, so "
                                  "every iteration would draw the same numbers; draw them before the loop and scan "
                                  "over them as xs")
        run = context.current()
        if run is None or run.keys is None:
            raise ModelStateError("random numbers need a training step of DataParallel, which gives every example "
                                  "its key (ModelParallel does not yet); in inference, layers that draw noise "
                                  "(dropout) must not draw")
        shape = tuple(shape)
        if len(shape) < 1 or not all(isinstance(s, (int, np.integer)) and s > 0 for s in shape[1:]):
            raise ShapeError(f"example_uniform needs a shape [batch, ...] with known sizes after the batch axis, "
                             f"got {shape}")
        counters = self.constant(context.element_counters(run.calls, tuple(int(s) for s in shape[1:])))
        run.calls += 1
        keys = self.reshape(self.wrap(self._native(run.keys, context.KEY_DTYPE)), (-1,) + (1,) * (len(shape) - 1))
        return self._hash_uniform(keys, counters)

    @abstractmethod
    def _hash_uniform(self, keys, counters):
        """``(mix32(keys ^ counters) >> 8) * 2**-24`` in the computation dtype, unsigned 32-bit arithmetic
        broadcast as NumPy (:func:`toolkit.nn.context.mix32`)."""

    # --- checks ----------------------------------------------------------------------------------------------------
    @abstractmethod
    def all_finite(self, xs):
        """A boolean scalar: no NaN or Inf in any of ``xs`` (used by the training step's NaN policy)."""


def _reduced_axes(axis: Axis, shape: Sequence[int | None]) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(len(shape)))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % len(shape) for a in axes)
