"""multigpu-toolkit: one backend-neutral interface for multi-device training with TensorFlow or Aesara.

Importing ``toolkit`` imports no framework; :func:`get_backend` loads one when asked.

The package is grouped by what a reader looks for:

- ``placement/``: devices (``Device``, ``parse_device``, ``use_logical_devices``), batch splitting, variables;
- ``nn/``: the model vocabulary: the neutral ``ops``, ``Model``, ``layers``, built-in ``models``;
- ``training/``: trainers (``DataParallel``, ``ModelParallel``), optimizers and schedules, metrics, checkpoints;
- ``processes/``: training across processes (``distributed``) and ``multigpu launch``;
- ``command/``: the ``multigpu`` command and its reports (compare, bench, plots);
- ``backends/``: each framework's translation (installed as ``toolkit.backends``; ``backends/`` in the repository);
- ``backend.py`` and ``registry.py``: the interface every backend implements, and finding backends by name.

The public submodules are attributes of ``toolkit`` (loaded on first use): ``toolkit.ops``, ``toolkit.layers``,
``toolkit.models``, ``toolkit.datasets``, ``toolkit.optim``, ``toolkit.metrics``, ``toolkit.callbacks``,
``toolkit.distributed``, ``toolkit.tolerances``, ``toolkit.workloads``, ``toolkit.registry``, ``toolkit.checkpoint``.
"""

from __future__ import annotations

import importlib
from typing import Any

from toolkit.backend import Backend
from toolkit.errors import (
    ArgumentError,
    BackendUnavailableError,
    CheckpointError,
    ComputeError,
    DeviceNotFoundError,
    DeviceParseError,
    DeviceSpecError,
    DTypeError,
    KerasImportError,
    LogicalDevicesError,
    ModelStateError,
    NonFiniteError,
    OptimizerError,
    ParamsError,
    ShapeError,
    ToolkitError,
)
from toolkit.nn.keras_import import from_keras, to_keras
from toolkit.nn.model import Model, State
from toolkit.nn.ops import Ops
from toolkit.placement.devices import Device, parse_device, use_logical_devices
from toolkit.placement.splitting import split_sizes
from toolkit.placement.variables import MirroredVariable, Variable
from toolkit.registry import available_backends, get_backend
from toolkit.training.checkpoint import Checkpoint, load_checkpoint
from toolkit.training.data_parallel import DataParallel
from toolkit.training.model_parallel import ModelParallel, Part, PartedModel

__version__ = "0.1.0"

#: Public submodules, reachable as ``toolkit.<name>`` without importing them first (none imports a framework).
SUBMODULES = {
    "callbacks": "toolkit.training.callbacks",
    "checkpoint": "toolkit.training.checkpoint",
    "datasets": "toolkit.datasets",
    "distributed": "toolkit.processes.distributed",
    "layers": "toolkit.nn.layers",
    "metrics": "toolkit.training.metrics",
    "models": "toolkit.nn.models",
    "ops": "toolkit.nn.ops",
    "optim": "toolkit.training.optim",
    "registry": "toolkit.registry",
    "tolerances": "toolkit.tolerances",
    "workloads": "toolkit.command.workloads",
}


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        module = importlib.import_module(SUBMODULES[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'toolkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *SUBMODULES])


__all__ = [
    "ArgumentError",
    "Backend",
    "BackendUnavailableError",
    "Checkpoint",
    "CheckpointError",
    "ComputeError",
    "DTypeError",
    "DataParallel",
    "Device",
    "DeviceNotFoundError",
    "DeviceParseError",
    "DeviceSpecError",
    "LogicalDevicesError",
    "MirroredVariable",
    "Model",
    "ModelParallel",
    "KerasImportError",
    "ModelStateError",
    "OptimizerError",
    "NonFiniteError",
    "Ops",
    "ParamsError",
    "Part",
    "PartedModel",
    "ShapeError",
    "State",
    "ToolkitError",
    "Variable",
    "available_backends",
    "get_backend",
    "load_checkpoint",
    "parse_device",
    "split_sizes",
    "use_logical_devices",
    "from_keras",
    "to_keras",
    *SUBMODULES,
]
