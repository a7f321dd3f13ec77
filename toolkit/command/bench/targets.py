"""What ``multigpu bench`` holds the toolkit to: its step time against each native of its framework, its scaling
from one device to several, and its share of the machine's peak on the compute-bound models."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """A speed target: ``candidate``'s step time over ``baseline``'s of the same backend and process is at most
    ``bound``.

    Attributes:
        backend: the backend's name.
        candidate: the toolkit's candidate (``"toolkit"``, ``"toolkit-c"``).
        baseline: the native it is compared with (``"mirrored-ctl"``, ``"function-jax"``, ...).
        devices: the device counts the target holds at (None: every count).
        bound: the largest ratio that meets it.
        compute_bound_only: it holds on the compute-bound models only.
    """

    backend: str
    candidate: str
    baseline: str
    devices: tuple[int, ...] | None
    bound: float
    compute_bound_only: bool = False


#: The speed targets. The Theano family (Aesara, PyTensor) has no native multi-device training, so its
#: baselines have one device; the hand-written ``jax.jit`` step is the ceiling of the JAX linker, whose graph
#: translation may cost up to 15%.
TARGETS = (
    Target("tensorflow", "toolkit", "mirrored-ctl", None, 1.05),
    Target("tensorflow", "toolkit", "function", (1,), 1.05),
    Target("tensorflow", "toolkit", "function-xla", (1,), 1.05),
    *(target for engine in ("aesara", "pytensor") for target in (
        Target(engine, "toolkit", "function-jax", (1,), 1.05),
        Target(engine, "toolkit-c", "function-c", (1,), 1.05),
        Target(engine, "toolkit", "jax-jit", (1,), 1.15, compute_bound_only=True),
    )),
)
#: Across backends: each backend's toolkit candidate's one-device step over the fastest backend's toolkit step on
#: the compute-bound models, at most this: a JAX-linker step no slower than the fastest framework's, a C-linker step
#: within 2x of it (issue 30: what a user comparing the frameworks through the toolkit should see).
CROSS_BACKEND_BOUNDS = {"toolkit": 1.0, "toolkit-c": 2.0}
#: Scaling: the toolkit's step time on SCALING_DEVICES devices over one device at the same global batch, on the
#: compute-bound models (the devices share the machine's cores, so this is the splitting and reduction overhead) and,
#: looser, on the dispatch-bound ones (where each device's part is a fixed cost of its own).
SCALING_DEVICES, SCALING_BOUND, DISPATCH_SCALING_BOUND = 4, 1.15, 1.3
#: The share of the machine's measured matmul peak that the faster backend's toolkit step reaches on one device on
#: the compute-bound models.
PEAK_FRACTION_TARGET = 0.6
#: The toolkit's fit reading its batches from a generator or a ``tf.data`` dataset keeps at least this share of its
#: throughput from arrays (the same batches, the same steps), on every model and device count: the read, unpacked
#: and cast ahead of the step, should hide behind it.
INPUT_THROUGHPUT_TARGET = 0.95


def target_for(backend: str, candidate: str, baseline: str, devices: int, compute_bound: bool) -> float | None:
    """The bound of :data:`TARGETS` on ``candidate`` over ``baseline`` at ``devices`` devices.

    Args:
        backend: the backend's name.
        candidate: the toolkit's candidate.
        baseline: the native compared with.
        devices: the device count of both.
        compute_bound: the model is compute-bound.

    Returns:
        The first matching target's bound, or None where no target applies.
    """
    return next((t.bound for t in TARGETS if (t.backend, t.candidate, t.baseline) == (backend, candidate, baseline)
                 and (t.devices is None or devices in t.devices) and (compute_bound or not t.compute_bound_only)),
                None)
