"""A model as three plain functions, so the same code runs on every backend."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.errors import ArgumentTypeError
from toolkit.nn import context
from toolkit.ops.interface import Ops, Tensor

InitFn = Callable[[np.random.Generator], Mapping[str, np.ndarray]]
ForwardFn = Callable[[Ops, Mapping[str, Tensor], Tensor], Any]
LossFn = Callable[[Ops, Any, Tensor], Tensor]


@dataclass(frozen=True)
class State:
    """Marks an entry of ``init``'s dict as model state rather than a parameter: not trained, read by ``forward``
    like a parameter, given a new value by a training step through ``ops.update_state`` (batch normalization's
    moving mean and variance). ``toolkit.layers.batch_norm_init`` makes its statistics this way.

    Attributes:
        value: the initial value (a NumPy array, or anything ``numpy.asarray`` takes).
    """

    value: Any


@dataclass(frozen=True, eq=False)
class Model:
    """A model: how to make its parameters, run it, and score it.

    Args:
        init: ``init(rng) -> {name: numpy array}``; ``rng`` is a ``numpy.random.Generator``.
        forward: ``forward(ops, params, x) -> outputs``, written with :class:`toolkit.ops.Ops` and Python arithmetic.
        loss: ``loss(ops, outputs, y) -> per-example losses`` (shape ``[batch]``); training minimises their mean.
        name: shown in reports; defaults to the forward function's name.
        rows_independent: True where ``forward`` and ``loss`` treat each row of the batch on its own, or mix rows
            only through ``ops.moments`` (batch normalization), which weighs out rows that pad a shard: then a
            data-parallel step whose backend runs shards of one size may pad uneven shards to the largest
            (:mod:`toolkit.training.shards`). False (the default for a model of your own) composes such a step per
            device instead, which is exact for any model; a model that sums over replicas
            (``ops.cross_replica_sum``, synchronized statistics) is padded either way, as it cannot be composed.
            The built-in models and imported Keras models are row-independent.
        metrics: what ``fit`` and ``evaluate`` report when they are given no ``metrics=``
            (:class:`toolkit.metrics.Metric` objects or their names): an imported Keras model's compiled metrics.
        constraints: ``{parameter name: constraint(ops, value) -> value}``, applied to the parameter's new value
            after each update, as Keras applies ``kernel_constraint`` (:mod:`toolkit.nn.constraints`).
        input_shape: the shape of one example of the input, as ``keras.Input(shape=...)`` takes it: a tuple of
            sizes, None on an axis whose length may change from batch to batch (a sequence length), or for a dict
            ``x`` a dict of such tuples by input name. The trainer refuses inputs of another rank or another size
            on a fixed axis, and lets a batch change length on the free axes (each new shape compiles its own
            step). None (the default): every axis keeps the size of the first training batch.
        output_shape: the shape of one example of the output, None on the axes whose length follows the inputs'
            free axes (a per-step output), or for several outputs a dict by output name in output order: the
            targets' leading axes line up with the outputs', so a target may change length on those axes. None:
            the targets keep the first batch's shapes.
        optimizer: the optimizer a trainer given none trains the model with (a :mod:`toolkit.optim` optimizer):
            an imported Keras model's compiled one (a :class:`toolkit.optim.RefusedOptimizer` where it cannot be
            translated); None: the trainer must be given one.
        optimizer_state: where that optimizer starts (:class:`toolkit.optim.OptimizerState`: the updates done and
            the slots' values, an imported Keras model's built optimizer's), or None: from nothing.

    ``init`` may mark entries with :class:`State`: the trainer keeps them apart from the parameters (``state()``),
    passes them to ``forward`` in ``params``, and writes the new values a training step gives them.
    ``forward`` learns whether it runs for training from ``ops.training``, and draws per-example noise with
    ``ops.example_uniform`` (see :mod:`toolkit.nn.context`).

    Models compare by identity, so backends can cache what they compile for one.
    """

    init: InitFn
    forward: ForwardFn
    loss: LossFn
    name: str = ""
    rows_independent: bool = False
    metrics: tuple = ()
    constraints: Mapping[str, Callable[[Ops, Tensor], Tensor]] = dataclasses.field(default_factory=dict)
    input_shape: Any = None
    output_shape: Any = None
    optimizer: Any = None
    optimizer_state: Any = None

    def __post_init__(self) -> None:
        for field in ("init", "forward", "loss"):
            if not callable(getattr(self, field)):
                raise ArgumentTypeError(f"Model.{field} must be callable, got {getattr(self, field)!r}")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.forward, "__name__", "model"))
        object.__setattr__(self, "metrics", (self.metrics,) if isinstance(self.metrics, str) else tuple(self.metrics))
        if not isinstance(self.constraints, Mapping) or not all(map(callable, self.constraints.values())):
            raise TypeError(f"Model.constraints must be a dict of callables by parameter name, got "
                            f"{self.constraints!r}")
        object.__setattr__(self, "constraints", dict(self.constraints))
        for field in ("input_shape", "output_shape"):
            object.__setattr__(self, field, _example_shapes(getattr(self, field), f"Model.{field}"))

    def losses(self, ops: Ops, params: Mapping[str, Any], x: Any, y: Any) -> Any:
        """The per-example losses ``loss(ops, forward(ops, params, x), y)`` with native arrays in and out, as a
        training run without per-example keys or model state: for code that trains the model outside the
        trainers (the bench's native baselines). The trainers use :meth:`train_losses`.

        Args:
            ops: the backend's :class:`~toolkit.ops.Ops` (``backend.ops(dtype)``).
            params: the parameters (and any model state) by name, native arrays.
            x: the inputs, a native array (or a dict of them).
            y: the targets, a native array.

        Returns:
            The per-example losses, a native array of shape ``[batch]``.

        Raises:
            ModelStateError: a layer draws noise (there are no per-example keys here).
        """
        with context.running(context.RunContext(training=True)):
            return ops.call(self._scored, params, x, y)[0]

    def train_losses(self, ops: Ops, params: Mapping[str, Any], batch: Mapping[str, Any], y: Any,
                     replica_sum: Callable[[Any], Any] | None = None,
                     metrics: Sequence[Any] = ()) -> tuple[Any, dict, dict]:
        """A training run, natives in and out: ``(per-example losses, new model state, metric values)``.

        ``batch`` is what a trainer passes for one shard (:func:`batch`): ``x``, the examples' ``keys``, the
        ``state`` values, for a padded shard its ``rows`` weights (the losses and metrics are returned for
        every row; the caller weighs them) and, where the examples are weighed (Keras' ``sample_weight``), their
        ``weights``: each example's loss is multiplied by its weight, then the run's penalties
        (:attr:`toolkit.nn.context.RunContext.penalties`: Keras' regularization losses) are added, unweighted.
        The new state has an entry for every state name (its old value where ``forward`` gave it none).
        ``replica_sum`` is the backend's cross-replica sum where the step traces its replicas together
        (:attr:`toolkit.nn.context.RunContext.replica_sum`; ``ops.cross_replica_sum`` refuses without one).
        ``metrics`` (:class:`toolkit.metrics.Metric` objects) are scored on the same training-mode outputs as the
        loss, as Keras' training metrics are: ``{name: per-example values}``, empty without metrics.

        Args:
            ops: the backend's :class:`~toolkit.ops.Ops`.
            params: the parameters by name, native arrays.
            batch: one shard's inputs, as described above.
            y: the shard's targets, a native array.
            replica_sum: the backend's cross-replica sum, or None.
            metrics: the metrics scored on the run's outputs.

        Returns:
            ``(per-example losses, {state name: new value}, {metric name: per-example values})``, native arrays.
        """
        run = context.RunContext(training=True, keys=batch["keys"], state=batch["state"], replica_sum=replica_sum,
                                 row_weights=batch.get("rows"))
        with context.running(run):
            losses, scores = ops.call(self._scored, {**params, **batch["state"]}, batch["x"], y, tuple(metrics),
                                      batch.get("weights"))
        return losses, {name: run.updates.get(name, value) for name, value in batch["state"].items()}, scores

    def infer(self, ops: Ops, params: Mapping[str, Any], batch: Mapping[str, Any]) -> Any:
        """An inference run, natives in and out: ``forward``'s outputs with ``ops.training`` False (moving
        statistics, no dropout).

        Args:
            ops: the backend's :class:`~toolkit.ops.Ops`.
            params: the parameters by name, native arrays.
            batch: one shard's inputs (:func:`batch`): ``x`` and the model ``state``; its other entries are not
                read.

        Returns:
            ``forward``'s outputs, native arrays.
        """
        with context.running(context.RunContext(training=False, state=batch["state"])):
            return ops.call(self.forward, {**params, **batch["state"]}, batch["x"])

    def _scored(self, ops: Ops, params: Mapping[str, Tensor], x: Any, y: Any,
                metrics: Sequence[Any] = (), weights: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """``loss(ops, forward(ops, params, x), y)`` times the examples' ``weights`` (if any) plus the run's
        penalties, and each metric's per-example values on the same outputs, on Tensors."""
        outputs = self.forward(ops, params, x)
        losses = self.loss(ops, outputs, y)
        if weights is not None:
            losses = losses * weights
        run = context.current()
        for penalty in run.penalties if run is not None else ():
            losses = losses + penalty
        return losses, {metric.name: metric(ops, outputs, y) for metric in metrics}


def _example_shape(shape: Any, what: str) -> tuple:
    if isinstance(shape, (list, tuple)) and all(
            size is None or isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size >= 0
            for size in shape):
        return tuple(None if size is None else int(size) for size in shape)
    raise ArgumentTypeError(f"{what} must be a tuple of sizes (ints >= 0, None for a free axis), got {shape!r}")


def _example_shapes(shapes: Any, what: str) -> Any:
    """``shapes`` (None, one example shape, or a dict of them by name) checked, as tuples."""
    if shapes is None:
        return None
    if isinstance(shapes, Mapping):
        if not shapes:
            raise ArgumentTypeError(f"{what} is an empty dict; expected a shape per input or output name")
        return {name: _example_shape(shape, f"{what}[{name!r}]") for name, shape in shapes.items()}
    return _example_shape(shapes, what)


def batch(x: Any, keys: Any, state: Mapping[str, Any], rows: Any = None) -> dict[str, Any]:
    """One shard's inputs to a model run, as a pytree the backends compile for like any input: ``x`` (an array or
    a dict of arrays), the examples' uint32 ``keys`` (see :func:`toolkit.nn.context.example_keys`), the model
    state's values on the shard's device and, for a shard padded to a common size, ``rows``: 1 for each example, 0
    for each padding row (:attr:`toolkit.nn.context.RunContext.row_weights`)."""
    shard = {"x": x, "keys": keys, "state": dict(state)}
    if rows is not None:
        shard["rows"] = rows
    return shard
