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
}
#: Public ops with no case, and why.
EXCLUDED: dict[str, str] = {
    "ctc_loss": "no closed-form reference: tests/test_ops_nn.py checks it against a brute-force sum over every "
                "alignment; NaN and infinite logits have no defined alignment probabilities",
    "training": "training context: a Python flag of the trainer's step, no array input",
    "update_state": "training context: writes model state, defined only inside a trainer's step",
    "cross_replica_sum": "training context: a sum over the replicas of a data-parallel step (refused outside one)",
    "example_uniform": "random: no reference (noise defined only inside a training run)",
    "record": "training context: returns its argument itself (a name for multigpu localize; tests/test_localize.py)",
    "corrcoef": "added by another task, has its own tests: tests/test_ops_statistics.py runs it on NaN, -0.0, "
                "empty, integer and boolean inputs",
    "unique": "added by another task, has its own tests: tests/test_ops_statistics.py runs it on NaN, -0.0, "
              "empty, integer and boolean inputs",
    "stft": "its framing and window are extract_sequences' and its transform rfft's, both in the table; "
            "tests/test_ops_signal.py checks it against NumPy",
    "istft": "the inverse of stft (excluded above); tests/test_ops_signal.py checks it against NumPy",
}
