"""A trainer's passes in inference mode: ``predict``, and ``evaluate``'s mean loss and metrics over every example,
weighed as Keras' ``evaluate`` weighs them (``sample_weight``; an output's own loss of a model of several outputs),
summed over batches, devices and processes in float64 and divided once.

:class:`Inference` is a part of :class:`toolkit.training.trainer.Trainer`; a trainer kind says how one batch runs in
inference mode (:meth:`Inference._inference`: over the devices, or part by part).
"""

from __future__ import annotations

import bisect
import functools
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.data.feed import RAN_OUT, Feed
from toolkit.errors import ShapeError
from toolkit.training import metrics as metrics_module
from toolkit.training.batches import count, rows, sample_weights, shapes
from toolkit.training.inputs import (
    array_batch_size,
    count_argument,
    in_context,
    is_batches,
    refuse_for_source,
    source_feed,
)


def _first_batches(batch_size: Any, steps: int | None, examples: int) -> tuple[int | None, slice]:
    """The batch size of an evaluation of arrays (:func:`~toolkit.training.inputs.array_batch_size`; None: all at
    once) and the rows its ``steps`` batches take, with Keras' warning where the arrays give fewer.

    Raises:
        ShapeError: a ``batch_size`` that is not an int >= 1 or None.
    """
    batch_size = array_batch_size(batch_size, steps, examples, None)
    if steps is None:
        return batch_size, slice(None)
    if -(-examples // batch_size) < steps:
        warnings.warn(RAN_OUT, stacklevel=3)
    return batch_size, slice(0, steps * batch_size)


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

    def predict(self, x: Any, batch_size: int | None = None, steps: int | None = None) -> Any:
        """The model's outputs for ``x`` (an array, a dict of arrays, or a source of batches: :mod:`toolkit.data`,
        whose elements' ``y`` and weights are ignored, as Keras' ``predict`` ignores them) in inference mode: batch
        normalization uses its moving statistics, dropout is off. Each batch of ``batch_size`` examples (default:
        all at once; a source's as they come) runs as a training batch would: split over the devices
        (DataParallel) or part by part on the parts' devices (ModelParallel); the outputs come back as NumPy
        arrays, in order.

        Args:
            x: an array, a dict of arrays by input name, or a source of batches.
            batch_size: examples per batch of arrays; None: all at once (with ``steps``, Keras' batch that splits
                the examples into ``steps``), and with a source.
            steps: the batches predicted (arrays: the first ``steps`` batches of ``batch_size``; a source: needed
                for one that never ends); None: all.

        Returns:
            The outputs, NumPy arrays (a pytree as the model's forward returns).

        Raises:
            ShapeError, DTypeError, NonFiniteError: bad input, or ``batch_size`` < 1 (nothing runs).
            ArgumentError: ``batch_size`` with a source, or an endless source without ``steps``.
            ComputeError: the framework failed on a device; DataError: a source that raised while read, or a source of
                one pass that has run out.
        """
        steps = count_argument(steps, "steps", optional=True)
        if is_batches(x):
            feed = self._feed(x, steps, False, batch_size=batch_size)
            parts = [self._predict(batch) for _, batch, _, _ in self._stream(feed, x)]
            if not parts:
                raise feed.nothing_given()
        else:
            x, _ = self.check_batch(x, None)
            batch_size, taken = _first_batches(batch_size, steps, count(x))
            parts = [self._predict(rows(x, taken), batch_size)]
        return optree.tree_map(lambda *pieces: np.concatenate(pieces), *parts)

    def _predict(self, x: Any, batch_size: int | None = None) -> Any:
        outputs = [optree.tree_map(self.backend.to_numpy, out)
                   for _, out, _, _ in self._inference(x, self._batches(count(x), batch_size))]
        return optree.tree_map(lambda *parts: np.concatenate(parts), *outputs)

    def _feed(self, data: Any, steps: int | None, targets: bool, **given: Any) -> Feed:
        """The feed of a source given to evaluate or predict (``data`` itself where it is fit's validation feed),
        the arguments a source carries itself refused."""
        feed = data if isinstance(data, Feed) else source_feed(self, data, steps, targets, "x")
        refuse_for_source(feed.source, **given)
        return feed

    def _stream(self, feed: Feed, data: Any) -> Iterator[tuple]:
        """``(where, x, y, weights)`` of each batch of an epoch of ``feed`` (made for ``data``: closed at the end
        unless it is ``data``, fit's validation feed), checked."""
        try:
            for x, y, weights in feed.epoch():
                where = f"batch {feed.pass_batch - 1} of {feed.source.kind}"
                x, y = in_context(where, lambda x=x, y=y: self.check_batch(x, y))
                yield where, x, y, weights
        finally:
            if feed is not data:
                feed.close()

    def evaluate(self, x: Any, y: Any = None, batch_size: int | None = None,
                 metrics: Sequence[str | metrics_module.Metric] = (), sample_weight: Any = None,
                 steps: int | None = None) -> dict[str, float]:
        """The mean loss and ``metrics`` (names from :data:`toolkit.metrics.NAMED`, or
        :class:`~toolkit.metrics.Metric` objects) over every example of ``x, y`` (arrays, or a source of batches:
        :mod:`toolkit.data`) in inference mode, batched like :meth:`predict`. Each device's per-example values are
        summed and counted in float64, over every batch and (when training across processes) every process, and
        divided once: the mean over all examples, whatever the split. Returns ``{"loss": ..., name: ...}``; nothing
        is updated. With ``sample_weight`` (one weight per example, or a source's batches' third entry), as Keras'
        ``evaluate``: the loss ``sum(loss * weight) / N``, a weighted metric (:attr:`toolkit.metrics.Metric.weighted`)
        ``sum(value * weight) / sum(weight)``, the others unweighted.

        Args:
            x: an array, a dict of arrays by input name, or a source of batches (or fit's validation
                :class:`~toolkit.data.feed.Feed`, whose next epoch's batches it scores).
            y: the targets; None with a source.
            batch_size: examples per batch of arrays; None: all at once (with ``steps``, Keras' batch that splits
                the examples into ``steps``), and with a source.
            metrics: names or :class:`~toolkit.metrics.Metric` objects; default: the model's.
            sample_weight: one weight per example of arrays (Keras'), or None.
            steps: the batches scored (arrays: the first ``steps`` batches of ``batch_size``; a source: needed for
                one that never ends); None: all.

        Raises:
            ArgumentError: an unknown metric; ``y``, ``sample_weight`` or ``batch_size`` with a source.
            ShapeError, DTypeError, NonFiniteError: bad input, weights or batch size.
            ComputeError: the framework failed on a device; DataError: a source that raised while read, or a source of
                one pass that has run out.
        """
        chosen = metrics_module.get(metrics or self.model.metrics)  # none given: the model's
        steps = count_argument(steps, "steps", optional=True)
        if is_batches(x):
            feed = self._feed(x, steps, True, y=y, sample_weight=sample_weight, batch_size=batch_size)
            found = [self._sums(batch, targets, weights, chosen, None) for _, batch, targets, weights
                     in self._stream(feed, x)]
            if not found:
                raise feed.nothing_given()
            sums = np.concatenate(found)
        else:
            x, y = self.check_batch(x, y)
            weights = None if sample_weight is None else sample_weights(sample_weight, count(y), "float64")
            batch_size, taken = _first_batches(batch_size, steps, count(y))  # Keras' steps: the first batches
            x, y, weights = rows(x, taken), rows(y, taken), None if weights is None else weights[taken]
            sums = self._sums(x, y, weights, chosen, batch_size)
        return self._scores(sums, chosen)

    def _sums(self, x: Any, y: Any, weights: np.ndarray | None, chosen: tuple,
              batch_size: int | None) -> np.ndarray:
        """Per batch of checked ``x, y``: each score's (weighed) sum, the example count and the weights' sum."""
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
        return sums

    def _scores(self, sums: np.ndarray, chosen: tuple) -> dict[str, float]:
        """The scores from every batch's sums (:meth:`_sums`), summed over the processes first."""
        if self.cluster is not None:
            batches = np.zeros(self.cluster.num_processes)
            batches[self.cluster.process_id] = len(sums)
            batches = self.backend.all_reduce_sum(batches, f"the evaluation's batches after step {self.step_count}")
            if np.any(batches != batches[0]):
                raise ShapeError(f"evaluate across processes needs the same number of batches in every process; got "
                                 f"{[int(n) for n in batches]} (pass steps)")
            sums = self.backend.all_reduce_sum(sums.ravel(), f"the evaluation after step {self.step_count}"
                                               ).reshape(sums.shape)
        names = ("loss", *(m.name for m in chosen))
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
        """``(first row, end row)`` of each batch of ``batch_size`` rows (checked: :func:`_first_batches`; None: one
        batch) of ``count`` rows."""
        batch_size = batch_size or max(count, 1)
        return [(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]

    def _inference(self, x: Any, batches: list[tuple[int, int]]) -> Iterator[tuple[Any, Any, int, int]]:
        """``(device, outputs, first row, end row)`` for each piece of the ``batches`` of ``x`` in inference mode:
        the outputs (natives) of rows ``first:end``, left on ``device``."""
        raise NotImplementedError
