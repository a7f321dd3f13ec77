"""The training context's ops: whether the model runs for training (:attr:`TrainingOps.training`), model state
updated by a training step (``update_state``), sums across the replicas of a data-parallel step
(``cross_replica_sum``, synchronized statistics), per-example random numbers (``example_uniform``), the step's
finiteness check (``all_finite``) and named intermediate outputs (``record``, collected by :func:`recording`). They
read the run of :mod:`toolkit.nn.context` that a trainer opens around a step.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.
"""

from __future__ import annotations

import contextlib
import contextvars
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError, ModelStateError, ShapeError
from toolkit.nn import context

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"all_finite": "T", "_hash_uniform": "tt"}

#: The outputs ``ops.record`` names while :func:`recording` is open (None: no recording, ``record`` is the identity).
_RECORDS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("toolkit_records", default=None)


@contextlib.contextmanager
def recording() -> Iterator[dict[str, Any]]:
    """Collect the intermediate outputs that model code names with ``ops.record(name, x)`` while this is open, in the
    order they are recorded: how ``multigpu localize`` reads every layer's output. Open it inside the function a
    backend traces (around ``forward``) and return the dict from that function, so the values become its outputs.

    Yields:
        ``{name: Tensor}``, filled as ``forward`` runs; a name recorded again (a layer called twice) is kept as
        ``name#2``, ``name#3`` and so on.
    """
    records: dict[str, Any] = {}
    token = _RECORDS.set(records)
    try:
        yield records
    finally:
        _RECORDS.reset(token)


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """Drop the records made while this is open (``ops.record`` is the identity inside): where a caller records a
    layer's output under a name of its own, the layers it is built of add no rows of theirs. The Keras import opens
    it around each Keras layer's call and records the output under the Keras layer's name, one row per layer."""
    token = _RECORDS.set(None)
    try:
        yield
    finally:
        _RECORDS.reset(token)


def record_layer(ops, name: str, x):
    """What the built-in layers (:mod:`toolkit.nn.layers`) and models call on their output: ``ops.record(name,
    x)``, except inside ``ops.scan``'s body, where the values exist only inside the loop and a layer used there (a
    dense layer in a recurrent cell) is not recorded rather than refused.

    A layer of several outputs (a tuple or list: an operation such as ``split`` in an imported Keras model) is not
    recorded; the steps that take its outputs apart are.

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        name: the layer's name (its ``prefix``).
        x: the layer's output.

    Returns:
        ``x`` itself.
    """
    return x if ops._scan_depth or isinstance(x, (tuple, list)) else ops.record(name, x)


