"""The C linker's code where the engine's is slow: selects in elementwise loops, sums over leading axes and the
elementwise loop itself, and the rewrites that put it in the toolkit's C-linker functions (:data:`REWRITES`, added
by ``compiling.mode``). What each of them was measured to gain is on docs/guides/benchmarks.md ("Why the backends'
code looks as it does").

Selects. ``Switch`` (``where``, a ReLU's gradient, every mask): the engines write ``z = cond ? a : b``, and where the
condition is loaded from an array (a mask computed once and used by several loops, as a ReLU's ``x <= 0`` is by its
gradients) gcc compiles it to a branch, which a ReLU's signs, as unpredictable as a coin, mispredict on about every
other element. :class:`BitSelect` selects the bits instead (a mask of the condition, and, or), which has no branch
and gives the same bits as the select, NaN and signed zeros included. A condition computed in the same loop keeps
the engine's code (see :meth:`BitSelect.c_code`).

Sums. A batch normalization sums over every axis but the channels', twice forward and twice in its gradient: the
bench ResNet's step has 70 such sums. The engines' reduction loop walks the input through its general strided
indexing. :class:`LeadingSum` adds a C-contiguous input's rows into float64 accumulators (as the engine's sum
accumulates float32 in float64) in one vectorized loop.

Loops. The engines' elementwise loop is one level per axis with every operand's strides read at run time, which
gcc does not vectorize. :class:`RowElemwise` adds a loop taken where every operand is contiguous and spans the
output or its trailing axes (a batch normalization's channel vectors): unit strides, vectorized; the same scalar
code, so the same values (four models trained three steps in float32 and float64 on both engines: identical
parameters), but for the sign and payload of a NaN where two NaNs meet (which one an instruction returns differs
between its scalar and vector forms), as for the sums' NaNs and their float64 last bits (the order of the
additions). The loop is a function of its own in the generated code, so that gcc compiles it for speed: inline, it
compiled it unvectorized wherever the engine's checks before it made the loop look rarely run (see
:func:`_row_loop`).
"""

from __future__ import annotations

import numpy as np

from ..environment import import_framework, imported

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
#: Where :class:`RowElemwise` replaces the engine's elementwise ops: after fusion and the in-place rewrites (75),
#: which make new ops of the engine's class, and before the last merge (100).
ROWS_POSITION = 99
#: The fewest elements :class:`RowElemwise`'s inner loop runs over: a trailing operand shorter than this (a channel
#: vector of 16) is repeated to a whole number of its rows at least this long, so the loop spans several of the
#: output's rows (over one row of 16 elements, gcc's vectorized loop spent its time entering and leaving).
ROW_TILE = 256
#: The C macro defined around :class:`RowElemwise`'s loop, which scalar code may test (:class:`BitSelect`).
ROW_LOOP = "TOOLKIT_ROW_LOOP"


class BitSelect(Switch):
    """``Switch`` whose C code selects bits rather than branching (see the module's docstring); the same values,
    gradient and Python implementation."""

    def c_code(self, node, name, inputs, outputs, sub):
        (cond, ift, iff), (z,) = inputs, outputs
        dtype = node.outputs[0].type.dtype
        if dtype not in BITS or node.inputs[0].owner is not None:
            # A condition computed in the same loop (a fused ReLU's x <= 0) is a comparison of values the loop
            # loaded, which gcc already selects without a branch, faster than the bits' arithmetic.
            return super().c_code(node, name, inputs, outputs, sub)
        ctype, bits = node.outputs[0].type.dtype_specs()[1], BITS[dtype]
        # Both operands are loaded before the select (the engine's references load lazily, which is what lets gcc
        # branch); memcpy is how C reads a float's bits without breaking aliasing rules (compiled to a move). In the
        # engine's loop an empty asm hides the mask's origin, or gcc may see the select in the bit arithmetic and
        # compile it as one again, a branch; in RowElemwise's loop (ROW_LOOP defined) it is left out, since it stops
        # gcc vectorizing the loop.
        # Each operand goes first to the two's common type, as ``?:`` converts them, then to the output's.
        return (f"{{ __typeof__(true ? {ift} : {iff}) sel_t0 = {ift}, sel_f0 = {iff};"
                f" {ctype} sel_t = sel_t0, sel_f = sel_f0; {bits} sel_a, sel_b;"
                f" memcpy(&sel_a, &sel_t, sizeof sel_a); memcpy(&sel_b, &sel_f, sizeof sel_b);"
                f" {bits} sel_m = ({bits})0 - ({bits})({cond} != 0);\n"
                f"#ifndef {ROW_LOOP}\n__asm__(\"\" : \"+r\"(sel_m));\n#endif\n"
                f" sel_a = (sel_a & sel_m) | (sel_b & ~sel_m); memcpy(&{z}, &sel_a, sizeof sel_a); }}")

    def c_code_cache_version(self):
        version = super().c_code_cache_version()
        return ("toolkit-bit-select", 9, *version) if version else ()  # () as the engine's: never cached


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


