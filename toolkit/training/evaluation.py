"""A trainer's ``evaluate``: the mean loss and metrics over every example in inference mode, weighed as Keras'
``evaluate`` weighs them (``sample_weight``; an output's own loss of a model of several outputs), summed over
batches, devices and processes in float64 and divided once."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import optree

from toolkit.training import metrics as metrics_module
from toolkit.training.batches import count, rows, sample_weights, shapes


def evaluate(trainer, x: Any, y: Any, batch_size: int | None = None,
             metrics: Sequence[str | metrics_module.Metric] = (), sample_weight: Any = None) -> dict[str, float]:
    """:meth:`toolkit.training.trainer.Trainer.evaluate` of ``trainer``: ``{"loss": ..., name: ...}``.

    Args:
        trainer: the trainer.
        x: an array, or a dict of arrays by input name.
        y: the targets.
        batch_size: examples per batch; None: all at once.
        metrics: names or :class:`~toolkit.metrics.Metric` objects; default: the model's.
        sample_weight: one weight per example (Keras'), or None.

    Returns:
        The loss and each metric: the loss ``sum(loss * weight) / N``, a weighted metric
        ``sum(value * weight) / sum(weight)`` (0 where that sum is 0), an output's loss the plain mean of its
        batches', the others unweighted means.

    Raises:
        ArgumentError: an unknown metric; ShapeError, DTypeError, NonFiniteError: bad input, weights or batch size.
        ComputeError: the framework failed on a device.
    """
    chosen = metrics_module.get(metrics or trainer.model.metrics)  # none given: the model's
    x, y = trainer.check_batch(x, y)
    weights = None if sample_weight is None else sample_weights(sample_weight, count(y), "float64")
    scorer = trainer._scorers.get(chosen)
    if scorer is None:
        def scorer(ops, outputs, y):
            return {"loss": trainer.model.loss(ops, outputs, y), **{m.name: m(ops, outputs, y) for m in chosen}}

        trainer._scorers[chosen] = scorer
    names = ("loss", *(m.name for m in chosen))
    weighed = [True, *(m.weighted or m.as_loss for m in chosen)]  # the loss, weighted metrics, per-output losses
    batches = trainer._batches(count(y), batch_size)
    starts = [start for start, _ in batches]
    sums = np.zeros((len(batches), len(names) + 2))  # per batch: the sums, the example count, the weights' sum
    for device, outputs, lo, hi in trainer._inference(x, batches):
        totals = sums[bisect.bisect_right(starts, lo) - 1]  # this piece's batch's row
        part = rows(y, slice(lo, hi))
        placed = optree.tree_map(functools.partial(trainer.backend.place, device=device), part)
        scores = trainer._compute(device, f"y {shapes(part)}", trainer.backend.call, scorer, device,
                                  {"outputs": outputs, "y": placed}, trainer.dtype)
        w = 1.0 if weights is None else weights[lo:hi]
        totals[:-2] += [np.sum(np.asarray(trainer.backend.to_numpy(scores[k]), np.float64) * (w if use else 1.0))
                        for k, use in zip(names, weighed)]
        totals[-2:] += hi - lo, np.sum(w) if weights is not None else hi - lo
    if trainer.cluster is not None:
        sums = trainer.backend.all_reduce_sum(sums.ravel(), f"the evaluation after step {trainer.step_count}"
                                              ).reshape(sums.shape)
    totals = sums.sum(axis=0)
    # Keras' loss divides the weighted sum by the example count, a weighted metric by the weights' sum (0 where
    # that is 0: Keras' divide_no_nan); an output's loss is the plain mean of its batches' (Keras' trackers of
    # them get no batch size)
    divisors = [totals[-2], *(totals[-1] if m.weighted else totals[-2] for m in chosen)]
    found = {name: float(total / divisor) if divisor else 0.0
             for name, total, divisor in zip(names, totals, divisors)}
    found.update({m.name: float(np.mean(sums[:, k] / sums[:, -2])) for k, m in enumerate(chosen, start=1)
                  if m.as_loss})
    return found
