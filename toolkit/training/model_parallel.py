"""Model parallelism: parts of one model on different devices, trained end to end.

A :class:`PartedModel` is a :class:`~toolkit.Model` written as named parts, each a function of some parameters and
of the outputs of earlier parts (or of the data inputs). On one device it runs like any model (``DataParallel`` can
train it); :class:`ModelParallel` runs each part on its own device: forward through the parts, values moved between
devices where one part feeds another, the loss on the last part's device, backward on the devices that own each part,
and every parameter updated on its home device (that of the first part using it). A parameter used by parts on
several devices (a shared encoder) is copied to them in the forward pass and its gradients summed at home.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkit.backend.interface import Backend
from toolkit.errors import ArgumentError, ArgumentTypeError, DeviceSpecError, ParamsError, ShapeError
from toolkit.nn import context
from toolkit.nn.model import InitFn, LossFn, Model
from toolkit.ops.interface import Ops, Tensor
from toolkit.placement.devices import Device
from toolkit.placement.splitting import shard_bounds, split_sizes
from toolkit.training.batches import count
from toolkit.training.batches import shapes as batch_shapes
from toolkit.training.optim import Optimizer
from toolkit.training.trainer import Trainer, rows


@dataclass(frozen=True)
class Part:
    """One piece of a :class:`PartedModel`.

    Args:
        name: unique within the model; later parts refer to this part's output by it.
        fn: ``fn(ops, params, *inputs) -> array``, written with :class:`toolkit.ops.Ops`; ``params`` holds only the
            parameters named in ``params``.
        inputs: names of data inputs or of earlier parts, passed to ``fn`` in this order.
        params: names of the parameters ``fn`` reads.
        device: where :class:`ModelParallel` runs it unless told otherwise (any device spelling).

    Raises:
        ArgumentError: an empty name, or no inputs.
        ArgumentTypeError: an ``fn`` that is not callable.
    """

    name: str
    fn: Callable[..., Tensor]
    inputs: tuple[str, ...]
    params: tuple[str, ...] = ()
    device: str | Device | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentError(f"a Part needs a non-empty name, got {self.name!r}")
        if not callable(self.fn):
            raise ArgumentTypeError(f"Part {self.name!r}: fn must be callable, got {self.fn!r}")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "params", tuple(self.params))
        if not self.inputs:
            raise ArgumentError(f"Part {self.name!r} needs at least one input, got none")


@dataclass(frozen=True, eq=False)
class PartedModel(Model):
    """A :class:`~toolkit.Model` made of :class:`Part` s; build it with :meth:`build`, which checks the parts.

    Attributes:
        parts: the parts in the order they run; the last part's output is the model's.
        inputs: the names of the data inputs.
        init: as for :class:`~toolkit.Model`, as are ``forward`` (which :meth:`build` makes from the parts),
            ``loss``, ``name``, ``rows_independent``, ``metrics``, ``constraints``, ``input_shape``,
            ``output_shape``, ``optimizer`` and ``optimizer_state``.
    """

    parts: tuple[Part, ...] = ()
    inputs: tuple[str, ...] = ("x",)

    @classmethod
    def build(cls, init: InitFn, parts: Sequence[Part], loss: LossFn, inputs: Sequence[str] = ("x",),
              name: str = "") -> PartedModel:
        """Check the parts and make the model.

        Args:
            init: ``init(rng) -> {name: array}`` for every parameter the parts use.
            parts: in an order where each part's inputs come before it; the last part's output is the model's.
            loss: ``loss(ops, outputs, y) -> per-example losses``, run on the last part's device.
            inputs: names of the data inputs. With one input, ``x`` is an array; with several, a dict by name.
            name: the model's name (empty: ``"parted-model"``).

        Returns:
            The :class:`PartedModel`. Calling it with ``x`` that does not match ``inputs`` (a dict of other names,
            or an array where several inputs are named) raises :class:`~toolkit.ShapeError`.

        Raises:
            ArgumentError: no parts, something that is not a :class:`Part`, duplicate names, or an input that names
                neither a data input nor an earlier part.
        """
        parts, inputs = tuple(parts), tuple(inputs)
        if not parts or not all(isinstance(p, Part) for p in parts):
            raise ArgumentError(f"a PartedModel needs a non-empty list of Part, got {parts!r}")
        known = list(inputs)
        for part in parts:
            if part.name in known:
                raise ArgumentError(f"part name {part.name!r} is used twice (data inputs: {list(inputs)})")
            unknown = [i for i in part.inputs if i not in known]
            if unknown:
                raise ArgumentError(f"part {part.name!r} reads {unknown}, which are neither data inputs nor "
                                    f"earlier parts; known so far: {known}")
            known.append(part.name)

        # ModelParallel runs the parts outside a model run (no per-example keys, no state): they run as training,
        # so a layer that needs keys (dropout) fails with a ModelStateError rather than silently doing nothing.
        parts = tuple(dataclasses.replace(part, fn=_training_part(part.fn)) for part in parts)

        def forward(ops: Ops, params: Mapping[str, Tensor], x: Any) -> Tensor:
            values = _named_inputs(inputs, x)
            for part in parts:
                values[part.name] = part.fn(ops, {k: params[k] for k in part.params}, *(values[i] for i in part.inputs))
            return values[parts[-1].name]

        return cls(init, forward, loss, name or "parted-model", parts=parts, inputs=inputs)

    def param_users(self) -> dict[str, list[str]]:
        """For each parameter name, the parts that read it.

        Returns:
            ``{parameter name: [part names, in the parts' order]}``; the first part is the parameter's home.
        """
        users: dict[str, list[str]] = {}
        for part in self.parts:
            for name in part.params:
                users.setdefault(name, []).append(part.name)
        return users


def _training_part(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` run in a training context without keys when no model run is current (ModelParallel's parts); in a
    run (DataParallel training a PartedModel, or predicting with it) the run's context applies."""

    @functools.wraps(fn)
    def part(ops, *args):
        if context.current() is not None:
            return fn(ops, *args)
        with context.running(context.RunContext(training=True)):
            return fn(ops, *args)

    return part


def _inference_part(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` run in inference mode (predict, evaluate): batch statistics and dropout off."""

    @functools.wraps(fn)
    def part(ops, *args):
        with context.running(context.RunContext(training=False)):
            return fn(ops, *args)

    return part


def _named_inputs(names: tuple[str, ...], x: Any) -> dict[str, Any]:
    if isinstance(x, Mapping):
        if set(x) != set(names):
            raise ShapeError(f"x must have exactly the inputs {list(names)}, got {sorted(x)}")
        return dict(x)
    if len(names) != 1:
        raise ShapeError(f"this model takes the named inputs {list(names)}: pass x as a dict")
    return {names[0]: x}


class ModelParallel(Trainer):
    """Train a :class:`PartedModel` with each part on its own device.

    Args:
        model: the :class:`PartedModel`.
        backend: a backend object or name.
        optimizer: a :mod:`toolkit.training.optim` optimizer; None: the model's (:attr:`toolkit.Model.optimizer`).
        devices: ``{part name: device}`` for parts to place elsewhere than their ``Part.device``.
        dtype: as for :class:`~toolkit.DataParallel`.
        seed: as for :class:`~toolkit.DataParallel`.
        nan_policy: as for :class:`~toolkit.DataParallel`.

    Attributes:
        devices: ``{part name: Device}``, where each part runs.

    :meth:`param_devices` says where each parameter lives. ``step`` (also with ``micro_batches``), ``fit``,
    ``predict``, ``evaluate``, ``gradients``, ``params``, ``set_params``, ``save`` and ``restore`` behave as for
    ``DataParallel``; the result equals the same model trained on one device.

    Raises:
        ArgumentTypeError: ``model`` is not a :class:`PartedModel`.
        DeviceSpecError: ``devices`` names a part the model does not have, or a part has no device.
        ParamsError: a parameter ``model.init`` makes that no part reads, one a part reads that ``init`` does not
            make, or model state (not carried across parts).
    """

    def __init__(self, model: PartedModel, backend: Backend | str, optimizer: Optimizer | None = None,
                 devices: Mapping[str, Any] | None = None, dtype: str = "float32", seed: int = 0,
                 nan_policy: str = "raise") -> None:
        if not isinstance(model, PartedModel):
            raise ArgumentTypeError(f"ModelParallel needs a toolkit.PartedModel, got {type(model).__name__}")
        super().__init__(model, backend, optimizer, dtype, seed, nan_policy)
        devices = dict(devices or {})
        names = [part.name for part in model.parts]
        if unknown := sorted(set(devices) - set(names)):
            raise DeviceSpecError(f"devices names unknown parts {unknown}; the parts are {names}")
        specs = {part.name: devices.get(part.name, part.device) for part in model.parts}
        if missing := [name for name, spec in specs.items() if spec is None]:
            raise DeviceSpecError(f"parts {missing} have no device: give Part(device=...) or devices={{name: ...}}")
        self.devices = {name: self.backend.select_devices([spec])[0] for name, spec in specs.items()}
        homes = {name: self.devices[parts[0]] for name, parts in model.param_users().items()}

        def home_of(name: str) -> list[Device]:
            if name not in homes:
                raise ParamsError(f"parameter {name!r} made by model.init is read by no part")
            return [homes[name]]

        self._init_params(home_of)
        if self.training_state.model_state:
            raise ParamsError(f"ModelParallel does not carry model state yet; this model declares "
                              f"{sorted(self.training_state.model_state)}: train it with DataParallel")
        if missing := sorted(set(homes) - set(self.training_state.params)):
            raise ParamsError(f"parts read parameters {missing} that model.init does not make")
        # The parted gradient per tuple of training metrics (fit's metrics score the last part's outputs).
        self._gradient_fns = {(): self.backend.compile_parted_gradient(model, self.devices, self.dtype)}
        self._forward = None  # predict's and evaluate's parts, compiled on first use

    def _loss_and_gradients(self, x, y, micro_batches=1, metrics=(), weights=None):
        if weights is not None:
            raise ArgumentError(f"sample_weight and class_weight are not supported by ModelParallel (its parts "
                                f"compute the loss of {self.model.name!r} without per-example weights); train with "
                                "DataParallel to weigh examples")
        # Micro-batches run one after another through every part; their mean losses, metrics and gradients are
        # combined weighted by size, each gradient on its parameter's home, which gives the whole batch's mean.
        if metrics not in self._gradient_fns:
            self._gradient_fns[metrics] = self.backend.compile_parted_gradient(self.model, self.devices, self.dtype,
                                                                               metrics)
        params, results, sizes = self._home_params(), [], []
        for lo, hi in shard_bounds(split_sizes(count(y), micro_batches)):
            inputs, shapes = self._inputs(x, lo, hi)
            results.append(self._compute("its devices", f"{shapes}, y {batch_shapes(rows(y, slice(lo, hi)))}",
                                         self._gradient_fns[metrics], params, inputs, rows(y, slice(lo, hi))))
            sizes.append(hi - lo)
        self._accept_input_spec()
        if len(results) == 1:
            loss, grads, scores = results[0]
            return loss, grads, {}, scores
        homes, last = self.param_devices(), self.devices[self.model.parts[-1].name]
        loss, scores = self.backend.average([(loss, scores) for loss, _, scores in results], sizes, last)
        grads = {name: self.backend.average([g[name] for _, g, _ in results], sizes, homes[name]) for name in params}
        return loss, grads, {}, scores

    def _inference(self, x, batches):
        if self._forward is None:
            self._forward = {part.name: self.backend.compile_part(_inference_part(part.fn), self.dtype)
                             for part in self.model.parts}
        params, last = self._home_params(), self.devices[self.model.parts[-1].name]
        for lo, hi in batches:
            inputs, shapes = self._inputs(x, lo, hi)
            yield last, self._compute("its devices", shapes, self._parted_forward, params, inputs), lo, hi

    def _home_params(self) -> dict[str, Any]:
        """Each parameter's native value on its home device (a parameter has one replica here)."""
        return {name: var.replicas[0].value for name, var in self.training_state.params.items()}

    def _inputs(self, x, lo: int, hi: int) -> tuple[dict[str, Any], str]:
        """Rows ``lo:hi`` of the data inputs by name, and their shapes for error messages."""
        inputs = _named_inputs(self.model.inputs, rows(x, slice(lo, hi)))
        return inputs, f"x {({k: tuple(v.shape) for k, v in inputs.items()})}"

    def _parted_forward(self, params, inputs):
        """The last part's outputs for ``inputs``, each part run on its device, its inputs moved there."""
        values = dict(inputs)
        for part in self.model.parts:
            device = self.devices[part.name]
            values[part.name] = self._forward[part.name].forward(
                {k: self.backend.place(params[k], device) for k in part.params},
                [self.backend.place(values[i], device) for i in part.inputs], device)
        return values[self.model.parts[-1].name]

    def __repr__(self) -> str:
        placed = ", ".join(f"{name}@{device}" for name, device in self.devices.items())
        return f"ModelParallel({self.model.name}, {self.backend.name}, [{placed}], {self.optimizer!r}, {self.dtype})"