class TrainingOps(ABC):
    """Mixed into :class:`~toolkit.ops.Ops`."""

    @property
    def training(self) -> bool:
        """Whether the model runs for a training step (True) or for inference (False: predict, evaluation, model
        code called outside a trainer). Layers read it: ``dropout`` is the identity and ``batch_norm`` uses its
        moving statistics in inference."""
        run = context.current()
        return bool(run and run.training)

    def update_state(self, name: str, value) -> None:
        """Give the model state ``name`` (declared with :class:`~toolkit.State` in ``init``) its value after this
        training step. The trainer writes it with the parameters, all or nothing, on every replica (the replicas'
        values averaged, weighted by their share of the batch). Outside a training run it does nothing."""
        run = context.current()
        if run is None or not run.training:
            return
        if self._scan_depth:
            raise ModelStateError(f"update_state({name!r}) inside ops.scan's f: the body is built once for every "
                                  "iteration; return the value in the carry and update the state after the loop")
        if name not in run.state:
            raise ModelStateError(f"update_state({name!r}): the model declares no state of that name; its state is "
                                  f"{sorted(run.state)} (mark an init entry with toolkit.State(array))")
        value = self._native(value, self.dtype)
        new, old = tuple(self.native_shape(value)), tuple(self.shape(run.state[name]))
        if new != old:
            raise ModelStateError(f"update_state({name!r}): the new value has shape {new}, the state has {old}")
        run.updates[name] = value

    def record(self, name: str, x):
        """``x`` itself, named ``name`` as an intermediate output of the model: where a recording is open
        (:func:`recording`, as ``multigpu localize`` opens one) the value is collected under ``name``; elsewhere
        nothing happens, and nothing of it reaches a compiled step (it returns the same tensor it was given).

        Raises:
            ArgumentError: ``name`` is not a non-empty string.
            ModelStateError: a recording is open and ``record`` is called inside ``ops.scan``'s ``f`` (the body is
                built once, its values exist only inside the loop: record the scan's outputs instead).
        """
        if not isinstance(name, str) or not name:
            raise ArgumentError(f"record needs a non-empty string name, got {name!r}")
        records = _RECORDS.get()
        if records is None:
            return x
        if self._scan_depth:
            raise ModelStateError(f"record({name!r}) inside ops.scan's f: the body's values exist only inside the "
                                  "loop; record the scan's outputs (its ys or final carry) after it")
        key, count = name, 1
        while key in records:
            count += 1
            key = f"{name}#{count}"
        records[key] = self.wrap(self._native(x))
        return x

    def cross_replica_sum(self, x):
        """``x`` summed over the replicas of a data-parallel training step, the same on every replica: each device
        adds the other devices' values of ``x`` to its own (``lax.psum``; ``ReplicaContext.all_reduce(SUM)`` under
        ``MirroredStrategy``). Its gradient is the cross-replica sum of the gradients, so training through it is
        training on the whole batch. With one replica it is ``x``. Synchronized statistics
        (``moments(..., synchronized=True)``, ``batch_norm(..., synchronized=True)``) are made with it.

        Raises:
            ModelStateError: where the step's replicas do not run together: a step composed per device
                (``trainer.gradients``, gradient accumulation), ModelParallel, model code run outside a trainer;
                and where the step pads uneven shards to one size (Aesara), whose padding rows a sum of rows would
                count: make row statistics with ``moments(..., synchronized=True)``, which weighs them out.
        """
        run = context.current()
        if run is not None and run.row_weights is not None:
            raise ModelStateError("cross_replica_sum in a step over uneven shards padded to one size (Aesara's "
                                  "multi-device step): a sum over rows would count the padding rows; make row "
                                  "statistics with ops.moments(..., synchronized=True), which weighs them out")
        return self._cross_replica_sum(x, run)

    def _cross_replica_sum(self, x, run):
        if run is None or run.replica_sum is None:
            raise ModelStateError("cross_replica_sum (synchronized statistics) needs a data-parallel training step "
                                  "that runs its replicas together: DataParallel's step, not trainer.gradients() or "
                                  "accumulated micro-batches; this run is "
                                  + ("outside a trainer's training step" if run is None or not run.training
                                     else "one device's part of a step composed per device"))
        x = self._native(x, self._result_dtype([x], floating=True))
        return self.wrap(run.replica_sum(x))

    def example_uniform(self, shape: Sequence[int]):
        """Uniform numbers in ``[0, 1)`` of ``shape``, whose axis 0 is the batch: each example's numbers come from
        its key (the trainer's seed, the step and the example's index in the global batch) and from how many draws
        this run made before, never from the device it runs on (see :mod:`toolkit.nn.context`). The same on every
        backend, in the computation dtype, multiples of ``2**-24``.

        Raises:
            ModelStateError: outside a training run of a trainer (no keys).
        """
        if self._scan_depth:
            raise ModelStateError("example_uniform (dropout, noise) inside ops.scan's f: the body is built once, so "
                                  "every iteration would draw the same numbers; draw them before the loop and scan "
                                  "over them as xs")
        run = context.current()
        if run is None or run.keys is None:
            raise ModelStateError("random numbers need a training step of DataParallel, which gives every example "
                                  "its key (ModelParallel does not yet); in inference, layers that draw noise "
                                  "(dropout) must not draw")
        shape = tuple(shape)
        if len(shape) < 1 or not all(isinstance(s, (int, np.integer)) and s > 0 for s in shape[1:]):
            raise ShapeError(f"example_uniform needs a shape [batch, ...] with known sizes after the batch axis, "
                             f"got {shape}")
        counters = self.constant(context.element_counters(run.calls, tuple(int(s) for s in shape[1:])))
        run.calls += 1
        keys = self.reshape(self.wrap(self._native(run.keys, context.KEY_DTYPE)), (-1,) + (1,) * (len(shape) - 1))
        return self._hash_uniform(keys, counters)

    @abstractmethod
    def _hash_uniform(self, keys, counters):
        """``(mix32(keys ^ counters) >> 8) * 2**-24`` in the computation dtype, unsigned 32-bit arithmetic
        broadcast as NumPy (:func:`toolkit.nn.context.mix32`)."""

    @abstractmethod
    def all_finite(self, xs):
        """A boolean scalar: no NaN or Inf in any of ``xs`` (used by the training step's NaN policy)."""