class RowElemwise(Elemwise):
    """The engine's elementwise op with a second loop in its C code, taken at run time where every operand that is
    not a scalar is C-contiguous and spans either the whole output or the same trailing axes of it (a channel
    vector's ``[1, 1, 1, C]``): a loop over the output's rows and, inside it, over one row's elements at unit
    strides, which gcc vectorizes; elsewhere the engine's loop (general strides, one level per axis)."""

    def _c_all(self, node, nodename, inames, onames, sub):
        decl, checks, alloc, loop, rest = super()._c_all(node, nodename, inames, onames, sub)
        rows = _row_loop(self, node, nodename, inames, onames, sub)
        if rows is None:
            return decl, checks, alloc, loop, rest
        condition, code = rows
        return decl, checks, alloc, f"if ({condition}) {{\n{code}\n}} else {{\n{loop}\n}}", rest

    def c_code_cache_version_apply(self, node):
        version = super().c_code_cache_version_apply(node)
        return ("toolkit-rows", 10, *version) if version else ()  # () as the engine's: never cached


def row_split(node) -> int | None:
    """The axis at which :class:`RowElemwise`'s loop splits ``node``'s output, or None where its loop does not fit
    the node's types (the engine's loop alone). Every input that is not a scalar (all its axes broadcast) spans
    either the whole output (split 0 where none spans less) or the output's axes from the split on, broadcast along
    the ones before it (a channel vector's ``[1, 1, 1, C]``: split 3); not a broadcast axis after a spanned one
    (``[N, 1, 1, C]``), nor trailing inputs from different axes, nor scalars only, nor an output of fewer than two
    axes."""
    ndim = node.outputs[0].type.ndim
    if ndim < 2:
        return None
    splits, arrays = set(), 0
    for variable in node.inputs:
        kind, count = _kind(variable)
        if kind is None:
            return None
        if kind == "trailing":
            splits.add(count)
        arrays += kind != "scalar"
    if not arrays:  # scalars only (one element): nothing to gain
        return None
    return None if len(splits) > 1 else (splits.pop() if splits else 0)


def _kind(variable) -> tuple[str | None, int]:
    """An elementwise input's kind for :class:`RowElemwise`'s loop (``"scalar"``, ``"full"``, ``"trailing"`` or
    None) and how many leading axes it is broadcast along."""
    ones = [s == 1 for s in variable.type.shape]
    count = ones.index(False) if False in ones else len(ones)
    if count == len(ones):
        return "scalar", count
    if any(ones[count:]):
        return None, count
    return ("trailing" if count else "full"), count


