"""multigpu-toolkit: one backend-neutral interface for multi-device training with TensorFlow or Aesara.

Importing ``toolkit`` imports no framework; :func:`get_backend` loads one when asked.

The package is grouped by what a reader looks for:

- ``placement/``: devices (``Device``, ``parse_device``), batch splitting, variables;
- ``nn/``: models: ``Model``, ``layers``, built-in ``models``, losses;
- ``training/``: trainers (``DataParallel``, ``ModelParallel``), optimizers and schedules, metrics, checkpoints;
- ``processes/``: training across processes (``distributed``) and ``multigpu launch``;
- ``command/``: the ``multigpu`` command and its reports (compare, bench, plots);
- ``backends/``: each framework's translation (installed as ``toolkit.backends``; ``backends/`` in the repository);
- ``ops/``: the op vocabulary (``Ops``, ``Tensor``, one module per op group);
- ``keras/``: the Keras importer (``from_keras``, ``to_keras``);
- ``backend/``: the interface every backend implements, and finding backends by name.

The public submodules (:data:`SUBMODULES`) are modules of their own, ``import toolkit.distributed`` and
``from toolkit.layers import dense`` as in any package, and attributes of ``toolkit`` loaded on first use, so that
``import toolkit`` stays quick; none imports a framework. Most of them give the public names of a module of the
grouping above (``toolkit.layers`` those of ``toolkit.nn.layers``), where those names are written and documented.
"""

from __future__ import annotations

import importlib
from typing import Any

from toolkit.backend.interface import Backend
from toolkit.backend.logical_devices import use_logical_devices
from toolkit.backend.registry import available_backends, get_backend
from toolkit.errors import (
    ArgumentError,
    ArgumentTypeError,
    BackendUnavailableError,
    CheckpointError,
    ComputeError,
    DataError,
    DeviceNotFoundError,
    DeviceParseError,
    DeviceSpecError,
    DTypeError,
    KerasCallbackError,
    KerasImportError,
    LogicalDevicesError,
    ModelStateError,
    NonFiniteError,
    OptimizerError,
    ParamsError,
    ShapeError,
    ToolkitError,
)
from toolkit.keras.importer import from_keras, to_keras
from toolkit.nn.model import Model, State
from toolkit.ops.interface import Ops
from toolkit.placement.devices import Device, parse_device
from toolkit.placement.splitting import split_sizes
from toolkit.placement.variables import MirroredVariable, Variable
from toolkit.training.checkpoint import Checkpoint, load_checkpoint
from toolkit.training.data_parallel import DataParallel
from toolkit.training.model_parallel import ModelParallel, Part, PartedModel
from toolkit.version import __version__ as __version__

#: The public submodules: ``toolkit.<name>`` is a module; as an attribute of ``toolkit`` it is imported on first use.
SUBMODULES = ("callbacks", "checkpoint", "data", "datasets", "distributed", "layers", "metrics", "models", "ops",
              "optim",
              "registry", "tolerances", "workloads")


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import binds it as an attribute of this module
    raise AttributeError(f"module 'toolkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *SUBMODULES])


__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "Backend",
    "BackendUnavailableError",
    "Checkpoint",
    "CheckpointError",
    "ComputeError",
    "DataError",
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
    "KerasCallbackError",
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
