"""A trainer's input checks: a batch is an array or a dict of arrays ``x`` and targets ``y`` (an array, or a list,
tuple or dict of arrays for a model of several outputs), all of one length, cast
to the trainer's dtype (floats) or :data:`LABEL_DTYPE` (integers), finite, and shaped like the first batch that
ran, except on the axes the model declares free (:attr:`toolkit.Model.input_shape`: a sequence length may change from
batch to batch, as Keras' ``Input(shape=(None, ...))``). Everything is checked before anything runs, so a bad batch
changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import optree

from toolkit.errors import ArgumentError, DTypeError, NonFiniteError, ShapeError

#: Floating dtypes a trainer computes in.
DTYPES = ("float32", "float64")
#: Integer inputs (class labels) are passed to the model as this dtype on every backend.
LABEL_DTYPE = "int32"

#: The dtypes a batch is cast to, as NumPy's dtype objects (one per dtype: compared by identity, unlike a string).
_NUMPY_DTYPES = {name: np.dtype(name) for name in (*DTYPES, LABEL_DTYPE)}


def as_dtype(dtype: Any) -> str:
    """``dtype``'s name, one of :data:`DTYPES`.

    Raises:
        DTypeError: another dtype.
    """
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in DTYPES:
        raise DTypeError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return name


def count_non_finite(array: np.ndarray) -> int:
    """How many NaN or Inf values ``array`` holds (0 for a non-floating array)."""
    return int(array.size - np.count_nonzero(np.isfinite(array))) if array.dtype.kind == "f" else 0


def count(x: Any) -> int:
    """The number of examples of a batch input or targets (an array, or a dict, list or tuple of arrays)."""
    return len(x) if isinstance(x, np.ndarray) else len(optree.tree_leaves(x)[0])


def shapes(x: Any) -> Any:
    """The shapes of the arrays of a batch input or targets, for messages."""
    return optree.tree_map(lambda a: tuple(np.shape(a)), x)


def several(y: Any) -> bool:
    """Whether targets ``y`` are several arrays (a dict by output name, or a list or tuple of arrays in output
    order: a model of several outputs) rather than one."""
    return isinstance(y, Mapping) or isinstance(y, (list, tuple)) and bool(y) and all(
        isinstance(v, np.ndarray) for v in y)


def named(x: Any, y: Any = None) -> dict[str, np.ndarray]:
    """The arrays of a batch by the names messages give them: ``x`` or ``x['name']``, ``y``, ``y[0]`` or
    ``y['output']``."""
    found = {f"x[{k!r}]": v for k, v in x.items()} if isinstance(x, Mapping) else {"x": x}
    if y is None:
        return found
    if isinstance(y, Mapping):
        return {**found, **{f"y[{k!r}]": v for k, v in y.items()}}
    if several(y):
        return {**found, **{f"y[{i}]": v for i, v in enumerate(y)}}
    return {**found, "y": y}


def rows(x: Any, index: Any) -> Any:
    """Rows ``index`` (a slice or an array of row numbers) of every array of the batch input ``x`` (an array or a
    dict of arrays)."""
    if isinstance(x, np.ndarray):
        return x[index]
    return optree.tree_map(lambda a: a[index], x)


def _declared(shapes: Any, key: Any, index: int, count: int) -> tuple | None:
    """The example shape ``shapes`` (a model's ``input_shape`` or ``output_shape``) declares for the array named
    ``key`` (a dict's key, or None), ``index``-th of ``count``."""
    if shapes is None:
        return None
    if isinstance(shapes, Mapping):
        if key is not None:
            return shapes.get(key)
        return list(shapes.values())[index] if count == len(shapes) else None
    return shapes if count == 1 else None


def declared_shapes(input_shape: Any, output_shape: Any, x: Any, y: Any = None) -> dict[str, tuple]:
    """The example shapes a model declares (:attr:`toolkit.Model.input_shape`, ``output_shape``) for the arrays of
    a batch, by the names :func:`named` gives them; arrays it declares nothing for are left out."""
    found = {}
    xs = list(x.items()) if isinstance(x, Mapping) else [(None, x)]
    for i, (key, _) in enumerate(xs):
        found["x" if key is None else f"x[{key!r}]"] = _declared(input_shape, key, i, len(xs))
    if isinstance(y, Mapping):
        found.update({f"y[{k!r}]": _declared(output_shape, k, i, len(y)) for i, k in enumerate(y)})
    elif several(y):
        found.update({f"y[{i}]": _declared(output_shape, None, i, len(y)) for i in range(len(y))})
    elif y is not None:
        found["y"] = _declared(output_shape, None, 0, 1)
    return {what: shape for what, shape in found.items() if shape is not None}


def free_axes(declared: tuple | None) -> frozenset[int]:
    """The example axes a declared shape leaves free (None)."""
    return frozenset(axis for axis, size in enumerate(declared or ()) if size is None)


def keeps(shape: tuple, accepted: tuple, free: frozenset[int]) -> bool:
    """Whether an example ``shape`` is the ``accepted`` one but on the ``free`` axes."""
    return len(shape) == len(accepted) and all(a == b or axis in free
                                               for axis, (a, b) in enumerate(zip(shape, accepted)))


class BatchCheck:
    """Checks and casts a trainer's batches, and remembers the shapes and kinds of the first training batch once it
    has run (:meth:`accept`): later batches must keep them, but on the axes the model declares free.

    Args:
        dtype: the trainer's dtype.
        input_shape: the model's :attr:`~toolkit.Model.input_shape` (None: nothing declared).
        output_shape: the model's :attr:`~toolkit.Model.output_shape` (None: nothing declared).

    Attributes:
        spec: ``{what: (shape of one example, dtype kind)}`` of the accepted batch, or None before the first.
    """

    def __init__(self, dtype: str, input_shape: Any = None, output_shape: Any = None) -> None:
        self.dtype = dtype
        self.input_shape, self.output_shape = input_shape, output_shape
        self.spec: dict | None = None
        self._pending: dict | None = None  # the spec of the last training batch checked

    def accept(self) -> None:
        """Remember the last checked training batch's shapes once it has run (the first batch's only)."""
        if self.spec is None:
            self.spec = self._pending

    def __call__(self, x: Any, y: Any) -> tuple[Any, np.ndarray | None]:
        """Check and cast a batch: ``x`` an array or a dict of arrays, ``y`` an array (or None: inputs only, for
        prediction), all of one length.

        Raises:
            ShapeError, DTypeError, NonFiniteError: what is wrong, naming the array.
        """
        if type(x) is np.ndarray and type(y) is np.ndarray and self.spec is not None:
            known = self._known(x, y)
            if known is not None:
                return known
        named_x = isinstance(x, Mapping)
        xs = {k: _array(v, f"x[{k!r}]") for k, v in x.items()} if named_x else {"x": _array(x, "x")}
        if not xs:
            raise ShapeError("x is an empty dict; expected at least one input array")
        if isinstance(y, Mapping) and not y:
            raise ShapeError("y is an empty dict; expected the targets of at least one output")
        ys = None if y is None else optree.tree_map(lambda a: _array(a, "y"), y) if several(y) else _array(y, "y")
        arrays = named(xs if named_x else xs["x"], ys)
        for what, array in arrays.items():
            if array.ndim == 0:
                raise ShapeError(f"x and y need a batch axis; got {what} of shape {array.shape}")
        lengths = {what: len(a) for what, a in arrays.items()}
        if len(set(lengths.values())) != 1:
            listed = " and ".join(str(n) for n in lengths.values())
            raise ShapeError(f"x and y must have the same number of examples; got {listed}")
        if next(iter(lengths.values())) == 0:
            raise ShapeError("the batch is empty (0 examples)")
        arrays = {what: self._cast(a, what) for what, a in arrays.items()}
        spec = {what: (a.shape[1:], a.dtype.kind) for what, a in arrays.items()}
        declared = declared_shapes(self.input_shape, self.output_shape, xs if named_x else xs["x"], ys)
        for what, shape in declared.items():
            if what.startswith("x") and not keeps(spec[what][0], shape, free_axes(shape)):
                raise ShapeError(f"{what} has examples of shape {spec[what][0]}; the model takes examples of shape "
                                 f"{shape} (None: any length)")
        if self.spec is not None and spec != self.spec:
            for what, (shape, kind) in spec.items():
                expected = self.spec.get(what)
                if expected is None or not keeps(shape, expected[0], free_axes(declared.get(what))):
                    wanted = {w: s for w, (s, _) in self.spec.items()}
                    free = {w: sorted(free_axes(s)) for w, s in declared.items() if free_axes(s)}
                    raise ShapeError(f"examples must keep the shapes of the first batch: {wanted}"
                                     f"{f' (but on the free example axes {free})' if free else ''}; got {what} {shape}")
                if expected[1] != kind:
                    raise DTypeError(f"{what} must stay {'integer labels' if expected[1] == 'i' else 'floating'} as in "
                                     f"the first batch; got dtype {arrays[what].dtype}")
        for what, array in arrays.items():
            if bad := count_non_finite(array):
                first = int(np.argwhere(~np.isfinite(array))[0][0])
                raise NonFiniteError(f"{what} has {bad} NaN or Inf value(s), the first in example {first}")
        if y is not None:
            self._pending = spec
        x = {k: arrays[f"x[{k!r}]"] for k in xs} if named_x else arrays["x"]
        if isinstance(y, Mapping):
            y = {k: arrays[f"y[{k!r}]"] for k in y}
        elif several(ys):
            y = type(y)(arrays[f"y[{i}]"] for i in range(len(y)))
        else:
            y = arrays.get("y")
        return x, y

    def _known(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The check of a training batch like the ones before, in a few microseconds (the full check is about a
        tenth of a small model's host work per step): two arrays of the dtypes they are cast to, with the accepted
        shapes, of one non-zero length, all finite. None for anything else; the full check then says what is wrong."""
        if not (x.ndim and y.ndim and len(x) == len(y) and len(y)):
            return None
        floats, labels = _NUMPY_DTYPES[self.dtype], _NUMPY_DTYPES[LABEL_DTYPE]
        if x.dtype is not floats and x.dtype is not labels or y.dtype is not floats and y.dtype is not labels:
            return None
        if {"x": (x.shape[1:], x.dtype.kind), "y": (y.shape[1:], y.dtype.kind)} != self.spec:
            return None
        if not all(np.isfinite(a).all() for a in (x, y) if a.dtype.kind == "f"):
            return None
        self._pending = self.spec
        return x, y

    def _cast(self, array: np.ndarray, what: str) -> np.ndarray:
        return cast(array, self.dtype, what)


def _array(value: Any, what: str) -> np.ndarray:
    """``value`` as a NumPy array.

    Raises:
        ShapeError: ``value`` is not one (a ragged list, a list of batches), saying so.
    """
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as error:
        hint = (" (a list or a tuple is array data, as in Keras: give a list of batches as iter(batches) for one "
                "pass, or as an object whose __iter__ returns iter(batches) for a pass each epoch)"
                if isinstance(value, (list, tuple)) else "")
        raise ShapeError(f"{what} is a {type(value).__name__} that is not an array{hint}: {error}") from error


def cast(array: np.ndarray, dtype: str, what: str) -> np.ndarray:
    """``array`` as a batch's array is computed on: floats in ``dtype`` (the trainer's), integers and booleans as
    :data:`LABEL_DTYPE`; no copy where it already is.

    Raises:
        DTypeError: not numbers (``what`` names the array).
    """
    if array.dtype.kind == "f":
        return array.astype(dtype, copy=False)
    if array.dtype.kind in "iub":
        return array.astype(LABEL_DTYPE, copy=False)
    raise DTypeError(f"{what} must hold numbers, got dtype {array.dtype}")


def sample_weights(sample_weight: Any, count: int, dtype: str, what: str = "sample_weight") -> np.ndarray:
    """Keras' ``sample_weight`` checked and cast: one weight per example, a ``(count,)`` or ``(count, 1)`` array
    of finite numbers (negative weights are taken, as Keras takes them).

    Args:
        sample_weight: the weights.
        count: the batch's example count.
        dtype: the trainer's dtype, which the weights are cast to.
        what: the argument's name in messages.

    Returns:
        A ``(count,)`` array of ``dtype``.

    Raises:
        ShapeError: another shape (per-output weights included); DTypeError: not numbers; NonFiniteError: NaN or
            Inf.
    """
    if isinstance(sample_weight, Mapping) or isinstance(sample_weight, (list, tuple)) and sample_weight and all(
            np.ndim(v) >= 1 for v in sample_weight):
        raise ShapeError(f"{what} must be one array of a weight per example (per-output weights are not "
                         f"supported), got a {type(sample_weight).__name__} of arrays")
    array = np.asarray(sample_weight)
    if array.dtype.kind not in "biuf":
        raise DTypeError(f"{what} must hold numbers, got dtype {array.dtype}")
    if array.ndim == 2 and array.shape[1:] == (1,):
        array = array[:, 0]
    if array.shape != (count,):
        raise ShapeError(f"{what} must hold one weight per example, shape ({count},) or ({count}, 1); got shape "
                         f"{array.shape}")
    array = array.astype(dtype)
    if bad := count_non_finite(array):
        raise NonFiniteError(f"{what} has {bad} NaN or Inf value(s), the first in example "
                             f"{int(np.argwhere(~np.isfinite(array))[0][0])}")
    return array


def class_weights(y: np.ndarray, class_weight: Any, dtype: str) -> np.ndarray:
    """Keras' ``class_weight`` as per-example weights, as Keras' ``class_weight_to_sample_weights`` converts it:
    each example's class is its label (integer labels, or ``(N, 1)`` labels squeezed, rounded) or the argmax of its
    one-hot row; a class the dict does not name weighs 1.0.

    Args:
        y: the checked targets, one array.
        class_weight: ``{class index: weight}``.
        dtype: the trainer's dtype.

    Returns:
        A ``(len(y),)`` array of ``dtype``.

    Raises:
        ArgumentError: not a dict, a key that is not an integer class index, or a weight that is not a finite number.
    """
    if not isinstance(class_weight, Mapping):
        raise ArgumentError(f"class_weight must be a dict {{class index: weight}}, got {type(class_weight).__name__}")
    table = {}
    for key, value in class_weight.items():
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
            raise ArgumentError(f"class_weight keys must be integer class indices, got {key!r}")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not np.isfinite(value):
            raise ArgumentError(f"class_weight[{key}] must be a finite number, got {value!r}")
        table[int(key)] = float(value)
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = np.argmax(labels, axis=-1) if labels.shape[-1] != 1 else np.squeeze(labels, axis=-1)
    if labels.ndim != 1:
        raise ShapeError(f"class_weight needs one class per example: labels (N,), (N, 1) or one-hot (N, classes); got "
                         f"targets of shape {np.shape(y)}")
    labels = np.round(labels).astype("int32")
    return np.asarray([table.get(int(label), 1.0) for label in labels], dtype=dtype)


def metric_weights(weights: np.ndarray, total: int, total_weight: float) -> np.ndarray:
    """The factors of a weighted metric's per-example values (:mod:`toolkit.training.rules`): ``weight * N / W``
    for a global batch of ``N`` (``total``) examples whose weights sum to ``W`` (``total_weight``), so that the
    replicas' share-weighted means add up to ``sum(value * weight) / W``; 0 where ``W`` is 0 (Keras' divide_no_nan).
    """
    return weights * (total / total_weight) if total_weight else np.zeros_like(weights)


def step_weights(sample_weight: Any, count: int, metrics: tuple, dtype: str,
                 across_processes: bool = False) -> dict[str, np.ndarray] | None:
    """The model batch's entries that weigh a step's batch of ``count`` examples (:mod:`toolkit.training.rules`):
    ``weights`` and, for weighted ``metrics``, ``metric_weights``.

    Args:
        sample_weight: one weight per example (Keras'), or None.
        count: the batch's example count.
        metrics: the step's :class:`toolkit.metrics.Metric` objects.
        dtype: the trainer's dtype.
        across_processes: whether the batch is one process's part of a step of several.

    Returns:
        The entries, or None without ``sample_weight``.

    Raises:
        ShapeError, DTypeError, NonFiniteError: bad weights; ArgumentError: weighted metrics across processes.
    """
    if sample_weight is None:
        return None
    found = {"weights": sample_weights(sample_weight, count, dtype)}
    if any(metric.weighted for metric in metrics):
        if across_processes:  # the global batch's total weight would need one more all-reduce
            raise ArgumentError("weighted metrics with sample_weight are not supported across processes; pass them "
                                "as metrics (unweighted) there")
        found["metric_weights"] = metric_weights(found["weights"], count,
                                                 float(np.sum(found["weights"], dtype=np.float64)))
    return found
