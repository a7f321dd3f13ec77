"""Activations, losses and normalizations of ``keras.ops.nn`` (``leaky_relu``, ``elu``, ``binary_crossentropy``,
``normalize``...).

Part of :class:`~toolkit.nn.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.

The activations take any array; integer and boolean inputs compute in the computation dtype. Their values are
``keras.ops``' (JAX's formulas), and so are their gradients where a function has a kink: the branch JAX's ``where``
takes (``leaky_relu``'s slope 1 at 0, ``elu``'s ``alpha`` at 0, ``hard_tanh``'s 1 at +-1), ``relu6``'s 0 at 0 and 6,
and the half that JAX's ``clip`` gives each side of a bound (``sparse_sigmoid`` at +-1).
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError

#: How each primitive's array arguments are converted (the letters of :data:`toolkit.nn.ops.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"relu6": "f", "log_sigmoid": "f"}

#: Keras' ``backend.epsilon()``: the probabilities of the crossentropies are clipped to ``[EPSILON, 1 - EPSILON]``,
#: and it is the default ``epsilon`` of ``normalize``, ``rms_normalization`` and ``layer_normalization``.
EPSILON = 1e-7
#: The log of an impossible path in :meth:`NNOps.ctc_loss` (Keras' and optax's ``log_epsilon``): finite, so that no
#: ``inf - inf`` appears in the forward algorithm or its gradient.
LOG_EPSILON = -1e5
#: SELU's constants (Klambauer et al. 2017), as JAX and Keras write them.
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


class NNOps(ABC):
    """Activations, losses and normalizations; mixed into :class:`~toolkit.nn.ops.Ops`."""

    def _float_input(self, x):
        """``x`` as a Tensor of its floating dtype (integers and booleans: the computation dtype)."""
        return self.wrap(self._native(x, self._result_dtype([x], floating=True)))

    # --- activations: primitives ----------------------------------------------------------------------------------
    @abstractmethod
    def relu6(self, x):
        """``min(max(x, 0), 6)``; its gradient is 0 at 0 and at 6 (JAX's ``relu6``)."""

    @abstractmethod
    def log_sigmoid(self, x):
        """``log(sigmoid(x)) = -softplus(-x)``, computed stably for any ``x``; its gradient is ``sigmoid(-x)``."""

    # --- activations: composites ----------------------------------------------------------------------------------
    def elu(self, x, alpha=1.0):
        """``x`` where ``x > 0``, else ``alpha * expm1(x)`` (exact near 0, unlike TensorFlow's ``tf.nn.elu``, which
        computes ``exp(x) - 1``); its gradient at 0 is ``alpha``."""
        x = self._float_input(x)
        # The inner where keeps expm1 off large x, whose inf would make the unused branch's gradient NaN.
        return self.where(x > 0, x, alpha * self.expm1(self.where(x > 0, 0.0, x)))

    def leaky_relu(self, x, negative_slope=0.2):
        """``x`` where ``x >= 0``, else ``negative_slope * x``."""
        x = self._float_input(x)
        return self.where(x >= 0, x, negative_slope * x)

    def selu(self, x):
        """``SELU_SCALE * elu(x, SELU_ALPHA)``."""
        return SELU_SCALE * self.elu(x, SELU_ALPHA)

    def celu(self, x, alpha=1.0):
        """``x`` where ``x > 0``, else ``alpha * expm1(x / alpha)``."""
        x = self._float_input(x)
        return self.where(x > 0, x, alpha * self.elu(x / alpha))

    def hard_sigmoid(self, x):
        """``relu6(x + 3) / 6``."""
        return self.relu6(self._float_input(x) + 3.0) / 6.0

    def hard_silu(self, x):
        """``x * hard_sigmoid(x)``; NaN at ``-inf`` (``-inf * 0``), as in NumPy and JAX."""
        x = self._float_input(x)
        # Aesara and PyTensor rewrite x * switch(c, 0, y) into switch(c, 0, x * y), which makes -inf * 0 a 0.
        return self.where(x == -float("inf"), float("nan"), x * self.hard_sigmoid(x))

    def hard_swish(self, x):
        """Another name of :meth:`hard_silu`."""
        return self.hard_silu(x)

    def swish(self, x):
        """Another name of :meth:`silu`: ``x * sigmoid(x)``."""
        return self.silu(self._float_input(x))

    def hard_tanh(self, x):
        """``x`` limited to ``[-1, 1]``; its gradient is 1 at +-1."""
        x = self._float_input(x)
        return self.where(x > 1, 1.0, self.where(x < -1, -1.0, x))

    def hard_shrink(self, x, threshold=0.5):
        """``x`` where ``|x| > threshold``, else 0."""
        x = self._float_input(x)
        return self.where(self.abs(x) > threshold, x, 0.0)

    def soft_shrink(self, x, threshold=0.5):
        """``x - threshold`` above ``threshold``, ``x + threshold`` below ``-threshold``, else 0."""
        x = self._float_input(x)
        return self.where(x > threshold, x - threshold, self.where(x < -threshold, x + threshold, 0.0))

    def tanh_shrink(self, x):
        """``x - tanh(x)``."""
        x = self._float_input(x)
        return x - self.tanh(x)

    def threshold(self, x, threshold, default_value):
        """``x`` where ``x > threshold``, else ``default_value``."""
        x = self._float_input(x)
        return self.where(x > threshold, x, default_value)

    def softsign(self, x):
        """``x / (1 + |x|)``."""
        x = self._float_input(x)
        return x / (1.0 + self.abs(x))

    def sparse_plus(self, x):
        """0 for ``x <= -1``, ``(x + 1)**2 / 4`` between, ``x`` for ``x >= 1``."""
        x = self._float_input(x)
        return self.where(x <= -1, 0.0, self.where(x >= 1, x, (x + 1.0) * (x + 1.0) / 4.0))

    def sparse_sigmoid(self, x):
        """``clip((x + 1) / 2, 0, 1)``. As JAX's ``clip``, the gradient at -1 and 1 is half the inner one (1/4):
        the mean of the two one-sided forms, which are equal in value."""
        x = self._float_input(x)
        inner = 0.5 * (x + 1.0)
        closed = self.where(x <= -1, 0.0, self.where(x >= 1, 1.0, inner))
        open_ = self.where(x < -1, 0.0, self.where(x > 1, 1.0, inner))
        return 0.5 * (closed + open_)

    def squareplus(self, x, b=4):
        """``(x + sqrt(x**2 + b)) / 2``."""
        x = self._float_input(x)
        return (x + self.sqrt(x * x + b)) / 2.0

    def glu(self, x, axis=-1):
        """Gated linear unit: ``x``'s first half along ``axis`` times the sigmoid of its second half.

        Raises:
            ShapeError: ``x``'s size along ``axis`` is odd.
        """
        x = self._float_input(x)
        shape = self.shape(x)
        axis = _axis(axis, len(shape), "glu")
        if shape[axis] % 2:
            raise ShapeError(f"glu splits axis {axis} of x in two halves; its size must be even, got x.shape={shape}")
        half = shape[axis] // 2
        before = (slice(None),) * axis
        return x[before + (slice(0, half),)] * self.sigmoid(x[before + (slice(half, None),)])

    def sparsemax(self, x, axis=-1):
        """Sparsemax (Martins and Astudillo, 2016): the Euclidean projection of ``x`` onto the probability simplex
        along ``axis``, ``max(x - tau, 0)`` with ``tau`` such that the outputs sum to 1.

        An entry ``i`` is in the support where ``1 + k_i x_i > s_i``, ``k_i`` and ``s_i`` being the count and the sum
        of the entries ``>= x_i``; ``tau = (sum of the support - 1) / its size``. That takes pairwise comparisons (an
        ``n x n`` array per row, n the size of ``axis``), not a sort. Keras 3.15.1 sums the running sums of the
        sorted support instead of the support itself: its outputs sum to less than 1 wherever the support has
        more than one entry; these are the published definition's.
        """
        x = self._float_input(x)
        axis = _axis(axis, len(self.shape(x)), "sparsemax")
        row, column = self.expand_dims(x, axis + 1), self.expand_dims(x, axis)  # x_i along axis, x_j along axis + 1
        above = column >= row
        count = self.sum(self.cast(above, x.dtype), axis=axis + 1)
        total = self.sum(self.where(above, column, 0.0), axis=axis + 1)
        support = 1.0 + count * x > total
        size = self.sum(self.cast(support, x.dtype), axis=axis, keepdims=True)
        tau = (self.sum(self.where(support, x, 0.0), axis=axis, keepdims=True) - 1.0) / size
        return self.maximum(x - tau, 0.0)

    # --- losses ----------------------------------------------------------------------------------------------------
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
        return -self.sum(target * self._log_probabilities(output, from_logits, axis), axis=axis)

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
        chosen = self.cast(self.one_hot(target, out_shape[-1]), output.dtype)
        return -self.sum(chosen * self._log_probabilities(output, from_logits, -1), axis=-1)

    def _log_probabilities(self, output, from_logits: bool, axis):
        if from_logits:
            return self.log_softmax(output, axis=axis)
        output = output / self.sum(output, axis=axis, keepdims=True)
        return self.log(self.clip(output, EPSILON, 1.0 - EPSILON))

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

    # --- normalization ---------------------------------------------------------------------------------------------
    def normalize(self, x, axis=-1, order: int = 2, epsilon: float | None = None):
        """``x / max(norm(x, order, axis), epsilon)`` (``epsilon`` defaults to :data:`EPSILON`); ``order=2`` as
        Keras writes it, ``x * min(1 / sqrt(sum(x**2, axis)), 1 / epsilon)``. A scalar is normalized as a
        vector of one entry.

        Raises:
            ArgumentError: ``order`` not an int >= 1, or ``order != 2`` over several axes (a matrix norm there).
        """
        if not isinstance(order, int) or isinstance(order, bool) or order < 1:
            raise ArgumentError(f"normalize's order must be an int >= 1, got order={order!r}")
        x = self._float_input(x)
        if not self.shape(x):
            x = self.reshape(x, (1,))
        epsilon = EPSILON if epsilon is None else epsilon
        if order == 2:
            inverse = 1.0 / self.sqrt(self.sum(self.square(x), axis=axis, keepdims=True))
            return x * self.minimum(inverse, 1.0 / epsilon)
        axes = _axes(axis, len(self.shape(x)), "normalize")
        if len(axes) > 1:
            raise ArgumentError(f"normalize with order={order} over axes {axes}: keras.ops computes a matrix norm "
                                "there; the toolkit normalizes by vector norms only (one axis, or order=2)")
        norm = self.sum(self.abs(x) ** order, axis=axes, keepdims=True) ** (1.0 / order)
        return x / self.maximum(norm, epsilon)

    def rms_normalization(self, x, scale=None, axis=-1, epsilon: float | None = None):
        """``x / sqrt(mean(x**2, axis) + epsilon) * scale`` (``epsilon`` defaults to :data:`EPSILON`), computed in
        at least float32 and returned in ``x``'s dtype, as Keras does (integer ``x`` gives integers)."""
        dtype, x = self.dtype_of(x), self._float_input(x)
        if not self.shape(x):
            x = self.reshape(x, (1,))
        epsilon = EPSILON if epsilon is None else epsilon
        outputs = x / self.sqrt(self.mean(self.square(x), axis=_axes(axis, len(self.shape(x)), "rms_normalization"),
                                          keepdims=True) + epsilon)
        if scale is not None:
            outputs = outputs * self.wrap(self._native(scale, x.dtype))
        return self.cast(outputs, dtype)

    def layer_normalization(self, x, gamma=None, beta=None, axis=-1, epsilon: float | None = None, **kwargs):
        """``(x - mean) / sqrt(variance + epsilon) * gamma + beta`` with the statistics over ``axis``
        (``epsilon`` defaults to :data:`EPSILON`), returned in ``x``'s dtype. ``gamma`` and ``beta`` are shaped
        like the normalized axes. Keras' deprecated ``rms_scaling=True`` (which scales by the variance, without
        centering) is followed, with Keras' warning.

        Raises:
            ArgumentError: a keyword argument other than ``rms_scaling``.
        """
        rms_scaling = kwargs.pop("rms_scaling", False)
        if kwargs:
            raise ArgumentError(f"layer_normalization takes no argument {sorted(kwargs)} (only x, gamma, beta, axis, "
                                "epsilon and the deprecated rms_scaling)")
        dtype, x = self.dtype_of(x), self._float_input(x)
        shape = self.shape(x)
        axes = _axes(axis, len(shape), "layer_normalization")
        epsilon = EPSILON if epsilon is None else epsilon

        def broadcast(v):
            if v is None:
                return None
            v = self.wrap(self._native(v, x.dtype))
            if len(self.shape(v)) != len(shape) and axes != (len(shape) - 1,):
                v = self.reshape(v, [shape[i] if i in axes else 1 for i in range(len(shape))])
            return v

        gamma, beta = broadcast(gamma), broadcast(beta)
        mean = self.mean(x, axis=axes, keepdims=True)
        variance = self.mean(self.square(x - mean), axis=axes, keepdims=True)
        inverse = 1.0 / self.sqrt(variance + epsilon)
        if rms_scaling:
            warnings.warn("layer_normalization(rms_scaling=True) is deprecated in Keras: it scales x by its "
                          "variance without centering it; ops.rms_normalization is the RMS normalization",
                          stacklevel=2)
            outputs = x * inverse if gamma is None else x * inverse * gamma
            return self.cast(outputs, dtype)
        if gamma is not None:
            inverse = inverse * gamma
        shift = -mean * inverse
        if beta is not None:
            shift = shift + beta
        return self.cast(x * inverse + shift, dtype)

    def batch_normalization(self, x, mean, variance, axis, offset=None, scale=None, epsilon=1e-3):
        """``(x - mean) / sqrt(variance + epsilon) * scale + offset`` with ``mean``, ``variance``, ``offset`` and
        ``scale`` vectors along ``x``'s ``axis``, computed as Keras does: ``x * inv + (offset - mean * inv)``,
        ``inv = scale / sqrt(variance + epsilon)``.

        Raises:
            ShapeError: a statistic that is not a vector of ``x``'s size along ``axis``.
        """
        given = [v for v in (x, mean, variance, offset, scale) if v is not None]
        dtype = self._result_dtype(given, floating=True)
        x = self.wrap(self._native(x, dtype))
        shape = self.shape(x)
        axis = _axis(axis, len(shape), "batch_normalization")
        along = [1] * len(shape)
        along[axis] = shape[axis]

        def vector(name, v):
            if v is None:
                return None
            v = self.wrap(self._native(v, dtype))
            if tuple(self.shape(v)) != (shape[axis],):
                raise ShapeError(f"batch_normalization needs {name} of shape ({shape[axis]},) (x's axis {axis}), got "
                                 f"{name}.shape={self.shape(v)}")
            return self.reshape(v, along)

        mean, variance = vector("mean", mean), vector("variance", variance)
        offset, scale = vector("offset", offset), vector("scale", scale)
        inverse = 1.0 / self.sqrt(variance + epsilon)
        if scale is not None:
            inverse = inverse * scale
        shift = -mean * inverse
        if offset is not None:
            shift = shift + offset
        return x * inverse + shift

    # --- encodings -------------------------------------------------------------------------------------------------
    def multi_hot(self, inputs, num_classes=None, axis=-1, dtype=None, sparse: bool = False, **kwargs):
        """Multi-hot rows: 1 at each class that ``inputs`` (integers) hold along their axis 1 (axis 0 for a
        vector), 0 elsewhere, as Keras computes it: the maximum of the one-hot encodings (classes inserted at
        ``axis``) over that axis. Entries outside ``[0, num_classes)`` set no class. ``dtype`` defaults to the
        computation dtype; ``num_tokens`` is Keras' older name of ``num_classes``.

        Raises:
            ArgumentError: ``sparse=True`` (no sparse tensors in the toolkit), or no ``num_classes``.
            DTypeError: ``inputs`` not integers.
        """
        num_classes = kwargs.pop("num_tokens", None) if num_classes is None else num_classes
        if kwargs:
            raise ArgumentError(f"multi_hot takes no argument {sorted(kwargs)}")
        if sparse:
            raise ArgumentError("multi_hot(sparse=True): the toolkit has no sparse tensors; use sparse=False")
        if num_classes is None:
            raise ArgumentError("multi_hot needs num_classes (an int), got None")
        if np.dtype(self.dtype_of(inputs)).kind not in "iu":
            raise DTypeError(f"multi_hot needs integer inputs, got dtype {self.dtype_of(inputs)}")
        encoded = self.one_hot(inputs, int(num_classes))
        rank = len(self.shape(encoded))
        axis = _axis(axis, rank, "multi_hot")
        if axis != rank - 1:
            encoded = self.transpose(encoded, [*range(axis), rank - 1, *range(axis, rank - 1)])
        encoded = self.max(encoded, axis=1 if rank > 2 else 0)
        return self.cast(encoded, dtype or self.dtype)

    # --- refused ---------------------------------------------------------------------------------------------------
    def polar(self, abs_, angle):
        """``keras.ops.polar`` (``abs_ * exp(1j * angle)``) gives complex numbers.

        Raises:
            DTypeError: always: the toolkit's tensors are boolean, integer or real floating; there is no complex
                dtype.
        """
        raise DTypeError("ops.polar returns complex numbers; the toolkit has no complex dtype (compute "
                         "abs_ * cos(angle) and abs_ * sin(angle) for the real and imaginary parts)")

    def ctc_loss(self, target, output, target_length, output_length, mask_index=0):
        """Connectionist temporal classification loss per sequence (Graves et al. 2006): minus the log of the
        probability, summed over every alignment, that ``output`` spells ``target``, as Keras computes it (the forward
        algorithm of optax's ``ctc_loss``, in log space, with ``LOG_EPSILON`` for log 0).

        Args:
            target: integer labels ``[batch, max_label_length]``; only the first ``target_length`` count.
            output: logits ``[batch, max_time, classes]`` (a log-softmax is taken); only the first
                ``output_length`` steps count.
            target_length, output_length: integers ``[batch]``.
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


def _axis(axis: int, rank: int, name: str) -> int:
    """``axis`` of an array of ``rank`` as a non-negative index, checked."""
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ShapeError(f"{name}: axis {axis!r} is out of range for an array of rank {rank}")
    return axis % rank


def _axes(axis: int | Sequence[int] | None, rank: int, name: str) -> tuple[int, ...]:
    """``axis`` (an int, a sequence of ints, or None: every axis) as sorted non-negative indices, checked."""
    if axis is None:
        return tuple(range(rank))
    axes = sorted({_axis(a, rank, name) for a in ((axis,) if isinstance(axis, int) else axis)})
    return tuple(axes)
