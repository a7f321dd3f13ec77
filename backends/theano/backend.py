"""Theano-family (Aesara, PyTensor) translation of the backend primitives.

Graphs and gradients are built with the engine. With ``linker="jax"`` (the default) they are compiled by its JAX
linker and run with ``jax.device_put`` inputs, one compiled function per input signature, on any JAX device. With
``linker="c"`` they are compiled by its own C linker and run on the host: one device, ``cpu:0``. Importing the
engine has glibc's malloc keep freed memory for the next step and JAX run one-device CPU steps in the calling
thread, process-wide (``environment.keep_step_memory``, ``environment.run_steps_inline``: both linkers' steps
allocate their memory at every call). How graphs are compiled is in :mod:`.compiling`, the training step in
:mod:`.step`, the device mesh in :mod:`.mesh`, the runtime across processes in :mod:`.distributed`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import optree

from toolkit import backend as interface
from toolkit.backend.logical_devices import logical_device_count
from toolkit.errors import ArgumentError, LogicalDevicesError
from toolkit.placement.devices import Device, parse_device
from toolkit.training import rules

from . import distributed, engine
from .compiling import LINKERS, BySignature, symbol
from .environment import import_framework
from .fused import compile_fused_step, replica_loss_and_gradients
from .ops import TheanoOps
from .variables import TheanoVariable

theano, jax = import_framework()

import jax.numpy as jnp  # noqa: E402


class _Part:
    """A model part compiled twice: its forward, and its vector-Jacobian product with Aesara's ``known_grads``."""

    def __init__(self, backend: Backend, forward: BySignature, vjp: BySignature) -> None:
        self._backend, self._forward, self._vjp = backend, forward, vjp

    def forward(self, params, inputs, device):
        return self._forward(params, list(inputs), device=self._backend._jax_device(device))

    def vjp(self, params, inputs, cotangent, device):
        output, grads, input_grads = self._vjp(params, list(inputs), cotangent,
                                               device=self._backend._jax_device(device))
        return output, grads, [input_grads.get(str(i)) for i in range(len(inputs))]


class Backend(interface.Backend):
    name = engine.NAME
    equal_shards = True  # the mesh step (step.MeshStep) maps one program over shards of one size

    def __init__(self, linker: str = "jax") -> None:
        if linker not in LINKERS:
            raise ArgumentError(f"{engine.NAME} linker must be one of {LINKERS}, got {linker!r}")
        self.linker = linker
        self._jax_devices: dict[Device, object] = {}
        if linker == "c":
            self._table = [(Device("cpu", 0), f"host ({engine.TITLE} C linker)")]
        else:
            self._table = []
            for kind in ("cpu", "gpu"):
                try:
                    found = jax.local_devices(backend=kind)  # this process's, when several run one job
                except RuntimeError:
                    continue  # no such platform in this jaxlib
                for index, native in enumerate(found):
                    self._jax_devices[Device(kind, index)] = native
                    self._table.append((Device(kind, index), str(native)))
            wanted, cpus = logical_device_count(), len(self.list_devices("cpu"))
            if wanted is not None and cpus != wanted:
                raise LogicalDevicesError(f"asked for {wanted} logical CPU devices, JAX has {cpus}")
        self._devices_by_native = {native: device for device, native in self._jax_devices.items()}
        self._shardings = {native: jax.sharding.SingleDeviceSharding(native) for native in self._jax_devices.values()}
        self._known = {device for device, _ in self._table}
        self._ops: dict[str, TheanoOps] = {}
        self._compiled: dict[tuple, object] = {}

    def __repr__(self) -> str:
        return f"<Backend {engine.NAME} (linker={self.linker}): {self._listing()}>"

    def device_table(self):
        return list(self._table)

    def place(self, value, device):
        device = parse_device(device)
        if device not in self._known:
            raise self._not_found(device)
        if self.linker == "c":
            return np.asarray(value)
        native = self._jax_devices[device]
        if isinstance(value, jax.Array) and value.sharding == self._shardings[native]:
            return value  # already there: jax.device_put would still cost tens of microseconds
        return jax.device_put(value, native)

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
            self._ops[dtype] = TheanoOps(dtype, self.linker)
        return self._ops[dtype]

    def call(self, fn, device, inputs, dtype):
        key = ("call", fn, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(inputs):
                symbols = optree.tree_map(symbol, inputs)
                return symbols, ops.call(fn, **symbols)

            self._compiled[key] = BySignature(build, dtype, self.linker)
        placed = optree.tree_map(lambda value: self.place(value, device), dict(inputs))
        return self._compiled[key](placed, device=self._jax_device(device))

    def compile_gradient(self, model, dtype, metrics=()):
        key = ("gradient", model, dtype, metrics)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(params, batch, y):
                symbols = optree.tree_map(symbol, (params, batch, y))
                return symbols, replica_loss_and_gradients(model, ops, *symbols, metrics)

            compiled = BySignature(build, dtype, self.linker)
            self._compiled[key] = lambda params, batch, y, device: compiled(params, batch, y,
                                                                            device=self._jax_device(device))
        return self._compiled[key]

    def compile_update(self, optimizer, dtype):
        key = ("update", optimizer, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build(*args):
                symbols = optree.tree_map(symbol, args)
                return symbols, ops.call(rules.apply_update, optimizer, *symbols)

            compiled = BySignature(build, dtype, self.linker)
            self._compiled[key] = lambda params, grads, state, step, checked, device: compiled(
                params, grads, state, step, checked, device=self._jax_device(device))
        return self._compiled[key]

    def compile_part(self, fn, dtype):
        key = ("part", fn, dtype)
        if key not in self._compiled:
            ops = self.ops(dtype)

            def build_forward(params, inputs):
                symbols = optree.tree_map(symbol, (params, inputs))
                return symbols, ops.call(fn, symbols[0], *symbols[1])

            def build_vjp(params, inputs, cotangent):
                symbols = optree.tree_map(symbol, (params, inputs, cotangent))
                p, ins, c = symbols
                output = ops.call(fn, p, *ins)
                floats = [i for i, x in enumerate(ins) if x.dtype.startswith("float")]
                grads = theano.grad(None, [*p.values(), *(ins[i] for i in floats)], known_grads={output: c},
                                    disconnected_inputs="ignore")
                return symbols, (output, dict(zip(p, grads[:len(p)])), dict(zip(map(str, floats), grads[len(p):])))

            self._compiled[key] = _Part(self, BySignature(build_forward, dtype, self.linker),
                                        BySignature(build_vjp, dtype, self.linker))
        return self._compiled[key]

    def compile_fused_step(self, model, optimizer, dtype, training_state, metrics=(), across_processes=False):
        return compile_fused_step(self, model, optimizer, dtype, training_state, metrics, across_processes)

    @classmethod
    def join(cls, cluster):
        distributed.start(cluster)

    def _all_reduce_sum(self, array, what):
        return distributed.all_reduce_sum(array, what)

    def _new_variable(self, value, device, name):
        return TheanoVariable(value, device, lambda v: self.place(v, device), name)

    def _weighted_sum(self, values: Sequence, weights: Sequence[float], device):
        values = [self.place(v, device) for v in values]
        total = weights[0] * values[0]
        for w, v in zip(weights[1:], values[1:]):
            total = total + w * v
        return total

    def _sum(self, values: Sequence, device):
        values = [self.place(v, device) for v in values]
        total = values[0]
        for v in values[1:]:
            total = total + v
        return total

    def _concat(self, values, device):
        values = [self.place(v, device) for v in values]
        return np.concatenate(values) if self.linker == "c" else jnp.concatenate(values)
