"""How the Theano-family backend compiles a graph: static input types, the engine's mode per linker, and a
function compiled once per input signature, run with native inputs on a JAX device or on the host."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import optree

from . import engine
from .environment import import_framework
from .kernels import c_kernels

theano, jax = import_framework()
tt = theano.tensor

#: The engine's linkers this backend can compile with.
LINKERS = tuple(engine.MODES)

def signature(value) -> tuple[str, tuple[int, ...]]:
    """The static type an input is compiled for: its dtype and its whole shape.

    Static shapes let Aesara fold shape arithmetic into constants, so reshapes with -1, their gradients, ``arange(n)``
    and slicing reach ``jax.jit`` as constants, which it requires; and layers can read a kernel's size from its type.
    JAX traces one program per input shape anyway. The cost is one Aesara compilation per distinct batch size
    (about 0.1 s with the JAX linker; the C linker reuses its cached modules).
    """
    return np.dtype(value.dtype).name, tuple(int(size) for size in np.shape(value))


def symbol(value, name: str | None = None):
    dtype, shape = signature(value)
    return tt.tensor(dtype=dtype, shape=shape, name=name)


def building(dtype: str):
    """Build graphs with floatX = the computation dtype: Aesara turns a Python float that float32 cannot hold
    exactly (0.999, 0.1) into a float64 constant unless floatX is float32, which would silently promote a float32
    graph to float64."""
    return theano.config.change_flags(floatX=dtype)


#: The C linker's rewrites the toolkit's functions leave out: ``local_dot22_to_dot22scalar`` turns ``scalar *
#: dot22(a, b)`` into a second product ``dot22scalar(a, b, scalar)`` even where ``dot22(a, b)`` has other clients,
#: and a training step reads each weight gradient twice (the finiteness check, and the update scaled by the learning
#: rate): the digits MLP's step computed 7 products instead of 5. Without it the scaling fuses into the update's
#: elementwise pass, as in a plain function.
C_EXCLUDED_REWRITES = ("local_dot22_to_dot22scalar",)


def mode(linker: str):
    """The engine's mode for ``linker``, as the toolkit's functions compile with it: the C linker's leaves out
    :data:`C_EXCLUDED_REWRITES` and adds the toolkit's C kernels (selects without branches, sums over leading
    axes, row loops: :data:`.c_kernels.REWRITES`)."""
    if linker == "jax":
        return engine.MODES["jax"]
    return (theano.compile.mode.get_mode(engine.MODES[linker]).excluding(*C_EXCLUDED_REWRITES)
            .register(*c_kernels.REWRITES))


class Function:
    """An Aesara function compiled for the linker, called with native inputs, returning a list of outputs."""

    def __init__(self, inputs, outputs, linker: str) -> None:
        if linker == "jax":
            with warnings.catch_warnings():
                # The JAX linker cannot run Aesara's runtime assertions and warns about each one it drops.
                warnings.filterwarnings("ignore", message="Skipping `CheckAndRaise` Op", category=UserWarning)
                function = theano.function(inputs, outputs, mode=engine.MODES["jax"], on_unused_input="ignore")
            # Calling the Aesara function object copies every input to the host, so all outputs would land on JAX
            # device 0. Its jitted function, called directly with device-placed arrays, runs where they are.
            self._run = function.vm.jit_fn
            self.raw = function.vm.jit_fn.__wrapped__  # the JAX function Aesara made, before jax.jit
            self._dtypes = [np.dtype(o.dtype) for o in outputs]
        else:
            self._run = theano.function(inputs, outputs, mode=mode(linker), on_unused_input="ignore")
            # Inputs always match the signature compiled for (BySignature), so Aesara's per-call checks and
            # conversions can go: they cost about a quarter of a small model's step.
            self._run.trust_input = True

    def __call__(self, *args, device=None) -> list:
        """Run with native inputs. ``device`` (a JAX device) is where outputs that depend on no input (constants,
        ``ones_like`` of a shape) are made; outputs computed from inputs are made where the inputs are."""
        if device is None:
            return list(self._run(*args))
        if device.platform == "cpu":
            args = _ready_on(device, args)
        with jax.default_device(device):
            outputs = list(self._run(*args))
        # An output that Aesara folded to a constant comes back as a float64 host array whatever the graph declares;
        # give it the declared dtype and put it on the device.
        return [o if o.dtype == d else jax.device_put(np.asarray(o, d), device) for o, d in zip(outputs, self._dtypes)]


#: The size from which XLA's CPU client copies a host array to a device on its own threads, after the call that
#: passed it returns (``kSmallDataTransferByteSize`` of its client: 100 KiB); a smaller one is copied in the calling
#: thread.
INLINE_COPY_BYTES = 102_400


def _ready_on(device, args):
    """``args`` (a sequence; returned as it is where nothing changes, else as a new list) with the NumPy arrays of
    :data:`INLINE_COPY_BYTES` or more put on the CPU ``device`` and copied there before this returns.

    Why: JAX's CPU client runs a one-device call in the calling thread (:func:`.environment.run_steps_inline`) only
    where its inputs are ready; one whose NumPy batch was still being copied ran later on one of XLA's threads,
    whose malloc arena maps a large scratch block afresh and unmaps it at every call, so that every page of it is
    faulted in again every step (the bench ResNet's 1.5 MiB batch under jax 0.10). Small arrays are copied at once
    anyway, and waiting for them would cost a dispatch-bound step (the digits MLP's) a large part of its time. Device
    arrays are passed as they are (a step's parameters are its last step's results); docs/guides/benchmarks.md has
    the measurements."""
    large = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.nbytes >= INLINE_COPY_BYTES]
    if not large:
        return args
    args = list(args)
    for i, placed in zip(large, jax.block_until_ready(jax.device_put([args[i] for i in large], device))):
        args[i] = placed
    return args


class BySignature:
    """Compile ``build(*example_args)`` once per input signature and run it.

    ``build`` returns ``(symbols, outputs)``: ``symbols`` mirrors the arguments' pytree (so both flatten to the same
    input order) and ``outputs`` is any pytree of symbolic results, which calls return with native arrays in it.
    """

    def __init__(self, build: Callable, dtype: str, linker: str) -> None:
        self._build, self._dtype, self._linker, self._compiled = build, dtype, linker, {}

    def __call__(self, *args, device=None):
        leaves, function, spec = self.compiled(*args)
        return optree.tree_unflatten(spec, function(*leaves, device=device))

    def compiled(self, *args):
        """``(leaves of args, Function, output pytree spec)``, compiling for this signature if needed."""
        leaves, structure = optree.tree_flatten(args)
        key = (structure, tuple((leaf.dtype, leaf.shape) for leaf in leaves))  # names matter too, not only shapes
        if key not in self._compiled:
            with building(self._dtype):
                symbols, outputs = self._build(*args)
            outputs, spec = optree.tree_flatten(outputs)
            self._compiled[key] = (Function(optree.tree_leaves(symbols), outputs, self._linker), spec)
        return (leaves, *self._compiled[key])
