"""What a model run knows besides its parameters and inputs: training or inference, its model state, and the
per-example random keys its noise comes from.

A trainer runs ``forward`` inside a :class:`RunContext` (:meth:`toolkit.nn.model.Model.run`); model code reads it
through the ops: ``ops.training``, ``ops.example_uniform(shape)`` and ``ops.update_state(name, value)``, and the
layers that need it (``dropout``, ``batch_norm``) use those.

**Randomness that does not depend on the device.** Every example of a training step gets a 32-bit key made on the
host from the trainer's seed, the step number and the example's index in the global batch (:func:`example_keys`).
The keys are split across devices with the examples, so a row's noise is the same whichever device it lands on and
however the batch is split. Inside ``forward``, the ``k``-th random call turns each example's key into numbers
with one integer hash per element (:func:`mix32`, the same unsigned 32-bit arithmetic on every backend, checked
against NumPy), so TensorFlow and Aesara draw identical numbers and float64 parity holds with dropout on.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The dtype of the per-example keys.
KEY_DTYPE = "uint32"
#: A uniform number keeps the top 24 bits of a hash: exact in float32 and float64, in ``[0, 1 - 2**-24]``.
UNIFORM_BITS = 24

#: The steps of :func:`mix32`: ``x ^= x >> shift``, then ``x *= multiplier`` (modulo 2**32) where one is given.
MIX32_STEPS = ((16, 0x7FEB352D), (15, 0x846CA68B), (16, None))

_MASK = 0xFFFFFFFF


def mix32(x: np.ndarray) -> np.ndarray:
    """An invertible 32-bit integer hash ("lowbias32", C. Wellons): the xor-shifts and multiplications of
    :data:`MIX32_STEPS`, modulo 2**32. The backends run the same steps on their unsigned 32-bit tensors."""
    x = np.asarray(x, np.uint32).copy()
    with np.errstate(over="ignore"):
        return _mix32_in_place(x)


def _mix32_in_place(x: np.ndarray) -> np.ndarray:
    """The steps of :func:`mix32` on ``x``, a uint32 array it may overwrite."""
    for shift, multiplier in MIX32_STEPS:
        x ^= x >> np.uint32(shift)
        if multiplier is not None:
            x *= np.uint32(multiplier)
    return x


def _mix32_int(x: int) -> int:
    """:func:`mix32` of one Python int: the trainer's step computes its seed and step hashes this way, as NumPy
    scalar arithmetic under ``errstate`` cost a fifth of a small model's step."""
    for shift, multiplier in MIX32_STEPS:
        x ^= x >> shift
        if multiplier is not None:
            x = (x * multiplier) & _MASK
    return x


def example_keys(seed: int, step: int, rows: np.ndarray) -> np.ndarray:
    """One key per example: a hash of ``(seed, step, global row index)``. Seeds and steps are taken modulo 2**32
    (a seed's high bits are folded in)."""
    return mix32(np.uint32(_step_key(seed, step)) ^ mix32(np.asarray(rows, np.int64).astype(np.uint32)))


def consecutive_example_keys(seed: int, step: int, first: int, count: int) -> np.ndarray:
    """:func:`example_keys` of rows ``first .. first + count - 1``, as a trainer's step asks for them: the rows'
    hashes are the same every step, so they are kept (:func:`_row_hashes`), and only the step's key is mixed in.
    Hashing every row again at each step would be about a fifth of a small model's host work per step."""
    # In place on the fresh array the xor makes: NumPy's array arithmetic wraps modulo 2**32 without the overflow
    # checks that make mix32 set errstate (they apply to scalars), and without its copy.
    return _mix32_in_place(_row_hashes(int(first), int(count)) ^ np.uint32(_step_key(seed, step)))


#: How many row ranges :func:`consecutive_example_keys` keeps the hashes of: a training run uses one or two batch
#: sizes (the last batch of an epoch), a few more with micro-batches or processes; 4 bytes a row each.
ROW_HASH_CACHE = 8


@functools.lru_cache(maxsize=ROW_HASH_CACHE)
def _row_hashes(first: int, count: int) -> np.ndarray:
    hashes = mix32(np.arange(first, first + count, dtype=np.int64).astype(np.uint32))
    hashes.flags.writeable = False  # shared by every step's keys
    return hashes


def _step_key(seed: int, step: int) -> int:
    seed = int(seed)
    base = _mix32_int((seed & _MASK) ^ _mix32_int((seed >> 32) & _MASK))
    return _mix32_int(base ^ (int(step) & _MASK))


def element_counters(call: int, shape: tuple[int, ...]) -> np.ndarray:
    """The per-element constants of the ``call``-th random draw of a run: a hash of ``(call, element index)``,
    shaped like one example's noise. An element's number is ``mix32(example key ^ counter)``."""
    size = int(np.prod(shape, dtype=np.int64))
    with np.errstate(over="ignore"):
        salted = np.arange(size, dtype=np.uint32) + mix32(np.uint32(0x9E3779B9) * np.uint32(call + 1))
    return mix32(salted).reshape(shape)


def uniform_reference(keys: np.ndarray, call: int, shape: tuple[int, ...]) -> np.ndarray:
    """What ``ops.example_uniform(shape)`` gives for ``keys`` as its ``call``-th draw, in NumPy (float64): the
    reference the backends are tested against."""
    keys = np.asarray(keys, np.uint32).reshape((-1,) + (1,) * (len(shape) - 1))
    bits = mix32(keys ^ element_counters(call, tuple(shape[1:])))
    return (bits >> np.uint32(32 - UNIFORM_BITS)).astype(np.float64) * 2.0 ** -UNIFORM_BITS


@dataclass
class RunContext:
    """One run of a model.

    Attributes:
        training: True for a training step (batch statistics, dropout on), False for inference.
        keys: the examples' keys (a native uint32 ``[batch]`` array) or None when the run has none.
        state: the model state's current values by name (natives).
        updates: new state values recorded by ``ops.update_state`` during the run.
        calls: random draws made so far in this run (numbers each draw's counters).
        replica_sum: how ``ops.cross_replica_sum`` adds a native over the replicas of the step (the backend's
            translation: a sum across the devices traced together, or the identity for one replica), or None where
            this run is one device's part of a step composed per device, where no replica sees another.
        row_weights: None where every row of the batch is an example; else a native ``[rows]`` vector of 1 for the
            shard's examples and 0 for rows that pad the shard to the step's common shard size (a step whose
            backend runs shards of one size: :mod:`toolkit.training.shards`). Losses, metrics and ``ops.moments``
            over the batch axis weigh rows by it.
        penalties: terms a training run's model adds to its loss outside the examples' weights (Keras' regularization
            losses), each a scalar or a ``[batch]`` vector: :meth:`toolkit.nn.model.Model.train_losses` adds them to
            the per-example losses after weighing those by the examples' weights (Keras' ``sample_weight``).
    """

    training: bool
    keys: Any = None
    state: Mapping[str, Any] = field(default_factory=dict)
    updates: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    replica_sum: Callable[[Any], Any] | None = None
    row_weights: Any = None
    penalties: list[Any] = field(default_factory=list)


def single_replica(value: Any) -> Any:
    """The cross-replica sum of a step with one replica: the value itself."""
    return value


_CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("toolkit_run_context", default=None)


def current() -> RunContext | None:
    """The context of the run being traced, or None outside one (model code called directly: inference)."""
    return _CURRENT.get()


@contextlib.contextmanager
def running(context: RunContext) -> Iterator[RunContext]:
    """Make ``context`` current while a model is traced."""
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)
