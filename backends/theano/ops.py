"""The neutral ops (:class:`toolkit.nn.ops.Ops`) as Theano-family (Aesara, PyTensor) graph ops. They build
symbolic graphs; the backend compiles them with the JAX linker (for devices) or the C linker. Arguments arrive as
variables of the dtypes the core chose (see ``toolkit.nn.ops.ARGUMENTS``)."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from toolkit.nn.context import MIX32_STEPS, UNIFORM_BITS
from toolkit.nn.ops import Ops
from toolkit.nn.shapes import check_conv, check_matmul, output_size, same_padding, window

from .environment import import_framework, imported

theano, jax = import_framework()

import jax.numpy as jnp  # noqa: E402

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


def _shape(x) -> list:
    """Each axis as a Python int where the type knows it (always, as the backend compiles), else symbolic. Ints keep
    shape arithmetic out of the graph: Aesara re-runs its shape rewrites for every symbolic shape it allocates."""
    return [size if size is not None else x.shape[axis] for axis, size in enumerate(x.type.shape)]


def _int64(sizes) -> list:
    """Static sizes as int64 constants, for a shape an op allocates or broadcasts to. A Python int becomes the
    smallest integer constant that holds it (int8 for 16), and PyTensor 3.0 rewrites the sum of an ``alloc``
    (``sum(ones(shape))``) into the product of its sizes in that dtype: 16 * 8 * 8 overflowed int8 to 0, so batch
    statistics divided by 1."""
    return [np.int64(size) if isinstance(size, (int, np.integer)) else size for size in sizes]


def _int64_shape(x) -> list:
    return _int64(_shape(x))


def _reduced(out, x, axis, keepdims: bool):
    """``out``, a reduction of ``x`` over ``axis``, with the static sizes of the axes it keeps."""
    axes = range(x.ndim) if axis is None else [a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis)]
    shape = [1 if i in axes else size for i, size in enumerate(x.type.shape) if keepdims or i not in axes]
    return tt.specify_shape(out, tuple(shape))


def _joined(xs, axis: int) -> tuple:
    """The static shape of ``xs`` joined along ``axis``: each other axis's size where any input knows it, the sum
    along ``axis`` where every input knows its size."""
    shapes = [tuple(x.type.shape) for x in xs]
    axis %= len(shapes[0])
    sizes = [next((s[i] for s in shapes if s[i] is not None), None) for i in range(len(shapes[0]))]
    along = [s[axis] for s in shapes]
    sizes[axis] = None if None in along else sum(along)
    return tuple(sizes)


def _indexed(shape: tuple, key) -> tuple:
    """The static shape of ``x[key]`` (basic indexing) for ``x`` of static ``shape``: NumPy indexes two stand-ins
    of no memory whose unknown axes have different sizes; a result axis is known where both agree."""
    def result(unknown: int) -> tuple:
        sizes = tuple(unknown if size is None else size for size in shape)
        return np.lib.stride_tricks.as_strided(np.zeros(1), sizes, (0,) * len(sizes))[key].shape

    return tuple(a if a == b else None for a, b in zip(result(1_000_003), result(1_000_033)))


def _padded(x, pads, value):
    """``x`` inside a constant ``value`` frame, ``pads[i] = (before, after)`` per axis: plain allocation and
    ``set_subtensor``, which every linker runs and differentiates."""
    shape = _shape(x)
    frame = tt.alloc(tt.constant(value, dtype=x.dtype), *_int64(s + a + b for s, (a, b) in zip(shape, pads)))
    return tt.set_subtensor(frame[tuple(slice(a, a + s) for s, (a, _) in zip(shape, pads))], x)


def _windows(x, size, strides, dilation, out):
    """The strided, dilated slices of an NHWC input, one per kernel offset ``(i, j)``: each ``[n, out_h, out_w, c]``.
    A convolution or a pooling is then a sum or a reduction over them: no gather, no scatter."""
    return {(i, j): x[:, i * dilation[0]:i * dilation[0] + (out[0] - 1) * strides[0] + 1:strides[0],
                      j * dilation[1]:j * dilation[1] + (out[1] - 1) * strides[1] + 1:strides[1], :]
            for i in range(size[0]) for j in range(size[1])}


def _frame(x, size, strides, dilation, padding, value):
    """``x`` padded for a window op (TensorFlow's "same" placement), and the output's height and width."""
    n, h, w, c = _shape(x)
    if padding == "same":
        pads = [same_padding(h, size[0], strides[0], dilation[0]), same_padding(w, size[1], strides[1], dilation[1])]
        x = _padded(x, [(0, 0), *pads, (0, 0)], value)
    return x, (output_size(h, size[0], strides[0], dilation[0], padding),
               output_size(w, size[1], strides[1], dilation[1], padding))


class TheanoOps(Ops):
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
        return tt.cast(value, dtype)

    def add(self, x1, x2):
        return tt.add(x1, x2)

    def subtract(self, x1, x2):
        return tt.sub(x1, x2)

    def multiply(self, x1, x2):
        return tt.mul(x1, x2)

    def divide(self, x1, x2):
        return true_divide(x1, x2)

    def floor_divide(self, x1, x2):
        return floor_divide(x1, x2)

    def mod(self, x1, x2):
        return tt.mod(x1, x2)

    def power(self, x1, x2):
        return tt.pow(x1, x2)

    def negative(self, x):
        return tt.neg(x)

    def abs(self, x):
        return tt.abs(x)

    def maximum(self, x1, x2):
        # switch, not tt.maximum: Aesara's maximum gives both operands the whole gradient at a tie, TensorFlow x1.
        return _first_unless(tt.gt, x1, x2)

    def minimum(self, x1, x2):
        return _first_unless(tt.lt, x1, x2)

    def greater(self, x1, x2):
        return tt.gt(x1, x2)

    def greater_equal(self, x1, x2):
        return tt.ge(x1, x2)

    def less(self, x1, x2):
        return tt.lt(x1, x2)

    def less_equal(self, x1, x2):
        return tt.le(x1, x2)

    def equal(self, x1, x2):
        return tt.eq(x1, x2)

    def not_equal(self, x1, x2):
        return tt.neq(x1, x2)

    def logical_and(self, x1, x2):
        return tt.and_(x1, x2)

    def logical_or(self, x1, x2):
        return tt.or_(x1, x2)

    def logical_not(self, x):
        return tt.invert(x)

    def where(self, condition, x1, x2):
        return tt.switch(condition, x1, x2)

    def relu(self, x):
        # switch, not maximum: maximum's gradient at x == 0 is not the 0 TensorFlow uses; x <= 0, not x > 0, so that
        # NaN stays NaN.
        return tt.switch(tt.le(x, 0), 0, x)

    def tanh(self, x):
        return tt.tanh(x)

    def sigmoid(self, x):
        return tt.sigmoid(x)

    def exp(self, x):
        return tt.exp(x)

    def log(self, x):
        return tt.log(x)

    def sqrt(self, x):
        return tt.sqrt(x)

    def square(self, x):
        return tt.square(x)

    def erf(self, x):
        return tt.erf(x)

    def sin(self, x):
        return tt.sin(x)

    def cos(self, x):
        return tt.cos(x)

    def softmax(self, x, axis=-1):
        return softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return log_softmax(x, axis=axis)

    def sum(self, x, axis=None, keepdims=False):
        return tt.sum(x, axis=axis, keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return tt.mean(x, axis=axis, keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return _reduced(tt.max(x, axis=axis, keepdims=keepdims), x, axis, keepdims)  # MaxAndArgmax forgets sizes

    def min(self, x, axis=None, keepdims=False):
        return _reduced(tt.min(x, axis=axis, keepdims=keepdims), x, axis, keepdims)

    def argmax(self, x, axis=None, keepdims=False):
        # Aesara's Argmax has no JAX conversion in 2.9; environment.py adds one.
        if axis is None:
            found = tt.argmax(tt.flatten(x), axis=0)
            return tt.cast(tt.reshape(found, [1] * x.ndim) if keepdims else found, "int32")
        return _reduced(tt.cast(tt.argmax(x, axis=axis, keepdims=keepdims), "int32"), x, axis, keepdims)

    def cumsum(self, x, axis=None):
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
            lead = _shape(a)[:-1]
            count = int(np.prod(lead)) if all(isinstance(n, int) for n in lead) else -1
            out = tt.dot(tt.reshape(a, (count, _shape(a)[-1])), b) if a.ndim > 2 else tt.dot(a, b)
            out = tt.reshape(out, (*lead, _shape(b)[-1])) if a.ndim > 2 else out
        else:
            batch = tuple(np.broadcast_shapes(tuple(_shape(a)[:-2]), tuple(_shape(b)[:-2])))
            a = tt.broadcast_to(a, _int64((*batch, *_shape(a)[-2:])))
            b = tt.broadcast_to(b, _int64((*batch, *_shape(b)[-2:])))
            count = int(np.prod(batch))
            out = tt.batched_dot(tt.reshape(a, (count, *_shape(a)[-2:])), tt.reshape(b, (count, *_shape(b)[-2:])))
            out = tt.reshape(out, (*batch, _shape(a)[-2], _shape(b)[-1]))  # sizes from the inputs: static
        if x2.ndim == 1:
            out = out[..., 0]
        return out[..., 0, :] if x1.ndim == 1 else out

    def reshape(self, x, shape):
        # A -1 is resolved here when the input's shape is static (as the backend compiles): Aesara would leave that
        # axis unknown, and later ops that need static sizes (matmul's batch axes, conv kernels) could not read it.
        shape, known = [int(s) for s in shape], x.type.shape
        if -1 in shape and None not in known:
            rest = int(np.prod([s for s in shape if s != -1]))
            shape[shape.index(-1)] = int(np.prod(known)) // rest if rest else 0
        return tt.reshape(x, tuple(shape))

    def transpose(self, x, axes=None):
        return tt.transpose(x, axes)

    def expand_dims(self, x, axis):
        return tt.expand_dims(x, axis)

    def squeeze(self, x, axis=None):
        return tt.squeeze(x, axis=axis)

    def broadcast_to(self, x, shape):
        return tt.broadcast_to(x, tuple(_int64(shape)))

    def cast(self, x, dtype):
        return tt.cast(x, dtype)

    def concatenate(self, xs, axis=0):
        return tt.specify_shape(tt.concatenate(list(xs), axis=axis), _joined(xs, axis))  # Join forgets all of it

    def stack(self, xs, axis=0):
        return tt.specify_shape(tt.stack(list(xs), axis=axis), _joined([tt.expand_dims(x, axis) for x in xs], axis))

    def pad(self, x, pad_width, constant_values=0):
        return _padded(x, [tuple(p) for p in pad_width], constant_values)

    def _index(self, native, key):
        return tt.specify_shape(native[key], _indexed(tuple(native.type.shape), key))  # slices forget sizes

    def _scan(self, step, init, xs, length, reverse, unroll):
        # The step is built once on fresh inputs; what it reads from outside becomes the loop op's extra inputs.
        carry = [tt.tensor(dtype=v.dtype, shape=v.type.shape) for v in init]
        x = [tt.tensor(dtype=v.dtype, shape=v.type.shape[1:]) for v in xs]
        new_carry, ys = step(carry, x)
        outputs = [*new_carry, *ys]
        outer = _outer_values(carry + x, outputs)
        fresh = [v.type() for v in outer]
        outputs = clone_replace(outputs, replace=dict(zip(outer, fresh)))
        loop = _Loop([*carry, *x, *fresh], outputs, len(carry), len(x), length, reverse, unroll)
        results = loop(*init, *xs, *outer)
        results = results if isinstance(results, (list, tuple)) else [results]
        return list(results[:len(carry)]), list(results[len(carry):])

    def _take(self, x, indices, axis):
        # Aesara's take forgets the static shape, which later ops (dropout's noise, attention) need.
        axis = axis % x.ndim
        shape = (*_shape(x)[:axis], *_shape(indices), *_shape(x)[axis + 1:])
        return tt.specify_shape(tt.take(x, indices, axis=axis), shape)

    def _take_along_axis(self, x, indices, axis):
        axis = axis % x.ndim
        shape = [i if a == axis else (s if s != 1 else i)
                 for a, (s, i) in enumerate(zip(_shape(x), _shape(indices)))]
        return tt.specify_shape(tt.take_along_axis(x, indices, axis=axis), shape)

    def ones_like(self, x):
        return tt.ones(_int64_shape(x), dtype=x.dtype)

    def zeros_like(self, x):
        return tt.zeros(_int64_shape(x), dtype=x.dtype)

    def one_hot(self, indices, depth):
        # A comparison with a constant arange, not indexing with arange(n): the JAX linker needs static arange bounds.
        return tt.eq(tt.shape_padright(indices), tt.arange(depth)).astype(self.dtype)

    def conv(self, inputs, kernel, strides=1, padding="valid", dilation_rate=1):
        # The engines' own conv ops have no JAX conversion. Under the JAX linker the convolution is one op that
        # becomes lax.conv_general_dilated (_Conv); under the C linker (or with unknown image sizes) an im2col: the
        # kernel-offset slices of the input side by side, times the flattened kernel, plain slicing, concatenation
        # and one matmul, which every linker runs and differentiates. The kernel's shape must be static.
        strides, dilation, padding = check_conv(inputs.ndim, kernel.ndim, strides, dilation_rate, padding)
        kh, kw, cin, cout = kernel.type.shape
        if None in (kh, kw, cin, cout):
            raise ValueError("ops.conv needs a kernel of static shape")
        _, h, w, _ = inputs.type.shape
        if self.linker == "jax" and None not in (h, w):
            pads = ((0, 0), (0, 0)) if padding == "valid" else tuple(
                same_padding(size, k, stride, d) for size, k, stride, d in zip((h, w), (kh, kw), strides, dilation))
            return _Conv(strides, pads, dilation)(inputs, kernel)
        x, out = _frame(inputs, (kh, kw), strides, dilation, padding, 0)
        n = _shape(x)[0]
        patches = tt.concatenate(list(_windows(x, (kh, kw), strides, dilation, out).values()), axis=3)
        flat = tt.dot(tt.reshape(patches, (n * out[0] * out[1], kh * kw * cin)), tt.reshape(kernel, (kh * kw * cin,
                                                                                                     cout)))
        return tt.reshape(flat, (n, *out, cout))

    def max_pool(self, inputs, pool_size, strides=None, padding="valid"):
        size, strides, padding = window(pool_size, strides, padding)
        x, out = _frame(inputs, size, strides, (1, 1), padding, -np.inf)
        # A chain of maxima over the window's offsets in row-major order: where entries tie, the gradient goes to the
        # first, as TensorFlow's MaxPoolGrad gives it (tt.max would give it to every tied entry, and ReLU outputs of
        # constant image regions do tie).
        larger = functools.partial(_first_unless, tt.gt)
        pooled = functools.reduce(larger, _windows(x, size, strides, (1, 1), out).values())
        return tt.specify_shape(pooled, (_shape(inputs)[0], *out, _shape(inputs)[3]))  # Aesara loses it in slices

    def average_pool(self, inputs, pool_size, strides=None, padding="valid"):
        size, strides, padding = window(pool_size, strides, padding)
        x, out = _frame(inputs, size, strides, (1, 1), padding, 0)
        total = functools.reduce(tt.add, _windows(x, size, strides, (1, 1), out).values())
        # How many entries of each window lie inside the input: a constant, computed with NumPy the same way.
        _, h, w, _ = _shape(inputs)
        ones, _ = _frame_numpy(np.ones((1, h, w, 1)), size, strides, padding)
        count = sum(ones[:, i:i + (out[0] - 1) * strides[0] + 1:strides[0], j:j + (out[1] - 1) * strides[1] + 1:
                         strides[1], :] for i in range(size[0]) for j in range(size[1]))
        return tt.specify_shape(total / tt.constant(count.astype(x.dtype)), (_shape(inputs)[0], *out,
                                                                             _shape(inputs)[3]))

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


def _first_unless(beats, x1, x2):
    """``x2`` where ``beats(x2, x1)`` or ``x2`` is NaN, else ``x1``: a maximum (``tt.gt``) or minimum (``tt.lt``)
    whose tie keeps ``x1`` (its gradient goes there, as TensorFlow's does) and where NaN from either side propagates,
    as in NumPy, JAX and TensorFlow (a bare ``switch(x1 >= x2, x1, x2)`` drops a NaN ``x1``)."""
    x2 = tt.as_tensor_variable(x2)
    take = beats(x2, x1)
    if x2.dtype.startswith("float"):
        take = tt.or_(take, tt.isnan(x2))
    return tt.switch(take, x2, x1)


def _frame_numpy(x: np.ndarray, size, strides, padding):
    """:func:`_frame` for a NumPy array (zeros around it for "same")."""
    if padding != "same":
        return x, None
    pads = [same_padding(x.shape[1], size[0], strides[0]), same_padding(x.shape[2], size[1], strides[1])]
    return np.pad(x, [(0, 0), *pads, (0, 0)]), None


class _JaxOp(Op):
    """An op whose computation is a JAX function (:meth:`function`, cached in ``_functions``): the JAX linker calls
    it in its compiled step; the C linker runs it on the host. Never folded: its inputs are rarely constant, and
    tracing it to fold would cost a compilation."""

    _functions: dict

    def function(self):
        raise NotImplementedError

    def perform(self, node, inputs, outputs):
        _on_host(self.function(), inputs, outputs, self._functions)

    def do_constant_folding(self, fgraph, node):
        return False


class _Loop(_JaxOp):
    """A whole ``ops.scan`` as one Aesara op: the step's graph is kept as an inner graph (rewritten once, as the
    JAX mode rewrites any graph) and becomes one ``jax.lax.scan``. Aesara never sees the loop unrolled, so its
    rewriting costs one step's graph whatever the length; the unrolled masked LSTM took 58 s to compile at 40 steps.
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
                return _as_outputs((*carry, *ys))

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
        return [[True] * len(node.outputs) for _ in node.inputs]


class _LoopGradient(_JaxOp):
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
                return _as_outputs(tuple(pullback(_as_outputs(tuple(cotangents)))))

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[i] for i in self.floats]


