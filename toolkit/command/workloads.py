"""Built-in workloads for the ``multigpu`` command: a model, its data, and whether accuracy applies.

``--model`` takes one of :data:`WORKLOADS`' names or ``module:function``, a function returning a
:class:`toolkit.Model` (trained then on the digits, as a classifier of 64 inputs and 10 classes) or a
:class:`Workload`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from toolkit.datasets import digits, synthetic_images, synthetic_sequences, zen_corpus
from toolkit.errors import ArgumentError
from toolkit.nn import layers
from toolkit.nn.model import Model
from toolkit.nn.models import lstm_text, mlp, mnist_convnet, resnet, sparse_softmax_cross_entropy, transformer_lm


@dataclass(frozen=True)
class Workload:
    """A model and its data, as the ``multigpu`` commands train them.

    Attributes:
        name: the workload's name in the command's tables and results.
        model: the :class:`toolkit.Model`.
        data: ``data(seed) -> (x_train, y_train, x_test, y_test)``, NumPy arrays.
        classifier: the outputs are class scores, so test accuracy applies.
        bench_batch: ``multigpu bench``'s global batch for this model unless given.
        bench_steps: ``multigpu bench``'s steps per round unless given.
        compute_bound: the step is arithmetic-bound at ``bench_batch``: bench judges it by its fraction of the
            machine's peak and against ``jax.jit``, where a dispatch-bound model is judged by its overhead.
    """

    name: str
    model: Model
    data: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    classifier: bool = True
    bench_batch: int = 256
    bench_steps: int = 32
    compute_bound: bool = False


def _conv_net() -> Model:
    def init(rng):
        return {**layers.conv2d_init(rng, 1, 16, 3), **layers.dense_init(rng, 16, 10)}

    def forward(ops, params, x):
        features = layers.conv2d(ops, params, ops.reshape(x, (-1, 8, 8, 1)), activation="relu")
        return layers.dense(ops, params, layers.global_max_pool2d(ops, features))

    return Model(init, forward, sparse_softmax_cross_entropy(10), name="conv16-gmp-dense10")


def _polynomial() -> Model:
    def forward(ops, params, x):
        a, b, c = params["coefficients"][0], params["coefficients"][1], params["coefficients"][2]
        return a * ops.square(x) + b * x + c

    return Model(lambda rng: {"coefficients": rng.normal(size=3)}, forward,
                 lambda ops, prediction, y: ops.square(prediction - y), name="polynomial")


def _polynomial_data(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=1200)
    y = 5 * x**2 + 3 + rng.normal(scale=0.1, size=x.shape)
    return x[:1000], y[:1000], x[1000:], y[1000:]


#: The built-in real models at the sizes the command trains them (small enough for a CPU; the model functions in
#: :mod:`toolkit.nn.models` take any size). Their data: :mod:`toolkit.datasets`' documented recipes.
RESNET_WIDTH, TRANSFORMER_SEQ_LEN, TRANSFORMER_WIDTH, LSTM_SEQ_LEN = 8, 32, 64, 20
#: The same models at the sizes ``multigpu bench`` measures arithmetic with, where a step is 10-40 GFLOP, not
#: dispatch: the ResNet at width 16 (16-32-64 channels on 32x32 images) and batch 128 (9.6 GFLOP a step); the
#: Transformer at sequence 128, width 256, 4 heads, 2 blocks, batch 16 (21 GFLOP a step), without dropout (the
#: natives it is compared with do not draw the toolkit's per-example noise; dropout is elementwise, not arithmetic).
BENCH_RESNET_WIDTH, BENCH_RESNET_BATCH = 16, 128
BENCH_TRANSFORMER_SEQ_LEN, BENCH_TRANSFORMER_WIDTH, BENCH_TRANSFORMER_BATCH = 128, 256, 16
#: Steps per round of the compute-bound bench models: a round of each candidate stays near a second.
BENCH_COMPUTE_STEPS = 3

#: The workloads ``--model`` names, each made on demand (a model and its data): the digits MLP and convnet, a
#: polynomial regression, and the built-in models at the sizes the commands and the bench measure.
WORKLOADS: dict[str, Callable[[], Workload]] = {
    "digits-mlp": lambda: Workload("digits-mlp", mlp([64, 128, 10], name="digits-mlp-64-128-10"), digits),
    "digits-conv": lambda: Workload("digits-conv", _conv_net(), digits),
    "polynomial": lambda: Workload("polynomial", _polynomial(), _polynomial_data, classifier=False),
    "mnist-convnet": lambda: Workload("mnist-convnet", mnist_convnet((8, 8, 1), filters=(16, 32), padding="same",
                                                                     name="mnist-convnet-8x8"), digits),
    "resnet": lambda: Workload("resnet", resnet(width=RESNET_WIDTH, name=f"resnet-w{RESNET_WIDTH}"),
                               lambda seed: synthetic_images(seed=seed)),
    "transformer": lambda: Workload("transformer", transformer_lm(seq_len=TRANSFORMER_SEQ_LEN,
                                                                  width=TRANSFORMER_WIDTH),
                                    lambda seed: zen_corpus(TRANSFORMER_SEQ_LEN, seed=seed)),
    "lstm-text": lambda: Workload("lstm-text", lstm_text(seq_len=LSTM_SEQ_LEN),
                                  lambda seed: synthetic_sequences(seq_len=LSTM_SEQ_LEN, seed=seed)),
    "resnet-bench": lambda: Workload(
        "resnet-bench", resnet(width=BENCH_RESNET_WIDTH, name=f"resnet-w{BENCH_RESNET_WIDTH}"),
        lambda seed: synthetic_images(seed=seed), bench_batch=BENCH_RESNET_BATCH, bench_steps=BENCH_COMPUTE_STEPS,
        compute_bound=True),
    "transformer-bench": lambda: Workload(
        "transformer-bench", transformer_lm(seq_len=BENCH_TRANSFORMER_SEQ_LEN, width=BENCH_TRANSFORMER_WIDTH,
                                            dropout=0.0, name=f"transformer-lm-{BENCH_TRANSFORMER_SEQ_LEN}x"
                                                              f"{BENCH_TRANSFORMER_WIDTH}"),
        lambda seed: zen_corpus(BENCH_TRANSFORMER_SEQ_LEN, seed=seed), bench_batch=BENCH_TRANSFORMER_BATCH,
        bench_steps=BENCH_COMPUTE_STEPS, compute_bound=True),
}
#: What ``multigpu bench`` measures unless told: the dispatch-bound MLP and the compute-bound ResNet and Transformer.
BENCH_MODELS = ("digits-mlp", "resnet-bench", "transformer-bench")


def draw_batches(examples: int, size: int, count: int, seed: int) -> list[np.ndarray]:
    """The row indices of ``count`` batches of ``size``, each drawn without replacement, the same for a seed: what
    ``multigpu compare`` and ``multigpu bench`` train every candidate on.

    Args:
        examples: the number of training examples.
        size: the batch size.
        count: the number of batches.
        seed: the seed of the draws.

    Returns:
        ``count`` int arrays of ``size`` row indices.

    Raises:
        ArgumentError: ``size`` exceeds the ``examples`` there are.
    """
    if size > examples:
        raise ArgumentError(f"--batch {size} is larger than the {examples} training examples")
    order = np.random.default_rng(seed)
    return [order.choice(examples, size=size, replace=False) for _ in range(count)]


def epoch_batches(examples: int, size: int, epochs: int, seed: int) -> list[list[np.ndarray]]:
    """The row indices of each epoch's batches: every epoch a new permutation of the examples (drawn from
    ``default_rng(seed)``), cut into batches of ``size``; the last batch of an epoch keeps the rows left over.

    Args:
        examples: the number of training examples.
        size: the batch size, >= 1.
        epochs: the number of epochs, >= 1.
        seed: the seed of the permutations.

    Returns:
        One list per epoch of int arrays of row indices.

    Raises:
        ArgumentError: ``size`` or ``epochs`` below 1.
    """
    if size < 1 or epochs < 1:
        raise ArgumentError(f"batch size and epochs must be >= 1, got {size} and {epochs}")
    order = np.random.default_rng(seed)
    return [[perm[start:start + size] for start in range(0, examples, size)]
            for perm in (order.permutation(examples) for _ in range(epochs))]


def load_workload(spec: str) -> Workload:
    """A built-in workload by name, or ``module:function``.

    Args:
        spec: a name of :data:`WORKLOADS`, or ``module:function`` naming a function of no arguments that returns a
            :class:`Workload`, or a :class:`toolkit.Model` (then trained on the digits).

    Returns:
        The :class:`Workload`.

    Raises:
        ArgumentError: an unknown name, a module or function that cannot be found, or one that returns neither a
            Model nor a Workload.
    """
    if spec in WORKLOADS:
        return WORKLOADS[spec]()
    if ":" not in spec:
        raise ArgumentError(f"unknown model {spec!r}; expected one of {', '.join(WORKLOADS)} or module:function")
    module_name, _, function_name = spec.partition(":")
    try:
        made = getattr(importlib.import_module(module_name), function_name)()
    except Exception as error:  # whatever the user's module or function raises, reported as one line
        raise ArgumentError(f"cannot load model {spec!r}: {type(error).__name__}: {error}") from error
    if isinstance(made, Workload):
        return made
    if isinstance(made, Model):
        return Workload(made.name, made, digits)
    raise ArgumentError(f"{spec} returned {type(made).__name__}; expected a toolkit.Model or "
                        "toolkit.workloads.Workload")
