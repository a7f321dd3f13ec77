"""The C linker's code for the scalar operations whose engine code is slow inside an elementwise loop, and the
rewrite that puts it in the toolkit's C-linker functions (:data:`REWRITE`, added by ``compiling.mode``).

``Switch`` (``where``, a ReLU and its gradient, every mask) is the one: the engines write ``z = cond ? a : b``, and
gcc compiles a select between two floats loaded through references to a branch. A ReLU's condition over
activations is as unpredictable as a coin, so that branch mispredicts on about every other element: measured on
2 M float32 elements (``switch(x <= 0, 0, g)``, Aesara's C linker, this 2-core x86 machine) 18-26 ms with random
signs and 1 ms with sorted ones, where a product of the same arrays takes 0.6 ms; the bench ResNet's C-linker step
spent 60% of its time in such loops. :class:`BitSelect` selects the bits instead (a mask of the condition, and,
or), which has no branch and gives the same bits as the select, NaN and signed zeros included: 3.4 ms there.
"""

from __future__ import annotations

from .environment import import_framework, imported

theano, _ = import_framework()

Switch = imported("scalar", "Switch")
Elemwise = imported("tensor.elemwise", "Elemwise")
node_rewriter = imported("graph.rewriting.basic", "node_rewriter")
in2out = imported("graph.rewriting.basic", "in2out")

#: The unsigned C type of each float dtype's width, whose bits :class:`BitSelect` selects; other dtypes (integers,
#: booleans: gcc selects them with a conditional move, no branch) keep the engine's code.
BITS = {"float32": "npy_uint32", "float64": "npy_uint64"}
#: Where in the engine's rewrite database the rewrite runs: after the canonical and specializing rewrites (which
#: look for ``Switch`` by its class: before them they would no longer recognize it) and before elementwise fusion
#: (``elemwise_fusion`` at 49), which fuses ``BitSelect`` into its loops as any scalar operation with C code.
POSITION = 48.9


class BitSelect(Switch):
    """``Switch`` whose C code selects bits rather than branching (see the module's docstring); the same values,
    gradient and Python implementation."""

    def c_code(self, node, name, inputs, outputs, sub):
        (cond, ift, iff), (z,) = inputs, outputs
        dtype = node.outputs[0].type.dtype
        if dtype not in BITS:
            return super().c_code(node, name, inputs, outputs, sub)
        ctype, bits = node.outputs[0].type.dtype_specs()[1], BITS[dtype]
        # Both operands are loaded before the select (the engine's references load lazily, which is what lets gcc
        # branch); memcpy is how C reads a float's bits without breaking aliasing rules (compiled to a move).
        return (f"{{ {ctype} t_ = {ift}, f_ = {iff}; {bits} a_, b_;"
                f" memcpy(&a_, &t_, sizeof a_); memcpy(&b_, &f_, sizeof b_);"
                f" const {bits} m_ = ({bits})0 - ({bits})({cond} != 0);"
                f" a_ = (a_ & m_) | (b_ & ~m_); memcpy(&{z}, &a_, sizeof a_); }}")

    def c_code_cache_version(self):
        return ("toolkit-bit-select", 1, *super().c_code_cache_version())


bit_select = BitSelect(name="bit_select")


@node_rewriter([Elemwise])
def local_bit_select(fgraph, node):
    """An elementwise ``Switch`` (the engine's class itself, not a subclass) as an elementwise :class:`BitSelect`."""
    if type(node.op.scalar_op) is not Switch:
        return None
    return Elemwise(bit_select, node.op.inplace_pattern).make_node(*node.inputs).outputs


#: The rewrite and its position, as the engine's ``Mode.register`` takes them.
REWRITE = (in2out(local_bit_select, name="toolkit_bit_select"), POSITION)
