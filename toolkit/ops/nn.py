"""Activations, normalizations and encodings of ``keras.ops.nn`` (``leaky_relu``, ``elu``, ``normalize``,
``multi_hot``...); the losses are in :mod:`toolkit.ops.losses`.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.

The activations take any array; integer and boolean inputs compute in the computation dtype. Their values are
``keras.ops``' (JAX's formulas), and so are their gradients where a function has a kink: the branch JAX's ``where``
takes (``leaky_relu``'s slope 1 at 0, ``elu``'s ``alpha`` at 0, ``hard_tanh``'s 1 at +-1), ``relu6``'s 0 at 0 and 6,
and the half that JAX's ``clip`` gives each side of a bound (``sparse_sigmoid`` at +-1).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"relu6": "f", "log_sigmoid": "f"}

#: Keras' ``backend.epsilon()``: the probabilities of the crossentropies are clipped to ``[EPSILON, 1 - EPSILON]``,
#: and it is the default ``epsilon`` of ``normalize``, ``rms_normalization`` and ``layer_normalization``.
EPSILON = 1e-7
#: SELU's constants (Klambauer et al. 2017), as JAX and Keras write them.
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


class NNOps(ABC):
    """Activations, normalizations and encodings; mixed into :class:`~toolkit.ops.Ops`."""

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
