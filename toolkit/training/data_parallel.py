"""Data-parallel training: one replica of the parameters per device, a global batch split across them.

A step (the rest is :class:`toolkit.training.trainer.Trainer`'s):

1. split the checked global batch into shards (:func:`toolkit.split_sizes`) and place each on its device, each
   example with its random key (:mod:`toolkit.nn.context`), so noise follows the example, not the device;
2. on each device with a non-empty shard, the mean loss and its gradient against that device's replica, and the
   model state's new values (batch statistics of that shard: per-replica batch normalization);
3. average the per-device results on the first device, weighted by shard size, which gives exactly the full-batch
   mean loss and gradient (:meth:`toolkit.backend.Backend.average`), and the shard-weighted mean of the new state;
4. the optimizer update on the first device, where the state lives, then the new parameters and model state go to
   every replica.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.backend import Backend
from toolkit.errors import ComputeError, ModelStateError
from toolkit.nn.model import Model, batch
from toolkit.placement.splitting import shard_bounds, split_sizes
from toolkit.processes import distributed
from toolkit.registry import REGISTRY
from toolkit.training.optim import Optimizer
from toolkit.training.trainer import DTYPES, LABEL_DTYPE, NAN_POLICIES, Trainer, rows

__all__ = ["DTYPES", "LABEL_DTYPE", "NAN_POLICIES", "DataParallel"]

#: How many batch sizes' splits a trainer keeps (a run has one or two: the last batch of an epoch).
SPLITS_KEPT = 16


class DataParallel(Trainer):
    """Train ``model`` with data parallelism over ``devices``.

    Args:
        model: the :class:`~toolkit.Model`.
        backend: a backend object or name (``"tensorflow"``, ``"aesara"``, ``"pytensor"``).
        devices: any :meth:`~toolkit.backend.Backend.select_devices` spec: ``"all"``, an int, ``"gpu:0,gpu:1"``, ...
        optimizer: a :mod:`toolkit.training.optim` optimizer.
        dtype: ``"float32"`` or ``"float64"``; parameters and floating inputs are cast to it.
        seed: seeds :attr:`rng`, which draws the initial parameters: the same seed gives the same parameters on
            every backend.
        weights: optional relative speed of each device; shards are sized in proportion (see ``split_sizes``).
        nan_policy: ``"raise"`` (default): a non-finite loss or gradient raises :class:`~toolkit.NonFiniteError` and
            changes nothing; ``"skip"``: the update is skipped and counted in :attr:`skipped_steps`.

    Attributes:
        devices: the devices used, in order; the first holds the optimizer state and does the averaging.
    """

    def __init__(self, model: Model, backend: Backend | str, devices: Any, optimizer: Optimizer,
                 dtype: str = "float32", seed: int = 0, weights: Sequence[float] | None = None,
                 nan_policy: str = "raise") -> None:
        super().__init__(model, backend, optimizer, dtype, seed, nan_policy)
        self.devices = tuple(self.backend.select_devices(devices))
        if weights is not None:
            split_sizes(len(self.devices), len(self.devices), weights)  # validates now rather than at the first step
        self.weights = None if weights is None else list(weights)
        self._splits: dict[tuple, tuple] = {}  # _split of each batch size (and weights) seen
        self._init_params(self.devices)
        self._predict_fn = None  # compiled on first use
        self.cluster, self._all_reduce = None, None
        joined = distributed.current()
        if joined is not None and joined[1].num_processes > 1:
            if joined[0] != self.backend.name:
                raise distributed.DistributedError(f"this process joined a {joined[0]} job (toolkit.distributed."
                                                   f"initialize); the trainer uses {self.backend.name}")
            self.cluster = joined[1]
            self._all_reduce = REGISTRY[self.backend.name].distributed().all_reduce_sum
        # What each tuple of training metrics compiles (fit's metrics score the step's own outputs): the gradient
        # function and the fused step (None: every step composed, with the reduction between processes a step of
        # its own).
        self._gradient_fns = {(): self.backend.compile_gradient(model, self.dtype)}
        self._fused_steps = {(): self._compile_fused_step(())}

    def _step(self, x, y, micro_batches, metrics):
        # Where the backend compiles the whole step into one call (Backend.compile_fused_step), that call is used;
        # the result is the same. Accumulating over micro-batches composes the step.
        if self._fused_steps is None or not (micro_batches == 1 and type(micro_batches) is int):
            return super()._step(x, y, micro_batches, metrics)
        if metrics not in self._fused_steps:
            self._fused_steps[metrics] = self._compile_fused_step(metrics)
        fused = self._fused_steps[metrics]
        if fused is None:
            return super()._step(x, y, micro_batches, metrics)
        x, y = self._check_batch(x, y)
        first_row, total = self._place_in_batch(len(y))
        indices, _, xs, ys = zip(*self._shards(x, y, first_row))
        step = np.asarray(self.step_count + 1, dtype=self.dtype)
        try:
            result = fused(indices, xs, ys, [len(shard) / total for shard in ys], step)
        except ComputeError:
            raise
        except Exception as error:
            if not isinstance(error, ModelStateError):  # the model's own error: composing would not say more
                self._loss_and_gradients(x, y)  # the composed computation names the failing device (ComputeError)
            raise self._compute_error(", ".join(map(str, self.devices)), f"x {_shapes(x)}, y {tuple(y.shape)}",
                                      error) from error
        if result is None:  # a split this backend's fused step does not take
            return super()._step(x, y, micro_batches, metrics)
        loss, written, scores = result
        self._accept_input_spec()
        return (self._finish_step(float(self.backend.to_numpy(loss)), bool(self.backend.to_numpy(written))),
                self._floats(scores))

    def _compile_fused_step(self, metrics: tuple):
        return self.backend.compile_fused_step(self.model, self.optimizer, self.dtype, self._params, self._state,
                                               self._model_state, metrics=metrics,
                                               across_processes=self.cluster is not None)

    def _inference(self, x, batches):
        for start, end in batches:
            for index, device, lo, hi in self._split(end - start):
                yield device, self._infer(x, index, device, start + lo, start + hi), start + lo, start + hi

    def _infer(self, x, index: int, device, lo: int, hi: int):
        """The model's outputs for rows ``lo:hi`` of ``x`` on replica ``index`` in inference mode (natives)."""
        if self._predict_fn is None:
            self._predict_fn = self.backend.compile_predict(self.model, self.dtype)
        shard = optree.tree_map(lambda a: self.backend.place(a, device), rows(x, slice(lo, hi)))
        return self._compute(device, f"x {_shapes(shard)}", self._predict_fn, _replica(self._params, index),
                             batch(shard, None, _replica(self._model_state, index)), device)

    def replica_params(self) -> list[dict]:
        """The parameters as held by each device's replica, in device order (all equal after every step)."""
        return [{name: var.replicas[i].numpy() for name, var in self._params.items()}
                for i in range(len(self.devices))]

    def _shards(self, x, y, first_row: int | None = None) -> list[tuple[int, Any, dict, Any]]:
        """``(replica index, device, model batch, y shard)`` for each non-empty shard of the batch, in device order;
        the model batch (:func:`toolkit.nn.model.batch`) holds the x shard, its examples' keys and the replica's
        model state. An empty shard contributes nothing (and its mean would be NaN). ``first_row``: the global
        index of the batch's first example (default: where this process's part starts)."""
        keys = self._example_keys(len(y), self._place_in_batch(len(y))[0] if first_row is None else first_row)
        return [(index, device, batch(rows(x, slice(lo, hi)), keys[lo:hi],
                                      _replica(self._model_state, index)), y[lo:hi])
                for index, device, lo, hi in self._split(len(y))]

    def _split(self, count: int) -> tuple[tuple[int, Any, int, int], ...]:
        """``(replica index, device, first row, end row)`` of each non-empty shard of ``count`` rows, in device
        order (sizes from :func:`toolkit.split_sizes` with the trainer's weights)."""
        key = (count, None if self.weights is None else tuple(self.weights))  # weights is a public attribute
        split = self._splits.get(key)
        if split is None:
            if len(self._splits) >= SPLITS_KEPT:
                self._splits.clear()
            sizes = split_sizes(count, len(self.devices), self.weights)
            split = self._splits[key] = tuple((index, device, lo, hi) for index, (device, (lo, hi))
                                              in enumerate(zip(self.devices, shard_bounds(sizes))) if hi > lo)
        return split

    def _loss_and_gradients(self, x, y, micro_batches=1, metrics=()):
        # Micro-batches run one after another, each split over the devices; their means are combined weighted by
        # size, here and then once across processes, so the result is the whole batch's mean.
        first_row, parts = self._place_in_batch(len(y))[0], []
        if metrics not in self._gradient_fns:
            self._gradient_fns[metrics] = self.backend.compile_gradient(self.model, self.dtype, metrics)
        gradient_fn = self._gradient_fns[metrics]
        bounds = shard_bounds(split_sizes(len(y), micro_batches))
        for lo, hi in bounds:
            results, shards = [], self._shards(rows(x, slice(lo, hi)), y[lo:hi], first_row + lo)
            for index, device, shard, shard_y in shards:
                shapes = f"shard x {_shapes(shard['x'])}, y {tuple(shard_y.shape)}"
                results.append(self._compute(device, shapes, self._shard_gradient, gradient_fn,
                                             _replica(self._params, index), shard, shard_y, device))
            parts.append(self.backend.average(results, weights=[len(s[3]) for s in shards], device=self.devices[0]))
        result = parts[0] if len(parts) == 1 else self.backend.average(parts, weights=[hi - lo for lo, hi in bounds],
                                                                       device=self.devices[0])
        if self.cluster is not None:
            result = self._mean_over_processes(*result, len(y))
        self._accept_input_spec()
        return result

    def _place_in_batch(self, count: int) -> tuple[int, int]:
        """Where this process's ``count`` examples start in the global batch, and the global batch's size: the
        example counts of every process, learnt by an all-reduce (parts may differ in size, and only the process
        knows its own), so that an example's random key is its index in the global batch whatever the number of
        processes. In one process: ``(0, count)``."""
        if self.cluster is None:
            return 0, count
        counts = np.zeros(self.cluster.num_processes)
        counts[self.cluster.process_id] = count
        counts = self._all_reduce(counts, f"the example numbering of step {self.step_count + 1}")
        return int(round(float(np.sum(counts[:self.cluster.process_id])))), int(round(float(np.sum(counts))))

    def _mean_over_processes(self, loss, grads, model_state, scores, count: int):
        """The mean over every process's examples: each process's mean times its example count, summed by the
        framework's all-reduce (in float64, as one vector), over the total count; each process passes only its own
        part of the global batch, so the parts may differ in size. The model state's new values and the metrics'
        means are averaged the same way."""
        local = {"": self.backend.to_numpy(loss), **{f"g{k}": self.backend.to_numpy(g) for k, g in grads.items()},
                 **{f"s{k}": self.backend.to_numpy(v) for k, v in model_state.items()},
                 **{f"m{k}": self.backend.to_numpy(v) for k, v in scores.items()}}
        parts = [np.asarray(a, np.float64).ravel() for a in local.values()]
        total = self._all_reduce(np.concatenate([[float(count)], *(count * p for p in parts)]),
                                 f"the gradient reduction of step {self.step_count + 1}")
        ends = np.cumsum([1, *(p.size for p in parts)])
        home = self.devices[0]
        mean = {k: self.backend.place((total[end - p.size:end] / total[0]).reshape(np.shape(a)).astype(self.dtype),
                                      home)
                for (k, a), p, end in zip(local.items(), parts, ends[1:])}
        return (mean.pop(""), *({k[1:]: v for k, v in mean.items() if k[0] == kind} for kind in "gsm"))

    def _shard_gradient(self, gradient_fn, replica, x, y, device):
        x = optree.tree_map(lambda a: self.backend.place(a, device), x)
        return gradient_fn(replica, x, self.backend.place(y, device), device)

    def __repr__(self) -> str:
        return (f"DataParallel({self.model.name}, {self.backend.name}, devices=[{', '.join(map(str, self.devices))}], "
                f"{self.optimizer!r}, dtype={self.dtype})")


def _replica(variables: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Replica ``index``'s native values of mirrored ``variables``, by name."""
    return {name: var.replicas[index].value for name, var in variables.items()}


def _shapes(x) -> Any:
    return {k: tuple(v.shape) for k, v in x.items()} if isinstance(x, Mapping) else tuple(x.shape)
