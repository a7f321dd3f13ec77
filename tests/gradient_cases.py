"""The table of every differentiable public op of ``ops``, for ``tests/test_ops_gradients.py``: one small float64
case per entry, with its NumPy reference (Keras' semantics), and the ops that have no gradient to check, each with
its reason. The entries are in ``tests/gradient_cases_{elementwise,arrays,models}.py`` by op group, their inputs in
``tests/gradient_cases_common.py``; this module assembles them.

An entry is ``"op"`` or ``"op.variant": (inputs, call, reference)``: ``inputs`` names arrays of :data:`INPUTS`
(each entry differentiates its own copies of them), ``call(ops, *arrays)`` runs the toolkit's op (``None``: the op of
the entry's name applied to the arrays), and ``reference(*arrays)`` is the same in NumPy (a NumPy or SciPy function,
or a lambda). Integer arguments (indices, segment ids, labels) are constants inside the calls. A call may return a
tuple or list of arrays (``split``, ``svd``): they are flattened and joined, as their references are. Points sit away
from kinks (the kink gradients are JAX's, checked in ``tests/test_ops_nn.py``) and inside every op's domain.
"""

from __future__ import annotations

from tests.gradient_cases_arrays import ARRAYS, LINALG, REDUCTIONS
from tests.gradient_cases_common import INPUTS
from tests.gradient_cases_elementwise import BASIC, ELEMENTWISE, MATH, SHAPES
from tests.gradient_cases_models import CORE, FUNCTIONAL, NN, SIGNAL, STATISTICS, WINDOWS

__all__ = ["CHECKED_ELSEWHERE", "DEVICE_ENTRIES", "INPUTS", "NON_DIFFERENTIABLE", "TABLES"]

#: Every table, each compiled as one gradient per backend, with the op groups whose entries it holds (the classes of
#: toolkit/ops/table.py's GROUPS): groups made of one module's parts share a table, so that a module split into
#: groups adds no compiled graph (each costs seconds of compilation on the Theano family).
TABLES: dict[str, tuple[tuple[str, ...], dict]] = {
    "elementwise": (("ElementwiseOps",), ELEMENTWISE),
    "shapes": (("ShapeOps",), SHAPES),
    "basic": (("Ops",), BASIC),
    "math": (("MathOps", "BitOps"), MATH),
    "arrays": (("CreationOps", "ArrayOps", "JoinOps"), ARRAYS),
    "reductions": (("ReductionOps", "SortingOps"), REDUCTIONS),
    "linalg": (("ProductOps", "LinalgOps"), LINALG),
    "nn": (("NNOps", "LossOps"), NN),
    "windows": (("WindowOps",), WINDOWS),
    "signal": (("SignalOps",), SIGNAL),
    "statistics": (("StatisticsOps",), STATISTICS),
    "functional": (("FunctionalOps",), FUNCTIONAL),
    "core": (("CoreOps", "ControlFlowOps"), CORE),
    "training": (("TrainingOps",), {}),
}

_BOOL = "a boolean result"
_INT = "an integer result"
_CONSTANT = "a constant made from a shape or Python numbers: no array input to differentiate"
#: The public ops without a gradient to check, and why.
NON_DIFFERENTIABLE = {
    **{name: _BOOL for name in (
        "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
        "logical_not", "logical_xor", "isclose", "allclose", "isfinite", "isinf", "isnan", "isneginf", "isposinf",
        "isreal", "signbit", "all", "any", "isin", "in_top_k", "all_finite")},
    **{name: _INT for name in (
        "argmax", "argmin", "argsort", "argpartition", "nanargmax", "nanargmin", "count_nonzero", "digitize",
        "searchsorted", "nonzero", "unravel_index", "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor",
        "bitwise_not", "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift", "left_shift", "right_shift",
        "one_hot", "multi_hot")},
    **{name: _CONSTANT for name in (
        "arange", "empty", "eye", "identity", "ones", "zeros", "tri", "bartlett", "blackman", "hamming", "hanning",
        "kaiser")},
    **{name: "a Python value (a shape, a size, a rank or a truth value), not an array"
       for name in ("shape", "size", "ndim", "is_tensor", "training")},
    "floor_divide": "an integral value (NumPy's divmod quotient): piecewise constant (floor, a function of the "
                    "same kind, is in the table with gradient 0)",
    "ones_like": "its values do not depend on the input's (only its shape)",
    "zeros_like": "its values do not depend on the input's (only its shape)",
    "unique": "distinct values, with integer indices and counts: a set operation, not a training op",
    "view": "a reinterpretation of the bits in another dtype",
    "saturate_cast": "a cast to a narrower dtype (integers, float16, float32): no float64 gradient to check",
    "polar": "refused: it returns complex numbers, which the toolkit has no dtype for (a typed DTypeError)",
    "ctc_decode": "decoding: integer paths, and scores that are a maximum over paths, not a training loss",
    "stop_gradient": "no gradient by definition (tests/test_ops_core.py: test_stop_gradient_passes_no_gradient)",
    "example_uniform": "random noise, drawn per example",
    "update_state": "writes model state; returns nothing to differentiate",
    "record": "returns its argument itself, so its gradient is the argument's (tests/test_localize.py trains through "
              "recorded outputs)",
    "cross_replica_sum": "a sum across the replicas of a running training step (tests/test_model_state.py checks "
                         "its values and gradients in data-parallel steps)",
}
#: Ops that landed with their own central-difference gradient tests, and the module that has them.
CHECKED_ELSEWHERE: dict[str, str] = {}
#: The entries the data-parallel test runs on 1 and on several devices: one per way an op is built that a replicated
#: step could break (a loop carrying constants, a conditional, a custom gradient, an engine op written in JAX, a
#: scatter, a sort, a decomposition, a transform, a window op, statistics over the batch of a layer). All the entries
#: would cost minutes of tracing per backend (measured on TensorFlow: 2.4 s of CPU per entry and device setting).
DEVICE_ENTRIES = (
    "ctc_loss.ctc_loss", "while_loop", "associative_scan.pairs", "vectorize.signature", "custom_gradient", "switch",
    "segment_prod", "sort", "svd", "rfft", "conv_transpose.conv_transpose2d_output_padding", "max_pool.max_pool2d",
    "dot_product_attention.attention_gqa_bias_mask", "scatter_update.add", "slice_update.clamped",
    "batch_normalization.batch_norm",
)
