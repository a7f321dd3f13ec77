"""Built-in models, written once with :class:`toolkit.ops.Ops`: they run unchanged on every backend.

Every layer's output is recorded (``ops.record``, read by ``multigpu localize``) under the layer's name: the layers of
:mod:`toolkit.nn.layers` under their ``prefix`` (the names of their parameters without the last part), and what the
models compute between them (activations, pooling, dropout, residual sums) under the names each model's docstring
gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.errors import ArgumentError, ShapeError
from toolkit.nn import layers
from toolkit.nn.model import Model
from toolkit.ops.losses import sparse_crossentropy
from toolkit.ops.training import record_layer

#: The activations :func:`mlp` accepts between its layers.
ACTIVATIONS = ("relu", "tanh", "sigmoid")


def sparse_softmax_cross_entropy(num_classes: int):
    """A loss ``loss(ops, logits, labels)``: each example's cross-entropy of its integer label against
    ``softmax(logits)``.

    Args:
        num_classes: the number of classes (the logits' last axis).

    Returns:
        ``loss(ops, logits, labels)``: ``[batch, ..., num_classes]`` logits and ``[batch, ...]`` integer labels in
        ``[0, num_classes)`` give ``[batch, ...]`` losses.
    """

    def loss(ops, logits, labels):
        return sparse_crossentropy(ops, labels, ops.log_softmax(logits, axis=-1), num_classes)

    return loss


def mlp(sizes: Sequence[int], activation: str = "relu", name: str | None = None) -> Model:
    """A multi-layer perceptron classifier: dense layers of ``sizes`` (inputs first, classes last), ``activation``
    between them, logits out, sparse softmax cross-entropy as the loss.

    Weights use Glorot-uniform initialisation (Keras' default), biases start at 0; parameters are named
    ``w0, b0, w1, b1, ...``; the layers' outputs are recorded as ``dense0``, ``relu0`` (the activation's name),
    ``dense1``, ... and the logits as the last ``dense``.

    Args:
        sizes: the layer widths, inputs first and classes last (at least two, each >= 1).
        activation: one of :data:`ACTIVATIONS`.
        name: the model's name (None: ``"mlp-"`` and the sizes, e.g. ``"mlp-64-32-10"``).

    Returns:
        A :class:`~toolkit.Model` taking ``[batch, sizes[0]]`` inputs and integer labels.

    Raises:
        ArgumentError: fewer than two sizes, a size below 1, or an activation not in :data:`ACTIVATIONS`.
    """
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or min(sizes) < 1:
        raise ArgumentError(f"mlp needs at least two sizes >= 1 (inputs and classes), got {list(sizes)}")
    if activation not in ACTIVATIONS:
        raise ArgumentError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    layers = list(zip(sizes[:-1], sizes[1:]))

    def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
        params = {}
        for i, (fan_in, fan_out) in enumerate(layers):
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            params[f"w{i}"] = rng.uniform(-limit, limit, size=(fan_in, fan_out))
            params[f"b{i}"] = np.zeros(fan_out)
        return params

    def forward(ops, params, x):
        h = x
        for i in range(len(layers)):
            h = record_layer(ops, f"dense{i}", ops.matmul(h, params[f"w{i}"]) + params[f"b{i}"])
            if i < len(layers) - 1:
                h = record_layer(ops, f"{activation}{i}", getattr(ops, activation)(h))
        return h

    return Model(init, forward, sparse_softmax_cross_entropy(sizes[-1]), rows_independent=True,
                 name=name or f"mlp-{'-'.join(map(str, sizes))}")


def sequence_cross_entropy(num_classes: int):
    """Loss ``loss(ops, logits, labels)`` for ``[batch, time, classes]`` logits and ``[batch, time]`` labels: each
    example's mean over its positions of the sparse softmax cross-entropy (a language model's next-token loss).

    Args:
        num_classes: the number of classes (the vocabulary size).

    Returns:
        ``loss(ops, logits, labels)`` giving ``[batch]`` losses.
    """
    per_position = sparse_softmax_cross_entropy(num_classes)

    def loss(ops, logits, labels):
        return ops.mean(per_position(ops, logits, labels), axis=-1)

    return loss


def mnist_convnet(input_shape: Sequence[int] = (28, 28, 1), classes: int = 10, filters: Sequence[int] = (32, 64),
                  dropout: float = 0.5, padding: str = "valid", name: str | None = None) -> Model:
    """The Keras MNIST convnet example ("Simple MNIST convnet"): two blocks of a 3x3 ReLU convolution and 2x2 max
    pooling, flatten, dropout, a dense layer to ``classes`` logits. Input ``[batch, height, width, channels]``, or
    flat rows of ``height * width * channels`` pixels (reshaped here). With ``padding="same"`` it fits small
    images (the 8x8 digits). Recorded outputs: ``conv0``, ``pool0``, ``conv1``, ``pool1``, ..., ``dropout``
    (the flattened features after dropout), ``dense``.

    Args:
        input_shape: ``(height, width, channels)`` of an image.
        classes: the number of classes.
        filters: the channels of each convolution block (one block per entry).
        dropout: the dropout rate before the dense layer.
        padding: the convolutions' padding, ``"valid"`` (Keras' example) or ``"same"``.
        name: the model's name (None: ``"mnist-convnet"``).

    Returns:
        A :class:`~toolkit.Model` taking images or flat pixel rows and integer labels.

    Raises:
        ShapeError: images that shrink to nothing through the blocks with this padding.
    """
    height, width, channels = (int(s) for s in input_shape)
    size = np.array([height, width])
    for _ in filters:
        size = (size - 2 if padding == "valid" else size) // 2
    if min(size) < 1:
        raise ShapeError(f"mnist_convnet: {tuple(input_shape)} images shrink to nothing with {padding!r} padding; "
                         "use larger images or padding='same'")
    flat = int(np.prod(size)) * int(filters[-1])

    def init(rng):
        params, inputs = {}, channels
        for i, count in enumerate(filters):
            params.update(layers.conv2d_init(rng, inputs, count, 3, prefix=f"conv{i}"))
            inputs = count
        return {**params, **layers.dense_init(rng, flat, classes, prefix="dense")}

    def forward(ops, params, x):
        h = ops.reshape(x, (-1, height, width, channels))
        for i in range(len(filters)):
            h = layers.conv2d(ops, params, h, prefix=f"conv{i}", padding=padding, activation="relu")
            h = record_layer(ops, f"pool{i}", layers.max_pool2d(ops, h, 2))
        h = record_layer(ops, "dropout", layers.dropout(ops, layers.flatten(ops, h), dropout))
        return layers.dense(ops, params, h, prefix="dense")

    return Model(init, forward, sparse_softmax_cross_entropy(classes), name=name or "mnist-convnet",
                 rows_independent=True)


def resnet(input_shape: Sequence[int] = (32, 32, 3), classes: int = 10, width: int = 16,
           blocks: Sequence[int] = (1, 1, 1), synchronized: bool = False, name: str | None = None) -> Model:
    """A small ResNet (He et al., the CIFAR variant) for ``[batch, 32, 32, 3]`` images: a 3x3 convolution with batch
    normalization and ReLU, then stages of ``blocks[i]`` residual blocks of ``width * 2**i`` channels, each stage
    after the first starting with stride 2; global average pooling and a dense layer to ``classes`` logits.

    A block: ``relu(bn(conv3x3(relu(bn(conv3x3(x, stride))))) + shortcut(x))``, the shortcut a strided 1x1
    convolution with batch normalization where the shape changes, else ``x``. Batch normalization keeps its moving
    statistics as model state; under data parallelism its batch statistics are each replica's, or the global
    batch's with ``synchronized=True`` (``layers.batch_norm``).

    Recorded outputs: ``stem/conv``, ``stem/bn``, ``stem/relu``; per block (``s{stage}b{block}``) ``conv1``,
    ``bn1``, ``relu1``, ``conv2``, ``bn2``, ``shortcut`` and ``shortcut_bn`` where it has them, and the block's
    output under its own name (``s0b0``); ``pool`` (the global average) and ``head``.

    Args:
        input_shape: ``(height, width, channels)`` of an image.
        classes: the number of classes.
        width: the first stage's channels; stage ``i`` has ``width * 2**i``.
        blocks: the number of residual blocks of each stage (one stage per entry).
        synchronized: batch normalization over the global batch instead of each replica's part.
        name: the model's name (None: ``"resnet"``).

    Returns:
        A :class:`~toolkit.Model` (with model state) taking images or flat pixel rows and integer labels.
    """
    height, width_px, channels = (int(s) for s in input_shape)
    plan = []  # (prefix, in channels, out channels, stride)
    inputs = width
    for stage, count in enumerate(blocks):
        for block in range(count):
            out = width * 2 ** stage
            plan.append((f"s{stage}b{block}", inputs, out, 2 if stage > 0 and block == 0 else 1))
            inputs = out

    def init(rng):
        params = {**layers.conv2d_init(rng, channels, width, 3, prefix="stem/conv"),
                  **layers.batch_norm_init(rng, width, prefix="stem/bn")}
        for prefix, cin, cout, stride in plan:
            params.update({**layers.conv2d_init(rng, cin, cout, 3, prefix=f"{prefix}/conv1"),
                           **layers.batch_norm_init(rng, cout, prefix=f"{prefix}/bn1"),
                           **layers.conv2d_init(rng, cout, cout, 3, prefix=f"{prefix}/conv2"),
                           **layers.batch_norm_init(rng, cout, prefix=f"{prefix}/bn2")})
            if stride != 1 or cin != cout:
                params.update({**layers.conv2d_init(rng, cin, cout, 1, prefix=f"{prefix}/shortcut"),
                               **layers.batch_norm_init(rng, cout, prefix=f"{prefix}/shortcut_bn")})
        return {**params, **layers.dense_init(rng, inputs, classes, prefix="head")}

    def batch_norm(ops, params, x, prefix):
        return layers.batch_norm(ops, params, x, prefix, synchronized=synchronized)

    def forward(ops, params, x):
        h = ops.reshape(x, (-1, height, width_px, channels))
        h = batch_norm(ops, params, layers.conv2d(ops, params, h, "stem/conv", padding="same"), "stem/bn")
        h = record_layer(ops, "stem/relu", ops.relu(h))
        for prefix, cin, cout, stride in plan:
            y = layers.conv2d(ops, params, h, f"{prefix}/conv1", padding="same", strides=stride)
            y = record_layer(ops, f"{prefix}/relu1", ops.relu(batch_norm(ops, params, y, f"{prefix}/bn1")))
            y = batch_norm(ops, params, layers.conv2d(ops, params, y, f"{prefix}/conv2", padding="same"),
                           f"{prefix}/bn2")
            if stride != 1 or cin != cout:
                h = batch_norm(ops, params, layers.conv2d(ops, params, h, f"{prefix}/shortcut", strides=stride),
                               f"{prefix}/shortcut_bn")
            h = record_layer(ops, prefix, ops.relu(y + h))
        return layers.dense(ops, params, record_layer(ops, "pool", layers.global_average_pool2d(ops, h)), "head")

    return Model(init, forward, sparse_softmax_cross_entropy(classes), name=name or "resnet",
                 rows_independent=True)


def transformer_lm(vocab: int = 128, seq_len: int = 32, width: int = 64, heads: int = 4, depth: int = 2,
                   mlp_ratio: int = 4, dropout: float = 0.1, name: str | None = None) -> Model:
    """A small decoder-only Transformer language model (GPT-style, pre-layer-norm): token plus learned position
    embeddings, ``depth`` blocks of causal multi-head self-attention and a GELU MLP, each inside a residual with
    layer normalization before it and dropout after it, a final layer norm and a dense layer to ``vocab`` logits at
    every position::

        h = dropout(tokens[x] + positions[0..T-1])
        h = h + dropout(attention(layer_norm(h), causal))
        h = h + dropout(dense(gelu(dense(layer_norm(h)))))          (per block)
        logits = dense(layer_norm(h))

    Input: ``[batch, seq_len]`` token ids; target: the next ids, ``[batch, seq_len]``; the loss is each example's
    mean next-token cross-entropy (:func:`sequence_cross_entropy`).

    Recorded outputs: ``tokens``, ``positions``, ``embeddings`` (their sum after dropout); per block (``b{i}``)
    ``ln1``, the attention's ``mha/query``, ``mha/key``, ``mha/value``, ``mha/heads``, ``mha/attention_output``,
    ``residual1`` (``h`` after the attention's residual), ``ln2``, ``mlp1``, ``mlp2`` and the block's output under its
    own name (``b0``); ``final_ln`` and ``head``.

    Args:
        vocab: the number of token ids.
        seq_len: the sequence length (the number of learned positions).
        width: the model width (embedding size).
        heads: the attention heads; ``width`` must be a multiple of it.
        depth: the number of Transformer blocks.
        mlp_ratio: the MLP's hidden width as a multiple of ``width``.
        dropout: the dropout rate after the embeddings, the attention and the MLP.
        name: the model's name (None: ``"transformer-lm"``).

    Returns:
        A :class:`~toolkit.Model`.

    Raises:
        ArgumentError: ``width`` not a multiple of ``heads``.
    """
    if width % heads:
        raise ArgumentError(f"transformer_lm: width {width} must be a multiple of heads {heads}")

    def init(rng):
        params = {**layers.embedding_init(rng, vocab, width, prefix="tokens"),
                  **layers.embedding_init(rng, seq_len, width, prefix="positions")}
        for i in range(depth):
            params.update({**layers.layer_norm_init(rng, width, prefix=f"b{i}/ln1"),
                           **layers.multi_head_attention_init(rng, width, heads, width // heads, prefix=f"b{i}/mha"),
                           **layers.layer_norm_init(rng, width, prefix=f"b{i}/ln2"),
                           **layers.dense_init(rng, width, mlp_ratio * width, prefix=f"b{i}/mlp1"),
                           **layers.dense_init(rng, mlp_ratio * width, width, prefix=f"b{i}/mlp2")})
        return {**params, **layers.layer_norm_init(rng, width, prefix="final_ln"),
                **layers.dense_init(rng, width, vocab, prefix="head")}

    def forward(ops, params, ids):
        h = layers.embedding(ops, params, ids, "tokens") + layers.embedding(ops, params, np.arange(seq_len),
                                                                            "positions")
        h = record_layer(ops, "embeddings", layers.dropout(ops, h, dropout))
        for i in range(depth):
            a = layers.layer_norm(ops, params, h, f"b{i}/ln1")
            h = h + layers.dropout(ops, layers.multi_head_attention(ops, params, a, a, use_causal_mask=True,
                                                                    prefix=f"b{i}/mha"), dropout)
            h = record_layer(ops, f"b{i}/residual1", h)
            m = layers.dense(ops, params, layers.layer_norm(ops, params, h, f"b{i}/ln2"), f"b{i}/mlp1",
                             activation="gelu")
            h = record_layer(ops, f"b{i}", h + layers.dropout(ops, layers.dense(ops, params, m, f"b{i}/mlp2"),
                                                             dropout))
        return layers.dense(ops, params, layers.layer_norm(ops, params, h, "final_ln"), "head")

    return Model(init, forward, sequence_cross_entropy(vocab), name=name or "transformer-lm",
                 rows_independent=True)


def lstm_text(vocab: int = 32, seq_len: int = 20, embed: int = 16, units: int = 32, classes: int = 2,
              name: str | None = None, unroll: bool = False) -> Model:
    """An embedding-LSTM text classifier with masking: Keras' ``Embedding(vocab, embed, mask_zero=True)``, an
    ``LSTM(units, unroll=unroll)`` that skips the padding (id 0) as Keras does, and a dense layer to ``classes``
    logits. Input ``[batch, seq_len]`` ids padded with 0; target: integer labels. Recorded outputs: ``embedding``,
    ``lstm`` (the last hidden state), ``head``.

    Args:
        vocab: the number of token ids, 0 being padding.
        seq_len: the sequence length.
        embed: the embedding size.
        units: the LSTM's hidden size.
        classes: the number of classes.
        name: the model's name (None: ``"lstm-text"``).
        unroll: unroll the LSTM's time loop (see :func:`toolkit.layers.lstm`).

    Returns:
        A :class:`~toolkit.Model`.
    """

    def init(rng):
        return {**layers.embedding_init(rng, vocab, embed), **layers.lstm_init(rng, embed, units),
                **layers.dense_init(rng, units, classes, prefix="head")}

    def forward(ops, params, ids):
        h = layers.lstm(ops, params, layers.embedding(ops, params, ids), steps=seq_len, units=units, mask=ids != 0,
                        unroll=unroll)
        return layers.dense(ops, params, h, "head")

    return Model(init, forward, sparse_softmax_cross_entropy(classes), name=name or "lstm-text",
                 rows_independent=True)


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """The fraction of rows whose largest logit is at the label, computed in NumPy.

    Args:
        logits: ``[batch, classes]`` (or ``[..., classes]``) NumPy values.
        labels: integer labels of the leading shape.

    Returns:
        A float in ``[0, 1]``.
    """
    return float(np.mean(np.argmax(logits, axis=-1) == np.asarray(labels)))
