"""Data-parallel training: one replica of the parameters per device, a global batch split across them.

One step, top to bottom (:meth:`DataParallel.step`):

1. check the batch and split it into shards (:func:`toolkit.split_sizes`), each placed on its device;
2. on each device with a non-empty shard, the mean loss and its gradient against that device's replica;
3. average the per-device results on the first device, weighted by shard size, which gives exactly the
   full-batch mean loss and gradient (:meth:`toolkit.backend.Backend.average`);
4. compute the optimizer update on the first device, where its state lives, with a finiteness check;
5. if the loss and gradients are finite, write the new parameters to every replica and keep the new state.

Nothing is written before step 5, so an error anywhere (bad input, a failure on one device, a non-finite gradient)
leaves parameters, optimizer state, step count and RNG state as they were.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.backend import Backend
from toolkit.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from toolkit.errors import (
    CheckpointError,
    ComputeError,
    DTypeError,
    NonFiniteError,
    ParamsError,
    ShapeError,
    ToolkitError,
)
from toolkit.model import Model
from toolkit.optim import Optimizer
from toolkit.registry import get_backend
from toolkit.splitting import shard_bounds, split_sizes

#: Floating dtypes a trainer computes in.
DTYPES = ("float32", "float64")
#: Integer inputs (class labels) are passed to the model as this dtype on every backend.
LABEL_DTYPE = "int32"
#: What a step does with a non-finite loss or gradient: raise NonFiniteError, or skip the update and count it.
NAN_POLICIES = ("raise", "skip")


def _as_dtype(dtype: Any) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in DTYPES:
        raise DTypeError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return name


def _count_non_finite(array: np.ndarray) -> int:
    return int(array.size - np.count_nonzero(np.isfinite(array))) if array.dtype.kind == "f" else 0


class DataParallel:
    """Train ``model`` with data parallelism over ``devices``.

    Args:
        model: the :class:`~toolkit.Model`.
        backend: a backend object or name (``"tensorflow"``, ``"aesara"``).
        devices: any :meth:`~toolkit.backend.Backend.select_devices` spec: ``"all"``, an int, ``"gpu:0,gpu:1"``, ...
        optimizer: a :mod:`toolkit.optim` optimizer.
        dtype: ``"float32"`` or ``"float64"``; parameters and floating inputs are cast to it.
        seed: seeds :attr:`rng`, which draws the initial parameters: the same seed gives the same parameters on
            every backend. Use :attr:`rng` for shuffling too, and a restored checkpoint replays the same order.
        weights: optional relative speed of each device; shards are sized in proportion (see ``split_sizes``).
        nan_policy: ``"raise"`` (default): a non-finite loss or gradient raises :class:`~toolkit.NonFiniteError` and
            changes nothing; ``"skip"``: the update is skipped and counted in :attr:`skipped_steps`.

    Attributes:
        devices: the devices used, in order; the first holds the optimizer state and does the averaging.
        step_count: the number of updates applied.
        skipped_steps: the number of updates skipped for non-finite values (``nan_policy="skip"``).
        rng: the ``numpy.random.Generator`` seeded with ``seed``; saved and restored with checkpoints.
    """

    def __init__(self, model: Model, backend: Backend | str, devices: Any, optimizer: Optimizer,
                 dtype: str = "float32", seed: int = 0, weights: Sequence[float] | None = None,
                 nan_policy: str = "raise") -> None:
        if not isinstance(model, Model):
            raise TypeError(f"model must be a toolkit.Model, got {type(model).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"optimizer must be a toolkit.optim optimizer, got {type(optimizer).__name__}")
        if nan_policy not in NAN_POLICIES:
            raise ValueError(f"nan_policy must be one of {NAN_POLICIES}, got {nan_policy!r}")
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.devices = tuple(self.backend.select_devices(devices))
        self.model, self.optimizer, self.dtype, self.nan_policy = model, optimizer, _as_dtype(dtype), nan_policy
        if weights is not None:
            split_sizes(len(self.devices), len(self.devices), weights)  # validates now rather than at the first step
        self.weights = None if weights is None else list(weights)
        self.step_count = self.skipped_steps = 0
        self.rng = np.random.default_rng(seed)
        self._input_spec: tuple | None = None  # (x example shape, y example shape, y kind) of the first good batch

        initial = model.init(self.rng)
        if not isinstance(initial, Mapping) or not initial:
            raise ParamsError(f"model.init must return a non-empty dict of arrays, got {type(initial).__name__}")
        initial = {name: np.asarray(value, dtype=self.dtype) for name, value in initial.items()}
        self._check_finite_params(initial, "model.init")
        self._params = {name: self.backend.mirrored_variable(value, self.devices, name=name)
                        for name, value in initial.items()}
        self._state = self._place_state({slot: {name: np.zeros_like(value) for name, value in initial.items()}
                                         for slot in optimizer.state_slots()})
        self._gradient_fn = self.backend.compile_gradient(model, self.dtype)
        self._update_fn = self.backend.compile_update(optimizer, self.dtype)

    # ------------------------------------------------------------------------------------------------------------------
    def step(self, x: Any, y: Any) -> float:
        """One optimizer update on the global batch ``(x, y)``; returns its mean loss (before the update).

        Raises:
            ShapeError, DTypeError, NonFiniteError: bad input (nothing is computed).
            ComputeError: the framework failed on a device.
            NonFiniteError: with ``nan_policy="raise"``, a NaN or Inf loss or gradient.
            In every case the trainer is left exactly as it was.
        """
        loss, grads = self._loss_and_gradients(x, y)
        home = self.devices[0]
        params = {name: var.replicas[0].value for name, var in self._params.items()}
        step = self.backend.place(np.asarray(self.step_count + 1, dtype=self.dtype), home)
        new_params, new_state, finite = self._update_fn(params, grads, self._state, step, home)
        loss = float(self.backend.to_numpy(loss))
        if not (math.isfinite(loss) and bool(self.backend.to_numpy(finite))):
            if self.nan_policy == "raise":
                raise NonFiniteError(
                    f"step {self.step_count + 1}: the loss ({loss}) or a gradient is NaN or Inf; nothing was updated. "
                    "Lower the learning rate, check the data, or pass nan_policy='skip' to skip such steps")
            self.skipped_steps += 1
            return loss
        for name, var in self._params.items():
            var.assign(new_params[name])
        self._state = new_state
        self.step_count += 1
        return loss

    def gradients(self, x: Any, y: Any) -> dict[str, np.ndarray]:
        """The gradient of the mean loss over the global batch, averaged across devices; nothing is updated."""
        _, grads = self._loss_and_gradients(x, y)
        return {name: self.backend.to_numpy(g) for name, g in grads.items()}

    def loss(self, x: Any, y: Any) -> float:
        """The mean loss over the global batch with the current parameters."""
        loss, _ = self._loss_and_gradients(x, y)
        return float(self.backend.to_numpy(loss))

    def params(self) -> dict[str, np.ndarray]:
        """The parameters, as NumPy arrays."""
        return {name: var.numpy() for name, var in self._params.items()}

    def replica_params(self) -> list[dict[str, np.ndarray]]:
        """The parameters as held by each device's replica, in device order (all equal after every step)."""
        return [{name: var.replicas[i].numpy() for name, var in self._params.items()}
                for i in range(len(self.devices))]

    def optimizer_state(self) -> dict[str, dict[str, np.ndarray]]:
        """The optimizer state, ``{slot: {param: array}}``, as NumPy arrays."""
        return {slot: {name: self.backend.to_numpy(v) for name, v in values.items()}
                for slot, values in self._state.items()}

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Replace every parameter on every replica. Keys and shapes must match; values are cast to the dtype.

        Raises:
            ParamsError: missing or extra keys, or a wrong shape; NonFiniteError: NaN or Inf. Nothing is changed.
        """
        arrays = self._check_params(params, "set_params")
        for name, array in arrays.items():
            self._params[name].assign(array)

    # ------------------------------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint: parameters, optimizer state, step counts, RNG state, dtype, model, optimizer, toolkit
        version. Atomic: a crash during ``save`` leaves an earlier checkpoint at ``path`` intact."""
        from toolkit import __version__

        metadata = {
            "step": self.step_count, "skipped_steps": self.skipped_steps, "rng_state": self.rng.bit_generator.state,
            "dtype": self.dtype, "model": self.model.name, "optimizer": type(self.optimizer).__name__,
            "optimizer_config": vars(self.optimizer), "backend": self.backend.name,
            "devices": [str(d) for d in self.devices], "toolkit_version": __version__,
        }
        save_checkpoint(path, Checkpoint(self.params(), self.optimizer_state(), metadata))

    def restore(self, path: str | os.PathLike | Checkpoint) -> None:
        """Load a checkpoint (from any backend and any device count) into this trainer.

        Raises:
            CheckpointError: unreadable or corrupted file, or one that does not fit this trainer (parameter names or
                shapes, dtype, optimizer kind). Nothing is changed.
        """
        checkpoint = path if isinstance(path, Checkpoint) else load_checkpoint(path)
        meta = checkpoint.metadata
        if meta.get("dtype") != self.dtype:
            raise CheckpointError(f"checkpoint dtype {meta.get('dtype')} differs from this trainer's {self.dtype}")
        if meta.get("optimizer") != type(self.optimizer).__name__:
            raise CheckpointError(f"checkpoint was written with {meta.get('optimizer')}, this trainer uses "
                                  f"{type(self.optimizer).__name__}")
        try:
            params = self._check_params(checkpoint.params, "checkpoint")
        except ToolkitError as error:
            raise CheckpointError(str(error)) from error
        expected = {slot: {name: p.shape for name, p in params.items()} for slot in self.optimizer.state_slots()}
        found = {slot: {name: v.shape for name, v in values.items()} for slot, values in checkpoint.state.items()}
        if found != expected:
            raise CheckpointError(f"checkpoint optimizer state {found} does not fit this trainer's {expected}")
        rng = np.random.default_rng()
        rng.bit_generator.state = meta["rng_state"]
        state = self._place_state({slot: {name: np.asarray(v, self.dtype) for name, v in values.items()}
                                   for slot, values in checkpoint.state.items()})
        for name, array in params.items():
            self._params[name].assign(array)
        self._state, self.rng = state, rng
        self.step_count, self.skipped_steps = int(meta["step"]), int(meta.get("skipped_steps", 0))

    # ------------------------------------------------------------------------------------------------------------------
    def _place_state(self, state: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
        return {slot: {name: self.backend.place(v, self.devices[0]) for name, v in values.items()}
                for slot, values in state.items()}

    def _check_params(self, params: Mapping[str, Any], what: str) -> dict[str, np.ndarray]:
        if not isinstance(params, Mapping):
            raise ParamsError(f"{what} needs a dict of arrays, got {type(params).__name__}")
        missing, extra = set(self._params) - set(params), set(params) - set(self._params)
        if missing or extra:
            raise ParamsError(f"{what} keys differ from the model's: missing {sorted(missing)}, extra {sorted(extra)}")
        arrays = {}
        for name, var in self._params.items():
            array = np.asarray(params[name])
            if array.shape != var.shape:
                raise ParamsError(f"{what}[{name!r}]: expected shape {var.shape}, got {array.shape}")
            if array.dtype.kind not in "biuf":
                raise DTypeError(f"{what}[{name!r}]: expected numbers, got dtype {array.dtype}")
            arrays[name] = array.astype(self.dtype)
        self._check_finite_params(arrays, what)
        return arrays

    @staticmethod
    def _check_finite_params(params: Mapping[str, np.ndarray], what: str) -> None:
        bad = {name: n for name, value in params.items() if (n := _count_non_finite(value))}
        if bad:
            raise NonFiniteError(f"{what}: NaN or Inf in parameters {bad} (name: count)")

    def _loss_and_gradients(self, x: Any, y: Any) -> tuple[Any, dict[str, Any]]:
        x, y = self._check_batch(x, y)
        sizes = split_sizes(len(x), len(self.devices), self.weights)
        results, kept = [], []
        for index, (device, (lo, hi)) in enumerate(zip(self.devices, shard_bounds(sizes))):
            if hi == lo:
                continue  # an empty shard contributes nothing (and its mean would be NaN)
            replica = {name: var.replicas[index].value for name, var in self._params.items()}
            try:
                shard_x, shard_y = self.backend.place(x[lo:hi], device), self.backend.place(y[lo:hi], device)
                results.append(self._gradient_fn(replica, shard_x, shard_y, device))
            except ToolkitError:
                raise
            except Exception as error:  # the framework's own error, whatever its type: report it as ours
                message = str(error).strip().splitlines()[0][:500] if str(error).strip() else ""
                raise ComputeError(
                    f"{self.model.name} failed on {device} (shard x {tuple(x[lo:hi].shape)}, y "
                    f"{tuple(y[lo:hi].shape)}): {type(error).__name__}: {message}; the trainer is unchanged"
                ) from error
            kept.append(hi - lo)
        result = self.backend.average(results, weights=kept, device=self.devices[0])
        if self._input_spec is None:
            self._input_spec = (x.shape[1:], y.shape[1:], y.dtype.kind)
        return result

    def _check_batch(self, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim == 0 or y.ndim == 0:
            raise ShapeError(f"x and y need a batch axis; got shapes {x.shape} and {y.shape}")
        if len(x) != len(y):
            raise ShapeError(f"x and y must have the same number of examples; got {len(x)} and {len(y)}")
        if len(x) == 0:
            raise ShapeError("the batch is empty (0 examples)")
        x, y = self._cast_input(x, "x"), self._cast_input(y, "y")
        if self._input_spec is not None:
            x_shape, y_shape, y_kind = self._input_spec
            if x.shape[1:] != x_shape or y.shape[1:] != y_shape:
                raise ShapeError(f"examples must keep the shapes of the first batch: x {x_shape}, y {y_shape}; "
                                 f"got x {x.shape[1:]}, y {y.shape[1:]}")
            if y.dtype.kind != y_kind:
                raise DTypeError(f"y must stay {'integer labels' if y_kind == 'i' else 'floating'} as in the first "
                                 f"batch; got dtype {y.dtype}")
        for name, array in (("x", x), ("y", y)):
            if bad := _count_non_finite(array):
                first = int(np.argwhere(~np.isfinite(array))[0][0])
                raise NonFiniteError(f"{name} has {bad} NaN or Inf value(s), the first in example {first}")
        return x, y

    def _cast_input(self, array: np.ndarray, what: str) -> np.ndarray:
        if array.dtype.kind == "f":
            return array.astype(self.dtype, copy=False)
        if array.dtype.kind in "iub":
            return array.astype(LABEL_DTYPE, copy=False)
        raise DTypeError(f"{what} must hold numbers, got dtype {array.dtype}")

    def __repr__(self) -> str:
        return (f"DataParallel({self.model.name}, {self.backend.name}, devices=[{', '.join(map(str, self.devices))}], "
                f"{self.optimizer!r}, dtype={self.dtype})")
