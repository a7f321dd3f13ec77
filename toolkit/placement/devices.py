"""Devices: one value type, one parser for every spelling users bring, and logical devices for testing."""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolkit.errors import DeviceParseError

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


__all__ = ["ACCEPTED_FORMS", "KINDS", "Device", "parse_device"]