class _Conv(_JaxOp):
    """``ops.conv`` under the JAX linker: one op that is ``lax.conv_general_dilated`` (NHWC input, HWIO kernel),
    XLA's convolution, where the im2col graph (patches side by side, one matmul) made the bench ResNet's step
    1.4x plain JAX's. Its gradient is :class:`_ConvGradient`, ``jax.vjp`` of the same call. ``padding`` is explicit
    (before, after) pairs per spatial axis, TensorFlow's placement for "same"."""

    __props__ = ("strides", "padding", "dilation")  # equal convolutions are one op (Aesara merges their nodes)

    def __init__(self, strides, padding, dilation) -> None:
        self.strides, self.padding, self.dilation = tuple(strides), tuple(map(tuple, padding)), tuple(dilation)
        self._functions: dict = {}

    def make_node(self, inputs, kernel):
        inputs, kernel = tt.as_tensor_variable(inputs), tt.as_tensor_variable(kernel)
        n, h, w, _ = inputs.type.shape
        kh, kw, _, cout = kernel.type.shape
        out = [(size + a + b - (k - 1) * d - 1) // s + 1
               for size, k, s, d, (a, b) in zip((h, w), (kh, kw), self.strides, self.dilation, self.padding)]
        return Apply(self, [inputs, kernel], [tt.tensor(dtype=inputs.dtype, shape=(n, *out, cout))])

    def function(self):
        if "forward" not in self._functions:
            strides, padding, dilation = self.strides, self.padding, self.dilation

            def conv(inputs, kernel):
                return jax.lax.conv_general_dilated(inputs, kernel, strides, padding, rhs_dilation=dilation,
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))

            self._functions["forward"] = conv
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return [(shapes[0][0], *node.outputs[0].type.shape[1:])]

    def L_op(self, inputs, outputs, output_grads):
        return _ConvGradient(self)(*inputs, output_grads[0])

    pullback = L_op  # PyTensor 3's name for L_op


