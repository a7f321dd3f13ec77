"""What a run reads: arrays in memory (checked once, ``validation_split`` taken from their end, weighed) or a source
of batches (:mod:`toolkit.data`), with Keras' rules for each, as :class:`~toolkit.data.feed.Feed` objects that
``fit``, ``evaluate`` and ``predict`` take their batches from."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import optree

from toolkit.data.feed import Feed
from toolkit.data.sources import ELEMENTS, ArraySource, Source, is_source, source, unpack
from toolkit.errors import ArgumentError, DTypeError, NonFiniteError, ShapeError
from toolkit.training.batches import cast, class_weights, count, sample_weights, several

#: Keras' batch size of array data where none is given.
DEFAULT_BATCH_SIZE = 32


def count_argument(value: Any, what: str, low: int = 1, optional: bool = False) -> int | None:
    """A run's count argument (``epochs``, ``batch_size``, ``steps``, ...): ``value``, an int >= ``low`` (or None
    where ``optional``), as an int.

    Args:
        value: what was given.
        what: its name, for the message.
        low: the least value taken.
        optional: whether None is taken (and returned).

    Raises:
        ShapeError: anything else, saying what was given.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ShapeError(f"{what} must be an int >= {low}{' or None' if optional else ''}, got {value!r}")
    return int(value)


