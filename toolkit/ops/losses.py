"""The losses of ``keras.ops.nn``: ``binary_crossentropy``, ``categorical_crossentropy``,
``sparse_categorical_crossentropy``, ``psnr`` and ``ctc_loss`` (``ctc_decode`` refused).

Part of :class:`~toolkit.ops.Ops`, composites only: written once here from the other groups' ops (the activations'
``_float_input`` and ``log_sigmoid`` among them). Values are Keras' (its NumPy backend's formulas) with IEEE's
special values on every backend: a target of 0 against an infinite logit is NaN, as ``0 * inf``.
"""

from __future__ import annotations

import math
from abc import ABC

import numpy as np

from toolkit.errors import ArgumentError, ShapeError
from toolkit.ops.nn import EPSILON

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): none
#: here.
ARGUMENTS: dict[str, str] = {}
#: The log of an impossible path in :meth:`LossOps.ctc_loss` (Keras' and optax's ``log_epsilon``): finite, so that
#: no ``inf - inf`` appears in the forward algorithm or its gradient.
LOG_EPSILON = -1e5


def log_probabilities(ops, output, from_logits: bool, axis, epsilon: float):
    """The log-probabilities of ``output`` along ``axis``: ``log_softmax(output)`` with ``from_logits``, else the log
    of ``output`` divided by its sum and clipped to ``[epsilon, 1 - epsilon]`` (Keras' formula for probabilities).
    Every cross-entropy of the toolkit takes its log-probabilities from here: the ops', the Keras losses'
    (:mod:`toolkit.nn.losses`) and the built-in models'.

    Args:
        ops: the :class:`~toolkit.ops.Ops` computing it.
        output: logits or probabilities.
        from_logits: whether ``output`` holds logits.
        axis: the classes' axis.
        epsilon: the clipping bound of probabilities (Keras' ``epsilon()``).
    """
    if from_logits:
        return ops.log_softmax(output, axis=axis)
    output = output / ops.sum(output, axis=axis, keepdims=True)
    return ops.log(ops.clip(output, epsilon, 1.0 - epsilon))


def sparse_crossentropy(ops, labels, log_p, classes: int | None = None):
    """Each row's cross-entropy of its integer label: ``-log_p[label]`` along the last axis, taken by a one-hot
    product rather than by indexing, so that a label outside ``[0, classes)`` selects nothing (loss 0, as Keras'
    one-hot does) and every backend's gradient is the same product's. The one sparse cross-entropy of the toolkit:
    the op's, the Keras losses' and the built-in models' call it.

    Args:
        ops: the :class:`~toolkit.ops.Ops` computing it.
        labels: integer class indices, shaped like ``log_p`` without its last axis.
        log_p: log-probabilities (:func:`log_probabilities`), the classes on the last axis.
        classes: the number of classes (None: ``log_p``'s last axis).
    """
    classes = ops.shape(log_p)[-1] if classes is None else classes
    return -ops.sum(ops.one_hot(labels, classes, dtype=ops.dtype_of(log_p)) * log_p, axis=-1)


