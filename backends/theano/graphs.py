"""What the Theano family's op modules share: the engine's symbols (under names that hold for Aesara and PyTensor),
static-shape helpers (the graph must keep sizes the compiled step reads), NaN-propagating maxima, :class:`JaxOp`,
an op whose computation is a JAX function (:class:`JaxFunction` of a table, :class:`JaxElementwise` of one
``jax.numpy`` function), and the JAX conversions of engine ops whose own conversion gives wrong values
(:func:`_fix_jax_conversions`)."""

from __future__ import annotations

import importlib

import numpy as np

from toolkit.errors import DTypeError
from toolkit.errors import ShapeError as ToolkitShapeError

from .environment import import_framework, imported

theano, jax = import_framework()

tt = theano.tensor
clone_replace = imported("graph.basic", "clone_replace")
true_divide = imported("tensor", "true_divide")
floor_divide = imported("tensor", "floor_divide")
Supervisor = imported("compile.function.types", "Supervisor")
get_mode = imported("compile.mode", "get_mode")
DisconnectedType = imported("gradient", "DisconnectedType")
Apply = imported("graph.basic", "Apply")
Constant = imported("graph.basic", "Constant")
io_toposort = imported("graph.basic", "io_toposort")
FunctionGraph = imported("graph.fg", "FunctionGraph")
Op = imported("graph.op", "Op")
jax_funcify = imported("link.jax.dispatch", "jax_funcify")
ShapeError = imported("tensor.exceptions", "ShapeError")
TensorSharedVariable = imported("tensor.sharedvar", "TensorSharedVariable")
log_softmax = imported("tensor.special", "log_softmax")
softmax = imported("tensor.special", "softmax")
TensorVariable = imported("tensor.var", "TensorVariable")
zero_grad = imported("gradient", "zero_grad")
disconnected_grad = imported("gradient", "disconnected_grad")
#: The real dtypes the engine's tensors can hold (no float8 or bfloat16: a cast to one is refused, not a KeyError).
ENGINE_DTYPES = frozenset(t.dtype for t in imported("scalar.basic", "all_types") if not t.dtype.startswith("complex"))


def shape_of(x) -> list:
    """Each axis as a Python int where the type knows it (always, as the backend compiles), else symbolic. Ints keep
    shape arithmetic out of the graph: Aesara re-runs its shape rewrites for every symbolic shape it allocates."""
    return [size if size is not None else x.shape[axis] for axis, size in enumerate(x.type.shape)]


def int64_sizes(sizes) -> list:
    """Static sizes as int64 constants, for a shape an op allocates or broadcasts to. A Python int becomes the
    smallest integer constant that holds it (int8 for 16), and PyTensor 3.0 rewrites the sum of an ``alloc``
    (``sum(ones(shape))``) into the product of its sizes in that dtype: 16 * 8 * 8 overflowed int8 to 0, so batch
    statistics divided by 1."""
    return [np.int64(size) if isinstance(size, (int, np.integer)) else size for size in sizes]


def int64_shape(x) -> list:
    return int64_sizes(shape_of(x))


def reduced(out, x, axis, keepdims: bool):
    """``out``, a reduction of ``x`` over ``axis``, with the static sizes of the axes it keeps."""
    axes = range(x.ndim) if axis is None else [a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis)]
    shape = [1 if i in axes else size for i, size in enumerate(x.type.shape) if keepdims or i not in axes]
    return tt.specify_shape(out, tuple(shape))


def joined_shape(xs, axis: int) -> tuple:
    """The static shape of ``xs`` joined along ``axis``: each other axis's size where any input knows it, the sum
    along ``axis`` where every input knows its size."""
    shapes = [tuple(x.type.shape) for x in xs]
    axis %= len(shapes[0])
    sizes = [next((s[i] for s in shapes if s[i] is not None), None) for i in range(len(shapes[0]))]
    along = [s[axis] for s in shapes]
    sizes[axis] = None if None in along else sum(along)
    return tuple(sizes)


def indexed_shape(shape: tuple, key) -> tuple:
    """The static shape of ``x[key]`` (basic indexing) for ``x`` of static ``shape``: NumPy indexes two stand-ins
    of no memory whose unknown axes have different sizes; a result axis is known where both agree."""
    def result(unknown: int) -> tuple:
        sizes = tuple(unknown if size is None else size for size in shape)
        return np.lib.stride_tricks.as_strided(np.zeros(1), sizes, (0,) * len(sizes))[key].shape

    return tuple(a if a == b else None for a, b in zip(result(1_000_003), result(1_000_033)))


def padded(x, pads, value):
    """``x`` inside a constant ``value`` frame, ``pads[i] = (before, after)`` per axis: plain allocation and
    ``set_subtensor``, which every linker runs and differentiates."""
    shape = shape_of(x)
    frame = tt.alloc(tt.constant(value, dtype=x.dtype), *int64_sizes(s + a + b for s, (a, b) in zip(shape, pads)))
    return tt.set_subtensor(frame[tuple(slice(a, a + s) for s, (a, _) in zip(shape, pads))], x)


