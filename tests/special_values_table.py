"""The table of :mod:`tests.test_ops_special_values`: per op a call over ``ops``, a NumPy reference with Keras'
semantics (``keras/src/backend/numpy``) and the input kinds it applies to, or the typed error every backend raises for
a kind (the cases, by op group, in the ``special_values_*`` modules; what they share in
:mod:`tests.special_values_common`); the ops left out and why; the differences not fixed yet.
"""

from __future__ import annotations

from tests.special_values_arrays import ARRAYS, REDUCTIONS
from tests.special_values_common import INPUTS, KINDS, Case
from tests.special_values_elementwise import BASIC, ELEMENTWISE, MATH, SHAPES
from tests.special_values_models import CORE, LINALG, NN, SIGNALS, STATISTICS_AND_FUNCTIONS, TRAINING, WINDOWS

__all__ = ["CASES", "EXCLUDED", "INPUTS", "KINDS", "KNOWN", "Case"]

CASES: list[Case] = [*ELEMENTWISE, *SHAPES, *BASIC, *MATH, *ARRAYS, *REDUCTIONS, *LINALG, *NN, *WINDOWS, *SIGNALS,
                     *CORE, *STATISTICS_AND_FUNCTIONS, *TRAINING]
#: Differences not fixed yet, ``(case id, backend, kind[, dtype]): why`` (no dtype: both): each must still differ
#: (the test fails when one is fixed, so the entry leaves with the fix).
KNOWN: dict[tuple[str, ...], str] = {
    ("argmax", "tensorflow", "float"): "-0.0 and 0.0 tie (the first wins); Keras' argmax counts -0.0 below 0.0 "
                                       "on every backend",
    **dict.fromkeys((("all_finite", "tensorflow", kind) for kind in ("int", "bool")),
                    "a raw InvalidArgumentError: tf.math.is_finite has no integer or boolean kernel"),
    **dict.fromkeys(((f"{op}[{variant}]", "tensorflow", "bool") for op in ("max", "min")
                     for variant in ("axis=None", "axis=0,keepdims", "axis=-1")),
                    "a raw InvalidArgumentError: TensorFlow has no boolean Max/Min kernel (amax and amin take "
                    "any and all)"),
    **dict.fromkeys((("floor_divide", backend, "float") for backend in ("tensorflow", "aesara", "pytensor")),
                    "-0.5 // inf is -0.0 (the floor of the quotient) where NumPy and JAX give -1 (their divmod: the "
                    "remainder takes the divisor's sign, inf)"),
    **dict.fromkeys((("argmax", backend, "float") for backend in ("aesara", "pytensor")),
                    "-0.0 and 0.0 tie (the first wins); Keras' argmax counts -0.0 below 0.0 on every backend"),
    **dict.fromkeys((("binary_crossentropy", backend, "float") for backend in ("aesara", "pytensor")),
                    "from_logits with target 0 and logit -inf: 0 where Keras (and TensorFlow here) give 0 * inf = "
                    "NaN: the engine rewrites a product with a 0/1 factor into a switch"),
    **dict.fromkeys((("categorical_crossentropy", backend, "float") for backend in ("aesara", "pytensor")),
                    "a target of zeros against NaN probabilities: -0.0 where Keras gives NaN (the engine's 0 * x "
                    "rewrite, as above)"),
    **dict.fromkeys((("psnr", backend, "float") for backend in ("aesara", "pytensor")),
                    "psnr(x, x) with infinite x: inf where Keras gives NaN (inf - inf): the engine rewrites x - x "
                    "into 0"),
    **dict.fromkeys(((op, backend, "float", "float64") for op in ("depthwise_conv", "separable_conv")
                     for backend in ("aesara", "pytensor")),
                    "a NaN or an infinity in one channel reaches every channel (XLA's CPU compiler turns a float64 "
                    "feature-grouped convolution into a dense one with a zero-masked kernel)"),
    **dict.fromkeys(((f"logsumexp[{variant}]", backend, "empty") for variant in ("axis=None", "axis=-1")
                     for backend in ("tensorflow", "aesara", "pytensor")),
                    "a ShapeError where NumPy, SciPy and JAX give -inf (the log of an empty sum): toolkit/nn/ops.py's "
                    "logsumexp takes the maximum without initial=-inf"),
}
#: Public ops with no case, and why.
EXCLUDED: dict[str, str] = {
    "ctc_loss": "no closed-form reference: tests/test_ops_nn.py checks it against a brute-force sum over every "
                "alignment; NaN and infinite logits have no defined alignment probabilities",
    "training": "training context: a Python flag of the trainer's step, no array input",
    "update_state": "training context: writes model state, defined only inside a trainer's step",
    "cross_replica_sum": "training context: a sum over the replicas of a data-parallel step (refused outside one)",
    "example_uniform": "random: no reference (noise defined only inside a training run)",
    "corrcoef": "added by another task, has its own tests: tests/test_ops_statistics.py runs it on NaN, -0.0, "
                "empty, integer and boolean inputs",
    "unique": "added by another task, has its own tests: tests/test_ops_statistics.py runs it on NaN, -0.0, "
              "empty, integer and boolean inputs",
    "stft": "its framing and window are extract_sequences' and its transform rfft's, both in the table; "
            "tests/test_ops_signal.py checks it against NumPy",
    "istft": "the inverse of stft (excluded above); tests/test_ops_signal.py checks it against NumPy",
}
