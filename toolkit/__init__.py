"""multigpu-toolkit: one backend-neutral interface for multi-device training with TensorFlow or Aesara.

Importing ``toolkit`` imports no framework; :func:`get_backend` loads one when asked.
"""

from toolkit import distributed, optim
from toolkit.backend import Backend
from toolkit.checkpoint import Checkpoint, load_checkpoint
from toolkit.devices import Device, parse_device, use_logical_devices
from toolkit.errors import (
    BackendUnavailableError,
    CheckpointError,
    ComputeError,
    DeviceNotFoundError,
    DeviceParseError,
    DeviceSpecError,
    DTypeError,
    LogicalDevicesError,
    NonFiniteError,
    ParamsError,
    ShapeError,
    ToolkitError,
)
from toolkit.model import Model
from toolkit.model_parallel import ModelParallel, Part, PartedModel
from toolkit.ops import Ops
from toolkit.parallel import DataParallel
from toolkit.registry import available_backends, get_backend
from toolkit.splitting import split_sizes
from toolkit.variables import MirroredVariable, Variable

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "Checkpoint",
    "CheckpointError",
    "ComputeError",
    "DTypeError",
    "DataParallel",
    "distributed",
    "Device",
    "DeviceNotFoundError",
    "DeviceParseError",
    "DeviceSpecError",
    "LogicalDevicesError",
    "NonFiniteError",
    "MirroredVariable",
    "Model",
    "ModelParallel",
    "Ops",
    "ParamsError",
    "Part",
    "PartedModel",
    "ShapeError",
    "ToolkitError",
    "Variable",
    "available_backends",
    "get_backend",
    "load_checkpoint",
    "optim",
    "parse_device",
    "split_sizes",
    "use_logical_devices",
]
