"""Devices: one value type, one parser for every spelling users bring, and logical devices for testing."""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolkit.errors import DeviceParseError, DeviceSpecError, LogicalDevicesError

#: Device kinds the toolkit knows. A backend maps each to its framework's name (TensorFlow "GPU", JAX "gpu"/"cuda").
KINDS = ("cpu", "gpu")

#: The spellings :func:`parse_device` accepts, as its error message lists them.
ACCEPTED_FORMS = (
    "gpu:1",
    "GPU:1",
    "/gpu:1",
    "/device:GPU:1",
    "/job:localhost/replica:0/task:0/device:GPU:1",
    "cuda1",
    "cuda:1",
    "gpu1",
    "cpu",
    "/cpu:0",
)

# An optional TensorFlow job/replica/task prefix, an optional "/" and "device:", then a kind and an optional index
# written as ":N" or glued on ("cuda1"). "cuda" is the Theano/PyTorch name for a GPU.
_DEVICE_RE = re.compile(
    r"^(?:/job:[^/]+(?:/replica:\d+)?(?:/task:\d+)?)?/?(?:device:)?(?P<kind>cpu|gpu|cuda)(?::?(?P<index>\d+))?$",
    re.IGNORECASE,
)


@dataclass(frozen=True, order=True)
class Device:
    """A device by kind and index: ``Device("gpu", 1)``. Hashable, compared by value, printed as ``"gpu:1"``.

    Attributes:
        kind: one of :data:`KINDS`.
        index: the device's number among those of its kind, an int >= 0.

    Raises:
        DeviceParseError: (a ``ValueError``) an unknown kind, or an index that is not an int >= 0.
    """

    kind: str
    index: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise DeviceParseError(f"device kind {self.kind!r} is not one of {KINDS}")
        if not isinstance(self.index, int) or isinstance(self.index, bool) or self.index < 0:
            raise DeviceParseError(f"device index must be an int >= 0, got {self.index!r}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"


def parse_device(text: str | Device) -> Device:
    """Parse any common spelling of a device.

    Args:
        text: e.g. ``"gpu:1"``, ``"/device:GPU:1"``, ``"/job:localhost/replica:0/task:0/device:GPU:1"``, ``"cuda1"``,
            ``"cpu"``. A :class:`Device` is returned unchanged. A missing index means 0.

    Returns:
        The :class:`Device`; ``"cuda"`` is read as ``"gpu"``.

    Raises:
        DeviceParseError: (a ``ValueError``) for anything else, listing the accepted forms.
    """
    if isinstance(text, Device):
        return text
    match = _DEVICE_RE.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise DeviceParseError(
            f"cannot parse device {text!r}; expected one of the forms {', '.join(ACCEPTED_FORMS)}"
        )
    kind = match["kind"].lower()
    return Device("gpu" if kind == "cuda" else kind, int(match["index"] or 0))


# ---------------------------------------------------------------------------------------------------------------------
# Logical devices. The number asked for is policy and lives here; each backend's environment module turns it into its
# framework's configuration, now if the framework is already loaded, else when the backend is first loaded.

_logical_cpu_count: int | None = None

#: The most logical CPU devices one process may ask for. Each is a full device of the framework, with its own thread
#: pools and executor; on the 2-core CI machine 2,048 of them took 75 s to start and gave nothing back, since they share
#: the same cores. 64 covers every multi-GPU host (8 or 16 GPUs) with room to spare.
MAX_LOGICAL_DEVICES = 64


def use_logical_devices(n: int) -> None:
    """Give this process ``n`` logical CPU devices in every backend, for multi-device runs on one machine.

    Call it before any framework has started (before the first TensorFlow op or JAX device query). A framework
    already loaded is configured now; one imported later is configured as it is imported, whoever imports it
    (TensorFlow by Keras, for example: Keras code may follow this call).

    Args:
        n: the number of logical CPU devices, an int from 1 to :data:`MAX_LOGICAL_DEVICES`.

    Raises:
        DeviceSpecError: (a ``ValueError``) ``n`` is not an int from 1 to :data:`MAX_LOGICAL_DEVICES`.
        LogicalDevicesError: (a ``RuntimeError``) a framework has already fixed its devices to another count;
            the message names it. Call ``use_logical_devices`` at the top of the program, or in a fresh process.
    """
    global _logical_cpu_count
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_LOGICAL_DEVICES:
        raise DeviceSpecError(f"use_logical_devices(n) needs an int n from 1 to {MAX_LOGICAL_DEVICES}, got {n!r}")
    from toolkit.registry import REGISTRY  # deferred: the registry imports the errors this module uses

    environments = [spec.environment() for spec in REGISTRY.values()]
    # Aesara and PyTensor both run on JAX and would each name its problem: every problem is named once.
    problems = list(dict.fromkeys(problem for env in environments if (problem := env.logical_devices_problem(n))))
    if problems:  # checked for every framework before any is configured, so a refusal changes nothing
        raise LogicalDevicesError(
            f"use_logical_devices({n}) came too late: " + "; ".join(problems)
            + ". Call toolkit.use_logical_devices() at the top of the program, before any framework starts."
        )
    for env in environments:
        env.configure_logical_devices(n)
    _logical_cpu_count = n


def apply_logical_devices(environment, framework: str) -> None:
    """Give a framework being loaded the logical CPU devices asked for by :func:`use_logical_devices`, if any.

    Args:
        environment: the backend's ``environment`` module (``logical_devices_problem``, ``configure_logical_devices``).
        framework: its name, for the error message.

    Raises:
        LogicalDevicesError: the framework has already started with another count.
    """
    n = _logical_cpu_count
    if n is None:
        return
    problem = environment.logical_devices_problem(n)
    if problem:
        raise LogicalDevicesError(f"cannot give {framework} {n} logical CPU devices: {problem}")
    environment.configure_logical_devices(n)


def logical_device_count() -> int | None:
    """The count last set by :func:`use_logical_devices`, or None."""
    return _logical_cpu_count


__all__ = ["ACCEPTED_FORMS", "KINDS", "MAX_LOGICAL_DEVICES", "Device", "apply_logical_devices", "logical_device_count",
           "parse_device", "use_logical_devices"]