def first_unless(beats, x1, x2):
    """``x2`` where ``beats(x2, x1)`` or ``x2`` is NaN, else ``x1``: a maximum (``tt.gt``) or minimum (``tt.lt``)
    whose tie keeps ``x1`` (its gradient goes there, as TensorFlow's does) and where NaN from either side propagates,
    as in NumPy, JAX and TensorFlow (a bare ``switch(x1 >= x2, x1, x2)`` drops a NaN ``x1``)."""
    x2 = tt.as_tensor_variable(x2)
    take = beats(x2, x1)
    if x2.dtype.startswith("float"):
        take = tt.or_(take, tt.isnan(x2))
    return select(take, x2, x1)


def select(condition, x1, x2):
    """``tt.switch``; an integer or boolean result has no gradient path (disconnected): Aesara's scalar switch gives
    its discrete branches the Python float 0.0 as gradient, which breaks differentiating any graph it is in (an
    integer index clipped inside a model: AttributeError 'float' object has no attribute 'type'; PyTensor fixed it)."""
    out = tt.switch(condition, x1, x2)
    return out if out.dtype.startswith(("float", "complex")) else disconnected_grad(out)


class JaxOp(Op):
    """An op whose computation is a JAX function (:meth:`function`, cached in ``_functions``): the JAX linker calls
    it in its compiled step; the C linker runs it on the host. Never folded: its inputs are rarely constant, and
    tracing it to fold would cost a compilation."""

    _functions: dict

    def function(self):
        raise NotImplementedError

    def perform(self, node, inputs, outputs):
        on_host(self.function(), inputs, outputs, self._functions)

    def do_constant_folding(self, fgraph, node):
        return False


@jax_funcify.register(JaxOp)
def _jax_op(op, **kwargs):
    return op.function()


class JaxFunction(JaxOp):
    """A JAX function of a table (``functions()``: name -> a function of arrays and static options returning a tuple
    of arrays) as an op, made with the function's name and options. Output shapes and dtypes come from
    ``jax.eval_shape`` (inputs of static shape); its gradient is ``jax.vjp`` of the same function
    (:class:`JaxFunctionGradient`). Subclasses give the table."""

    __props__ = ("name", "options")

    @staticmethod
    def functions() -> dict:
        raise NotImplementedError

    def __init__(self, name: str, *options) -> None:
        self.name, self.options = name, tuple(options)
        self._functions: dict = {}

    def bound(self):
        """The table's function with this op's options bound: arrays in, a tuple of arrays out."""
        fn, options = self.functions()[self.name], self.options
        return lambda *xs: fn(*xs, *options)

    def function(self):
        if "forward" not in self._functions:
            fn = self.bound()
            self._functions["forward"] = lambda *xs: as_outputs(fn(*xs))
        return self._functions["forward"]

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(x) for x in inputs]
        if any(None in x.type.shape for x in inputs):
            raise ToolkitShapeError(f"ops.{self.name} needs inputs of static shape, got "
                                    f"{[x.type.shape for x in inputs]}")
        specs = [jax.ShapeDtypeStruct(x.type.shape, x.dtype) for x in inputs]
        outputs = jax.eval_shape(self.bound(), *specs)
        return Apply(self, inputs, [tt.tensor(dtype=str(o.dtype), shape=o.shape) for o in outputs])

    def infer_shape(self, fgraph, node, shapes):
        return [tuple(o.type.shape) for o in node.outputs]

    def L_op(self, inputs, outputs, output_grads):
        cotangents = [tt.zeros_like(o) if isinstance(g.type, DisconnectedType) else g
                      for o, g in zip(outputs, output_grads)]
        grads = JaxFunctionGradient(self, len(inputs))(*inputs, *cotangents)
        return list(grads) if isinstance(grads, (list, tuple)) else [grads]

    pullback = L_op  # PyTensor 3's name for L_op


class JaxFunctionGradient(JaxOp):
    """The vector-Jacobian product of a :class:`JaxFunction` for its inputs (``jax.vjp`` of the same function); the
    inputs are the function's, then one cotangent per output. Not differentiable again."""

    __props__ = ("op", "count")

    def __init__(self, op: JaxFunction, count: int) -> None:
        self.op, self.count = op, count  # the forward op and how many inputs it has
        self._functions: dict = {}

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(x) for x in inputs]
        return Apply(self, inputs, [x.type() for x in inputs[:self.count]])

    def function(self):
        if "vjp" not in self._functions:
            fn, count = self.op.bound(), self.count

            def vjp(*values):
                primals, cotangents = values[:count], values[count:]
                return as_outputs(tuple(jax.vjp(fn, *primals)[1](tuple(cotangents))))

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return shapes[:len(node.outputs)]


