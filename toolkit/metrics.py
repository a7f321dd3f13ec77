"""Metrics with Keras' names and formulas, one value per example (``from toolkit.metrics import Metric``).

The public names of :mod:`toolkit.training.metrics`, where they are written and documented.
"""

from toolkit.training.metrics import (
    NAMED,
    Metric,
    get,
    sparse_categorical_crossentropy,
    sparse_top_k_categorical_accuracy,
)

__all__ = ["NAMED", "Metric", "get", "sparse_categorical_crossentropy", "sparse_top_k_categorical_accuracy"]