def _row_loop(op, node, nodename, inames, onames, sub):
    """``(run-time condition, code)`` of :class:`RowElemwise`'s loop for ``node``, or None (:func:`row_split`)."""
    split, ndim = row_split(node), node.outputs[0].type.ndim
    if split is None:
        return None
    names, inputs = [], []
    for name, variable in zip(inames, node.inputs):  # once each (an input may be given twice)
        if name not in names:
            names.append(name), inputs.append(variable)
    kinds = {name: _kind(variable)[0] for name, variable in zip(names, inputs)}
    aliased = {node.outputs[o]: names[inputs.index(node.inputs[i])] for o, i in op.inplace_pattern.items()}
    arrays = [n for n in names if kinds[n] != "scalar"] + [o for o, v in zip(onames, node.outputs)
                                                            if v not in aliased]
    # Contiguous, and as large as their kind says: Aesara broadcasts an axis of unknown static size that is 1 at
    # run time, which the types cannot tell (a [None, 4] input of 1 row beside an output of 1000).
    first, tile = onames[0], ROW_TILE
    cols = f"PyArray_MultiplyList(PyArray_DIMS({first}) + {split}, {ndim - split})"  # a trailing operand's size
    sizes = [f"PyArray_SIZE({n}) == {f'PyArray_SIZE({first})' if kinds[n] == 'full' else cols}"
             for n in names if kinds[n] != "scalar"]
    condition = " && ".join([f"PyArray_IS_C_CONTIGUOUS({a})" for a in arrays] + sizes) or "1"
    ctype = {n: v.type.dtype_specs()[1] for n, v in zip(names, inputs)}
    ctype.update({o: v.type.dtype_specs()[1] for o, v in zip(onames, node.outputs)})
    head = [f"const npy_intp row_total = PyArray_SIZE({first});", f"const npy_intp row_cols = {cols};",
            # one row (the output no larger than its trailing inputs, which it may then write in place): no tiles
            f"const npy_intp row_block = row_cols == 0 || row_cols >= {tile} || row_total == row_cols ? row_cols"
            f" : ({tile} + row_cols - 1) / row_cols * row_cols;"]
    block, element = [], []
    for name in names:
        t = ctype[name]
        if kinds[name] == "scalar":
            head.append(f"{t}& {name}_i = (({t}*)PyArray_DATA({name}))[0];")
            continue
        head.append(f"{t}* {name}_p = ({t}*)PyArray_DATA({name});")
        if kinds[name] == "trailing":  # repeated to the block's length, so one loop runs over whole rows
            head += [f"{t} {name}_tile[{2 * tile}];", f"{t}* {name}_t = {name}_p;",
                     f"if (row_block != row_cols) {{ for (npy_intp row_j = 0; row_j < row_block; ++row_j) "
                     f"{name}_tile[row_j] = {name}_p[row_j % row_cols]; {name}_t = {name}_tile; }}"]
            element.append(f"{t}& {name}_i = {name}_t[row_j];")
        else:
            block.append(f"{t}* {name}_r = {name}_p + row_b;")
            element.append(f"{t}& {name}_i = {name}_r[row_j];")
    for oname, variable in zip(onames, node.outputs):
        t = ctype[oname]
        if variable in aliased:
            element.append(f"{t}& {oname}_i = {aliased[variable]}_i;")
        else:
            head.append(f"{t}* {oname}_p = ({t}*)PyArray_DATA({oname});")
            block.append(f"{t}* {oname}_r = {oname}_p + row_b;")
            element.append(f"{t}& {oname}_i = {oname}_r[row_j];")
    # The loop is a function of its own (a lambda gcc may not inline), so that gcc estimates its frequencies from its
    # own entry: inline, after the engine's many checks of its operands, gcc guessed the loop rarely run, compiled it
    # for size and left it unvectorized, slower than the engine's own loop. A scalar op's failure (an integer division
    # by zero) returns true from it, and the engine's failure code runs after: that code is a goto, which cannot leave
    # a lambda.
    task = op.scalar_op.c_code(node.tag.fake_node, nodename + "_scalar_", [f"{n}_i" for n in inames],
                               [f"{o}_i" for o in onames], {**sub, "fail": "return true;"})
    nl = "\n"
    code = f"""#define {ROW_LOOP}
if ([&]() __attribute__((noinline)) -> bool {{
{nl.join(head)}
for (npy_intp row_b = 0; row_b < row_total; row_b += row_block) {{
const npy_intp row_n = row_total - row_b < row_block ? row_total - row_b : row_block;
{nl.join(block)}
#pragma GCC ivdep
for (npy_intp row_j = 0; row_j < row_n; ++row_j) {{
{nl.join(element)}
{{ {task} }}
}}
}}
return false;
}}()) {{
{sub["fail"]}
}}
#undef {ROW_LOOP}"""
    return condition, code


@node_rewriter([Sum])
def local_leading_sum(fgraph, node):
    """A float sum over leading axes that accumulates in float64 (the engine's default) as :class:`LeadingSum`."""
    (x,), op = node.inputs, node.op
    axes = tuple(range(x.ndim)) if op.axis is None else tuple(op.axis)
    if (x.dtype not in BITS or node.outputs[0].dtype != x.dtype or op.acc_dtype != "float64" or not axes
            or axes != tuple(range(len(axes)))):
        return None
    return [LeadingSum(len(axes))(x)]


@node_rewriter([Elemwise])
def local_row_elemwise(fgraph, node):
    """The engine's elementwise op of two axes or more as a :class:`RowElemwise` (the same computation)."""
    op = node.op
    if type(op) is not Elemwise or node.outputs[0].type.ndim < 2:
        return None
    return RowElemwise(op.scalar_op, op.inplace_pattern, name=op.name, nfunc_spec=op.nfunc_spec,
                       openmp=op.openmp).make_node(*node.inputs).outputs


#: The rewrites and their positions, as the engine's ``Mode.register`` takes them.
REWRITES = ((in2out(local_bit_select, local_leading_sum, name="toolkit_c_kernels"), POSITION),
            (in2out(local_row_elemwise, name="toolkit_row_loops"), ROWS_POSITION))
