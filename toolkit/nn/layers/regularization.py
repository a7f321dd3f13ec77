"""Dropout (Keras ``Dropout``), with noise that follows the example, not the device (:mod:`toolkit.nn.context`)."""

from __future__ import annotations

from collections.abc import Sequence

from toolkit.errors import ArgumentError, ShapeError


def dropout(ops, x, rate: float, noise_shape: Sequence[int | None] | None = None):
    """In training, each entry is zeroed with probability ``rate`` and the others are scaled by ``1 / (1 - rate)``;
    in inference, ``x`` unchanged (Keras ``Dropout``)::

        keep = example_uniform(noise_shape) >= rate
        y = where(keep, x / (1 - rate), 0)

    ``x``'s axis 0 must be the examples: each example's mask comes from its key, so it is the same on every backend
    and whatever device the example lands on. ``noise_shape`` (as Keras; None entries take ``x``'s size) shares one
    draw along its axes of size 1, for example ``(None, 1, features)`` for one mask per sequence.

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model; ``ops.training`` switches dropout on.
        x: ``[examples, ...]``.
        rate: the probability that an entry is zeroed, in ``[0, 1)``.
        noise_shape: the shape of one draw, broadcast to ``x``'s (None: ``x``'s shape).

    Returns:
        A tensor of ``x``'s shape and dtype.

    Raises:
        ArgumentError: ``rate`` outside ``[0, 1)``.
        ShapeError: a ``noise_shape`` that does not broadcast to ``x``'s shape.
    """
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ArgumentError(f"dropout rate must be in [0, 1), got {rate}")
    if not ops.training or rate == 0.0:
        return x
    shape = ops.shape(x)
    if noise_shape is None:
        noise = tuple(shape)
    else:
        noise = tuple(size if wanted is None else wanted for size, wanted in zip(shape, noise_shape))
        if len(noise_shape) != len(shape) or any(n not in (1, s) for n, s in zip(noise[1:], shape[1:])):
            raise ShapeError(f"dropout noise_shape {tuple(noise_shape)} does not broadcast to x's shape {shape}: "
                             "each entry must be None, 1 or x's size")
    keep = ops.example_uniform(noise) >= rate
    return ops.where(keep, x / (1.0 - rate), 0.0)
