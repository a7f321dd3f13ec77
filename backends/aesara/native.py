"""Native Aesara training for ``multigpu bench``: a plain ``aesara.function`` training step with ``updates``, as
Theano users wrote it, on one device, with the JAX linker (``function-jax``) and the C linker (``function-c``).
Aesara has no multi-device training of its own to compare with (see :mod:`toolkit.command.bench`).

The model's math is the toolkit model's, written with :class:`~backends.aesara.ops.AesaraOps`, whose methods build
the same Aesara graph a user would; parameters are ``aesara.shared`` variables updated in place by the function.
"""

from __future__ import annotations

import warnings

import numpy as np

from toolkit.backends.aesara.environment import import_framework
from toolkit.backends.aesara.ops import AesaraOps
from toolkit.command.bench import Batches

aesara, jax = import_framework()

import aesara.tensor as at  # noqa: E402

#: The toolkit's candidates: name -> options for get_backend (the C linker has one device: bench runs it at n = 1).
TOOLKIT_OPTIONS = {"toolkit": {}, "toolkit-c": {"linker": "c"}}
#: Aesara's names for the modes of each linker.
MODES = {"jax": "JAX", "c": "FAST_RUN"}
#: The library whose matmul measures the machine's peak for this backend (:mod:`toolkit.command.flops`): JAX, the
#: engine of Aesara's device path.
PEAK_LIBRARY = "jax"


def matmul(a: np.ndarray, b: np.ndarray):
    """A call that computes ``a @ b`` with ``jax.jit`` on JAX's first device and waits for the result."""
    ja, jb = jax.device_put(a), jax.device_put(b)
    product = jax.jit(lambda p, q: p @ q)
    return lambda: product(ja, jb).block_until_ready()


class FunctionWithUpdates:
    """``f = aesara.function([x, y], loss, updates=[(p, p - lr * grad)])``, called once per batch."""

    devices_used = 1

    def __init__(self, model, params, batches: Batches, linker: str, dtype: str, lr: float) -> None:
        ops = AesaraOps(dtype)
        with aesara.config.change_flags(floatX=dtype):  # what a float32 user sets; keeps constants in dtype
            self._shared = {name: aesara.shared(np.asarray(value, dtype), name=name) for name, value in params.items()}
            # Every batch has the same shape, so the inputs' types give it: JAX needs static reshape sizes.
            x = at.tensor(batches.x.dtype.name, shape=(batches.size, *batches.x.shape[1:]), name="x")
            y = at.tensor(batches.y.dtype.name, shape=(batches.size, *batches.y.shape[1:]), name="y")
            # Shared variables have no static shape in their type; the model sees its parameters with theirs.
            typed = {name: at.specify_shape(var, np.shape(params[name])) for name, var in self._shared.items()}
            loss = at.mean(model.losses(ops, typed, x, y))
            grads = aesara.grad(loss, list(self._shared.values()))
            step = np.asarray(lr, dtype)
            updates = [(p, p - step * g) for p, g in zip(self._shared.values(), grads)]
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Skipping `CheckAndRaise` Op", category=UserWarning)
                self._function = aesara.function([x, y], loss, updates=updates, mode=MODES[linker])
        self._batches, self._next = batches, 0

    def run(self, steps: int) -> float:
        for _ in range(steps):
            x, y = self._batches[self._next]
            self._next = (self._next + 1) % len(self._batches)
            loss = float(self._function(x, y))
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return {name: np.asarray(var.get_value()) for name, var in self._shared.items()}


def runners(model, params, batches: Batches, devices, backend, dtype: str, lr: float) -> dict:
    """The native runners: one device whatever ``devices`` is (plain Aesara has no multi-device training)."""
    return {f"function-{linker}": FunctionWithUpdates(model, params, batches, linker, dtype, lr) for linker in MODES}
