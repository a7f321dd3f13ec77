"""Native Theano-family training for ``multigpu bench``, with the engine of the backend benched (Aesara or PyTensor),
on one device (neither has multi-device training of its own to compare with):

- ``function-jax`` and ``function-c``: a plain ``function`` training step with ``updates`` (``aesara.function`` or
  ``pytensor.function``), as Theano users wrote it, with the JAX linker and the C linker. The model's math is the
  toolkit model's, written with the backend's ops (``backend.ops``), whose methods build the same graph a user
  would; parameters and model state are ``shared`` variables updated in place by the function;
- ``jax-jit``: the same model written directly in JAX (:mod:`toolkit.command.bench.natives.plain_jax`).
"""

from __future__ import annotations

import importlib
import warnings

import numpy as np

import toolkit
from toolkit.backend.registry import REGISTRY
from toolkit.command.bench.measure import Batches
from toolkit.command.bench.natives import plain_jax
from toolkit.command.bench.natives.plain_jax import JaxJit, JaxOps, checked_conv, matmul, on_arrays
from toolkit.nn.model import batch

__all__ = ["PEAK_LIBRARY", "TOOLKIT_OPTIONS", "library", "matmul", "products", "runners"]

#: The toolkit's candidates: name -> options for get_backend (the C linker has one device: bench runs it at n = 1).
TOOLKIT_OPTIONS = {"toolkit": {}, "toolkit-c": {"linker": "c"}}
#: The library whose matmul measures the machine's peak for this backend (:mod:`toolkit.command.flops`): JAX, the
#: engine of the device path.
PEAK_LIBRARY = "jax"


def products(found: list, operands: list, cotangents: list, dtype: str):
    """A call that runs a step's matmuls and convolutions alone (:func:`toolkit.command.flops.products_alone`) as the
    family's JAX-linker step computes them: :func:`plain_jax.products` with each convolution lowered by the family's
    rule (``backends/theano/kernels/conv_lowering.py``: oneDNN's passes where they compute the step's float32
    convolutions),
    not XLA's alone. The engine whose modules lower them is the one imported (Aesara or PyTensor: the same rule).

    Args:
        found: the step's products (:class:`toolkit.command.flops.Product`), in the order they ran.
        operands: each product's two operands, NumPy arrays.
        cotangents: each product's output cotangent, NumPy arrays.
        dtype: the computation dtype.

    Returns:
        A function of no arguments, timed by :func:`toolkit.command.flops.products_alone`.
    """
    return plain_jax.products(found, operands, cotangents, dtype, ops=_FamilyConvOps(dtype))