class _ConvGradient(_JaxOp):
    """The vector-Jacobian product of a :class:`_Conv` for its input and its kernel (XLA's transposed
    convolutions, as ``jax.vjp`` makes them). Not differentiable again: a gradient of it raises."""

    __props__ = ("conv",)

    def __init__(self, conv: _Conv) -> None:
        self.conv = conv
        self._functions: dict = {}

    def make_node(self, inputs, kernel, cotangent):
        inputs, kernel, cotangent = map(tt.as_tensor_variable, (inputs, kernel, cotangent))
        return Apply(self, [inputs, kernel, cotangent], [inputs.type(), kernel.type()])

    def function(self):
        if "vjp" not in self._functions:
            conv = self.conv.function()

            def vjp(inputs, kernel, cotangent):
                return jax.vjp(conv, inputs, kernel)[1](cotangent)

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return shapes[:2]


@jax_funcify.register(_JaxOp)
def _jax_op(op, **kwargs):
    return op.function()


def _as_outputs(values: tuple):
    """A JAX conversion's result as Aesara's JAX linker takes it: one value for an op with one output."""
    return values[0] if len(values) == 1 else values


def _on_host(function, inputs, outputs, cache) -> None:
    """Run a loop's JAX function on the host CPU for the C linker (and Aesara's Python fallback)."""
    if "jit" not in cache:
        cache["jit"] = jax.jit(function)
    with jax.default_device(jax.devices("cpu")[0]):
        results = cache["jit"](*inputs)
    for storage, value in zip(outputs, results if len(outputs) > 1 else (results,)):
        storage[0] = np.asarray(value)


def _outer_values(inner_inputs: list, outputs: list) -> list:
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
