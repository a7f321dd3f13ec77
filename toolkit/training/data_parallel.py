"""Data-parallel training: one replica of the parameters per device, a global batch split across them.

A step, following the rules of :mod:`toolkit.training.rules` (the rest is :class:`toolkit.training.trainer.Trainer`'s):

1. lay the checked global batch out over the devices (:mod:`toolkit.training.shards`: sizes from
   :func:`toolkit.split_sizes`, padded where the backend's step takes equal shards) and give each shard its share
   of the step and each example its random key (:mod:`toolkit.nn.context`), so noise follows the example, not the
   device;
2. where the backend compiles the whole step into one call (:meth:`toolkit.Backend.compile_fused_step`),
   that call runs the rest; otherwise, composed: on each device with a non-empty shard, its part of the loss, its
   gradient against that device's replica, and its parts of the model state and metrics, computed by
   :meth:`toolkit.Backend.compile_gradient`; their sum on the first device (and across processes);
3. the update on the first device, where the optimizer state lives, then, all or nothing, the new parameters and
   model state go to every replica.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.backend.interface import Backend
from toolkit.errors import ArgumentTypeError, ComputeError, ModelStateError
from toolkit.nn.model import Model, batch
from toolkit.placement.splitting import shard_bounds, split_sizes
from toolkit.training import metrics as metrics_module
from toolkit.training import shards as shard_plan
from toolkit.training.batches import count, shapes
from toolkit.training.optim import Optimizer
from toolkit.training.rules import PaddingRefused, replica_batch, shares
from toolkit.training.trainer import DTYPES, LABEL_DTYPE, NAN_POLICIES, Trainer, rows

__all__ = ["DTYPES", "LABEL_DTYPE", "NAN_POLICIES", "DataParallel"]

#: How many batch sizes' splits a trainer keeps (a run has one or two: the last batch of an epoch).
SPLITS_KEPT = 16
#: The paths a step runs on (:attr:`DataParallel.last_step_path`).
FUSED, COMPOSED = "fused", "composed"


class DataParallel(Trainer):
    """Train ``model`` with data parallelism over ``devices``.

    Args:
        model: the :class:`~toolkit.Model`.
        backend: a backend object or name (``"tensorflow"``, ``"aesara"``, ``"pytensor"``).
        devices: any :meth:`~toolkit.Backend.select_devices` spec: ``"all"``, an int, ``"gpu:0,gpu:1"``, ...
        optimizer: a :mod:`toolkit.training.optim` optimizer; None: the model's (:attr:`toolkit.Model.optimizer`,
            an imported Keras model's compiled optimizer, continuing from its state).
        dtype: ``"float32"`` or ``"float64"``; parameters and floating inputs are cast to it.
        seed: seeds :attr:`rng`, which draws the initial parameters: the same seed gives the same parameters on
            every backend.
        weights: optional relative speed of each device; shards are sized in proportion (see ``split_sizes``).
        nan_policy: ``"raise"`` (default): a non-finite loss or gradient raises :class:`~toolkit.NonFiniteError` and
            changes nothing; ``"skip"``: the update is skipped and counted in :attr:`skipped_steps`.

    Attributes:
        devices: the devices used, in order; the first holds the optimizer state and does the averaging.
    """

    def __init__(self, model: Model, backend: Backend | str, devices: Any, optimizer: Optimizer | None = None,
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
        self.cluster = self.backend.cluster()
        # What each tuple of training metrics compiles (fit's metrics score the step's own outputs): the gradient
        # function and the fused step (None: every step composed, with the sum between processes a step of its own).
        self._gradient_fns = {(): self.backend.compile_gradient(model, self.dtype)}
        self._fused_steps = {(): self._compile_fused_step(())}
        # The path chosen for each batch layout (padded shards or not) once a step has run in it; the last step's.
        self._paths: dict[bool, str] = {}
        self._last_path: str | None = None

    def _step(self, x, y, micro_batches, metrics, sample_weight=None):
        # Accumulating over micro-batches composes the step; so do fused = False and a backend without a fused
        # step for these metrics.
        self._last_path = None  # until this step has run
        fused = None
        if self._fused_steps is not None and micro_batches == 1 and type(micro_batches) is int:
            if metrics not in self._fused_steps:
                self._fused_steps[metrics] = self._compile_fused_step(metrics)
            fused = self._fused_steps[metrics]
        if fused is None:
            return self._composed(super()._step(x, y, micro_batches, metrics, sample_weight))
        x, y = self.check_batch(x, y)
        weights = self._weights(sample_weight, count(y), metrics)
        layout = self._layout(count(y))
        # The path is decided once per batch layout, padded shards or not: where the model refused padded shards
        # as its step was traced (whatever the metrics: the model's rows decide), every padded step is composed.
        key = layout.pad_to is not None
        if self._paths.get(key) == COMPOSED:
            return self._composed(self._composed_step(x, y, 1, metrics, weights))
        indices, _, xs, ys = zip(*self._shards(x, y, layout, weights))
        step = np.asarray(self.step_count + 1, dtype=self.dtype)
        try:
            loss, written, scores = fused(indices, xs, ys, self._shares(count(y), layout), step)
        except PaddingRefused:  # raised as the step was traced, before anything ran
            self._paths[key] = COMPOSED
            return self._composed(self._composed_step(x, y, 1, metrics, weights))
        except ComputeError:
            raise
        except Exception as error:
            if (located := self._device_error(x, y, metrics, weights, error)) is not None:
                raise located from located.__cause__  # the failing device's own error stays its cause
            raise self._compute_error(", ".join(map(str, self.devices)), f"x {_shapes(x)}, y {_shapes(y)}",
                                      error) from error
        self._paths[key] = self._last_path = FUSED
        self._accept_input_spec()
        return (self._finish_step(float(self.backend.to_numpy(loss)), bool(self.backend.to_numpy(written))),
                self._floats(scores))

    def _composed(self, result):
        """``result``, of a step that ran composed."""
        self._last_path = COMPOSED
        return result

    def _device_error(self, x, y, metrics: tuple, weights, error: Exception) -> ComputeError | None:
        """Where a fused step failed (nothing was written), the error of the device that fails when the step's
        parts are computed again device by device (nothing is written either), naming the device and its shard; or
        None, and the fused step's own error is the one to report: where the parts compute, where the model's own
        state rules failed (a ModelStateError: composing would not say more), or where the model cannot be
        composed per device (its ModelStateError there, which is not the failure)."""
        if isinstance(error, ModelStateError):
            return None
        try:
            self._loss_and_gradients(x, y, 1, metrics, weights)
        except ComputeError as composed:
            if not isinstance(composed.__cause__, ModelStateError):
                return composed
        return None

    @property
    def last_step_path(self) -> str | None:
        """Which path ran the last step: ``"fused"`` (the backend's one compiled call,
        :meth:`toolkit.Backend.compile_fused_step`), ``"composed"`` (per device, from the backend's primitives:
        micro-batches, ``fused = False``, no fused step for the metrics, or a model that refused padded shards
        in this batch layout), or None before the first step."""
        return self._last_path

    def _compile_fused_step(self, metrics: tuple):
        return self.backend.compile_fused_step(self.model, self.optimizer, self.dtype, self.training_state,
                                               metrics=metrics, across_processes=self.cluster is not None)

    def _inference(self, x, batches):
        for start, end in batches:
            for index, device, lo, hi in self._split(end - start):
                yield device, self._infer(x, index, device, start + lo, start + hi), start + lo, start + hi

    def _infer(self, x, index: int, device, lo: int, hi: int):
        """The model's outputs for rows ``lo:hi`` of ``x`` on replica ``index`` in inference mode (natives)."""
        if self._predict_fn is None:
            self._predict_fn = self.backend.compile_predict(self.model, self.dtype)
        shard = optree.tree_map(lambda a: self.backend.place(a, device), rows(x, slice(lo, hi)))
        state = self.training_state
        return self._compute(device, f"x {_shapes(shard)}", self._predict_fn, _replica(state.params, index),
                             batch(shard, None, _replica(state.model_state, index)), device)

    def replica_params(self) -> list[dict]:
        """The parameters as held by each device's replica, in device order (all equal after every step)."""
        return [{name: var.replicas[i].numpy() for name, var in self.training_state.params.items()}
                for i in range(len(self.devices))]

    def replica_state(self) -> list[dict]:
        """The model state as held by each device's replica, in device order (all equal after every step: the
        replicas' new values are averaged and written to every replica); empty dicts for a model without state."""
        return [{name: var.replicas[i].numpy() for name, var in self.training_state.model_state.items()}
                for i in range(len(self.devices))]

    # ------------------------------------------------------------------------------------------------------------------
    # The step as one compiled call: a switch to compose it instead, and a hook on the call.

    @property
    def fused(self) -> bool:
        """Whether a step runs as one compiled call (:meth:`toolkit.Backend.compile_fused_step`) where the
        backend compiles one and the step allows it (one micro-batch). False: every step is composed from the
        backend's primitives, device by device, as :meth:`gradients` and accumulated micro-batches are; the update
        is the same (to rounding), so setting it False compares the two paths, or names the device where a step
        fails. Setting it True again compiles the fused step at the next step.

        Raises:
            ArgumentTypeError: (on assignment) a value that is not True or False.
        """
        return self._fused_steps is not None

    @fused.setter
    def fused(self, value: bool) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentTypeError(f"DataParallel.fused must be True or False, got {value!r}")
        if not value:
            self._fused_steps = None
        elif self._fused_steps is None:
            self._fused_steps, self._paths = {}, {}  # compiled by the next step, for its metrics

    def fused_step(self, metrics: Sequence[Any] = ()) -> Callable | None:
        """The compiled call a step scoring ``metrics`` runs (compiled now if no step has needed it yet).

        Args:
            metrics: names or :class:`~toolkit.metrics.Metric` objects, as :meth:`train_step` takes; ``()`` for
                :meth:`step`.

        Returns:
            ``fn(indices, xs, ys, shares, step) -> (mean loss, written, {metric name: mean})``
            (:meth:`toolkit.Backend.compile_fused_step`), or None where steps are composed (:attr:`fused`
            False, or a backend that compiles no fused step for this trainer). For inspection, TensorFlow's has
            ``fn.function``, its ``tf.function`` (``get_concrete_function(...).graph``: where each op runs), and
            the Theano family's one-device C-linker step ``fn.functions``, its compiled functions.

        Raises:
            ArgumentError: an unknown metric.
        """
        if self._fused_steps is None:
            return None
        key = metrics_module.get(metrics)
        if key not in self._fused_steps:
            self._fused_steps[key] = self._compile_fused_step(key)
        return self._fused_steps[key]

    def wrap_fused_step(self, wrapper: Callable[[Callable], Callable], metrics: Sequence[Any] = ()) -> bool:
        """Make the steps that score ``metrics`` call ``wrapper(step)`` in place of the compiled step: a wrapper
        that calls through can time the compiled call (``multigpu bench`` does), count the calls or read their
        arguments (each shard's share of the step, for one).

        Args:
            wrapper: takes the compiled step (:meth:`fused_step`) and returns a callable with its arguments and
                result.
            metrics: as :meth:`fused_step`.

        Returns:
            True; False, with nothing changed, where steps are composed (there is no compiled call to wrap).

        Raises:
            ArgumentError: an unknown metric.
        """
        step = self.fused_step(metrics)
        if step is None:
            return False
        self._fused_steps[metrics_module.get(metrics)] = wrapper(step)
        return True

    def _shards(self, x, y, layout: shard_plan.Layout | None = None,
                weights: Mapping[str, np.ndarray] | None = None) -> list[tuple[int, Any, dict, Any]]:
        """``(replica index, device, model batch, y shard)`` for each shard of the batch, in device order: each
        non-empty shard (an empty one contributes nothing), or, where ``layout`` pads, every device's shard padded
        to one size. The model batch (:func:`toolkit.nn.model.batch`) holds the x shard, its examples' keys, the
        replica's model state, padded, its row weights and, with ``weights`` (:meth:`Trainer._weights`), the
        examples' weights."""
        layout = layout or self._layout(count(y))
        keys = self._example_keys(count(y), layout.first_row)
        model_state = self.training_state.model_state
        if layout.pad_to is None:
            return [(index, device, _weighed(batch(rows(x, slice(lo, hi)), keys[lo:hi],
                                                   _replica(model_state, index)), weights, slice(lo, hi)),
                     rows(y, slice(lo, hi)))
                    for index, device, lo, hi in self._split(count(y))]
        found = []
        bounds = shard_bounds(split_sizes(count(y), len(self.devices), self.weights))
        for index, (device, (lo, hi)) in enumerate(zip(self.devices, bounds)):
            taken, padding = shard_plan.padded_rows(lo, hi, layout.pad_to)
            found.append((index, device, _weighed(batch(rows(x, taken), keys[taken], _replica(model_state, index),
                                                        padding.astype(self.dtype)), weights, taken), rows(y, taken)))
        return found

    def _shares(self, count: int, layout: shard_plan.Layout) -> list[float]:
        """Each shard of :meth:`_shards`' share of the step (rule 1), for this process's ``count`` examples."""
        if layout.pad_to is None:
            return shares([hi - lo for _, _, lo, hi in self._split(count)], layout.total)
        return shares(split_sizes(count, len(self.devices), self.weights), layout.total)

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

    def _layout(self, count: int) -> shard_plan.Layout:
        """Where this process's ``count`` examples sit in the step's global batch, and whether the backend's fused
        step gets its shards padded. Across processes every process's shard sizes are learnt by an all-reduce
        (parts may differ in size, and only the process knows its own), so that an example's random key is its
        index in the global batch whatever the number of processes, and every process pads alike."""
        # The non-empty shards' sizes, then a 0 for each empty one: the layout reads their sum, largest and count.
        sizes = [hi - lo for _, _, lo, hi in self._split(count)]
        sizes += [0] * (len(self.devices) - len(sizes))
        if self.cluster is None:
            return _one_process_layout(tuple(sizes), self.backend.equal_shards)
        table = np.zeros((self.cluster.num_processes, len(self.devices)))
        table[self.cluster.process_id] = sizes
        table = self.backend.all_reduce_sum(table.ravel(), f"the example numbering of step {self.step_count + 1}")
        table = np.rint(table).astype(int).reshape(self.cluster.num_processes, len(self.devices))
        return shard_plan.layout(table.tolist(), self.cluster.process_id, self.backend.equal_shards)

    def _loss_and_gradients(self, x, y, micro_batches=1, metrics=(), weights=None):
        # Micro-batches run one after another, each split over the devices; every shard's share is of the whole
        # batch (of every process's), so the parts add up to the batch's means, here and then across processes.
        layout = self._layout(count(y))
        if metrics not in self._gradient_fns:
            self._gradient_fns[metrics] = self.backend.compile_gradient(self.model, self.dtype, metrics)
        gradient_fn, parts, params = self._gradient_fns[metrics], [], self.training_state.params
        for lo, hi in shard_bounds(split_sizes(count(y), micro_batches)):
            part = shard_plan.Layout(layout.first_row + lo, layout.total)
            part_weights = None if weights is None else rows(weights, slice(lo, hi))
            part_x, part_y = rows(x, slice(lo, hi)), rows(y, slice(lo, hi))
            for (index, device, shard, shard_y), share in zip(self._shards(part_x, part_y, part, part_weights),
                                                              self._shares(hi - lo, part)):
                shapes = f"shard x {_shapes(shard['x'])}, y {_shapes(shard_y)}"
                parts.append(self._compute(device, shapes, self._shard_gradient, gradient_fn,
                                           _replica(params, index), replica_batch(shard, share, self.dtype),
                                           shard_y, device))
        result = self.backend.sum(parts, self.devices[0])  # on the first device, where the update runs
        if self.cluster is not None:
            result = self._sum_over_processes(*result)
        self._accept_input_spec()
        return result

    def _sum_over_processes(self, loss, grads, model_state, scores):
        """The parts of every process summed by the backend's all-reduce (in float64, as one vector): each process's
        parts are shares of the global batch, so their sum is the global batch's means."""
        local = {"": self.backend.to_numpy(loss), **{f"g{k}": self.backend.to_numpy(g) for k, g in grads.items()},
                 **{f"s{k}": self.backend.to_numpy(v) for k, v in model_state.items()},
                 **{f"m{k}": self.backend.to_numpy(v) for k, v in scores.items()}}
        parts = [np.asarray(a, np.float64).ravel() for a in local.values()]
        total = self.backend.all_reduce_sum(np.concatenate(parts),
                                            f"the gradient reduction of step {self.step_count + 1}")
        ends, home = np.cumsum([p.size for p in parts]), self.devices[0]
        summed = {k: self.backend.place(total[end - p.size:end].reshape(np.shape(a)).astype(self.dtype), home)
                  for (k, a), p, end in zip(local.items(), parts, ends)}
        return (summed.pop(""), *({k[1:]: v for k, v in summed.items() if k[0] == kind} for kind in "gsm"))

    def _shard_gradient(self, gradient_fn, replica, x, y, device):
        x = optree.tree_map(lambda a: self.backend.place(a, device), x)
        return gradient_fn(replica, x, self.backend.place(y, device), device)

    def __repr__(self) -> str:
        return (f"DataParallel({self.model.name}, {self.backend.name}, devices=[{', '.join(map(str, self.devices))}], "
                f"{self.optimizer!r}, dtype={self.dtype})")


@functools.lru_cache(maxsize=SPLITS_KEPT)
def _one_process_layout(sizes: tuple[int, ...], equal_shards: bool) -> shard_plan.Layout:
    return shard_plan.layout([sizes], 0, equal_shards)


def _weighed(shard: dict, weights: Mapping[str, np.ndarray] | None, taken: Any) -> dict:
    """The model batch ``shard`` with rows ``taken`` of the examples' ``weights`` (none: as it is)."""
    if weights is not None:
        shard.update(rows(dict(weights), taken))
    return shard


def _replica(variables: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Replica ``index``'s native values of mirrored ``variables``, by name."""
    return {name: var.replicas[index].value for name, var in variables.items()}


def _shapes(x) -> Any:
    return shapes(x)
