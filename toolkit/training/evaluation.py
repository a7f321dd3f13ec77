"""A trainer's passes in inference mode: ``predict``, and ``evaluate``'s mean loss and metrics over every example,
weighed as Keras' ``evaluate`` weighs them (``sample_weight``; an output's own loss of a model of several outputs),
summed over batches, devices and processes in float64 and divided once.

:class:`Inference` is a part of :class:`toolkit.training.trainer.Trainer`; a trainer kind says how one batch runs in
inference mode (:meth:`Inference._inference`: over the devices, or part by part).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.errors import ShapeError
from toolkit.training import metrics as metrics_module
from toolkit.training.batches import count, rows, sample_weights, shapes


class Inference:
    """``predict`` and ``evaluate``, batched, on the trainer's devices.

    What it reads of the trainer it is part of: ``backend``, ``dtype``, ``model``, ``cluster``, ``step_count``,
    :meth:`check_batch`, :meth:`_compute` (a device's share run with its errors reported) and :meth:`_inference`
    (the trainer kind's batch in inference mode).
    """

    backend: Any
    dtype: str
    model: Any
    cluster: Any
    step_count: int
    check_batch: Callable[..., tuple[Any, Any]]
    _compute: Callable[..., Any]

    @functools.cached_property
    def _scorers(self) -> dict:
        """evaluate's compiled scores, per tuple of metrics (the backend compiles a function once per object)."""
        return {}

    def predict(self, x: Any, batch_size: int | None = None) -> Any:
        """The model's outputs for ``x`` (an array or a dict of arrays) in inference mode: batch normalization
        uses its moving statistics, dropout is off. Each batch of ``batch_size`` examples (default: all at once)
        runs as a training batch would: split over the devices (DataParallel) or part by part on the parts'
        devices (ModelParallel); the outputs come back as NumPy arrays, in order.

        Args:
            x: an array, or a dict of arrays by input name.
            batch_size: examples per batch; None: all at once.

        Returns:
            The outputs, NumPy arrays (a pytree as the model's forward returns).

        Raises:
            ShapeError, DTypeError, NonFiniteError: bad input, or ``batch_size`` < 1 (nothing runs).
            ComputeError: the framework failed on a device.
        """
        x, _ = self.check_batch(x, None)
        outputs = [optree.tree_map(self.backend.to_numpy, out)
                   for _, out, _, _ in self._inference(x, self._batches(count(x), batch_size))]
        return optree.tree_map(lambda *parts: np.concatenate(parts), *outputs)

    def evaluate(self, x: Any, y: Any, batch_size: int | None = None,
                 metrics: Sequence[str | metrics_module.Metric] = (), sample_weight: Any = None) -> dict[str, float]:
        """The mean loss and ``metrics`` (names from :data:`toolkit.metrics.NAMED`, or
        :class:`~toolkit.metrics.Metric` objects) over every example of ``x, y`` in inference mode, batched like
        :meth:`predict`. Each device's per-example values are summed and counted in float64, over every batch and
        (when training across processes) every process, and divided once: the mean over all examples, whatever the
        split. Returns ``{"loss": ..., name: ...}``; nothing is updated. With ``sample_weight`` (one weight per
        example), as Keras' ``evaluate``: the loss ``sum(loss * weight) / N``, a weighted metric
        (:attr:`toolkit.metrics.Metric.weighted`) ``sum(value * weight) / sum(weight)``, the others unweighted.

        Args:
            x: an array, or a dict of arrays by input name.
            y: the targets.
            batch_size: examples per batch; None: all at once.
            metrics: names or :class:`~toolkit.metrics.Metric` objects; default: the model's.
            sample_weight: one weight per example (Keras'), or None.

        Raises:
            ArgumentError: an unknown metric; ShapeError, DTypeError, NonFiniteError: bad input, weights or batch size.
            ComputeError: the framework failed on a device.
        """
        chosen = metrics_module.get(metrics or self.model.metrics)  # none given: the model's
        x, y = self.check_batch(x, y)
        weights = None if sample_weight is None else sample_weights(sample_weight, count(y), "float64")
        scorer = self._scorers.get(chosen)
        if scorer is None:
            def scorer(ops, outputs, y):
                return {"loss": self.model.loss(ops, outputs, y), **{m.name: m(ops, outputs, y) for m in chosen}}

            self._scorers[chosen] = scorer
        names = ("loss", *(m.name for m in chosen))
        weighed = [True, *(m.weighted or m.as_loss for m in chosen)]  # the loss, weighted metrics, per-output losses
        batches = self._batches(count(y), batch_size)
        starts = [start for start, _ in batches]
        sums = np.zeros((len(batches), len(names) + 2))  # per batch: the sums, the example count, the weights' sum
        for device, outputs, lo, hi in self._inference(x, batches):
            totals = sums[bisect.bisect_right(starts, lo) - 1]  # this piece's batch's row
            part = rows(y, slice(lo, hi))
            placed = optree.tree_map(functools.partial(self.backend.place, device=device), part)
            scores = self._compute(device, f"y {shapes(part)}", self.backend.call, scorer, device,
                                   {"outputs": outputs, "y": placed}, self.dtype)
            w = 1.0 if weights is None else weights[lo:hi]
            totals[:-2] += [np.sum(np.asarray(self.backend.to_numpy(scores[k]), np.float64) * (w if use else 1.0))
                            for k, use in zip(names, weighed)]
            totals[-2:] += hi - lo, np.sum(w) if weights is not None else hi - lo
        if self.cluster is not None:
            sums = self.backend.all_reduce_sum(sums.ravel(), f"the evaluation after step {self.step_count}"
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

    @staticmethod
    def _batches(count: int, batch_size: int | None) -> list[tuple[int, int]]:
        """``(first row, end row)`` of each batch of ``batch_size`` rows (default: one batch) of ``count`` rows."""
        if batch_size is None:
            batch_size = max(count, 1)
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ShapeError(f"batch_size must be an int >= 1 or None, got {batch_size!r}")
        return [(start, min(start + int(batch_size), count)) for start in range(0, count, int(batch_size))]

    def _inference(self, x: Any, batches: list[tuple[int, int]]) -> Iterator[tuple[Any, Any, int, int]]:
        """``(device, outputs, first row, end row)`` for each piece of the ``batches`` of ``x`` in inference mode:
        the outputs (natives) of rows ``first:end``, left on ``device``."""
        raise NotImplementedError
