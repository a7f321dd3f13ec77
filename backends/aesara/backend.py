"""Aesara translation of the backend primitives.

Graphs and gradients are built with Aesara. With ``linker="jax"`` (the default) they are compiled by Aesara's JAX
linker and run with ``jax.device_put`` inputs, one compiled function per input signature, on any JAX device. With
``linker="c"`` they are compiled by Aesara's own C linker and run on the host: one device, ``cpu:0``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import optree

from backends.aesara.environment import import_framework
from backends.aesara.ops import AesaraOps
from backends.aesara.variables import AesaraVariable
from toolkit import backend as interface
from toolkit.devices import Device, logical_device_count, parse_device
from toolkit.errors import LogicalDevicesError

aesara, jax = import_framework()

import aesara.tensor as at  # noqa: E402
import jax.numpy as jnp  # noqa: E402

#: Aesara linkers this backend can compile with.
LINKERS = ("jax", "c")


def _signature(value) -> tuple[str, tuple[int, ...]]:
    """The static type an input is compiled for: its dtype and its whole shape.

    Static shapes let Aesara fold shape arithmetic into constants, so reshapes with -1, their gradients, ``arange(n)``
    and slicing reach ``jax.jit`` as constants, which it requires; and layers can read a kernel's size from its type.
    JAX traces one program per input shape anyway. The cost is one Aesara compilation per distinct batch size
    (about 0.1 s with the JAX linker; the C linker reuses its cached modules).
    """
    return np.dtype(value.dtype).name, tuple(int(size) for size in np.shape(value))


def _symbol(value, name: str | None = None):
    dtype, shape = _signature(value)
    return at.tensor(dtype, shape=shape, name=name)


def _building(dtype: str):
    """Build graphs with floatX = the computation dtype: Aesara turns a Python float that float32 cannot hold
    exactly (0.999, 0.1) into a float64 constant unless floatX is float32, which would silently promote a float32
    graph to float64."""
    return aesara.config.change_flags(floatX=dtype)


class _Function:
    """An Aesara function compiled for the linker, called with native inputs, returning a list of outputs."""

    def __init__(self, inputs, outputs, linker: str) -> None:
        if linker == "jax":
            with warnings.catch_warnings():
                # The JAX linker cannot run Aesara's runtime assertions and warns about each one it drops.
                warnings.filterwarnings("ignore", message="Skipping `CheckAndRaise` Op", category=UserWarning)
                function = aesara.function(inputs, outputs, mode="JAX", on_unused_input="ignore")
            # Calling the Aesara function object copies every input to the host, so all outputs would land on JAX
            # device 0. Its jitted function, called directly with device-placed arrays, runs where they are.
            self._run = function.vm.jit_fn
            self._dtypes = [np.dtype(o.dtype) for o in outputs]
        else:
            self._run = aesara.function(inputs, outputs, mode="FAST_RUN", on_unused_input="ignore")

    def __call__(self, *args, device=None) -> list:
        """Run with native inputs. ``device`` (a JAX device) is where outputs that depend on no input (constants,
        ``ones_like`` of a shape) are made; outputs computed from inputs are made where the inputs are."""
        if device is None:
            return list(self._run(*args))
        with jax.default_device(device):
            outputs = list(self._run(*args))
        # An output that Aesara folded to a constant comes back as a float64 host array whatever the graph declares;
        # give it the declared dtype and put it on the device.
        return [o if o.dtype == d else jax.device_put(np.asarray(o, d), device) for o, d in zip(outputs, self._dtypes)]


class _BySignature:
    """Compile ``build(*example_args)`` once per input signature and run it.

    ``build`` returns ``(symbols, outputs)``: ``symbols`` mirrors the arguments' pytree (so both flatten to the same
    input order) and ``outputs`` is any pytree of symbolic results, which calls return with native arrays in it.
    """

    def __init__(self, build: Callable, dtype: str, linker: str) -> None:
        self._build, self._dtype, self._linker, self._compiled = build, dtype, linker, {}

    def __call__(self, *args, device=None):
        leaves, structure = optree.tree_flatten(args)
        key = (structure, tuple(_signature(leaf) for leaf in leaves))  # names matter too, not only shapes
        if key not in self._compiled:
            with _building(self._dtype):
                symbols, outputs = self._build(*args)
            outputs, spec = optree.tree_flatten(outputs)
            self._compiled[key] = (_Function(optree.tree_leaves(symbols), outputs, self._linker), spec)
        function, spec = self._compiled[key]
        return optree.tree_unflatten(spec, function(*leaves, device=device))


class _Part:
    """A model part compiled twice: its forward, and its vector-Jacobian product with Aesara's ``known_grads``."""

    def __init__(self, backend: Backend, forward: _BySignature, vjp: _BySignature) -> None:
        self._backend, self._forward, self._vjp = backend, forward, vjp

    def forward(self, params, inputs, device):
        return self._forward(params, list(inputs), device=self._backend._jax_device(device))

    def vjp(self, params, inputs, cotangent, device):
        output, grads, input_grads = self._vjp(params, list(inputs), cotangent,
                                               device=self._backend._jax_device(device))
        return output, grads, [input_grads.get(str(i)) for i in range(len(inputs))]


