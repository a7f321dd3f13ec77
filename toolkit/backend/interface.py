"""The backend interface: a few primitives each framework implements, device selection and placement, the optional
fused step and the part across processes. The multi-device methods written once on top of the primitives (split,
average, sum, make_parallel, inference, a parted model's gradient) are in :mod:`toolkit.backend.composed`.

A backend translates; it does not decide. How a batch is split and padded (:mod:`toolkit.placement.splitting`,
:mod:`toolkit.training.shards`) and what a training step is (its rules: :mod:`toolkit.training.rules`) are decided
in the core; a backend compiles those rules for its framework, runs them on a device, sums across replicas and
processes, and writes the results.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from toolkit.backend.composed import ComposedMethods
from toolkit.backend.composed import scored_mean as scored_mean  # re-exported: backends import it from here
from toolkit.errors import DeviceNotFoundError, DeviceSpecError, DistributedError
from toolkit.placement.devices import Device, parse_device
from toolkit.placement.variables import MirroredVariable, Variable
from toolkit.processes import distributed
from toolkit.processes.distributed import Cluster

if TYPE_CHECKING:  # for annotations only: the interface needs no model, op or optimizer code to be defined
    from toolkit.nn.model import Model
    from toolkit.ops.interface import Ops
    from toolkit.training.optim import Optimizer
    from toolkit.training.state import TrainerState

Native = Any  # a backend's array type


class GradientFn(Protocol):
    def __call__(self, params: Mapping[str, Native], batch: Mapping[str, Any], y: Native,
                 device: Device) -> tuple[Native, dict[str, Native], dict[str, Native], dict[str, Native]]:
        """One replica's training run on its shard (``batch`` from :func:`toolkit.training.rules.replica_batch`: x,
        the examples' keys, the model state, the replica's share of the step), computed on ``device`` and left
        there: its part of the loss, that part's gradient for each parameter, its parts of the model state's new
        values and of the mean of each metric the function was compiled for (``{name: part}``); rules 2 and 3 of
        :mod:`toolkit.training.rules`."""


class UpdateFn(Protocol):
    def __call__(self, params: Mapping[str, Native], grads: Mapping[str, Native],
                 state: Mapping[str, Mapping[str, Native]], step: Native, checked: Sequence[Native],
                 device: Device) -> tuple[dict[str, Native], dict[str, dict[str, Native]], Native]:
        """Rule 5 (:func:`toolkit.training.rules.apply_update`) on ``device``: the new parameters, the new optimizer
        state (``state[slot][param]``) and whether they may be written (every gradient, new value and value of
        ``checked`` finite), left on ``device``."""


class PartFn(Protocol):
    """A part of a model compiled for one backend (see :meth:`Backend.compile_part`)."""

    def forward(self, params: Mapping[str, Native], inputs: Sequence[Native], device: Device) -> Native:
        """``fn(ops, params, *inputs)`` on ``device``."""

    def vjp(self, params: Mapping[str, Native], inputs: Sequence[Native], cotangent: Native,
            device: Device) -> tuple[Native, dict[str, Native], list[Native | None]]:
        """The output, and the gradients of ``sum(output * cotangent)`` for each parameter and for each floating
        input (None for integer inputs), all on ``device``."""


class Backend(ComposedMethods, ABC):
    """A framework's implementation of the multi-device interface.

    Backends are made by :func:`toolkit.get_backend`, not directly. Methods accept NumPy arrays (or anything
    ``numpy.asarray`` takes) and return the framework's native arrays; :meth:`to_numpy` brings one back. The
    multi-device methods composed from the primitives (:meth:`split`, :meth:`average`, :meth:`sum`,
    :meth:`make_parallel`, :meth:`compile_predict`, :meth:`compile_parted_gradient`) are inherited from
    :class:`~toolkit.backend.composed.ComposedMethods`.
    """

    name: ClassVar[str]
    #: Whether :meth:`compile_fused_step`'s step over several devices takes only shards of one size; the trainer then
    #: pads uneven ones (:mod:`toolkit.training.shards`).
    equal_shards: ClassVar[bool] = False

    # ----------------------------------------------------------------------------------------------------------------
    # Primitives: what a framework must provide.

    @abstractmethod
    def device_table(self) -> list[tuple[Device, str]]:
        """Every device the framework sees, with the framework's own name for it, in the framework's order."""

    @abstractmethod
    def place(self, value: Any, device: Device) -> Native:
        """A native copy of ``value`` on ``device`` (no copy if it is already there).

        Args:
            value: a native or NumPy array, or anything ``numpy.asarray`` takes.
            device: one of this backend's devices.
        """

    @abstractmethod
    def to_numpy(self, value: Native) -> np.ndarray:
        """A NumPy copy of a native (or NumPy) array.

        Args:
            value: the array.
        """

    @abstractmethod
    def device_of(self, value: Native) -> Device:
        """The device holding a native array.

        Args:
            value: a native array of this backend.
        """

    @abstractmethod
    def ops(self, dtype: str) -> Ops:
        """The backend's :class:`~toolkit.ops.Ops` for computations in ``dtype``.

        Args:
            dtype: the computation's floating dtype, ``"float32"`` or ``"float64"``.
        """

    @abstractmethod
    def call(self, fn: Callable[..., Any], device: Device, inputs: Mapping[str, Native], dtype: str) -> Any:
        """Run ``fn(ops, **inputs)`` on ``device``; return its outputs (an array or a pytree of them) left there.

        Args:
            fn: written with :class:`~toolkit.ops.Ops`, taking the inputs by keyword.
            device: where it runs.
            inputs: native arrays (or pytrees of them) by name, already on ``device``.
            dtype: the computation's dtype (see :meth:`ops`).
        """

    @abstractmethod
    def compile_gradient(self, model: Model, dtype: str, metrics: tuple = ()) -> GradientFn:
        """A replica's part of the loss and its gradient on any device: :func:`toolkit.training.rules.
        replica_objective` of ``model``, also scoring ``metrics`` (:class:`toolkit.metrics.Metric` objects) on the
        training run's outputs, and the framework's gradient of the part.

        Args:
            model: the model.
            dtype: the computation's dtype.
            metrics: the metrics whose parts the function also returns.
        """

    @abstractmethod
    def compile_update(self, optimizer: Optimizer, dtype: str) -> UpdateFn:
        """:func:`toolkit.training.rules.apply_update` for a whole parameter dict, compiled once and run on the
        device of its inputs.

        Args:
            optimizer: the optimizer whose update is compiled.
            dtype: the computation's dtype.
        """

    @abstractmethod
    def compile_part(self, fn: Callable[..., Any], dtype: str) -> PartFn:
        """A model part ``fn(ops, params, *inputs)``, compiled for forward and backward runs on any device.

        Args:
            fn: the part, written with :class:`~toolkit.ops.Ops`.
            dtype: the computation's dtype.
        """

    @abstractmethod
    def _new_variable(self, value: np.ndarray, device: Device, name: str | None) -> Variable:
        """A backend :class:`~toolkit.placement.variables.Variable` holding ``value`` on ``device``."""

    @abstractmethod
    def _weighted_sum(self, values: Sequence[Native], weights: Sequence[float], device: Device) -> Native:
        """``sum(w * v)`` in the given order, computed on ``device``."""

    @abstractmethod
    def _sum(self, values: Sequence[Native], device: Device) -> Native:
        """``sum(v)`` in the given order, computed on ``device``."""

    @abstractmethod
    def _concat(self, values: Sequence[Native], device: Device) -> Native:
        """Concatenate along axis 0 on ``device``."""

    # ----------------------------------------------------------------------------------------------------------------
    # Device selection.

    def list_devices(self, kind: str | None = None) -> list[Device]:
        """Devices this backend can use.

        Args:
            kind: ``"cpu"`` or ``"gpu"`` for only those; None for all.

        Raises:
            DeviceSpecError: ``kind`` is something else.
        """
        if kind is not None and kind not in ("cpu", "gpu"):
            raise DeviceSpecError(f"kind must be 'cpu', 'gpu' or None, got {kind!r}")
        return [d for d, _ in self.device_table() if kind is None or d.kind == kind]

    def native_name(self, device: Device | str) -> str:
        """The framework's name for ``device``.

        Args:
            device: a :class:`Device` or a device string (``"gpu:0"``).

        Raises:
            DeviceParseError: a device string that does not parse.
            DeviceNotFoundError: a device this backend does not see.
        """
        device = parse_device(device)
        for d, name in self.device_table():
            if d == device:
                return name
        raise self._not_found(device)

    def select_devices(self, spec: str | int | Device | Sequence[str | Device]) -> list[Device]:
        """Resolve a device selection.

        Args:
            spec: ``"all"`` (every GPU, or every CPU device when there is no GPU); an int ``n`` (the first ``n`` of
                those); a string of comma-separated devices (``"gpu:0,gpu:1"``); a :class:`Device`; or a list of
                devices or device strings.

        Raises:
            DeviceSpecError: a malformed spec (a count < 1, an empty list, a device named twice, a wrong type).
            DeviceParseError: a device string that does not parse.
            DeviceNotFoundError: a device, or more devices, than this backend sees; the message lists them. An
                explicit GPU on a machine without it is an error, never a fallback to the CPU.
        """
        existing = self.list_devices()
        pool = [d for d in existing if d.kind == "gpu"] or [d for d in existing if d.kind == "cpu"]
        if isinstance(spec, str) and spec.strip().lower() == "all":
            return pool
        if isinstance(spec, int) and not isinstance(spec, bool):
            if spec < 1:
                raise DeviceSpecError(f"a device count must be >= 1, got {spec}")
            if spec > len(pool):
                raise DeviceNotFoundError(
                    f"{spec} devices asked for, but {self.name} sees {len(pool)} {pool[0].kind.upper()} device(s): "
                    f"{self._listing()}. For logical CPU devices call toolkit.use_logical_devices({spec}) first."
                )
            return pool[:spec]
        if isinstance(spec, str):
            items: list[str | Device] = [s for s in spec.split(",") if s.strip()]
        elif isinstance(spec, Device):
            items = [spec]
        elif isinstance(spec, Sequence):
            items = list(spec)
        else:
            raise DeviceSpecError(f"cannot select devices from {spec!r}; expected 'all', an int, a string like "
                                  "'gpu:0,gpu:1', a Device, or a list of devices")
        if not items:
            raise DeviceSpecError(f"no devices in {spec!r}")
        devices = [parse_device(item) for item in items]
        duplicates = sorted({str(d) for d in devices if devices.count(d) > 1})
        if duplicates:
            raise DeviceSpecError(f"device(s) {', '.join(duplicates)} named more than once in {spec!r}")
        for device in devices:
            if device not in existing:
                raise self._not_found(device)
        return devices

    def _listing(self) -> str:
        return ", ".join(str(d) for d in self.list_devices()) or "none"

    def _not_found(self, device: Device) -> DeviceNotFoundError:
        return DeviceNotFoundError(f"{self.name} has no device {device}; it sees: {self._listing()}")

    # ----------------------------------------------------------------------------------------------------------------
    # Placement.

    def variable(self, value: Any, device: Device | str, name: str | None = None) -> Variable:
        """A variable holding ``value`` on ``device`` (``.device``, ``.numpy()``, ``.assign(value)``).

        Args:
            value: its initial value (anything ``numpy.asarray`` takes).
            device: a :class:`Device` or a device string.
            name: the framework's name for the variable, if it keeps one.

        Raises:
            DeviceParseError, DeviceNotFoundError: as :meth:`select_devices`.
        """
        (device,) = self.select_devices([device])
        return self._new_variable(np.asarray(value), device, name)

    def mirrored_variable(self, value: Any, devices: Any, name: str | None = None) -> MirroredVariable:
        """One replica of ``value`` on each device of ``devices``.

        Args:
            value: the initial value of every replica (anything ``numpy.asarray`` takes).
            devices: any :meth:`select_devices` spec.
            name: the framework's name for the replicas, if it keeps one.

        Raises:
            DeviceSpecError, DeviceParseError, DeviceNotFoundError: as :meth:`select_devices`.
        """
        value = np.asarray(value)
        return MirroredVariable([self._new_variable(value, d, name) for d in self.select_devices(devices)])

    # ----------------------------------------------------------------------------------------------------------------
    # Data parallelism (split, average, sum, make_parallel, compile_predict: :mod:`toolkit.backend.composed`).

    def compile_fused_step(self, model: Model, optimizer: Optimizer, dtype: str, training_state: TrainerState,
                           metrics: tuple = (), across_processes: bool = False) -> Callable | None:
        """Optional: a whole data-parallel step as one compiled call, for backends where per-call overhead dominates.

        The step is ``fn(indices, xs, ys, shares, step)``: ``xs`` are the shards' model batches
        (:func:`toolkit.nn.model.batch`: NumPy arrays and the replicas' state values), ``ys`` their targets,
        ``indices`` the replica each runs on, ``shares`` their shares of the step (floats; each shard's replica batch
        is :func:`toolkit.training.rules.replica_batch` of its model batch and share), ``step`` the update's number
        as a NumPy scalar of the dtype. Where the backend declares :attr:`equal_shards`, a step over several
        devices gets one shard of one size per device (padded, with ``rows``; :mod:`toolkit.training.shards`).
        ``across_processes``: the step is this process's part of a multi-process job's step (the shares are of the
        global batch): the parts are summed over the processes inside the step, before the update, and
        ``ops.cross_replica_sum`` reaches every process's replicas; a backend that cannot returns None.

        It runs the rules of :mod:`toolkit.training.rules` in one program: each replica's part and its gradient,
        their sum, the update, and, only if it may be written, the new parameters, optimizer state and model state
        handed to ``training_state``'s one all-or-nothing write (:meth:`~toolkit.training.state.TrainerState.commit`,
        with the backend's own write primitive where it has one: a traced assignment, a deferred read);
        ``written`` says which happened. The step reads the variables from ``training_state`` and writes them only
        through that commit.

        Args:
            model: the model.
            optimizer: the optimizer whose update the step applies.
            dtype: the computation's dtype.
            training_state: the trainer's :class:`~toolkit.training.state.TrainerState`: its ``params`` (mirrored
                variables, first replica: home), ``slots`` (the optimizer's variables at home, ``[slot][name]``) and
                ``model_state`` (mirrored), and its commit.
            metrics: the metrics whose means the step also returns.
            across_processes: the step is this process's part of a multi-process job's step (see above).

        Returns:
            ``fn(indices, xs, ys, shares, step) -> (mean loss, written, {metric name: mean})``, or None (the
            default: the trainer composes the step from the primitives above).
        """
        return None

    # ----------------------------------------------------------------------------------------------------------------
    # Across processes.

    @classmethod
    def join(cls, cluster: Cluster) -> None:
        """Start the framework's runtime across the processes of ``cluster``, before any backend object is made
        (:func:`toolkit.distributed.initialize` calls it in every process of a job of several).

        Args:
            cluster: this process's place in the job.

        Raises:
            DistributedError: the backend cannot train across processes, or not with this job's settings.
            PeerLostError: a process did not join within the job's timeout (the message names it).
        """
        raise DistributedError(f"the {cls.name} backend does not train across processes")

    def cluster(self) -> Cluster | None:
        """The job of several processes this process joined for this backend (:func:`toolkit.distributed.
        initialize`), or None for a process on its own.

        Raises:
            DistributedError: the process joined a job for another backend.
        """
        joined = distributed.current()
        if joined is None or joined[1].num_processes == 1:
            return None
        if joined[0] != self.name:
            raise DistributedError(f"this process joined a {joined[0]} job (toolkit.distributed.initialize); this "
                                   f"backend is {self.name}")
        return joined[1]

    def all_reduce_sum(self, array: np.ndarray, what: str) -> np.ndarray:
        """The elementwise sum of a host ``array`` over every process of the job (``array`` itself for a process on
        its own): the sum across processes of what the host computes (a composed step's parts, evaluate's
        totals, fit's checks).

        Args:
            array: this process's values (any shape).
            what: names the reduction in the error of a lost process.

        Returns:
            The sum, a NumPy array of ``array``'s shape.

        Raises:
            PeerLostError: another process died or hung (the message names it).
        """
        if self.cluster() is None:
            return np.asarray(array)
        return self._all_reduce_sum(np.asarray(array), what)

    def _all_reduce_sum(self, array: np.ndarray, what: str) -> np.ndarray:
        """:meth:`all_reduce_sum` in a job of several processes (a backend that :meth:`join` starts provides it)."""
        raise DistributedError(f"the {self.name} backend does not train across processes")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self._listing()}>"
