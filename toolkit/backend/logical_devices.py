"""Logical CPU devices, for multi-device runs on one machine: how many this process asked for
(:func:`use_logical_devices`) is policy and lives here; each backend's environment module turns it into its
framework's configuration, now if the framework is already loaded, else as it is loaded
(:func:`apply_logical_devices`).
"""

from __future__ import annotations

from toolkit.backend.registry import REGISTRY
from toolkit.errors import DeviceSpecError, LogicalDevicesError

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


__all__ = ["MAX_LOGICAL_DEVICES", "apply_logical_devices", "logical_device_count", "use_logical_devices"]
