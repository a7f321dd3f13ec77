"""The C linker's code where the engine's is slow: selects in elementwise loops and sums over leading axes, and the
rewrite that puts it in the toolkit's C-linker functions (:data:`REWRITE`, added by ``compiling.mode``).

Selects. ``Switch`` (``where``, a ReLU's gradient, every mask): the engines write ``z = cond ? a : b``, and where the
condition is loaded from an array (a mask computed once and used by several loops, as a ReLU's ``x <= 0`` is by its
gradients) gcc compiles it to a branch, which a ReLU's signs, as unpredictable as a coin, mispredict on about every
other element: measured on 2 M float32 elements (Aesara's C linker, this 2-core x86 machine, after warm-up)
8.1 ms with random signs and 0.73 ms with sorted ones. :class:`BitSelect` selects the bits instead (a mask of the
condition, and, or), which has no branch and gives the same bits as the select, NaN and signed zeros included:
1.5 ms there, and 9.0 -> 1.8 ms for a batch normalization's gradient through a ReLU; the bench ResNet's C-linker
step 380 -> 203 ms. A condition computed in the same loop keeps the engine's code (see :meth:`BitSelect.c_code`).

Sums. A batch normalization sums over every axis but the channels', twice forward and twice in its gradient: the
bench ResNet's step has 70 such sums. The engines' reduction loop walks the input through its general strided
indexing: 1.4 ms for 2 M float32 elements over three of four axes, 5.5 ms over two. :class:`LeadingSum` adds a
C-contiguous input's rows into float64 accumulators (as the engine's sum accumulates float32 in float64) in one
vectorized loop: 0.29 and 0.13 ms there; the bench ResNet's C-linker step 203 -> 150 ms (145 with the fused
ReLU's select left to gcc).
"""

from __future__ import annotations

import numpy as np

from .environment import import_framework, imported

theano, _ = import_framework()

tt = theano.tensor
Apply = imported("graph.basic", "Apply")
COp = imported("link.c.op", "COp")
Switch = imported("scalar", "Switch")
Elemwise = imported("tensor.elemwise", "Elemwise")
Sum = imported("tensor.math", "Sum")
node_rewriter = imported("graph.rewriting.basic", "node_rewriter")
in2out = imported("graph.rewriting.basic", "in2out")

#: The unsigned C type of each float dtype's width, whose bits :class:`BitSelect` selects; other dtypes (integers,
#: booleans: gcc selects them with a conditional move, no branch) keep the engine's code.
BITS = {"float32": "npy_uint32", "float64": "npy_uint64"}
#: Where in the engine's rewrite database the rewrite runs: after the canonical and specializing rewrites (which
#: look for ``Switch`` and ``Sum`` by their classes: before them they would no longer recognize them) and before
#: elementwise fusion (``elemwise_fusion`` at 49), which fuses ``BitSelect`` into its loops as any scalar operation
#: with C code.
POSITION = 48.9


class BitSelect(Switch):
    """``Switch`` whose C code selects bits rather than branching (see the module's docstring); the same values,
    gradient and Python implementation."""

    def c_code(self, node, name, inputs, outputs, sub):
        (cond, ift, iff), (z,) = inputs, outputs
        dtype = node.outputs[0].type.dtype
        if dtype not in BITS or node.inputs[0].owner is not None:
            # A condition computed in the same loop (a fused ReLU's x <= 0) is a comparison of values the loop
            # loaded, which gcc already selects without a branch: a fused ReLU 0.72 ms, 2.0 ms selecting bits.
            return super().c_code(node, name, inputs, outputs, sub)
        ctype, bits = node.outputs[0].type.dtype_specs()[1], BITS[dtype]
        # Both operands are loaded before the select (the engine's references load lazily, which is what lets gcc
        # branch); memcpy is how C reads a float's bits without breaking aliasing rules (compiled to a move). The
        # empty asm hides the mask's origin: gcc otherwise sees the select in the bit arithmetic and may compile it
        # as one again (2.0 ms against 1.5 with it).
        return (f"{{ {ctype} t_ = {ift}, f_ = {iff}; {bits} a_, b_;"
                f" memcpy(&a_, &t_, sizeof a_); memcpy(&b_, &f_, sizeof b_);"
                f" {bits} m_ = ({bits})0 - ({bits})({cond} != 0); __asm__(\"\" : \"+r\"(m_));"
                f" a_ = (a_ & m_) | (b_ & ~m_); memcpy(&{z}, &a_, sizeof a_); }}")

    def c_code_cache_version(self):
        return ("toolkit-bit-select", 5, *super().c_code_cache_version())


