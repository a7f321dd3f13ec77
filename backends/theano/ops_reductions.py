"""Theano translation of :class:`toolkit.ops.reductions.ReductionOps`. Segment reductions are
:class:`~.graphs.JaxOp` s: the engines have no op of their own for them (a scatter of maxima has none either)."""

from __future__ import annotations

from .graphs import Apply, DisconnectedType, JaxOp, jax, reduced, tt


class _Prod(JaxOp):
    """``jnp.prod`` over ``axes`` in the input's dtype; its gradient (floats) is :class:`_FirstInputVjp`."""

    __props__ = ("axes", "keepdims")

    def __init__(self, axes: tuple, keepdims: bool) -> None:
        self.axes, self.keepdims = axes, keepdims
        self._functions: dict = {}

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        shape = self.infer_shape(None, None, [x.type.shape])[0]
        return Apply(self, [x], [tt.tensor(dtype=x.dtype, shape=shape)])

    def function(self):
        if "forward" not in self._functions:
            axes, keepdims = self.axes, self.keepdims
            self._functions["forward"] = lambda x: jax.numpy.prod(x, axis=axes, keepdims=keepdims).astype(x.dtype)
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return [tuple(1 if a in self.axes else size for a, size in enumerate(shapes[0])
                      if self.keepdims or a not in self.axes)]

    def connection_pattern(self, node):
        return [[node.inputs[0].dtype.startswith("float")]]

    def L_op(self, inputs, outputs, output_grads):
        if not inputs[0].dtype.startswith("float"):
            return [DisconnectedType()()]
        return [_FirstInputVjp(self)(*inputs, output_grads[0])]

    pullback = L_op  # PyTensor 3's name for L_op


class TheanoReductionOps:
    def _prod(self, x, axes, keepdims):
        # Not tt.prod: its gradient with zeros in the input goes through ProdWithoutZeros, whose JAX conversion calls
        # a jax.lax function that does not exist; JAX's own gradient of prod is exact at zeros.
        return _Prod(tuple(axes), bool(keepdims))(x)

    def _reduce_any(self, x, axes, keepdims):
        return reduced(tt.any(x, axis=axes, keepdims=keepdims), x, axes, keepdims)

    def _reduce_all(self, x, axes, keepdims):
        return reduced(tt.all(x, axis=axes, keepdims=keepdims), x, axes, keepdims)

    def _segment_reduce(self, data, segment_ids, num_segments, reduction):
        return _SegmentReduce(reduction, num_segments)(data, segment_ids)


def _segment_function(reduction: str, num_segments: int):
    """The segment reduction as a JAX function of ``(data, ids)``: ids outside ``[0, num_segments)`` go to one
    extra segment, dropped; an empty segment of max/min holds -inf/+inf for floats (JAX's, Keras' on JAX and
    NumPy), the dtype's lowest/highest value for integers."""
    reduce = {"sum": jax.ops.segment_sum, "prod": _segment_prod, "max": jax.ops.segment_max,
              "min": jax.ops.segment_min}[reduction]

    def segments(data, ids):
        jnp = jax.numpy
        ids = jnp.where((ids >= 0) & (ids < num_segments), ids, num_segments)
        found = reduce(data, ids, num_segments=num_segments + 1)[:num_segments].astype(data.dtype)
        if reduction in ("max", "min"):
            count = jax.ops.segment_sum(jnp.ones(ids.shape, "int32"), ids, num_segments=num_segments + 1)
            if jnp.issubdtype(data.dtype, jnp.floating):
                lowest, highest = -jnp.inf, jnp.inf
            else:
                lowest, highest = jnp.iinfo(data.dtype).min, jnp.iinfo(data.dtype).max
            empty = (count[:num_segments] == 0).reshape((-1,) + (1,) * (data.ndim - 1))
            found = jnp.where(empty, jnp.asarray(lowest if reduction == "max" else highest, data.dtype), found)
        return found

    return segments


def _segment_prod(data, ids, num_segments: int):
    """``jax.ops.segment_prod``'s values as a product over each segment's rows picked by a one-hot mask (``[segments,
    rows, ...]``): JAX differentiates ``prod`` (exactly at zeros too), while ``segment_prod``'s scatter-multiply has no
    gradient where ids repeat (NotImplementedError: scatter_mul gradients)."""
    jnp = jax.numpy
    member = (ids[None, :] == jnp.arange(num_segments)[:, None]).reshape((num_segments, -1) + (1,) * (data.ndim - 1))
    return jnp.prod(jnp.where(member, data[None], jnp.ones((), data.dtype)), axis=1)


class _SegmentReduce(JaxOp):
    """``jax.ops.segment_<reduction>`` of ``data``'s rows by int32 ids into ``num_segments`` rows; its gradient
    (for floating data) is :class:`_FirstInputVjp`."""

    __props__ = ("reduction", "num_segments")

    def __init__(self, reduction: str, num_segments: int) -> None:
        self.reduction, self.num_segments = reduction, num_segments
        self._functions: dict = {}

    def make_node(self, data, ids):
        data, ids = tt.as_tensor_variable(data), tt.as_tensor_variable(ids)
        shape = (self.num_segments, *data.type.shape[1:])
        return Apply(self, [data, ids], [tt.tensor(dtype=data.dtype, shape=shape)])

    def function(self):
        if "forward" not in self._functions:
            self._functions["forward"] = _segment_function(self.reduction, self.num_segments)
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return [(self.num_segments, *shapes[0][1:])]

    def connection_pattern(self, node):
        return [[node.inputs[0].dtype.startswith("float")], [False]]

    def L_op(self, inputs, outputs, output_grads):
        data, ids = inputs
        if not data.dtype.startswith("float"):
            return [DisconnectedType()(), DisconnectedType()()]
        return [_FirstInputVjp(self)(data, ids, output_grads[0]), DisconnectedType()()]

    pullback = L_op  # PyTensor 3's name for L_op


class _FirstInputVjp(JaxOp):
    """The vector-Jacobian product of a one-output :class:`JaxOp` for its first input (``jax.vjp`` of its function,
    the other inputs held): :class:`_Prod`'s, and :class:`_SegmentReduce`'s (max and min: to the rows that reach
    the segment's value, shared between ties, as TensorFlow's gradient gives it). Inputs: the op's, then the
    cotangent."""

    __props__ = ("forward",)

    def __init__(self, forward: JaxOp) -> None:
        self.forward = forward
        self._functions: dict = {}

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        return Apply(self, inputs, [inputs[0].type()])

    def function(self):
        if "vjp" not in self._functions:
            forward = self.forward.function()

            def vjp(first, *rest):
                *others, cotangent = rest
                return jax.vjp(lambda value: forward(value, *others), first)[1](cotangent)[0]

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[0]]
