"""Where the numbers part (``multigpu localize``), measured: for one set of parameters and one batch, every recorded
layer output, the loss and every parameter's gradient on each backend, against a float64 reference. The command's
module, :mod:`toolkit.command.localize`, says what was found in words and as a table.

A training step is computed on each backend in the computation dtype (float32 by default) and in float64, from the
same parameters, batch and dropout keys. The reference is the first backend's float64 run; the other backends'
float64 runs say how far the reference itself can be trusted. Each quantity's error is max |value - reference| over
its largest |reference| (:func:`compare_runs`), and the quantities are read in the order a step computes them: the
outputs ``forward`` names with ``ops.record(name, x)`` (in the order recorded), the model's output and the loss, then
the gradients in backpropagation order (the reverse of the parameters' order in ``init``, which is the layers' order
in the built-in and imported Keras models). The first quantity past :data:`LOCALIZE_BOUND` is where the numbers
part; per quantity the backend farther from the reference is named, and counted over outputs and over gradients.

One step in float32 stays within about 1e-6 of float64 on the built-in models: what parts float32 training runs is
the training itself, which amplifies those roundings step after step. With ``--steps N --follow`` every backend also
trains N steps in the computation dtype beside the float64 run, and the step and the parameters (so the layer) where
each run first parts from float64 are named (:func:`starting_point`).

The result is a plain dict (``localize.json``), schema ``multigpu-toolkit/localize`` version
:data:`SCHEMA_VERSION`: ``config``; ``rows``, one per quantity in step order (``kind`` output/loss/gradient,
``name``, ``shape``, ``scale``, ``error`` {backend: relative error in the computation dtype}, ``float64_error``
{backend: the same in float64}, ``unresolved``: zero in exact arithmetic, so the reference cannot judge it,
``farther``: the backend farther from the reference, or null with one backend); ``trajectories`` (with ``--follow``,
per backend: ``backend``, ``max_rel_param_diff`` per step, ``split_step``, ``first_parted``,
``param_split_steps``); ``first_past`` (the first row past the bound on any backend, or null),
``first_past_by_backend``, ``farther_counts`` ({kind: {backend: rows where it is farther}}), ``worst`` (the row with
the largest error), ``bound``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optree

from toolkit.command.divergence import pair_record, relative_divergence
from toolkit.command.seeds import RunSeeds, initial_values, seed_trainer
from toolkit.command.workloads import Workload, draw_batches
from toolkit.errors import ArgumentError
from toolkit.nn import context
from toolkit.nn.model import Model, batch
from toolkit.ops.training import recording

#: The results' ``schema`` entry, and its version (raised when a field changes meaning or goes).
SCHEMA = "multigpu-toolkit/localize"
SCHEMA_VERSION = 1

#: The relative error past which a quantity has parted from the float64 reference. One float32 rounding is 6e-8
#: relative; a layer's output carries the roundings of its sums (a dot product of n terms: up to n of them, about
#: sqrt(n) in practice), so the layers of the built-in models stay within 1e-6 of float64 (measured: digits MLP and
#: Transformer at initialization, outputs 1e-7 to 6e-7, gradients up to 3e-6). 1e-4 is some 1,700 float32 roundings:
#: a quantity past it has had its rounding amplified (cancellation, a saturated softmax, a normalization of a small
#: variance) or computes something else. It is also :data:`toolkit.tolerances.SPLIT_BOUND`, the divergence
#: at which two training runs count as parted, so the two commands speak of one threshold.
LOCALIZE_BOUND = 1e-4

#: A quantity whose largest |reference value| is below this fraction of the largest of its kind (outputs, or
#: gradients) is zero in exact arithmetic, its reference rounding noise that cannot judge it (an attention key's bias
#: gets no gradient: softmax ignores a shift of its logits; measured, the Transformer's: 1e-19 to 4e-18 of the largest
#: gradient, where its smallest real gradients are 5e-4 of it). float64 rounds at 1.1e-16; 1e-10 leaves a million
#: roundings of margin for the cancellation in a sum, and six orders below the smallest real gradient seen.
UNRESOLVED = 1e-10

#: The reference dtype.
REFERENCE_DTYPE = "float64"
#: The names of the model's output and loss among the recorded outputs (``ops.record`` names cannot clash with them:
#: a recorded name that does would be kept as ``name#2``).
OUTPUT, LOSS = "(output)", "(loss)"
#: The kinds of quantity, in the order a training step computes them.
KINDS = ("output", "loss", "gradient")


def relative_error(value: np.ndarray, reference: np.ndarray, scale: float) -> float:
    """max |value - reference| over ``scale``, in float64 (0 where the scale is 0 and they are equal, inf where only
    the scale is 0).

    Args:
        value: a backend's array.
        reference: the reference array, of the same shape.
        scale: what the difference is measured against.

    Returns:
        The relative error.

    Raises:
        ArgumentError: the shapes differ.
    """
    value, reference = np.asarray(value, np.float64), np.asarray(reference, np.float64)
    if value.shape != reference.shape:
        raise ArgumentError(f"shapes differ: {value.shape} against the reference's {reference.shape}")
    difference = float(np.max(np.abs(value - reference))) if value.size else 0.0
    if scale > 0:
        return difference / scale
    return 0.0 if difference == 0 else float("inf")


def _scale(array: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(array, np.float64)))) if np.size(array) else 0.0


def _recorded(model: Model) -> Model:
    """``model`` with its output recorded as :data:`OUTPUT` (each leaf, ``(output)[i]``, where it returns several)."""
    def forward(ops, params, x):
        outputs = model.forward(ops, params, x)
        if not isinstance(outputs, (list, tuple, dict)):
            return ops.record(OUTPUT, outputs)
        for i, leaf in enumerate(optree.tree_leaves(outputs)):
            ops.record(f"{OUTPUT}[{i}]", leaf)
        return outputs

    return dataclasses.replace(model, forward=forward)


class _Functions:
    """The two functions a backend compiles for one model: the recorded outputs and loss, and the loss alone (its
    vector-Jacobian product gives the gradients)."""

    def __init__(self, model: Model, state_names: Sequence[str]) -> None:
        recorded = _recorded(model)

        def mean_loss(ops, params, x, y, keys):
            state = {name: params[name] for name in state_names}
            trained = {name: value for name, value in params.items() if name not in state}
            losses, _, _ = recorded.train_losses(ops, trained, batch(x, keys, state), y)
            return ops.mean(losses)

        def outputs(ops, params, x, y, keys):
            with recording() as records:
                loss = mean_loss(ops, params, x, y, keys)
            return {**records, LOSS: loss}

        self.outputs, self.loss = outputs, mean_loss


def evaluate(backend, functions: _Functions, dtype: str, params: Mapping[str, np.ndarray],
             state: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray, keys: np.ndarray) -> dict[str, Any]:
    """One training step's recorded outputs, loss and gradients on ``backend``'s first device, in ``dtype``.

    Args:
        backend: a :class:`toolkit.Backend`.
        functions: what to compile (:class:`_Functions`).
        dtype: the computation dtype.
        params: the parameters, NumPy.
        state: the model state, NumPy.
        x: the batch's inputs (floating inputs are cast to ``dtype``).
        y: the batch's targets.
        keys: the examples' uint32 keys (dropout).

    Returns:
        ``{"outputs": {name: array}, "gradients": {name: array}}``, NumPy, the outputs in the order recorded with
        :data:`LOSS` last.
    """
    device = backend.select_devices(1)[0]

    def place(value):
        value = np.asarray(value)
        return backend.place(value.astype(dtype) if value.dtype.kind == "f" else value, device)

    natives = {name: place(value) for name, value in {**params, **state}.items()}
    inputs = [optree.tree_map(place, x), place(y), backend.place(np.asarray(keys, context.KEY_DTYPE), device)]
    outputs = backend.compile_part(functions.outputs, dtype).forward(natives, inputs, device)
    _, grads, _ = backend.compile_part(functions.loss, dtype).vjp(natives, inputs, place(np.asarray(1.0)), device)
    return {"outputs": {name: backend.to_numpy(value) for name, value in outputs.items()},
            "gradients": {name: backend.to_numpy(grads[name]) for name in params}}


def starting_point(workload: Workload, seeds: RunSeeds, backends: Sequence[str], dtype: str, steps: int,
                   batch_size: int, optimizer: Callable[[], Any] | None, follow: bool = False,
                   bound: float = LOCALIZE_BOUND) -> tuple[dict, dict, np.ndarray, np.ndarray, np.ndarray, list]:
    """The parameters, model state and batch a localization compares: ``seeds.init``'s initial values, trained for
    ``steps`` float64 steps on the first backend (one device) where ``steps > 0``, and the batch of the next step.

    With ``follow``, every backend also trains in ``dtype`` from the same initial values on the same batches, in
    lockstep with the float64 run, and each one's parameters are compared with the float64 run's after every step
    (:func:`toolkit.command.divergence.relative_divergence`): where each trajectory parts from float64, and which
    parameters part first.

    Args:
        workload: the model and its data.
        seeds: the run's seeds.
        backends: the backends; the first trains the float64 steps.
        dtype: the computation dtype of the followed runs.
        steps: training steps before the step compared.
        batch_size: the batch size.
        optimizer: makes the optimizer of those steps (needed where ``steps > 0``).
        follow: also train every backend in ``dtype`` alongside.
        bound: the divergence past which a followed run has parted from float64.

    Returns:
        ``(params, state, x, y, keys, trajectories)``, NumPy; ``trajectories`` one per backend followed
        (``backend``, ``max_rel_param_diff`` per step, ``split_step``, ``first_parted``, ``param_split_steps``),
        empty without ``follow``.
    """
    from toolkit.training.data_parallel import DataParallel

    x_train, y_train, _, _ = workload.data(seeds.data)
    rows = draw_batches(len(x_train), batch_size, steps + 1, seeds.data)
    trajectories = []
    if steps:
        def trainer(name, kind):
            made = DataParallel(workload.model, name, 1, optimizer(), dtype=kind, seed=seeds.noise)
            seed_trainer(made, workload.model, seeds)
            return made

        reference = trainer(backends[0], REFERENCE_DTYPE)
        followed = {name: trainer(name, dtype) for name in backends} if follow else {}
        divergence: dict[str, list[dict[str, float]]] = {name: [] for name in followed}
        for index in rows[:steps]:
            for run in (reference, *followed.values()):
                run.step(x_train[index], y_train[index])
            exact = reference.params()
            for name, run in followed.items():
                divergence[name].append(relative_divergence(run.params(), exact))
        params, state = reference.params(), reference.state()
        for name, per_step in divergence.items():
            record = pair_record((name, 1), (backends[0], 1), per_step, bound)
            trajectories.append({"backend": name, **{key: record[key] for key in (
                "max_rel_param_diff", "split_step", "first_parted", "param_split_steps")}})
    else:
        params, state = initial_values(workload.model, seeds.init)
    keys = context.consecutive_example_keys(seeds.noise, steps, 0, batch_size)
    return params, state, x_train[rows[steps]], y_train[rows[steps]], keys, trajectories


def localize(workload: Workload, backends: Sequence[str], dtype: str, batch_size: int, seeds: RunSeeds,
             steps: int = 0, optimizer: Callable[[], Any] | None = None, bound: float = LOCALIZE_BOUND,
             follow: bool = False) -> dict[str, Any]:
    """Compare one training step on every backend in ``dtype`` with the first backend's float64 step, quantity by
    quantity (see the module's docstring); with ``follow``, also each backend's ``dtype`` training run with the
    float64 one over the ``steps`` steps before (:func:`starting_point`).

    Args:
        workload: the model and its data.
        backends: the backends' names; the first one's float64 run is the reference.
        dtype: the computation dtype compared.
        batch_size: the batch size.
        seeds: the init, data and noise seeds.
        steps: float64 training steps (first backend, ``optimizer``) before the step compared; 0: the initial
            parameters.
        optimizer: makes the optimizer of those steps (needed where ``steps > 0``).
        bound: the relative error past which a quantity has parted.
        follow: train every backend in ``dtype`` alongside the float64 steps and say where each parts from it.

    Returns:
        The results (the module's docstring gives their fields).
    """
    import toolkit

    params, state, x, y, keys, trajectories = starting_point(workload, seeds, backends, dtype, steps, batch_size,
                                                             optimizer, follow, bound)
    functions = _Functions(workload.model, list(state))
    found = {}
    for name in backends:
        for kind in dict.fromkeys((dtype, REFERENCE_DTYPE)):
            found[(name, kind)] = evaluate(toolkit.get_backend(name), functions, kind, params, state, x, y, keys)
    rows = compare_runs(found, backends, dtype, list(params))
    return summarize({"schema": SCHEMA, "version": SCHEMA_VERSION, "rows": rows, "bound": bound,
                      "trajectories": trajectories}, backends, bound)


def compare_runs(found: Mapping[tuple[str, str], Mapping[str, Mapping[str, np.ndarray]]], backends: Sequence[str],
                 dtype: str, param_order: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of a localization: each quantity's error on each backend against the first backend's float64 run,
    relative to the quantity's own scale (its largest |reference value|).

    The own scale, not the model's, because Adam divides each gradient by its own running size: a small gradient's
    relative error moves its parameter as much as a large one's. A quantity that is zero in exact arithmetic (an
    attention key's bias gets no gradient: softmax ignores a shift of its logits) holds rounding noise alone, in
    float64 too: one whose scale is below :data:`UNRESOLVED` of the largest of its kind is marked ``unresolved``
    and never counted as past the bound.

    Args:
        found: ``{(backend, dtype): {"outputs": ..., "gradients": ...}}`` for every backend in ``dtype`` and in
            float64.
        backends: the backends, the reference's first.
        dtype: the computation dtype compared.
        param_order: the parameters in ``init``'s order.

    Returns:
        One row per quantity, in step order (the module's docstring gives the fields).
    """
    reference = found[(backends[0], REFERENCE_DTYPE)]
    outputs = reference["outputs"]
    largest = {"outputs": max((_scale(v) for v in outputs.values()), default=0.0),
               "gradients": max((_scale(v) for v in reference["gradients"].values()), default=0.0)}
    quantities = [("loss" if name == LOSS else "output", name, outputs[name])
                  for name in [*(n for n in outputs if n != LOSS), LOSS]]
    quantities += [("gradient", name, reference["gradients"][name]) for name in reversed(param_order)]
    rows = []
    for kind, name, value in quantities:
        part, scale = "gradients" if kind == "gradient" else "outputs", _scale(value)
        error = {b: relative_error(found[(b, dtype)][part][name], value, scale) for b in backends}
        exact = {b: relative_error(found[(b, REFERENCE_DTYPE)][part][name], value, scale) for b in backends}
        farther = max(backends, key=lambda b: error[b]) if len(backends) > 1 and len(set(error.values())) > 1 \
            else None
        rows.append({"kind": kind, "name": name, "shape": list(np.shape(value)), "scale": scale, "error": error,
                     "float64_error": exact, "unresolved": scale < UNRESOLVED * largest[part], "farther": farther})
    return rows


def summarize(results: dict[str, Any], backends: Sequence[str], bound: float) -> dict[str, Any]:
    """Add what a reader looks for first: the first row past ``bound`` (on any backend, and per backend), the
    row with the largest error, and per kind how many rows each backend is farther from the reference in.

    Args:
        results: with ``rows`` (:func:`compare_runs`).
        backends: the backends compared.
        bound: the relative error past which a quantity has parted.

    Returns:
        ``results`` with ``first_past``, ``first_past_by_backend``, ``worst`` and ``farther_counts``.
    """
    rows = results["rows"]
    judged = [row for row in rows if not row["unresolved"]]
    past = [row for row in judged if max(row["error"].values()) > bound]
    by_backend = {b: next((row["name"] for row in judged if row["error"][b] > bound), None) for b in backends}
    counts = {kind: {b: sum(1 for row in judged if row["kind"] == kind and row["farther"] == b) for b in backends}
              for kind in KINDS}
    worst = max(judged, key=lambda row: max(row["error"].values()), default=None)
    return {**results, "first_past": past[0] if past else None, "first_past_by_backend": by_backend,
            "worst": worst, "farther_counts": counts}