bit_select = BitSelect(name="bit_select")


@node_rewriter([Elemwise])
def local_bit_select(fgraph, node):
    """An elementwise ``Switch`` (the engine's class itself, not a subclass) as an elementwise :class:`BitSelect`."""
    if type(node.op.scalar_op) is not Switch:
        return None
    return Elemwise(bit_select, node.op.inplace_pattern).make_node(*node.inputs).outputs


class LeadingSum(COp):
    """The sum over an array's ``leading`` first axes, accumulated in float64 and cast to the input's float dtype:
    the engine's ``Sum(axis=range(leading))`` with its default ``acc_dtype``, in one loop over the rows of a
    C-contiguous copy (none when the input is already, as an elementwise loop's output is)."""

    __props__ = ("leading",)

    def __init__(self, leading: int) -> None:
        self.leading = int(leading)

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        if x.dtype not in BITS or not 0 < self.leading <= x.ndim:
            raise TypeError(f"LeadingSum({self.leading}) sums a float32 or float64 array of at least "
                            f"{self.leading} axes, got {x.type}")
        return Apply(self, [x], [tt.tensor(dtype=x.dtype, shape=x.type.shape[self.leading:])])

    def perform(self, node, inputs, outputs):
        (x,), (z,) = inputs, outputs
        z[0] = np.asarray(np.sum(x, axis=tuple(range(self.leading)), dtype=np.float64), dtype=x.dtype)

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[0][self.leading:]]

    def c_code(self, node, name, inputs, outputs, sub):
        (x,), (z,), fail = inputs, outputs, sub["fail"]
        ctype, typenum = node.inputs[0].type.dtype_specs()[1], f"NPY_{node.inputs[0].dtype.upper()}"
        lead = self.leading
        return f"""
        {{
            PyArrayObject* xc = PyArray_GETCONTIGUOUS({x});
            if (!xc) {fail}
            const int nd = PyArray_NDIM(xc);
            npy_intp rows = 1, cols = 1;
            for (int i = 0; i < {lead}; ++i) rows *= PyArray_DIMS(xc)[i];
            for (int i = {lead}; i < nd; ++i) cols *= PyArray_DIMS(xc)[i];
            Py_XDECREF({z});
            {z} = (PyArrayObject*)PyArray_EMPTY(nd - {lead}, PyArray_DIMS(xc) + {lead}, {typenum}, 0);
            double* acc = (double*)calloc(cols > 0 ? cols : 1, sizeof(double));
            if (!{z} || !acc) {{
                free(acc); Py_DECREF(xc);
                if (!PyErr_Occurred()) PyErr_NoMemory();
                {fail}
            }}
            const {ctype}* __restrict src = (const {ctype}*)PyArray_DATA(xc);
            for (npy_intp r = 0; r < rows; ++r) {{
                const {ctype}* __restrict row = src + r * cols;
                double* __restrict a = acc;
                for (npy_intp c = 0; c < cols; ++c) a[c] += row[c];
            }}
            {ctype}* dst = ({ctype}*)PyArray_DATA({z});
            for (npy_intp c = 0; c < cols; ++c) dst[c] = ({ctype})acc[c];
            free(acc);
            Py_DECREF(xc);
        }}
        """

    def c_code_cache_version(self):
        return (1,)


@node_rewriter([Sum])
def local_leading_sum(fgraph, node):
    """A float sum over leading axes that accumulates in float64 (the engine's default) as :class:`LeadingSum`."""
    (x,), op = node.inputs, node.op
    axes = tuple(range(x.ndim)) if op.axis is None else tuple(op.axis)
    if (x.dtype not in BITS or node.outputs[0].dtype != x.dtype or op.acc_dtype != "float64" or not axes
            or axes != tuple(range(len(axes)))):
        return None
    return [LeadingSum(len(axes))(x)]


#: The rewrite and its position, as the engine's ``Mode.register`` takes them.
REWRITE = (in2out(local_bit_select, local_leading_sum, name="toolkit_c_kernels"), POSITION)
