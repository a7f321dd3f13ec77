"""The neutral ops (:class:`toolkit.ops.Ops`) as Theano-family (Aesara, PyTensor) graph ops. They build
symbolic graphs; the backend compiles them with the JAX linker (for devices) or the C linker. Arguments arrive as
variables of the dtypes the core chose (see ``toolkit.ops.interface.ARGUMENTS``)."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from toolkit.nn.context import MIX32_STEPS, UNIFORM_BITS
from toolkit.ops.interface import Ops
from toolkit.ops.window_shapes import check_matmul

from .graphs import (
    Apply,
    DisconnectedType,
    FunctionGraph,
    JaxOp,
    ShapeError,
    Supervisor,
    TensorSharedVariable,
    TensorVariable,
    as_outputs,
    checked_cast,
    clone_replace,
    floor_divide,
    get_mode,
    indexed_shape,
    int64_sizes,
    jax,
    jax_funcify,
    outer_values,
    reduced,
    shape_of,
    tt,
    zero_grad,
)
from .ops_arrays import TheanoArrayOps
from .ops_bits import TheanoBitOps
from .ops_core import TheanoCoreOps
from .ops_elementwise import TheanoElementwiseOps
from .ops_functional import TheanoFunctionalOps
from .ops_linalg import TheanoLinalgOps
from .ops_math import TheanoMathOps
from .ops_nn import TheanoNNOps
from .ops_reductions import TheanoReductionOps
from .ops_shapes import TheanoShapeOps
from .ops_signal import TheanoSignalOps
from .ops_sorting import TheanoSortingOps
from .ops_windows import TheanoWindowOps

jnp = jax.numpy  # jax as .graphs started it, the engine's way


def _tie_shared(extremum, x, axes, keepdims):
    """``extremum`` (the engine's max or min) of ``x`` over ``axes`` whose gradient is shared equally by the entries
    that tie for it, as TensorFlow's and JAX's is (Keras' ``ops.max`` on either). The engine's gives each tied entry
    the whole gradient: a global max pooling of the digits, whose equal pixel patches tie, moved 1e-5 away from
    TensorFlow in one float64 step.

    The value is the engine's, bit for bit: ``m - e`` with ``e`` an exact zero (a mean of ``m - x`` over the tied
    entries) whose gradient is the ties' share. An infinite extremum (where ``m - x`` is NaN) is the mean of its
    ties, exactly the infinity, with the same gradient. A NaN extremum keeps the engine's value and gradient (on
    TensorFlow it is NaN, and so is the loss it reaches)."""
    if not x.dtype.startswith("float"):
        return extremum(x, axis=axes, keepdims=keepdims)
    found = extremum(x, axis=axes, keepdims=True)
    held = zero_grad(found)
    ties = tt.eq(x, held)
    count = tt.sum(ties, axis=axes, keepdims=True, dtype=x.dtype)
    share = tt.sum(tt.switch(ties, held - x, 0), axis=axes, keepdims=True) / count
    spread = tt.sum(tt.switch(ties, x, 0), axis=axes, keepdims=True) / count
    value = tt.switch(tt.isnan(found), found, tt.switch(tt.isinf(found), spread, held - share))
    return value if keepdims else tt.squeeze(value, axis=axes)


class TheanoOps(TheanoElementwiseOps, TheanoShapeOps, TheanoMathOps, TheanoBitOps, TheanoArrayOps,
                TheanoReductionOps, TheanoSortingOps, TheanoLinalgOps, TheanoNNOps, TheanoWindowOps, TheanoSignalOps,
                TheanoCoreOps, TheanoFunctionalOps, Ops):
    def __init__(self, dtype: str, linker: str = "jax") -> None:
        super().__init__(dtype)
        self.linker = linker  # which convolution: XLA's under the JAX linker, the graph's own im2col under C

    def is_native(self, value):
        return isinstance(value, (TensorVariable, TensorSharedVariable))

    def constant(self, value):
        return tt.constant(value, dtype=value.dtype.name)

    def native_dtype(self, value):
        return value.dtype

    def native_shape(self, value):
        return tuple(value.type.shape)

    def native_cast(self, value, dtype):
        if value.dtype == "bool" and str(dtype).startswith("float"):
            # XLA rewrites a product with a boolean cast to a float into a select (and the engines a product with
            # switch(b, 1, 0) likewise), so that 0 * inf would be 0, not NaN (a crossentropy of a boolean target against
            # an infinite logit). Through abs, which neither rewrite looks into, the product keeps IEEE's values.
            return tt.abs(checked_cast(value, dtype))
        return checked_cast(value, dtype)

    def _sum(self, x, axes, keepdims):
        return tt.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)  # not Aesara's int64 for int32

    def _mean(self, x, axes, keepdims):
        return tt.mean(x, axis=axes, keepdims=keepdims)

    def _max(self, x, axes, keepdims):
        return reduced(_tie_shared(tt.max, x, axes, keepdims), x, axes, keepdims)  # MaxAndArgmax forgets sizes

    def _min(self, x, axes, keepdims):
        return reduced(_tie_shared(tt.min, x, axes, keepdims), x, axes, keepdims)

    def _argmax(self, x, axis, keepdims):
        # Aesara's Argmax has no JAX conversion in 2.9; environment.py adds one.
        if axis is None:
            found = tt.argmax(tt.flatten(x), axis=0)
            return tt.cast(tt.reshape(found, [1] * x.ndim) if keepdims else found, "int32")
        return reduced(tt.cast(tt.argmax(x, axis=axis, keepdims=keepdims), "int32"), x, axis, keepdims)

    def _cumsum(self, x, axis):
        return tt.cumsum(x, axis=axis)

    def matmul(self, x1, x2):
        # tt.matmul has no gradient in Aesara 2.9 (and computes float32 in float64); batch axes are broadcast and
        # folded into one for batched_dot, which has both.
        check_matmul(self.native_shape(x1), self.native_shape(x2))
        a = tt.shape_padleft(x1) if x1.ndim == 1 else x1
        b = tt.shape_padright(x2) if x2.ndim == 1 else x2
        if b.ndim == 2:
            # Rows times one matrix (a dense layer on sequences): the batch axes fold into the rows of one dot.
            # BatchedDot's C code calls BLAS's dgemm_ itself, which the C linker cannot link without a BLAS library.
            lead = shape_of(a)[:-1]
            count = int(np.prod(lead)) if all(isinstance(n, int) for n in lead) else -1
            out = tt.dot(tt.reshape(a, (count, shape_of(a)[-1])), b) if a.ndim > 2 else tt.dot(a, b)
            out = tt.reshape(out, (*lead, shape_of(b)[-1])) if a.ndim > 2 else out
        else:
            batch = tuple(np.broadcast_shapes(tuple(shape_of(a)[:-2]), tuple(shape_of(b)[:-2])))
            a = tt.broadcast_to(a, int64_sizes((*batch, *shape_of(a)[-2:])))
            b = tt.broadcast_to(b, int64_sizes((*batch, *shape_of(b)[-2:])))
            count = int(np.prod(batch))
            out = tt.batched_dot(tt.reshape(a, (count, *shape_of(a)[-2:])), tt.reshape(b, (count, *shape_of(b)[-2:])))
            out = tt.reshape(out, (*batch, shape_of(a)[-2], shape_of(b)[-1]))  # sizes from the inputs: static
        if x2.ndim == 1:
            out = out[..., 0]
        if x1.ndim == 1:  # the added row axis: the last one left where x2 is a vector too
            out = out[..., 0] if x2.ndim == 1 else out[..., 0, :]
        return out

    def _index(self, native, key):
        return tt.specify_shape(native[key], indexed_shape(tuple(native.type.shape), key))  # slices forget sizes

    def _scan(self, step, init, xs, length, reverse, unroll):
        # The step is built once on fresh inputs; what it reads from outside becomes the loop op's extra inputs.
        carry = [tt.tensor(dtype=v.dtype, shape=v.type.shape) for v in init]
        x = [tt.tensor(dtype=v.dtype, shape=v.type.shape[1:]) for v in xs]
        new_carry, ys = step(carry, x)
        outputs = [*new_carry, *ys]
        outer = outer_values(carry + x, outputs)
        fresh = [v.type() for v in outer]
        outputs = clone_replace(outputs, replace=dict(zip(outer, fresh)))
        loop = _Loop([*carry, *x, *fresh], outputs, len(carry), len(x), length, reverse, unroll)
        results = loop(*init, *xs, *outer)
        results = results if isinstance(results, (list, tuple)) else [results]
        return list(results[:len(carry)]), list(results[len(carry):])

    def _hash_uniform(self, keys, counters):
        def uint32(value):
            return tt.constant(np.uint32(value))

        # Aesara has no shift op: x >> k is the floor division by 2**k, exact on unsigned integers.
        x = tt.bitwise_xor(keys, counters)
        for shift, multiplier in MIX32_STEPS:
            x = tt.bitwise_xor(x, floor_divide(x, uint32(1 << shift)))
            if multiplier is not None:
                x = x * uint32(multiplier)  # uint32 products wrap modulo 2**32 (NumPy and JAX)
        top = floor_divide(x, uint32(1 << (32 - UNIFORM_BITS)))
        return tt.cast(top, self.dtype) * tt.constant(np.asarray(2.0 ** -UNIFORM_BITS, self.dtype))

    def all_finite(self, xs):
        # Aesara 2.9 has isnan and isinf but no isfinite.
        finite = [tt.all(tt.invert(tt.or_(tt.isnan(x), tt.isinf(x)))) for x in xs]
        return functools.reduce(tt.and_, finite)


class _Loop(JaxOp):
    """A whole ``ops.scan`` as one Aesara op: the step's graph is kept as an inner graph (rewritten once, as the
    JAX mode rewrites any graph) and becomes one ``jax.lax.scan``. Aesara never sees the loop unrolled, so its
    rewriting costs one step's graph whatever the length, where an unrolled loop's grows with its length.
    Aesara 2.9's own ``scan`` has no JAX conversion of its gradient, hence this op and :class:`_LoopGradient`
    (``jax.vjp`` of the same function). The C linker runs both through JAX on the host (:meth:`perform`).

    Inputs: the initial carry, the scanned sequences, then the outer values the step reads (parameters and the
    like, passed on unchanged); outputs: the last carry, then each per-step output stacked on a new axis 0."""

    def __init__(self, inner_inputs, inner_outputs, carries: int, sequences: int, length: int, reverse: bool,
                 unroll: int) -> None:
        self.fgraph = FunctionGraph(inner_inputs, inner_outputs, clone=True)
        self.fgraph.attach_feature(Supervisor(self.fgraph.inputs))  # rewrites must not destroy the step's inputs
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Skipping `CheckAndRaise` Op", category=UserWarning)
            get_mode("JAX").optimizer.rewrite(self.fgraph)
        self.carries, self.sequences, self.length = carries, sequences, length
        self.reverse, self.unroll = reverse, unroll
        self._functions: dict = {}

    def __eq__(self, other):
        return self is other  # each loop is its own op: never merged with another of the same inputs

    def __hash__(self):
        return id(self)

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        step_outputs = self.fgraph.outputs
        outputs = [i.type() for i in inputs[:self.carries]]
        outputs += [tt.tensor(dtype=o.dtype, shape=(self.length, *o.type.shape)) for o in step_outputs[self.carries:]]
        return Apply(self, inputs, outputs)

    def function(self):
        """The loop as a JAX function of the op's inputs, returning its outputs."""
        if "forward" not in self._functions:
            step, carries, sequences = jax_funcify(self.fgraph), self.carries, self.sequences
            dtypes = [o.dtype for o in self.fgraph.outputs]

            def body(carry, x, outer):
                outputs = step(*carry, *x, *outer)
                outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
                # A folded constant comes back float64 whatever the graph declares; the carry must keep its dtype.
                outputs = [jnp.asarray(o, d) for o, d in zip(outputs, dtypes)]
                return tuple(outputs[:carries]), tuple(outputs[carries:])

            def loop(*inputs):
                init, xs = inputs[:carries], inputs[carries:carries + sequences]
                outer = inputs[carries + sequences:]
                carry, ys = jax.lax.scan(lambda c, x: body(c, x, outer), tuple(init), tuple(xs), length=self.length,
                                         reverse=self.reverse, unroll=self.unroll)
                return as_outputs((*carry, *ys))

            self._functions["forward"] = loop
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        stacked = [tuple(o.type.shape) for o in node.outputs[self.carries:]]
        if any(None in shape for shape in stacked):
            raise ShapeError("a per-step output of unknown shape")  # Aesara then asks the output for its shape
        return [*shapes[:self.carries], *stacked]

    def L_op(self, inputs, outputs, output_grads):
        cotangents = [tt.zeros_like(o) if isinstance(g.type, DisconnectedType) else g
                      for o, g in zip(outputs, output_grads)]
        floats = [i for i, x in enumerate(inputs) if x.dtype.startswith("float")]
        found = _LoopGradient(self, floats)(*inputs, *cotangents)
        found = found if isinstance(found, (list, tuple)) else [found]
        grads = dict(zip(floats, found))
        return [grads[i] if i in grads else DisconnectedType()() for i in range(len(inputs))]

    pullback = L_op  # PyTensor 3's name for L_op (it warns that L_op will stop being called); Aesara calls L_op

    def connection_pattern(self, node):
        # Only floating inputs get a gradient (L_op): integer and boolean ones (a loop counter) are disconnected.
        return [[i.dtype.startswith("float")] * len(node.outputs) for i in node.inputs]


class _LoopGradient(JaxOp):
    """The vector-Jacobian product of a :class:`_Loop` for its floating inputs: ``jax.vjp`` of the loop's
    function, so the backward pass is JAX's reverse scan over the same step."""

    def __init__(self, loop: _Loop, floats: list[int]) -> None:
        self.loop, self.floats = loop, tuple(floats)
        self._functions: dict = {}

    def __eq__(self, other):
        return type(other) is _LoopGradient and other.loop is self.loop and other.floats == self.floats

    def __hash__(self):
        return hash((id(self.loop), self.floats))

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        return Apply(self, inputs, [inputs[i].type() for i in self.floats])

    def function(self):
        if "vjp" not in self._functions:
            loop, floats = self.loop.function(), self.floats

            def vjp(*inputs):
                count = len(inputs) - len(self.loop.fgraph.outputs)
                primals, cotangents = list(inputs[:count]), inputs[count:]

                def of_floats(*values):
                    full = list(primals)
                    for i, value in zip(floats, values):
                        full[i] = value
                    return loop(*full)

                _, pullback = jax.vjp(of_floats, *(primals[i] for i in floats))
                return as_outputs(tuple(pullback(as_outputs(tuple(cotangents)))))

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[i] for i in self.floats]
