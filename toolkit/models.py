"""Built-in models written once with :class:`toolkit.Ops` (an MLP, a convnet, a ResNet, a Transformer language
model, an LSTM text classifier) and their losses (``from toolkit.models import mlp``).

The public names of :mod:`toolkit.nn.models`, where they are written and documented.
"""

from toolkit.nn.models import (
    ACTIVATIONS,
    accuracy,
    lstm_text,
    mlp,
    mnist_convnet,
    resnet,
    sequence_cross_entropy,
    sparse_softmax_cross_entropy,
    transformer_lm,
)

__all__ = [
    "ACTIVATIONS", "accuracy", "lstm_text", "mlp", "mnist_convnet", "resnet", "sequence_cross_entropy",
    "sparse_softmax_cross_entropy", "transformer_lm",
]
