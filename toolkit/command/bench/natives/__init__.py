"""The native training code ``multigpu bench`` measures the toolkit against: what a user of each framework writes
without this toolkit, on the same model, parameters, batches and devices.

Each framework's natives are a module giving:

- ``TOOLKIT_OPTIONS``: the toolkit's candidates on that backend, name -> options for ``get_backend``;
- ``PEAK_LIBRARY`` and ``matmul(a, b)``: the library whose matmul measures the machine's peak, and a call that runs
  that matmul and waits for it (:func:`toolkit.command.flops.matmul_peak`);
- ``library(name, candidate)``: what computes a candidate's matmuls and convolutions, in words (XLA, TensorFlow's
  kernels with or without oneDNN, the C linker's BLAS), reported with each run;
- ``products(found, operands, cotangents, dtype)``: a call that runs a step's matmuls and convolutions alone
  (:func:`toolkit.command.flops.products_alone`);
- ``runners(model, params, state, batches, devices, backend, dtype, lr)``: the native candidates by name, each a
  :class:`~toolkit.command.bench.measure.Runner` starting from the toolkit's initial ``params`` and model ``state``.

The modules import their framework; :func:`natives` loads one after the backend, which configures the framework
first (logical devices, quiet logs, the engine's JAX set-up).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from toolkit.errors import BackendUnavailableError

#: Each backend's natives module: the Theano family's engines share one, bound to the engine of the backend benched.
MODULES = {"tensorflow": "tensorflow", "aesara": "theano", "pytensor": "theano"}


def natives(name: str) -> ModuleType:
    """Backend ``name``'s natives, its framework started by the backend first.

    Args:
        name: a backend's name (a key of :data:`MODULES`).

    Returns:
        The natives module (its contract in this package's docstring).

    Raises:
        BackendUnavailableError: the bench has no natives for ``name``, or the backend is not installed.
    """
    import toolkit

    if name not in MODULES:
        raise BackendUnavailableError(f"multigpu bench has no native baselines for backend {name!r}; it has them for "
                            f"{', '.join(MODULES)}")
    toolkit.get_backend(name)
    return importlib.import_module(f"{__name__}.{MODULES[name]}")
