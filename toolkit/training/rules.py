"""The rules of one data-parallel training step, written once for every path that runs a step.

A step trains on a global batch of ``N`` examples laid out over replicas: each device's shard, each micro-batch
of it, each process's part (:mod:`toolkit.training.shards`). Every path follows these rules, in this order:

1. **Shares** (:func:`shares`): a replica of ``n`` examples has the share ``n / N`` of the step.
2. **Each replica's part** (:func:`replica_objective`, traced for each replica): its share of the batch's mean
   loss, ``share * mean(per-example losses)``, the same of each metric, and ``share * new value`` of the model
   state. Rows that pad a shard to a common size weigh 0 in the means. Where the examples are weighed (Keras'
   ``sample_weight``: the model batch's ``weights``), each example's loss is its loss times its weight, to which
   the run's penalties are added (:meth:`toolkit.nn.model.Model.train_losses`), so the batch's loss is Keras'
   ``sum(loss * weight) / N`` plus the regularization penalties, whatever the split; a weighted metric's
   per-example values are multiplied by the model batch's ``metric_weights`` (``weight * N / sum of the global
   batch's weights``, :func:`toolkit.training.batches.metric_weights`), so its parts add up to Keras'
   ``sum(value * weight) / sum(weight)``; a metric weighed as the loss (a per-output loss) by the ``weights``.
3. **Gradients** of each replica's part of the loss (primitive: the framework's differentiation).
4. **The sum over replicas and processes** (primitive): the parts add up to the batch's mean loss, its gradient,
   the share-weighted mean of the replicas' new model state and each metric's mean.
5. **The update and the finiteness rule** (:func:`apply_update`, traced once): the optimizer's update, the
   model's constraints applied to the new values (:func:`constrain`), accepted only if the loss, every gradient,
   every new value and the new model state are finite.
6. **The all-or-nothing write** (primitive): if accepted, the new parameters go to every replica, the optimizer
   state to the parameters' homes and the model state to every replica; otherwise nothing is written.

The primitives, path by path (3. gradients; 4. the sum; 6. the write):

- composed per device (``Trainer.step`` with micro-batches, ``gradients``, ``loss``; the backend's
  ``compile_gradient`` traces rule 2, ``compile_update`` rule 5): a compiled gradient per device; the backend's sum
  on the first device, then ``Backend.all_reduce_sum`` across processes; ``Variable.assign``;
- TensorFlow's fused step (one ``tf.function``): ``tf.gradients`` of the replicas' summed parts; ``tf.add_n`` and
  the collective all-reduce; ``tf.cond`` around the assignments;
- the Theano family on one device (host step): the engine's ``grad``; one replica, nothing to sum; ``switch``
  updates of shared variables (C linker) or the outputs written after the call (JAX linker);
- the Theano family on several devices (mesh step, one ``shard_map``): the engine's ``grad`` on each device;
  ``lax.psum``; the outputs written after the call.

The examples' weights travel in the replica's batch like its keys, so every path carries them through shards,
padding and micro-batches. The constraints of the parameters (:attr:`toolkit.Model.constraints`, Keras'
``kernel_constraint``) transform the new values in :func:`apply_update`, before the finiteness check, so that every
path writes them, all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.nn.model import Model
from toolkit.ops.interface import Ops
from toolkit.training.optim import Optimizer


class PaddingRefused(Exception):  # noqa: N818 (a signal to the trainer, not an error a user sees)
    """Raised while a step is traced, before anything runs: a shard padded to a common size for a model that may
    mix the rows of its batch in its own code (neither ``rows_independent`` nor summing over replicas), which would
    see the padding. The trainer composes the step per device instead."""


def shares(sizes: Sequence[int], total: int) -> list[float]:
    """Rule 1: each replica's share of a step.

    Args:
        sizes: each replica's example count.
        total: the global batch's example count (every process's).
    """
    return [size / total for size in sizes]


def replica_batch(model_batch: Mapping[str, Any], share: float, dtype: str) -> dict[str, Any]:
    """One replica's inputs to a step.

    Args:
        model_batch: the shard's model batch (:func:`toolkit.nn.model.batch`).
        share: the replica's share of the step (:func:`shares`).
        dtype: the computation dtype, the share's.
    """
    return {**model_batch, "share": np.asarray(share, dtype)}


def replica_objective(ops: Ops, model: Model, params: Mapping[str, Any], batch: Mapping[str, Any], y: Any,
                      metrics: Sequence[Any] = (),
                      replica_sum: Callable[[Any], Any] | None = None) -> tuple[Any, dict, dict]:
    """Rule 2, natives in and out: one replica's training run and its parts.

    Args:
        ops: the backend's ops.
        model: the :class:`~toolkit.Model`.
        params: the replica's parameters.
        batch: the replica's batch (:func:`replica_batch`), which also holds ``rows`` where the shard is padded.
        y: the shard's targets.
        metrics: :class:`toolkit.metrics.Metric` objects scored on the same outputs.
        replica_sum: as in :meth:`~toolkit.nn.model.Model.train_losses`: the backend's sum across the replicas
            traced together, or None where the replica is one device's part of a composed step.

    Returns:
        ``(part of the loss, {state name: part of the new value}, {metric name: part of its mean})``.

    Raises:
        PaddingRefused: a padded shard of a model that may mix rows.
    """
    summed = []

    def counted(value):
        summed.append(True)
        return replica_sum(value)

    losses, new_state, scores = model.train_losses(ops, params, batch, y, None if replica_sum is None else counted,
                                                   metrics)
    rows = batch.get("rows")
    if rows is not None and not (model.rows_independent or summed):
        raise PaddingRefused(model.name)
    factors = {metric.name: batch["metric_weights"] for metric in metrics
               if getattr(metric, "weighted", False) and "metric_weights" in batch}
    factors.update({metric.name: batch["weights"] for metric in metrics
                    if getattr(metric, "as_loss", False) and "weights" in batch})
    return ops.call(_parts, losses, new_state, scores, batch["share"], rows, factors)


def _parts(ops: Ops, losses, new_state: Mapping[str, Any], scores: Mapping[str, Any], share, rows,
           metric_weights: Mapping[str, Any]):
    return (share * _mean(ops, losses, rows), {name: share * value for name, value in new_state.items()},
            {name: share * _mean(ops, values * metric_weights[name] if name in metric_weights else values, rows)
             for name, values in scores.items()})


def _mean(ops: Ops, values, rows):
    """The mean of per-example ``values`` over a replica's examples: the padding rows (``rows`` 0) left out. A
    shard of padding only (fewer examples than devices) has share 0 and a mean of 0, not NaN."""
    if rows is None:
        return ops.mean(values)
    return ops.sum(values * rows) / ops.maximum(ops.sum(rows), 1.0)


def apply_update(ops: Ops, optimizer: Optimizer, params: Mapping[str, Any], grads: Mapping[str, Any],
                 slots: Mapping[str, Mapping[str, Any]], step: Any, checked: Sequence[Any] = (),
                 constraints: Mapping[str, Callable] | None = None) -> tuple[dict, dict, Any]:
    """Rule 5, on Tensors: the update, and whether the step may be written.

    Args:
        ops: the backend's ops.
        optimizer: the trainer's optimizer.
        params: the parameters, at their home.
        grads: the gradients (the sums of rule 4).
        slots: the optimizer state, ``slots[slot][name]``.
        step: the update's number, a scalar of the dtype.
        checked: further values that must be finite (the loss and the new model state).
        constraints: the model's constraints (:attr:`toolkit.Model.constraints`), applied to the new values of the
            parameters they name here (:func:`constrain`); None where the caller applies them itself.

    Returns:
        ``(new params, new slots, written)``: ``written`` a boolean scalar, true when every gradient, new value and
        value of ``checked`` is finite.
    """
    new_params, new_slots, finite = optimizer.update(ops, params, grads, slots, step)
    if constraints:
        new_params = constrain(ops, constraints, new_params)
        finite = ops.logical_and(finite, ops.all_finite([new_params[name] for name in constraints
                                                         if name in new_params]))
    if checked:
        finite = ops.logical_and(finite, ops.all_finite(list(checked)))
    return new_params, new_slots, finite


def constrain(ops: Ops, constraints: Mapping[str, Callable], params: Mapping[str, Any]) -> dict[str, Any]:
    """Rule 5's projection, on Tensors: each parameter of ``params`` that ``constraints`` names, replaced by its
    constraint of it (Keras applies a variable's constraint right after its update); the others as they are.

    Args:
        ops: the backend's ops.
        constraints: ``{parameter name: constraint(ops, value) -> value}``.
        params: new parameter values (those of one home device, on the composed path).

    Returns:
        The parameters, constrained.
    """
    return {name: constraints[name](ops, value) if name in constraints else value for name, value in params.items()}


def constrained(ops: Ops, params: Mapping[str, Any], constraints: Mapping[str, Callable]) -> tuple[dict, Any]:
    """:func:`constrain` for the step composed per device, which applies it after its update call: the
    parameters, constrained, and whether they are all finite.

    Args:
        ops: the backend's ops.
        params: new parameter values of one home device.
        constraints: the model's constraints.
    """
    new = constrain(ops, constraints, params)
    return new, ops.all_finite(list(new.values()))
