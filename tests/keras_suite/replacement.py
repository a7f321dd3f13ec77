"""``keras.ops`` replaced by the toolkit's ops on one backend, every call recorded.

Every public function of Keras' op modules (:data:`KERAS_OP_MODULES`) whose name is a public method of
:class:`toolkit.ops.Ops` (found when the suite starts, so new ops are picked up) is replaced by a
:class:`ToolkitFunction`: it turns the call's NumPy arrays (also inside lists and tuples) into placed inputs of
``backend.call``, passes every other argument (axes, shapes, Python lists and scalars, dtypes) as it is, runs the
toolkit's op of that name in float64 if an input is float64 (else float32, Keras' floatx) and returns NumPy arrays,
so that Keras' assertions run unchanged. Op classes (``knp.Add()(x, y)``) are replaced by a subclass that calls the
same function with the constructor's arguments. The functions the toolkit lacks stay Keras' own, wrapped only to
record that a test called them (which makes the test "not covered").
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree

#: The Keras modules whose ops are replaced.
KERAS_OP_MODULES = ("keras.src.ops.numpy", "keras.src.ops.nn", "keras.src.ops.math", "keras.src.ops.core")
#: Keras' conversions between its tensors and NumPy: tests use them to make inputs and read results, so they stay
#: Keras' own and do not make a test "not covered" (a test of them alone calls no op: it is not covered).
HELPERS = frozenset({"convert_to_tensor", "convert_to_numpy"})
#: Methods of ``Ops`` that are not ops a test could call (a Keras op of that name would still be replaced).
NOT_OPS = frozenset({"call", "wrap", "wrap_tree", "unwrap", "constant", "is_native", "native_dtype", "native_shape",
                     "native_cast", "dtype_of"})
#: The perturbation of :attr:`Runner.perturb` (the harness's self-test): a float result ``x`` becomes
#: ``x + PERTURBATION * (1 + |x|)`` (relative for large values, absolute near 0, never cancelling), an integer one
#: ``x + 1``, a boolean one ``not x``; beyond the tolerances of Keras' tests (1e-6 by default, at most 1e-3).
PERTURBATION = 1e-2
#: Types whose names mark sparse or ragged tensors (TensorFlow, JAX, SciPy), and the keyword arguments that ask for
#: them: such calls are out of scope, left to Keras.
OUT_OF_SCOPE_TYPES = ("SparseTensor", "RaggedTensor", "BCOO", "BCSR", "IndexedSlices", "spmatrix", "sparray")
OUT_OF_SCOPE_KEYWORDS = ("sparse", "ragged")
#: Ops that return a function (``vectorize(pyfunc)``, ``custom_gradient(f)``): the function they return runs through
#: the toolkit when the test calls it, each call one traced call of ``op(*op_args)(*call_args)`` on its arrays.
FUNCTION_MAKERS = frozenset({"vectorize", "custom_gradient"})


def toolkit_op_names() -> frozenset[str]:
    """The public methods of :class:`toolkit.ops.Ops` (the vocabulary as it is now, mixins included)."""
    from toolkit.ops.interface import Ops

    return frozenset(name for name, value in inspect.getmembers(Ops)
                     if not name.startswith("_") and callable(value) and name not in NOT_OPS)


@dataclass
class Record:
    """What one test called: ops run by the toolkit, Keras ops the toolkit lacks, and out-of-scope calls."""

    toolkit: set[str] = field(default_factory=set)
    keras: set[str] = field(default_factory=set)
    out_of_scope: dict[str, str] = field(default_factory=dict)  # op -> why (sparse, ragged, symbolic)
    arrays: int = 0  # arrays the toolkit's ops gave the test (what a perturbation changes)

    def as_dict(self) -> dict[str, Any]:
        return {"toolkit": sorted(self.toolkit), "keras": sorted(self.keras), "out_of_scope": self.out_of_scope,
                "arrays": self.arrays}


class Recorder:
    """The current test's :class:`Record`. ``depth`` counts the Keras ops running: an op called from inside a Keras
    op (Keras' ``append`` calling ``concatenate``) is Keras' business, not the test's, and runs as Keras' own."""

    def __init__(self) -> None:
        self.record = Record()
        self.depth = 0

    def reset(self) -> Record:
        done, self.record, self.depth = self.record, Record(), 0
        return done


RECORDER = Recorder()


def out_of_scope(args: tuple, kwargs: dict) -> str | None:
    """Why a call is out of scope (sparse, ragged or symbolic input), or None."""
    for name in OUT_OF_SCOPE_KEYWORDS:
        if kwargs.get(name):
            return f"{name}=True"
    for leaf in optree.tree_leaves((args, kwargs), none_is_leaf=True):
        kind = type(leaf).__name__
        if kind == "KerasTensor":
            return "symbolic input (KerasTensor)"
        if any(marker in kind for marker in OUT_OF_SCOPE_TYPES):
            return f"{'ragged' if 'Ragged' in kind else 'sparse'} input ({kind})"
        if getattr(leaf, "sparse", False) is True or getattr(leaf, "ragged", False) is True:
            return f"sparse or ragged input ({kind})"
    return None


@dataclass(frozen=True)
class _Slot:
    """Where the ``index``-th array input goes in a call's arguments."""

    index: int


def _is_tensor_like(value: Any) -> bool:
    """A Keras tensor or variable of an eager backend (not NumPy's): it is converted to NumPy and placed."""
    if isinstance(value, (np.ndarray, np.generic, str, bytes, int, float, complex, bool, type(None))):
        return False
    module = type(value).__module__ or ""
    return (module.startswith(("tensorflow", "jax", "jaxlib", "torch", "keras"))
            and hasattr(value, "shape") and hasattr(value, "dtype") and not callable(value))


class Runner:
    """Runs toolkit ops on one backend's first device, one ``backend.call`` per Keras call.

    The function given to ``backend.call`` is made once per op and argument structure (the non-array arguments are
    part of it), so a Theano-family backend compiles each (op, argument structure, shapes, dtypes) once."""

    def __init__(self, backend_name: str, perturb: bool = False) -> None:
        import toolkit

        self.backend = toolkit.get_backend(backend_name)
        self.device = self.backend.list_devices()[0]
        self.perturb = perturb
        self._functions: dict[tuple, Callable] = {}
        self._static: dict[tuple, tuple] = {}  # (function, signature) -> the result's structure and non-array leaves
        self._ops = None  # the Ops of the call being traced: an op called inside it (a scan's body) uses it directly

    def __call__(self, name: str, args: tuple, kwargs: dict, made: tuple | None = None) -> Any:
        """The toolkit's op ``name`` on ``args``; with ``made`` (``(op_args, op_kwargs)``), the function that
        ``name(*op_args, **op_kwargs)`` returns (see :data:`FUNCTION_MAKERS`) on ``args``."""
        if self._ops is not None:  # inside a traced call: a callback of scan/map composing ops on Tensors
            op = getattr(self._ops, name)
            return (op if made is None else op(*made[0], **made[1]))(*args, **kwargs)
        arrays: list[np.ndarray] = []

        def slot(leaf):
            if _is_tensor_like(leaf):
                leaf = np.asarray(leaf)
            if isinstance(leaf, np.ndarray):
                arrays.append(leaf)
                return _Slot(len(arrays) - 1)
            return leaf

        template = optree.tree_map(slot, (args, kwargs), none_is_leaf=True)
        dtype = computation_dtype(arrays, kwargs)
        key = (name, _structure_key(template), _structure_key(made))
        function = self._functions.get(key)
        if function is None:
            function = self._functions[key] = self._function(name, template, made)
        signature = (dtype, tuple((a.dtype.str, a.shape) for a in arrays))
        self._signature = (function, signature)
        inputs = {f"a{i}": self.backend.place(a, self.device) for i, a in enumerate(arrays)}
        natives = self.backend.call(function, self.device, inputs, dtype)
        spec, static = self._static[(function, signature)]
        natives = iter(natives[1:])  # after the marker
        leaves = [self._result(next(natives)) if leaf is _NATIVE else leaf for leaf in static]
        RECORDER.record.arrays += sum(leaf is _NATIVE for leaf in static)
        return optree.tree_unflatten(spec, leaves)

    def _function(self, name: str, template: Any, made: tuple | None = None) -> Callable:
        from toolkit.ops.tensor import Tensor

        def function(ops, **inputs):
            args, kwargs = optree.tree_map(lambda leaf: inputs[f"a{leaf.index}"] if isinstance(leaf, _Slot) else leaf,
                                           template, none_is_leaf=True)
            self._ops = ops
            try:
                op = getattr(ops, name) if made is None else getattr(ops, name)(*made[0], **made[1])
                result = op(*args, **kwargs)
            finally:
                self._ops = None
            leaves, spec = optree.tree_flatten(result, is_leaf=lambda v: isinstance(v, Tensor), none_is_leaf=True)
            static = [_NATIVE if isinstance(leaf, Tensor) else leaf for leaf in leaves]
            self._static[self._signature] = (spec, static)
            # A result may hold no array (ndim, is_tensor): a Theano-family function needs an output, so a constant
            # marker leads the list.
            marker = ops.wrap(ops.constant(np.zeros((), np.float32)))
            return [marker, *(leaf for leaf in leaves if isinstance(leaf, Tensor))]

        function.__qualname__ = f"keras_suite.{name}"
        return function

    def _result(self, native: Any) -> np.ndarray:
        value = np.asarray(self.backend.to_numpy(native))
        return perturbed(value) if self.perturb else value


_NATIVE = object()  # marks the array leaves of a traced result


def computation_dtype(arrays: list[np.ndarray], kwargs: dict) -> str:
    """float64 where an input (or the ``dtype`` argument) is float64, else float32 (Keras' floatx)."""
    asked = kwargs.get("dtype")
    wide = any(a.dtype == np.float64 for a in arrays)
    try:
        wide = wide or (asked is not None and np.dtype(asked) == np.float64)
    except TypeError:
        pass
    return "float64" if wide else "float32"


def _structure_key(template: Any) -> str:
    """A hashable description of a call's arguments with the arrays left out (``repr`` keeps types and values)."""
    return repr(template)


def perturbed(value: np.ndarray) -> np.ndarray:
    """``value`` changed beyond any test's tolerance (see :data:`PERTURBATION`), dtype kept."""
    if value.dtype.kind in "fc":
        return (value + PERTURBATION * (1 + np.abs(value))).astype(value.dtype)
    if value.dtype.kind in "iu":
        return value + np.ones((), value.dtype)
    if value.dtype.kind == "b":
        return ~value
    return value


class ToolkitFunction:
    """A Keras op replaced by the toolkit's op of the same name."""

    def __init__(self, name: str, original: Callable, runner: Runner) -> None:
        self.name, self.original, self.runner = name, original, runner
        self.__wrapped__ = original
        self.__name__ = self.__qualname__ = name
        self.__doc__ = original.__doc__
        self.__signature__ = inspect.signature(original)

    def __call__(self, *args, **kwargs):
        if RECORDER.depth and self.runner._ops is None:  # called by a Keras op: Keras' own
            return self.original(*args, **kwargs)
        reason = out_of_scope(args, kwargs)
        if reason is not None:
            RECORDER.record.out_of_scope[self.name] = reason
            return _as_keras(self.original, args, kwargs)
        RECORDER.record.toolkit.add(self.name)
        if self.name in FUNCTION_MAKERS and self.runner._ops is None:
            return functools.wraps(args[0] if args and callable(args[0]) else self)(
                lambda *call_args, **call_kwargs: self.runner(self.name, call_args, call_kwargs, made=(args, kwargs)))
        return self.runner(self.name, args, kwargs)


class KerasFunction:
    """A Keras op the toolkit lacks: Keras' own, its calls recorded."""

    def __init__(self, name: str, original: Callable) -> None:
        self.name, self.original = name, original
        self.__wrapped__ = original
        self.__name__ = self.__qualname__ = name
        self.__doc__ = original.__doc__

    def __call__(self, *args, **kwargs):
        if not RECORDER.depth:
            self.record(args, kwargs)
        return _as_keras(self.original, args, kwargs)

    def record(self, args: tuple, kwargs: dict) -> None:
        reason = out_of_scope(args, kwargs)
        if reason is not None:
            RECORDER.record.out_of_scope[self.name] = reason
        elif self.name not in HELPERS:
            RECORDER.record.keras.add(self.name)


def _as_keras(function: Callable, args: tuple, kwargs: dict):
    RECORDER.depth += 1
    try:
        return function(*args, **kwargs)
    finally:
        RECORDER.depth -= 1


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def replaced_class(cls: type, function: ToolkitFunction | KerasFunction) -> type:
    """A subclass of the Keras op class ``cls`` whose instances, called by a test, call ``function`` (the replaced
    function of the same op) with the constructor's and the call's arguments, matched by name to the function's
    parameters (``Einsum(subscripts)(*operands)`` is ``einsum(subscripts, *operands)``); where the toolkit lacks the
    op, they run as Keras' own with the call recorded. Called inside a Keras function (``pad`` is
    ``Pad(pad_width, mode)(x, ...)``), it is Keras' own."""
    init, call = inspect.signature(cls.__init__), inspect.signature(cls.call)

    def __init__(self, *args, **kwargs):
        bound = init.bind(self, *args, **kwargs)
        bound.apply_defaults()
        self._suite_options = _named(bound)
        cls.__init__(self, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        if RECORDER.depth or isinstance(function, KerasFunction):
            if not RECORDER.depth:
                function.record(args, kwargs)
            return _as_keras(cls.__call__, (self, *args), kwargs)
        bound = call.bind(self, *args, **kwargs)
        arguments = function.__signature__.bind(**{**self._suite_options, **_named(bound, var_positional=False)})
        for name, value in bound.arguments.items():  # a *operands of call is the function's *operands
            if call.parameters[name].kind == inspect.Parameter.VAR_POSITIONAL:
                arguments = function.__signature__.bind(*arguments.args, *value, **arguments.kwargs)
        return function(*arguments.args, **arguments.kwargs)

    return types.new_class(cls.__name__, (cls,), exec_body=lambda ns: ns.update(
        __init__=__init__, __call__=__call__, __module__=cls.__module__, __qualname__=cls.__qualname__))


def _named(bound: inspect.BoundArguments, var_positional: bool = False) -> dict[str, Any]:
    """A bound call's arguments by name, without ``self``, ``name`` and the ``*args`` (unless ``var_positional``);
    ``**kwargs`` spread out."""
    named = {}
    for key, value in list(bound.arguments.items())[1:]:
        kind = bound.signature.parameters[key].kind
        if kind == inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        elif kind != inspect.Parameter.VAR_POSITIONAL and key != "name":
            named[key] = value
    return named


def _fits(cls: type, function: Callable) -> bool:
    """Whether every constructor and call argument of op class ``cls`` is an argument of ``function`` (so the class
    can be called as the function)."""
    try:
        wanted = {name for method in (cls.__init__, cls.call)
                  for name, p in inspect.signature(method).parameters.items()
                  if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
        return wanted - {"self", "name"} <= set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False


def install(runner: Runner | None, op_names: frozenset[str] | None = None) -> dict[str, dict[str, str]]:
    """Replace Keras' ops (in :data:`KERAS_OP_MODULES` and every loaded ``keras.ops``/``keras.src.ops``/
    ``keras.api.ops`` namespace that re-exports them) by the toolkit's where it has the op (``op_names``, default
    :func:`toolkit_op_names`), by recorders elsewhere; with no ``runner``, by recorders everywhere (Keras' own run).
    Returns ``{module: {name: "toolkit" | "keras"}}``."""
    import importlib

    from keras.src.ops.operation import Operation

    if runner is None:
        op_names = frozenset()
    elif op_names is None:
        op_names = toolkit_op_names()
    replacements: dict[int, Any] = {}  # id(original) -> replacement
    kinds: dict[str, dict[str, str]] = {}
    for module_name in KERAS_OP_MODULES:
        module = importlib.import_module(module_name)
        kinds[module_name] = {}
        for name, value in list(vars(module).items()):
            if name.startswith("_") or getattr(value, "__module__", None) != module_name:
                continue
            if inspect.isfunction(value):
                replacement = (ToolkitFunction(name, value, runner) if name in op_names
                               else KerasFunction(name, value))
                kinds[module_name][name] = "toolkit" if name in op_names else "keras"
                replacements[id(value)] = replacement
                setattr(module, name, replacement)
        for name, value in list(vars(module).items()):
            if isinstance(value, type) and issubclass(value, Operation) and value.__module__ == module_name:
                function = getattr(module, _snake_case(name), None)
                if isinstance(function, (ToolkitFunction, KerasFunction)) and _fits(value, function.original):
                    replacements[id(value)] = replaced_class(value, function)
                    setattr(module, name, replacements[id(value)])
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith(("keras.src.ops", "keras.ops", "keras.api.ops")):
            continue
        if module_name in KERAS_OP_MODULES:
            continue
        for name, value in list(vars(module).items()):
            if id(value) in replacements and not name.startswith("_"):
                setattr(module, name, replacements[id(value)])
    return kinds
