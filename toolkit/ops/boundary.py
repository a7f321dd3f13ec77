"""The boundary between model code and a framework: how :class:`~toolkit.ops.Ops` converts what model code
passes (Tensors, natives, Python numbers, NumPy constants) into a backend's native arrays and back, and the dtype
and axis rules every op shares.

A backend implements its primitives on natives; :func:`wrap_primitive` puts each behind this boundary (converting
its array arguments by the letters of :data:`toolkit.ops.interface.ARGUMENTS`), so model code sees only
:class:`~toolkit.ops.tensor.Tensor` values.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import optree

from toolkit.errors import DTypeError, ShapeError
from toolkit.ops.tensor import INT_DTYPE, Tensor, constant_dtype, is_weak, result_dtype

if TYPE_CHECKING:
    from toolkit.ops.interface import Ops

Native = Any  # a backend's native array: tf.Tensor, or an Aesara symbolic variable
Axis = int | Sequence[int] | None



def wrap_primitive(name: str, spec: str, impl: Callable) -> Callable:
    """Wrap a backend's primitive: convert its array arguments by ``spec`` (see
    :data:`toolkit.ops.interface.ARGUMENTS`),
    call it on natives, and hand its results back as Tensors. Array arguments may also come by keyword (``take(x,
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


class OpsBoundary(ABC):
    """The conversions, dtype rules and axis checks under :class:`~toolkit.ops.Ops` (its base: not used alone).

    A backend provides the natives (:meth:`is_native`, :meth:`constant`, :meth:`native_dtype`, ...); the rest is
    written once here. ``self.dtype`` and ``self.shape`` are :class:`~toolkit.ops.Ops`'.
    """

    # ----------------------------------------------------------------------------------------------------------------
    # The boundary between model code and the framework.

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """``fn(self, *args, **kwargs)`` with the native arrays of ``args`` (any pytree) given to ``fn`` as Tensors,
        and the Tensors of its result given back as natives: how a backend runs model, layer and optimizer code.

        Args:
            fn: a function of ``ops`` and Tensors.
            *args: its positional arguments; native arrays anywhere in them reach ``fn`` as Tensors.
            **kwargs: its keyword arguments, converted the same way.
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
        own; a constant's from :func:`~toolkit.ops.tensor.constant_dtype`)."""
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

    def dtype_of(self, x: Any) -> str:
        """The dtype of ``x`` as model code sees it (constants: by the rules of :mod:`toolkit.ops.tensor`).

        Args:
            x: a Tensor, a native array, a Python number or a NumPy constant.

        Raises:
            DTypeError: a NumPy constant that is not boolean, integer or floating (strings, objects, complex).
        """
        return self._dtype_of_value(x)

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