def array_batch_size(batch_size: Any, steps: int | None, examples: int, default: int | None) -> int | None:
    """The batch size of a run over arrays, as Keras' array adapter sets it: ``batch_size``; where none is given,
    with ``steps``, the batch that splits the examples into that many (``ceil(examples / steps)``), else
    ``default`` (fit: 32, Keras'; evaluate and predict: None, all at once, the same numbers).

    Args:
        batch_size: what was given (None: nothing).
        steps: the run's ``steps`` or ``steps_per_epoch``, or None.
        examples: the examples of the arrays.
        default: the batch size without ``steps``.

    Raises:
        ShapeError: a ``batch_size`` that is not an int >= 1 or None.
    """
    batch_size = count_argument(batch_size, "batch_size", optional=True)
    if batch_size is not None:
        return batch_size
    return max(-(-examples // steps), 1) if steps is not None else default


def refuse_for_source(src: Source, **given: Any) -> None:
    """The refusals of arguments that the elements of a source of batches carry themselves (Keras' for ``y`` and
    ``sample_weight``), and of ``validation_split``, which only arrays can be split by (Keras').

    Raises:
        ArgumentError: ``y``, ``sample_weight``, ``batch_size`` or ``validation_split`` (where no
            ``validation_data`` overrides it) given with a source. Keras ignores a ``batch_size`` given with a
            source; the toolkit refuses it, as every setting it would not use.
    """
    carried = {"y": "the targets", "sample_weight": "the sample weights", "batch_size": "the batch size"}
    for name, value in given.items():
        if name == "validation_split" and value and given.get("validation_data") is None:
            raise ArgumentError(f"validation_split is only supported for arrays (as in Keras); x is {src.kind}: "
                                "pass validation_data")
        if name in carried and value is not None:
            raise ArgumentError(f"{name} must be None when x is {src.kind}: its elements are batches and carry "
                                f"{carried[name]} ({ELEMENTS}); got {name} of type {type(value).__name__}")


def in_context(where: str, check: Callable[[], Any]) -> Any:
    """``check()``, a shape, dtype or non-finite error it raises re-raised with ``where`` (a stream's batch) first."""
    try:
        return check()
    except (ShapeError, DTypeError, NonFiniteError) as error:
        raise type(error)(f"{where}: {error}") from error


def element_reader(trainer: Any, src: Source, targets: bool, class_weight: Any = None) -> Callable[[Any, int], Any]:
    """How an element of ``src`` becomes a batch (run on the reading thread): unpacked, cast to the trainer's dtype
    (integers to int32), its weights checked (``sample_weight``, or ``class_weight`` converted from its ``y``).

    Args:
        trainer: whose dtype.
        src: the source, for messages.
        targets: whether the run needs ``y`` (fit and evaluate; predict takes ``x`` only).
        class_weight: fit's ``class_weight``, or None.
    """
    dtype = trainer.dtype

    def read(element: Any, index: int) -> tuple[Any, Any, np.ndarray | None]:
        where = f"batch {index} of {src.kind}"
        x, y, weight = unpack(element, where)
        if targets and y is None:
            raise ShapeError(f"{where} has no targets: each batch must be (x, y) or (x, y, sample_weight) here")
        x = in_context(where, lambda: optree.tree_map(lambda a: cast(a, dtype, "x"), x))
        if not targets:
            return x, None, None
        y = in_context(where, lambda: optree.tree_map(lambda a: cast(a, dtype, "y"), y))
        return x, y, in_context(where, lambda: example_weights(y, weight, class_weight, dtype, where))

    return read


def example_weights(y: Any, sample_weight: Any, class_weight: Any, dtype: str,
                    where: str | None = None) -> np.ndarray | None:
    """The examples' weights of a fit's batch (or of all its arrays): ``sample_weight``, or ``class_weight``
    converted from ``y`` (Keras' rules), or None.

    Args:
        y: the targets.
        sample_weight: one weight per example, or None.
        class_weight: ``{class: weight}``, or None.
        dtype: the weights' dtype.
        where: the batch of a source whose element carried ``sample_weight``; None: fit's argument.

    Raises:
        ArgumentError: both given, or class_weight for several outputs or a bad class_weight; ShapeError,
            DTypeError, NonFiniteError: bad weights.
    """
    if sample_weight is not None and class_weight is not None:
        given = f"{where} carries sample weights and class_weight was given" if where else \
            "sample_weight and class_weight were both given"
        raise ArgumentError(f"{given}: pass one, not both (Keras refuses both too): fold the class weights into the "
                            "sample weights")
    if class_weight is not None:
        if several(y):
            raise ArgumentError("class_weight is only supported for a model of one output (as in Keras): weigh the "
                                "examples of a model of several outputs with sample_weight")
        return class_weights(y, class_weight, dtype)
    return None if sample_weight is None else sample_weights(sample_weight, count(y), dtype)


def _split(x: Any, y: Any, sample_weight: Any, fraction: Any) -> tuple[tuple, tuple]:
    """Keras' ``validation_split``: the last ``fraction`` of the examples (before any shuffling) for validation."""
    total = count(y)
    split_at = int(math.floor(total * (1.0 - fraction)))
    if split_at in (0, total):
        raise ShapeError(f"{total} examples cannot be split into a training and a validation set by "
                         f"validation_split={fraction} (as in Keras): pass more data or another fraction")

    def part(value: Any, rows: slice) -> Any:
        if value is None:
            return None
        return optree.tree_map(lambda a: np.asarray(a)[rows], value)

    head, tail = slice(0, split_at), slice(split_at, total)
    return (part(x, head), part(y, head), part(sample_weight, head)), (part(x, tail), part(y, tail),
                                                                       part(sample_weight, tail))


def split_validation(x: Any, y: Any, sample_weight: Any, validation_split: Any,
                     validation_data: Any) -> tuple[Any, Any, Any, Any]:
    """``x, y, sample_weight, validation_data`` after Keras' ``validation_split`` of arrays: taken where no
    ``validation_data`` is given (Keras' documented precedence: ``validation_data`` overrides the split, and every
    example trains).

    Raises:
        ArgumentError: a fraction outside [0, 1); ShapeError: too few examples to split.
    """
    check_fraction(validation_split)
    if validation_split == 0 or validation_data is not None:
        return x, y, sample_weight, validation_data
    (x, y, weight), held_out = _split(x, y, sample_weight, validation_split)
    return x, y, weight, held_out if held_out[2] is not None else held_out[:2]


def check_fraction(validation_split: Any) -> None:
    """Refuse a ``validation_split`` that is not a fraction (whether or not it is used).

    Raises:
        ArgumentError: not a number in [0, 1).
    """
    if isinstance(validation_split, bool) or not isinstance(validation_split, (int, float, np.integer, np.floating)) \
            or not 0 <= validation_split < 1:
        raise ArgumentError(f"validation_split must be a float in [0, 1), got {validation_split!r}")


def array_feed(x: Any, y: Any, weights: np.ndarray | None, batch_size: int, shuffle: bool,
               steps_per_epoch: int | None, trainer: Any) -> Feed:
    """The feed of checked arrays, each pass's order drawn from the trainer's RNG where ``shuffle``."""
    src = ArraySource(x, y, weights, count(y), batch_size, shuffle)
    return Feed(src, steps_per_epoch, lambda element, index: element, (lambda: trainer.rng) if shuffle else None,
                trainer.training_state.set_rng_state)


def source_feed(trainer: Any, data: Any, steps: int | None, targets: bool, what: str, shuffle: bool = False,
                class_weight: Any = None, steps_name: str = "steps") -> Feed:
    """The feed of a source of batches ``data`` (``what`` names the argument), each epoch ``steps`` batches
    (``steps_name`` the argument that gives them) or a pass, the order of a PyDataset's batches drawn from the
    trainer's RNG where ``shuffle`` (as Keras shuffles it).

    Raises:
        ArgumentError: an infinite source without ``steps``; and what :func:`toolkit.data.sources.source` raises.
    """
    src = source(data)
    if src.infinite and steps is None:
        raise ArgumentError(f"{what} is {src.kind} that never ends (.repeat(), or no num_batches): pass {steps_name} "
                            "to say how many batches an epoch takes")
    if shuffle and not src.shuffles:
        warnings.warn(f"`shuffle=True` was passed, but will be ignored since the data `x` was provided as "
                      f"{src.kind}: it keeps its own order (shuffle it where it is made, as in Keras)", stacklevel=4)
    if class_weight is not None:
        class_weights(np.zeros(1, np.int32), class_weight, trainer.dtype)  # a bad dict refused before any step
    draws = shuffle and src.shuffles
    return Feed(src, steps, element_reader(trainer, src, targets, class_weight),
                (lambda: trainer.rng) if draws else None, trainer.training_state.set_rng_state, what)


def is_batches(data: Any) -> bool:
    """Whether ``data`` is read as batches (a source, or a feed) rather than as arrays."""
    return isinstance(data, Feed) or is_source(data)


def validation_arrays(validation_data: Any) -> tuple[Any, Any, Any]:
    """``(x, y, sample_weight)`` of array validation data, as Keras unpacks it.

    Raises:
        ArgumentError: not a pair or a triple.
    """
    if isinstance(validation_data, Mapping) or not isinstance(validation_data, (tuple, list)) \
            or len(validation_data) not in (2, 3):
        raise ArgumentError(f"validation_data must be a pair (x, y), a triple (x, y, sample_weight) or a source of "
                            f"batches, got {type(validation_data).__name__}"
                            + (f" of {len(validation_data)}" if isinstance(validation_data, (tuple, list)) else ""))
    return (*validation_data, None)[:3]


__all__ = ["DEFAULT_BATCH_SIZE", "array_batch_size", "array_feed", "check_fraction", "count_argument",
           "element_reader", "example_weights", "in_context", "is_batches", "refuse_for_source", "source_feed",
           "split_validation", "validation_arrays"]