class LossOps(ABC):  # noqa: B024 (composites only: nothing for a backend to implement)
    """Losses; mixed into :class:`~toolkit.ops.Ops`."""

    def binary_crossentropy(self, target, output, from_logits: bool = False):
        """Elementwise ``-(target log p + (1 - target) log(1 - p))``: ``p = clip(output, EPSILON, 1 - EPSILON)``, or
        with ``from_logits`` ``log p = log_sigmoid(output)`` and ``log(1 - p) = log_sigmoid(-output)``, not clipped.

        Raises:
            ShapeError: ``target`` and ``output`` of different shapes.
        """
        target, output = self._same_shape("binary_crossentropy", target, output)
        if from_logits:
            return -target * self.log_sigmoid(output) - (1.0 - target) * self.log_sigmoid(-output)
        output = self.clip(output, EPSILON, 1.0 - EPSILON)
        return -(target * self.log(output) + (1.0 - target) * self.log(1.0 - output))

    def categorical_crossentropy(self, target, output, from_logits: bool = False, axis=-1):
        """``-sum(target * log p, axis)``: ``log p = log_softmax(output, axis)`` with ``from_logits``, else ``p`` is
        ``output`` divided by its sum along ``axis`` and clipped to ``[EPSILON, 1 - EPSILON]``.

        Raises:
            ShapeError: ``target`` and ``output`` of different shapes, or scalars.
        """
        target, output = self._same_shape("categorical_crossentropy", target, output)
        if not self.shape(output):
            raise ShapeError("categorical_crossentropy needs target and output of rank >= 1, got scalars")
        return -self.sum(target * log_probabilities(self, output, from_logits, axis, EPSILON), axis=axis)

    def sparse_categorical_crossentropy(self, target, output, from_logits: bool = False, axis=-1):
        """:meth:`categorical_crossentropy` with ``target`` the class indices (integers; floats are truncated to
        them, as Keras does), shaped like ``output`` without its last axis (or with it of size 1). A target outside
        ``[0, classes)`` selects no class: its loss is 0 (Keras' one-hot of it is all zeros).

        Raises:
            ShapeError: ``target``'s shape is not ``output``'s without the last axis, ``output`` is a scalar, or
                ``axis`` is not the last axis (the classes must be last, as Keras on TensorFlow requires).
        """
        output = self._float_input(output)
        out_shape, target_shape = self.shape(output), self.shape(target)
        if not out_shape:
            raise ShapeError("sparse_categorical_crossentropy needs an output of rank >= 1, got a scalar")
        if axis not in (-1, len(out_shape) - 1):
            raise ShapeError(f"sparse_categorical_crossentropy takes the classes along the last axis of output "
                             f"(axis=-1), got axis={axis} for output.shape={out_shape}")
        target = self.cast(target, "int32")
        if len(target_shape) == len(out_shape) and target_shape[-1] == 1:
            target = self.squeeze(target, axis=-1)
        if tuple(self.shape(target)) != tuple(out_shape[:-1]):
            raise ShapeError(f"sparse_categorical_crossentropy needs target of output's shape without its last axis "
                             f"{tuple(out_shape[:-1])}, got target.shape={target_shape}")
        return sparse_crossentropy(self, target, log_probabilities(self, output, from_logits, -1, EPSILON),
                                   out_shape[-1])

    def _same_shape(self, name: str, x1, x2):
        """``x1`` and ``x2`` as Tensors of their common floating dtype, checked to have one shape."""
        dtype = self._result_dtype([x1, x2], floating=True)
        x1, x2 = self.wrap(self._native(x1, dtype)), self.wrap(self._native(x2, dtype))
        if tuple(self.shape(x1)) != tuple(self.shape(x2)):
            names = ("target", "output") if "entropy" in name else ("x1", "x2")
            raise ShapeError(f"{name} needs {names[0]} and {names[1]} of one shape, got {names[0]}.shape="
                             f"{self.shape(x1)} and {names[1]}.shape={self.shape(x2)}")
        return x1, x2

    def psnr(self, x1, x2, max_val):
        """Peak signal-to-noise ratio in decibels, ``20 log10(max_val) - 10 log10(mean((x1 - x2)**2))`` over all
        entries (``inf`` for equal inputs).

        Raises:
            ShapeError: ``x1`` and ``x2`` of different shapes.
        """
        x1, x2 = self._same_shape("psnr", x1, x2)
        max_val = self.wrap(self._native(max_val, x2.dtype))
        error = self.mean(self.square(self._difference(x1, x2)))
        return (20.0 / math.log(10.0)) * self.log(max_val) - (10.0 / math.log(10.0)) * self.log(error)

    def _difference(self, x1, x2):
        """``x1 - x2`` with IEEE's values also where ``x1`` and ``x2`` are one array: the Theano family's engines
        rewrite ``x - x`` into 0, which is NaN for an infinite or NaN ``x``. Where an operand is not finite, the
        difference is spelled out without a subtraction (NaN for NaN or equal infinities, else the infinity)."""
        finite = self.logical_and(self.isfinite(x1), self.isfinite(x2))
        undefined = self.logical_or(self.logical_or(self.isnan(x1), self.isnan(x2)), x1 == x2)
        infinite = self.where(undefined, float("nan"), self.where(self.isinf(x1), x1, -x2))
        return self.where(finite, x1 - x2, infinite)

    def ctc_loss(self, target, output, target_length, output_length, mask_index=0):
        """Connectionist temporal classification loss per sequence (Graves et al. 2006): minus the log of the
        probability, summed over every alignment, that ``output`` spells ``target``, as Keras computes it (the forward
        algorithm of optax's ``ctc_loss``, in log space, with ``LOG_EPSILON`` for log 0).

        Args:
            target: integer labels ``[batch, max_label_length]``; only the first ``target_length`` count.
            output: logits ``[batch, max_time, classes]`` (a log-softmax is taken); only the first
                ``output_length`` steps count.
            target_length: the targets' lengths, integers ``[batch]``.
            output_length: the outputs' lengths, integers ``[batch]``.
            mask_index: the blank class.

        Raises:
            ShapeError: ``output`` not of rank 3 or ``target`` not of rank 2 with ``output``'s batch size.
        """
        output = self._float_input(output)
        shape, labels_shape = self.shape(output), self.shape(target)
        if len(shape) != 3 or len(labels_shape) != 2 or labels_shape[0] != shape[0]:
            raise ShapeError(f"ctc_loss needs output [batch, time, classes] and target [batch, labels], got "
                             f"output.shape={shape} and target.shape={labels_shape}")
        (batch, steps, classes), labels = shape, labels_shape[1]
        dtype = output.dtype
        target = self.cast(target, "int32")
        logprobs = self.log_softmax(output, axis=-1)
        # 1 where a label equals the next one: a blank must separate them.
        repeat = self.concatenate([self.cast(target[:, :-1] == target[:, 1:], dtype),
                                   self.wrap(self._native(np.zeros((batch, 1)), dtype))], axis=1)
        blank = self.transpose(logprobs[:, :, mask_index:mask_index + 1], (1, 0, 2))  # [time, batch, 1]
        chosen = self.cast(self.one_hot(target, classes), dtype)  # [batch, labels, classes]
        emit = self.transpose(self.matmul(logprobs, self.transpose(chosen, (0, 2, 1))), (1, 0, 2))  # [time, b, labels]
        padding = self.cast(self.expand_dims(self.cast(output_length, "int32"), -1) <= np.arange(steps), dtype)

        def log_add(x1, x2):
            """``log(exp(x1) + exp(x2))`` of finite values (every score here is >= about ``LOG_EPSILON`` times the
            length): fewer ops than ``ops.logaddexp``, whose care for infinities these scores do not need."""
            larger = self.maximum(x1, x2)
            return larger + self.log(self.exp(x1 - larger) + self.exp(x2 - larger))

        def add_to_phi(phi, score):
            """``phi[:, 1:]`` plus ``score`` in log space."""
            return self.concatenate([phi[:, :1], log_add(phi[:, 1:], score)], axis=-1)

        def step(carry, x):
            previous_phi, previous_emit = carry
            emit_t, blank_t, pad = x
            phi = add_to_phi(previous_phi, previous_emit + LOG_EPSILON * repeat)  # emit to blank, unless repeated
            next_emit = log_add(phi[:, :-1] + emit_t, previous_emit + emit_t)  # blank to emit, emit's loop
            next_phi = add_to_phi(phi + blank_t, previous_emit + blank_t + LOG_EPSILON * (1.0 - repeat))
            pad = self.reshape(pad, (batch, 1))
            return (pad * previous_phi + (1.0 - pad) * next_phi, pad * previous_emit + (1.0 - pad) * next_emit), None

        start_phi = np.full((batch, labels + 1), LOG_EPSILON)
        start_phi[:, 0] = 0.0
        init = (self.wrap(self._native(start_phi, dtype)),
                self.wrap(self._native(np.full((batch, labels), LOG_EPSILON), dtype)))
        (phi, last_emit), _ = self.scan(step, init, (emit, blank, self.transpose(padding, (1, 0))))
        phi = add_to_phi(phi, last_emit)
        ends = self.clip(self.cast(target_length, "int32"), 0, labels)
        return -self.sum(phi * self.cast(self.one_hot(ends, labels + 1), dtype), axis=-1)

    def ctc_decode(self, inputs, sequence_lengths, strategy="greedy", beam_width=100, top_paths=1,
                   merge_repeated=True, mask_index=0):
        """``keras.ops.ctc_decode``.

        Raises:
            ArgumentError: always: the toolkit does not implement CTC decoding.
        """
        raise ArgumentError("ops.ctc_decode is not implemented in the toolkit")