class _FamilyConvOps(JaxOps):
    """:class:`JaxOps` whose convolutions are the Theano family's JAX-linker op."""

    @on_arrays
    def conv(self, inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
        from toolkit.ops.window_shapes import explicit_padding

        strides, dilation, padding = checked_conv(inputs, kernel, strides, padding, data_format, dilation_rate)
        pads = explicit_padding(inputs.shape[1:-1], kernel.shape[:-2], strides, dilation, padding)
        lowering = importlib.import_module(f"toolkit.backends.{_engine_name()}.kernels.conv_lowering")
        return lowering.traced_conv(inputs, kernel, strides, pads, dilation)


def _engine_name() -> str:
    # The family's modules load as an engine's package's (backends/theano/__init__.py): that of the engine the
    # bench's candidates imported (Aesara and PyTensor cannot share an environment: NumPy 1 against 2).
    import sys

    found = next((name for name in ("aesara", "pytensor") if name in sys.modules), None)
    if found is None:
        raise RuntimeError("the Theano family's products alone need its engine imported (Aesara or PyTensor): the "
                           "bench builds its candidates first")
    return found


def library(name: str, candidate: str) -> str:
    """What computes candidate ``candidate``'s matmuls and convolutions, in words: XLA (and its platform) for the
    JAX-linker candidates; for the C linker's, the BLAS the engine links (its ``blas__ldflags``), or NumPy's dot
    where none is named (the engine's products then run through NumPy, outside its C code); and oneDNN where it
    computes the float32 convolutions (every candidate but plain JAX, where it is installed).

    Args:
        name: the backend's name (``"aesara"``, ``"pytensor"``).
        candidate: the candidate's name.

    Returns:
        E.g. ``"XLA cpu, jaxlib 0.4.30"`` or ``"C linker, BLAS -lopenblas"``.
    """
    framework, _ = _engine(name)
    # Every candidate but plain JAX builds the toolkit's convolution op, oneDNN's for float32 where it is installed.
    onednn = importlib.import_module(f"toolkit.backends.{name}.kernels.onednn").library() is not None
    convolutions = ", oneDNN float32 convolutions" if onednn and candidate != "jax-jit" else ""
    if candidate.endswith("-c") or "-c-" in candidate:
        flags = framework.config.blas__ldflags.strip()
        return (f"C linker, BLAS {flags}" if flags else "C linker, no BLAS (NumPy's dot)") + convolutions
    import jax
    import jaxlib

    return f"XLA {jax.default_backend()}, jaxlib {jaxlib.__version__}{convolutions}"


def _engine(name: str):
    """Backend ``name``'s engine module (already started by the backend) and its compilation mode of each linker."""
    spec = REGISTRY[name]
    framework, _ = spec.environment().import_framework()
    return framework, importlib.import_module(f"{spec.package}.engine").MODES


class FunctionWithUpdates:
    """``f = theano.function([x, y], loss, updates=[(p, p - lr * grad), (s, new s)])``, called once per batch.
    With ``all_or_nothing=True`` each update is ``switch(finite, new, old)``: written only if the loss, every
    gradient and the new state are finite, the guarantee the toolkit's step gives (``nan_policy``).

    Args:
        model: the toolkit :class:`~toolkit.Model` benched.
        params: its initial parameters (the toolkit trainer's), by name.
        state: its initial model state, by name.
        batches: the cycle of batches (:class:`~toolkit.command.bench.measure.Batches`).
        engine: the backend's name, ``"aesara"`` or ``"pytensor"``.
        linker: a linker of the engine's compilation modes (``"jax"``, ``"c"``).
        dtype: the computation dtype.
        lr: SGD's learning rate.
        all_or_nothing: write the updates only where everything is finite.
    """

    devices_used = 1

    def __init__(self, model, params, state, batches: Batches, engine: str, linker: str, dtype: str, lr: float,
                 all_or_nothing: bool = False) -> None:
        theano, modes = _engine(engine)
        tt, ops = theano.tensor, toolkit.get_backend(engine, linker=linker).ops(dtype)
        with theano.config.change_flags(floatX=dtype):  # what a float32 user sets; keeps constants in dtype
            self._shared = {name: theano.shared(np.asarray(value, dtype), name=name)
                            for name, value in {**params, **state}.items()}
            # Every batch has the same shape, so the inputs' types give it: JAX needs static reshape sizes.
            x = tt.tensor(dtype=batches.x.dtype.name, shape=(batches.size, *batches.x.shape[1:]), name="x")
            y = tt.tensor(dtype=batches.y.dtype.name, shape=(batches.size, *batches.y.shape[1:]), name="y")
            # Shared variables have no static shape in their type; the model sees its parameters with theirs.
            typed = {name: tt.specify_shape(var, np.shape(value))
                     for (name, var), value in zip(self._shared.items(), {**params, **state}.values())}
            losses, new_state, _ = model.train_losses(ops, {k: typed[k] for k in params},
                                                      batch(x, None, {k: typed[k] for k in state}), y)
            loss = tt.mean(losses)
            trained = [self._shared[k] for k in params]
            step, grads = np.asarray(lr, dtype), theano.grad(loss, trained)
            updates = [(p, p - step * g) for p, g in zip(trained, grads)]
            updates += [(self._shared[k], value) for k, value in new_state.items()]
            if all_or_nothing:
                finite = ops.call(type(ops).all_finite, [loss, *grads, *new_state.values()])
                updates = [(var, tt.switch(finite, new, var)) for var, new in updates]
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Skipping `CheckAndRaise` Op", category=UserWarning)
                self._function = theano.function([x, y], loss, updates=updates, mode=modes[linker])
        self._batches, self._next = batches, 0

    def run(self, steps: int) -> float:
        for _ in range(steps):
            x, y = self._batches[self._next]
            self._next = (self._next + 1) % len(self._batches)
            loss = float(self._function(x, y))
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return {name: np.asarray(var.get_value()) for name, var in self._shared.items()}


def runners(model, params, state, batches: Batches, devices, backend, dtype: str, lr: float) -> dict:
    """The native runners, in the one-device process only: they have one device (neither engine has multi-device
    training of its own), and the toolkit on ``n`` devices is compared with them through its scaling ratio (with
    per-replica batch statistics, ``n`` devices do not train like one, so their parameters could not be compared
    there).

    Args:
        model: the toolkit :class:`~toolkit.Model` benched.
        params: its initial parameters (the toolkit trainer's), by name.
        state: its initial model state, by name.
        batches: the cycle of batches (:class:`~toolkit.command.bench.measure.Batches`).
        devices: the toolkit devices the toolkit's run uses.
        backend: the Aesara or PyTensor backend benched.
        dtype: the computation dtype.
        lr: SGD's learning rate.

    Returns:
        ``{candidate: runner}``: ``function-<linker>`` and ``function-<linker>-checked`` for each linker, and
        ``jax-jit``; empty on more than one device.
    """
    if len(devices) > 1:
        return {}
    natives = {f"function-{linker}{'-checked' * checked}": FunctionWithUpdates(
                   model, params, state, batches, backend.name, linker, dtype, lr, all_or_nothing=checked)
               for linker in _engine(backend.name)[1] for checked in (False, True)}
    return {**natives, "jax-jit": JaxJit(model, params, state, batches, dtype, lr)}
