"""``--perturb BACKEND:SCALE[:DEVICES]``: check the check. One backend's model outputs are multiplied by
``1 + SCALE`` (on every device count, or only on ``DEVICES``), so that a user can see ``multigpu parity`` fail on a
difference of a known size confined to one backend, and to one device count if asked: the kind of defect a
backend's multi-device path can have (a shard size that takes another kernel, a reduction that drops a shard).

The perturbation is applied to the model the chosen runs train (its ``forward``), not inside a backend, so it is the
same on every backend and reaches every op after the model's outputs: the loss, its gradient, the optimizer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import optree

from toolkit.errors import ArgumentError
from toolkit.nn.model import Model


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """One backend's outputs scaled by ``1 + scale``.

    Attributes:
        backend: the backend whose runs are perturbed.
        scale: the relative change of every model output (``1e-3``: outputs 0.1% larger).
        devices: the device counts whose runs are perturbed, or None for every one.
    """

    backend: str
    scale: float
    devices: tuple[int, ...] | None = None

    def applies(self, backend: str, devices: int) -> bool:
        """Whether the run of ``backend`` on ``devices`` devices is perturbed.

        Args:
            backend: the run's backend.
            devices: the run's device count.

        Returns:
            True where the backend is this one's and the device count one of :attr:`devices` (any, if None).
        """
        return backend == self.backend and (self.devices is None or devices in self.devices)

    def model(self, model: Model) -> Model:
        """``model`` with every output of its ``forward`` multiplied by ``1 + scale``.

        Args:
            model: the model the run would train.

        Returns:
            A new :class:`toolkit.Model`, the same but for ``forward``.
        """
        forward, factor = model.forward, 1.0 + self.scale

        def perturbed(ops, params, x):
            return optree.tree_map(lambda out: out * factor, forward(ops, params, x))

        return dataclasses.replace(model, forward=perturbed)

    def __str__(self) -> str:
        where = "every device count" if self.devices is None else f"{', '.join(map(str, self.devices))} device(s)"
        return f"{self.backend}'s outputs scaled by 1 + {self.scale:g} on {where}"


def parse_perturbation(text: str, backends: Sequence[str], device_counts: Sequence[int]) -> Perturbation:
    """``BACKEND:SCALE[:DEVICES]`` as ``--perturb`` takes it, checked against the runs asked for.

    Args:
        text: e.g. ``"aesara:1e-3"`` or ``"aesara:1e-3:2"`` (``DEVICES`` a comma-separated list of device counts).
        backends: the backends the command runs.
        device_counts: the device counts it runs them on.

    Returns:
        The :class:`Perturbation`.

    Raises:
        ArgumentError: not of that form, a scale that is not a finite non-zero number above -1, a backend that is not
            run, or a device count that is not run.
    """
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ArgumentError(f"--perturb takes BACKEND:SCALE[:DEVICES] (e.g. aesara:1e-3:2), got {text!r}")
    backend, scale_text = parts[0], parts[1]
    try:
        scale = float(scale_text)
        devices = None if len(parts) == 2 else tuple(int(n) for n in parts[2].split(","))
    except ValueError:
        raise ArgumentError(f"--perturb {text!r}: SCALE must be a number and DEVICES a comma-separated list of "
                            "device counts") from None
    if not math.isfinite(scale) or scale == 0 or scale <= -1:
        raise ArgumentError(f"--perturb {text!r}: SCALE must be finite, non-zero and above -1, got {scale:g}")
    if backend not in backends:
        raise ArgumentError(f"--perturb {text!r}: backend {backend!r} is not run (--backends {','.join(backends)})")
    missing = [n for n in devices or () if n not in device_counts]
    if missing:
        raise ArgumentError(f"--perturb {text!r}: device count(s) {missing} are not run "
                            f"(--devices {','.join(map(str, device_counts))})")
    return Perturbation(backend, scale, devices)