class JaxElementwise(JaxOp):
    """A broadcasting ``jax.numpy`` function (``jnp.<name>``) of arrays of one dtype, for what the engines lack.
    Only ``nextafter`` is differentiable: its gradient is the output's for ``x1`` (TensorFlow's), none for ``x2``;
    the integer functions have no gradient."""

    __props__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        self._functions: dict = {}

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        ndim = max(i.ndim for i in inputs)
        shapes = [(1,) * (ndim - i.ndim) + tuple(i.type.shape) for i in inputs]
        shape = tuple(None if None in sizes else max(sizes) if min(sizes) != 0 else 0 for sizes in zip(*shapes))
        return Apply(self, inputs, [tt.tensor(dtype=inputs[0].dtype, shape=shape)])

    def function(self):
        if "forward" not in self._functions:
            self._functions["forward"] = getattr(jax.numpy, self.name)
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        shape = node.outputs[0].type.shape
        if None in shape:
            raise ShapeError("an elementwise result of unknown shape")  # the engine then asks the output
        return [tuple(np.int64(size) for size in shape)]

    def connection_pattern(self, node):
        return [[self.name == "nextafter" and i == 0] for i in range(len(node.inputs))]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0], DisconnectedType()()]  # nextafter's; the others are not connected

    pullback = L_op  # PyTensor 3's name for L_op


def as_outputs(values: tuple):
    """A JAX conversion's result as Aesara's JAX linker takes it: one value for an op with one output."""
    return values[0] if len(values) == 1 else values


def on_host(function, inputs, outputs, cache) -> None:
    """Run a loop's JAX function on the host CPU for the C linker (and Aesara's Python fallback)."""
    if "jit" not in cache:
        cache["jit"] = jax.jit(function)
    with jax.default_device(jax.devices("cpu")[0]):
        results = cache["jit"](*inputs)
    for storage, value in zip(outputs, results if len(outputs) > 1 else (results,)):
        storage[0] = np.asarray(value)


def _fix_jax_conversions() -> None:
    """JAX conversions that replace the engine's own where those give wrong values under the JAX linker:

    - ``Softplus`` (both engines): the engine's piecewise form (``exp(x)`` below -37, ``log1p(exp(x))``, ``x +
      exp(-x)`` above 18, ``x`` above 33.3) as ``jnp.where`` of every branch, whose ``jax.vjp`` is NaN wherever a
      branch not taken overflows (``0 * inf``): the gradient of a loop (``ops.scan``, differentiated by JAX) through
      ``ops.logaddexp`` or a log-sigmoid of a large ``|x|``. The same branches, each on an argument clamped to its
      own range: the same values, and a finite gradient.
    - Aesara's ``MaxAndArgmax`` (a maximum and an argmax of one tensor over one axis, merged into one node): its
      conversion transposes by a traced array of axes (TracerIntegerConversionError). Static axes here.
    """
    jnp = jax.numpy

    @jax_funcify.register(imported("scalar", "Softplus"))
    def jax_funcify_Softplus(op, **kwargs):
        def softplus(x):
            return jnp.where(x < -37.0, jnp.exp(jnp.minimum(x, -37.0)),
                             jnp.where(x < 18.0, jnp.log1p(jnp.exp(jnp.minimum(x, 18.0))),
                                       jnp.where(x < 33.3, x + jnp.exp(-jnp.maximum(x, 18.0)), x)))

        return softplus

    max_and_argmax = getattr(importlib.import_module(f"{theano.__name__}.tensor.math"), "MaxAndArgmax", None)
    if max_and_argmax is None:  # PyTensor has separate Max and Argmax ops
        return

    @jax_funcify.register(max_and_argmax)
    def jax_funcify_MaxAndArgmax(op, node=None, **kwargs):
        axes, dtype = op.axis, node.outputs[1].dtype

        def maxandargmax(x):
            reduced = tuple(range(x.ndim)) if axes is None else tuple(int(a) for a in axes)
            kept = [a for a in range(x.ndim) if a not in reduced]
            last = jnp.transpose(x, (*kept, *reduced))  # the reduced axes last, flattened into one
            flat = last.reshape(last.shape[:len(kept)] + (-1,))
            return jnp.max(x, axis=reduced), jnp.argmax(flat, axis=-1).astype(dtype)

        return maxandargmax


_fix_jax_conversions()


def checked_cast(x, dtype: str):
    """``tt.cast`` to a dtype the engine has, else a DTypeError naming it."""
    if str(dtype) not in ENGINE_DTYPES:
        raise DTypeError(f"cast to {dtype}: {theano.__name__} has no such dtype; it has "
                         f"{', '.join(sorted(ENGINE_DTYPES))}")
    return tt.cast(x, dtype)


def outer_values(inner_inputs: list, outputs: list) -> list:
    """The variables the step's graph reads from outside it: inputs of its nodes (or outputs) that do not depend on
    the step's own inputs and are not constants (parameters, values computed before the loop)."""
    nodes = io_toposort(inner_inputs, outputs)
    dependent = set(inner_inputs)
    for node in nodes:
        if any(i in dependent for i in node.inputs):
            dependent.update(node.outputs)
    found: dict = {}
    for node in nodes:
        if node.outputs[0] in dependent:
            for i in node.inputs:
                if i not in dependent and not isinstance(i, Constant):
                    found.setdefault(i, None)
    for o in outputs:
        if o not in dependent and not isinstance(o, Constant):
            found.setdefault(o, None)
    return list(found)
