"""The multi-device methods of :class:`toolkit.Backend` written once on top of its primitives.

A backend inherits them: splitting a batch across devices, weighted means and sums of per-device pytrees, the
``make_parallel`` recipe, inference on a shard, and a parted model's gradient composed part by part. Each uses only
the primitives :class:`~toolkit.Backend` declares (``place``, ``call``, ``compile_part``, ``_sum``, ...); a
backend overrides one where its framework does it better (TensorFlow's tape spans devices).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.errors import ArgumentError, ShapeError
from toolkit.nn.model import Model
from toolkit.ops.interface import Ops
from toolkit.placement.devices import Device, parse_device
from toolkit.placement.splitting import shard_bounds, split_sizes

Native = Any  # a backend's array type


class ComposedMethods:
    """The methods of :class:`~toolkit.Backend` composed from its primitives (a mixin: it has no state
    and is not used alone)."""

    # ----------------------------------------------------------------------------------------------------------------
    # Data parallelism and inference.

    def split(self, array: Any, devices: Any, weights: Sequence[float] | None = None) -> list[Native]:
        """Split ``array`` on axis 0 into one shard per device (sizes from :func:`toolkit.split_sizes`), each placed
        on its device. Shards may be empty when the array has fewer rows than there are devices.

        Args:
            array: the array to split (anything ``numpy.asarray`` takes), of rank >= 1.
            devices: any :meth:`select_devices` spec.
            weights: one number > 0 per device, the shards' relative sizes; default: equal.

        Returns:
            One native array per device, on it.

        Raises:
            ShapeError: ``array`` is a scalar.
            ArgumentError: ``weights`` not one finite number > 0 per device.
            DeviceSpecError, DeviceParseError, DeviceNotFoundError: as :meth:`select_devices`.
        """
        devices = self.select_devices(devices)
        array = np.asarray(array)
        if array.ndim == 0:
            raise ShapeError("cannot split a scalar (shape ()); expected an array with a batch axis 0")
        sizes = split_sizes(len(array), len(devices), weights)
        return [self.place(array[a:b], d) for d, (a, b) in zip(devices, shard_bounds(sizes))]

    def average(self, values: Sequence[Any], weights: Sequence[float] | None = None,
                device: Device | str | None = None) -> Any:
        """The weighted mean of one pytree (an array, or a dict/list/tuple of arrays) per device.

        Args:
            values: pytrees of the same structure, typically one gradient dict per device.
            weights: one number >= 0 per value, normalised here (not all 0). Entries of weight 0 are left out, so
                the NaN "mean" of an empty shard does no harm. With shard sizes as weights, the mean of per-shard
                mean gradients is the full-batch mean gradient for any split. Default: equal weights.
            device: where the result is computed and left; default: the device of the first value.

        A data-parallel step does not need it: its replicas' parts are already weighted by their shares
        (:mod:`toolkit.training.rules`), and :meth:`sum` adds them up.

        Returns:
            A pytree of ``values``' structure of native arrays on the target device.

        Raises:
            ArgumentError: no values, or weights not one finite number >= 0 per value, or all 0.
        """
        values = list(values)
        if not values:
            raise ArgumentError("average() needs at least one value, got none")
        if weights is None:
            weights = [1.0] * len(values)
        weights = [float(w) for w in weights]
        if len(weights) != len(values) or not all(np.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
            raise ArgumentError(f"average() needs one finite weight >= 0 per value ({len(values)}), not all 0; "
                             f"got {weights!r}")
        kept = [(v, w) for v, w in zip(values, weights) if w > 0]
        total = sum(w for _, w in kept)
        leaves0 = optree.tree_leaves(kept[0][0])
        target = parse_device(device) if device is not None else self.device_of(leaves0[0])
        if device is not None:
            (target,) = self.select_devices([target])
        return optree.tree_map(
            lambda *leaves: self._weighted_sum(leaves, [w / total for _, w in kept], target),
            *[v for v, _ in kept],
        )

    def sum(self, values: Sequence[Any], device: Device | str) -> Any:
        """The sum of one pytree per replica (each replica's part of a step, rule 4 of :mod:`toolkit.training.rules`
        within a process), computed on ``device`` in the order given.

        Args:
            values: pytrees of the same structure, one per replica.
            device: where the sum is computed and left.

        Returns:
            A pytree of that structure of native arrays on ``device``.

        Raises:
            ArgumentError: no values.
        """
        values = list(values)
        if not values:
            raise ArgumentError("sum() needs at least one value, got none")
        (target,) = self.select_devices([device])
        return optree.tree_map(lambda *leaves: self._sum(leaves, target), *values)

    def make_parallel(self, fn: Callable[..., Any], devices: Any, **inputs: Any) -> Any:
        """The classic ``make_parallel`` recipe: split every input on axis 0 across ``devices``, run
        ``fn(ops, **shard)`` on each device, and concatenate the outputs on the first device.

        Devices whose shard is empty are not run.

        Args:
            fn: written with :class:`~toolkit.ops.Ops`; ``ops.dtype`` is the widest floating dtype of the
                inputs (float32 if none is floating).
            devices: any :meth:`select_devices` spec.
            **inputs: arrays by name, split on axis 0; each has the same non-zero number of rows.

        Returns:
            ``fn``'s outputs (an array or a pytree of them), concatenated on axis 0 on the first device.

        Raises:
            ArgumentError: no inputs.
            ShapeError: inputs that are scalars, empty, or of different lengths.
        """
        devices = self.select_devices(devices)
        if not inputs:
            raise ArgumentError("make_parallel() needs at least one keyword input to split, got none")
        arrays = {k: np.asarray(v) for k, v in inputs.items()}
        lengths = {k: (len(a) if a.ndim else None) for k, a in arrays.items()}
        if None in lengths.values() or len(set(lengths.values())) != 1 or 0 in lengths.values():
            raise ShapeError(f"make_parallel() inputs must share a non-empty axis 0; got lengths {lengths}")
        floats = [a.dtype for a in arrays.values() if a.dtype.kind == "f"]
        dtype = np.result_type(*floats).name if floats else "float32"
        sizes = split_sizes(next(iter(lengths.values())), len(devices))
        outputs = [
            self.call(fn, d, {k: self.place(a[lo:hi], d) for k, a in arrays.items()}, dtype)
            for d, (lo, hi) in zip(devices, shard_bounds(sizes)) if hi > lo
        ]
        return optree.tree_map(lambda *parts: self._concat(parts, devices[0]), *outputs)

    def compile_predict(self, model: Model, dtype: str) -> Callable:
        """``fn(params, batch, device) -> outputs``: the model's inference run (:meth:`~toolkit.nn.model.Model.infer`:
        moving statistics, no dropout) on one shard's ``batch`` (x and the model state), on ``device``.
        Written once with :meth:`call`; a backend whose ``call`` does not compile may override it.

        Args:
            model: the model.
            dtype: the computation's dtype.
        """

        def infer(ops, params, batch):
            return model.infer(ops, params, batch)

        return lambda params, batch, device: self.call(infer, device, {"params": params, "batch": batch}, dtype)


    # ----------------------------------------------------------------------------------------------------------------
    # Model parallelism.

    def compile_parted_gradient(self, model: Any, placement: Mapping[str, Device], dtype: str,
                                metrics: tuple = ()) -> Callable:
        """The loss and gradients of a :class:`~toolkit.PartedModel` with each part on ``placement[part]``.

        Returns ``fn(params, inputs, y) -> (mean loss, {param: gradient}, {metric name: mean})``: ``params`` native
        arrays on their home devices (the device of the first part reading each), ``inputs`` the data inputs by
        name, each gradient left on its parameter's home, the loss and ``metrics``' means (scored on the same
        outputs) on the last part's device.

        Written once from :meth:`compile_part`: the forward pass runs part by part, moving each output to the
        devices of the parts that read it; the backward pass runs the parts in reverse on their own devices, moving
        each input's gradient back to the part that produced it (summed where several parts read it); parameter
        gradients are summed on the parameter's home. A backend with a tape that spans devices may override it.
        The last part's output is the vector ``[loss, *metric means]``, differentiated with the cotangent
        ``[1, 0, ...]``: the loss's gradient alone.

        Args:
            model: the :class:`~toolkit.PartedModel`.
            placement: the device of each part, by part name.
            dtype: the computation's dtype.
            metrics: the metrics whose means the function also returns.
        """
        parts, last = model.parts, model.parts[-1]

        def with_loss(ops, params, *inputs):
            return scored_mean(ops, model.loss, metrics, last.fn(ops, params, *inputs[:-1]), inputs[-1])

        compiled = {part.name: self.compile_part(part.fn, dtype) for part in parts[:-1]}
        compiled[last.name] = self.compile_part(with_loss, dtype)
        homes = {name: placement[users[0]] for name, users in model.param_users().items()}

        def loss_and_gradients(params, inputs, y):
            values, placed = dict(inputs), {}
            for part in parts:
                device = placement[part.name]
                ins = [self.place(values[i], device) for i in part.inputs] + ([self.place(y, device)]
                                                                               if part is last else [])
                placed[part.name] = ({k: self.place(params[k], device) for k in part.params}, ins)
                if part is not last:
                    values[part.name] = compiled[part.name].forward(*placed[part.name], device)
            seed = np.eye(1, 1 + len(metrics), dtype=dtype)[0]  # d(loss)/d(output): 1 for the loss, 0 for metrics
            cotangents: dict[str, list] = {last.name: [self.place(seed, placement[last.name])]}
            param_grads: dict[str, list] = {name: [] for name in params}
            loss = None
            for part in reversed(parts):
                if part.name not in cotangents:
                    continue  # its output reaches the loss through no path: no gradient flows into it
                device = placement[part.name]
                cotangent = self._sum(cotangents.pop(part.name), device)
                output, grads, input_grads = compiled[part.name].vjp(*placed[part.name], cotangent, device)
                loss = output if part is last else loss
                for name, grad in grads.items():
                    param_grads[name].append(grad)
                for source, grad in zip(part.inputs, input_grads):
                    if grad is not None and source in compiled:
                        cotangents.setdefault(source, []).append(grad)
            grads = {name: self._sum(found, homes[name]) if found else
                     self.place(np.zeros(np.shape(self.to_numpy(params[name])), dtype), homes[name])
                     for name, found in param_grads.items()}
            return loss[0], grads, {metric.name: loss[1 + i] for i, metric in enumerate(metrics)}

        return loss_and_gradients



def scored_mean(ops: Ops, loss: Callable[..., Any], metrics: Sequence[Any], outputs: Any, y: Any) -> Any:
    """The vector ``[mean loss, *mean of each metric]`` of ``outputs`` against ``y``, on Tensors: a parted
    model's last part as its gradient sees it."""
    return ops.stack([ops.mean(loss(ops, outputs, y)), *(ops.mean(metric(ops, outputs, y)) for metric in metrics)])