class Backend(interface.Backend):
    name = "aesara"

    def __init__(self, linker: str = "jax") -> None:
        if linker not in LINKERS:
            raise ValueError(f"aesara linker must be one of {LINKERS}, got {linker!r}")
        self.linker = linker
        self._jax_devices: dict[Device, object] = {}
        if linker == "c":
            self._table = [(Device("cpu", 0), "host (Aesara C linker)")]
        else:
            self._table = []
            for kind in ("cpu", "gpu"):
                try:
                    found = jax.devices(kind)
                except RuntimeError:
                    continue  # no such platform in this jaxlib
                for index, native in enumerate(found):
                    self._jax_devices[Device(kind, index)] = native
                    self._table.append((Device(kind, index), str(native)))
            wanted, cpus = logical_device_count(), len(self.list_devices("cpu"))
            if wanted is not None and cpus != wanted:
                raise LogicalDevicesError(f"asked for {wanted} logical CPU devices, JAX has {cpus}")
        self._devices_by_native = {native: device for device, native in self._jax_devices.items()}
        self._known = {device for device, _ in self._table}
        self._ops: dict[str, AesaraOps] = {}
        self._compiled: dict[tuple, object] = {}

    def __repr__(self) -> str:
        return f"<Backend aesara (linker={self.linker}): {self._listing()}>"

    def device_table(self):
        return list(self._table)

    def place(self, value, device):
        device = parse_device(device)
        if device not in self._known:
            raise self._not_found(device)
        if self.linker == "c":
            return np.asarray(value)
        return jax.device_put(value, self._jax_devices[device])

    def _jax_device(self, device):
        return self._jax_devices.get(device)  # None under the C linker

    def to_numpy(self, value):
        return np.asarray(value)

    def device_of(self, value):
        if isinstance(value, np.ndarray):
            return Device("cpu", 0)
        (native,) = value.devices()
        return self._devices_by_native[native]

    def ops(self, dtype):
        if dtype not in self._ops:
            self._ops[dtype] = AesaraOps(dtype)
        return self._ops[dtype]

    def call(self, fn, device, inputs, dtype):
        key = ("call", fn, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(inputs):
                symbols = {name: _symbol(value, name) for name, value in inputs.items()}
                return symbols, fn(ops, **symbols)

            self._compiled[key] = _BySignature(build, dtype, self.linker)
        placed = {name: self.place(value, device) for name, value in inputs.items()}
        return self._compiled[key](placed, device=self._jax_device(device))

    def compile_gradient(self, model, dtype):
        key = ("gradient", model, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(params, x, y):
                symbols = optree.tree_map(_symbol, (params, x, y))
                p, x, y = symbols
                loss = at.mean(model.loss(ops, model.forward(ops, p, x), y))
                grads = aesara.grad(loss, list(p.values()), disconnected_inputs="ignore")
                return symbols, (loss, dict(zip(p, grads)))

            compiled = _BySignature(build, dtype, self.linker)
            self._compiled[key] = lambda params, x, y, device: compiled(params, x, y, device=self._jax_device(device))
        return self._compiled[key]

    def compile_update(self, optimizer, dtype):
        key = ("update", optimizer, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(*args):
                symbols = optree.tree_map(_symbol, args)
                return symbols, optimizer.update(ops, *symbols)

            compiled = _BySignature(build, dtype, self.linker)
            self._compiled[key] = lambda params, grads, state, step, device: compiled(
                params, grads, state, step, device=self._jax_device(device))
        return self._compiled[key]

    def compile_part(self, fn, dtype):
        key = ("part", fn, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build_forward(params, inputs):
                symbols = optree.tree_map(_symbol, (params, inputs))
                return symbols, fn(ops, symbols[0], *symbols[1])

            def build_vjp(params, inputs, cotangent):
                symbols = optree.tree_map(_symbol, (params, inputs, cotangent))
                p, ins, c = symbols
                output = fn(ops, p, *ins)
                floats = [i for i, x in enumerate(ins) if x.dtype.startswith("float")]
                grads = aesara.grad(None, [*p.values(), *(ins[i] for i in floats)], known_grads={output: c},
                                    disconnected_inputs="ignore")
                return symbols, (output, dict(zip(p, grads[:len(p)])), dict(zip(map(str, floats), grads[len(p):])))

            self._compiled[key] = _Part(self, _BySignature(build_forward, dtype, self.linker),
                                        _BySignature(build_vjp, dtype, self.linker))
        return self._compiled[key]

    def _new_variable(self, value, device, name):
        return AesaraVariable(value, device, lambda v: self.place(v, device), name)

    def _weighted_sum(self, values: Sequence, weights: Sequence[float], device):
        values = [self.place(v, device) for v in values]
        total = weights[0] * values[0]
        for w, v in zip(weights[1:], values[1:]):
            total = total + w * v
        return total

    def _concat(self, values, device):
        values = [self.place(v, device) for v in values]
        return np.concatenate(values) if self.linker == "c" else jnp.concatenate(values)
