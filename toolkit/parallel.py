"""Data-parallel training: one replica of the parameters per device, a global batch split across them.

One step, top to bottom (:meth:`DataParallel.step`):

1. split the global batch into shards (:func:`toolkit.split_sizes`) and place each on its device;
2. on each device with a non-empty shard, the mean loss and its gradient against that device's replica;
3. average the per-device results on the first device, weighted by shard size, which gives exactly the
   full-batch mean loss and gradient (:meth:`toolkit.backend.Backend.average`);
4. apply the optimizer on the first device, where its state lives;
5. write the new parameters to every replica.

Nothing is written before step 5, so an error anywhere leaves parameters, optimizer state and step count as they were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.backend import Backend
from toolkit.errors import DTypeError, ParamsError, ShapeError
from toolkit.model import Model
from toolkit.optim import Optimizer
from toolkit.registry import get_backend
from toolkit.splitting import shard_bounds, split_sizes

#: Floating dtypes a trainer computes in.
DTYPES = ("float32", "float64")
#: Integer inputs (class labels) are passed to the model as this dtype on every backend.
LABEL_DTYPE = "int32"


def _as_dtype(dtype: Any) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in DTYPES:
        raise DTypeError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return name


class DataParallel:
    """Train ``model`` with data parallelism over ``devices``.

    Args:
        model: the :class:`~toolkit.Model`.
        backend: a backend object or name (``"tensorflow"``, ``"aesara"``).
        devices: any :meth:`~toolkit.backend.Backend.select_devices` spec: ``"all"``, an int, ``"gpu:0,gpu:1"``, ...
        optimizer: a :mod:`toolkit.optim` optimizer.
        dtype: ``"float32"`` or ``"float64"``; parameters and floating inputs are cast to it.
        seed: seeds the ``numpy.random.Generator`` passed to ``model.init``: the same seed gives the same initial
            parameters on every backend.
        weights: optional relative speed of each device; shards are sized in proportion (see ``split_sizes``).

    Attributes:
        devices: the devices used, in order; the first holds the optimizer state and does the averaging.
        step_count: the number of updates applied.
    """

    def __init__(self, model: Model, backend: Backend | str, devices: Any, optimizer: Optimizer,
                 dtype: str = "float32", seed: int = 0, weights: Sequence[float] | None = None) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"model must be a toolkit.Model, got {type(model).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"optimizer must be a toolkit.optim optimizer, got {type(optimizer).__name__}")
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.devices = tuple(self.backend.select_devices(devices))
        self.model, self.optimizer, self.dtype, self.seed = model, optimizer, _as_dtype(dtype), seed
        if weights is not None:
            split_sizes(len(self.devices), len(self.devices), weights)  # validates now rather than at the first step
        self.weights = None if weights is None else list(weights)
        self.step_count = 0

        initial = model.init(np.random.default_rng(seed))
        if not isinstance(initial, Mapping) or not initial:
            raise ParamsError(f"model.init must return a non-empty dict of arrays, got {type(initial).__name__}")
        initial = {name: np.asarray(value, dtype=self.dtype) for name, value in initial.items()}
        self._params = {name: self.backend.mirrored_variable(value, self.devices, name=name)
                        for name, value in initial.items()}
        home = self.devices[0]
        self._state = {slot: {name: self.backend.place(np.zeros_like(value), home) for name, value in initial.items()}
                       for slot in optimizer.state_slots()}
        self._gradient_fn = self.backend.compile_gradient(model, self.dtype)
        self._update_fn = self.backend.compile_update(optimizer, self.dtype)

    # ------------------------------------------------------------------------------------------------------------------
    def step(self, x: Any, y: Any) -> float:
        """One optimizer update on the global batch ``(x, y)``; returns its mean loss (before the update)."""
        loss, grads = self._loss_and_gradients(x, y)
        home = self.devices[0]
        params = {name: var.replicas[0].value for name, var in self._params.items()}
        step = self.backend.place(np.asarray(self.step_count + 1, dtype=self.dtype), home)
        new_params, new_state = self._update_fn(params, grads, self._state, step, home)
        loss = float(self.backend.to_numpy(loss))
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

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Replace every parameter on every replica. Keys and shapes must match; values are cast to the dtype.

        Raises:
            ParamsError: missing or extra keys, or a wrong shape; nothing is changed.
        """
        if not isinstance(params, Mapping):
            raise ParamsError(f"set_params needs a dict of arrays, got {type(params).__name__}")
        missing, extra = set(self._params) - set(params), set(params) - set(self._params)
        if missing or extra:
            raise ParamsError(f"set_params keys differ from the model's: missing {sorted(missing)}, "
                              f"extra {sorted(extra)}")
        arrays = {}
        for name, var in self._params.items():
            array = np.asarray(params[name])
            if array.shape != var.shape:
                raise ParamsError(f"set_params[{name!r}]: expected shape {var.shape}, got {array.shape}")
            arrays[name] = array.astype(self.dtype)
        for name, array in arrays.items():
            self._params[name].assign(array)

    # ------------------------------------------------------------------------------------------------------------------
    def _loss_and_gradients(self, x: Any, y: Any) -> tuple[Any, dict[str, Any]]:
        x, y = self._check_batch(x, y)
        sizes = split_sizes(len(x), len(self.devices), self.weights)
        results, kept = [], []
        for index, (device, (lo, hi)) in enumerate(zip(self.devices, shard_bounds(sizes))):
            if hi == lo:
                continue  # an empty shard contributes nothing (and its mean would be NaN)
            replica = {name: var.replicas[index].value for name, var in self._params.items()}
            shard_x, shard_y = self.backend.place(x[lo:hi], device), self.backend.place(y[lo:hi], device)
            results.append(self._gradient_fn(replica, shard_x, shard_y, device))
            kept.append(hi - lo)
        return self.backend.average(results, weights=kept, device=self.devices[0])

    def _check_batch(self, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim == 0 or y.ndim == 0:
            raise ShapeError(f"x and y need a batch axis; got shapes {x.shape} and {y.shape}")
        if len(x) != len(y):
            raise ShapeError(f"x and y must have the same number of examples; got {len(x)} and {len(y)}")
        if len(x) == 0:
            raise ShapeError("the batch is empty (0 examples)")
        return self._cast_input(x, "x"), self._cast_input(y, "y")

    def _cast_input(self, array: np.ndarray, what: str) -> np.ndarray:
        if array.dtype.kind == "f":
            return array.astype(self.dtype, copy=False)
        if array.dtype.kind in "iub":
            return array.astype(LABEL_DTYPE, copy=False)
        raise DTypeError(f"{what} must hold numbers, got dtype {array.dtype}")

    def __repr__(self) -> str:
        return (f"DataParallel({self.model.name}, {self.backend.name}, devices=[{', '.join(map(str, self.devices))}], "
                f"{self.optimizer!r}, dtype={self.dtype})")
