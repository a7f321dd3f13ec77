"""The gradient of every differentiable public op of ``ops``, in one place: the table in ``tests/gradient_cases.py``
holds a small float64 case and a NumPy reference per op, and here

- every public op (the op list of ``toolkit/ops/table.py``) is in the table, or named with its reason among the
  ops without a gradient to check, or among those checked in their own module: a new op without an entry fails;
- each op's float64 gradient, on every backend, equals the central difference of its NumPy reference;
- TensorFlow and the Theano-family backend give the same gradients;
- the same gradients and the same step come out on 1 device and on MAX_DEVICES over an uneven batch, for one entry
  per way an op is built (DEVICE_ENTRIES).

One compiled gradient per table (an op group, or the groups of one module's parts) and backend: a table's ops run
side by side, each on its own copies of its inputs, their outputs flattened and joined, and the sum of the outputs
times random weights is differentiated once. Each
entry is then checked on its own (its inputs' gradients against the central difference of its own reference), so a
wrong gradient is named by its entry.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import toolkit
from tests.conftest import MAX_DEVICES, PARITY, needs_all_backends
from tests.gradient_cases import CHECKED_ELSEWHERE, DEVICE_ENTRIES, INPUTS, NON_DIFFERENTIABLE, TABLES
from tests.op_checks import DIFFERENCE_STEP, GRADIENT_ATOL, GRADIENT_RTOL, gradients
from toolkit.ops.table import GROUPS, op_names

#: The tables that have entries (one compiled gradient each per backend).
TABLE_NAMES = [name for name, (_, table) in TABLES.items() if table]
#: TensorFlow and the Theano family differentiate the same graphs with other kernels and summation orders: a few
#: roundings of float64 apart, relative (LAPACK's and XLA's decompositions, measured up to 1e-13 here).
PARITY_RTOL, PARITY_ATOL = 1e-10, 1e-12
#: The same gradient on 1 and on MAX_DEVICES devices: the shards' gradients are summed in another order, and a step
#: of learning rate 1 rounds the parameters (of size ~1) once.
DEVICES_RTOL, DEVICES_ATOL = 1e-11, 1e-12


def _op(key: str) -> str:
    return key.split(".")[0]


def _flat(value, join, ravel):
    """A result (an array, or a tuple or list of arrays: split, svd) as one flat vector."""
    if isinstance(value, (tuple, list)):
        return join([ravel(part) for part in value])
    return ravel(value)


def _numpy_flat(value) -> np.ndarray:
    return _flat(value, np.concatenate, lambda part: np.ravel(np.asarray(part, np.float64)))


def _run(key: str, ops, arrays):
    call = _entry(key)[1]
    return call(ops, *arrays) if call else getattr(ops, _op(key))(*arrays)


@functools.cache
def _entries() -> dict:
    return {key: entry for _, table in TABLES.values() for key, entry in table.items()}


def _entry(key: str):
    return _entries()[key]


def _inputs(keys) -> dict[str, np.ndarray]:
    """Each entry's own copy of each input, as ``"<entry>.<position>"``."""
    return {f"{key}.{i}": INPUTS[name].copy() for key in keys for i, name in enumerate(_entry(key)[0])}


def _reference(key: str, arrays) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return _numpy_flat(_entry(key)[2](*arrays))


def _joined(keys):
    """The toolkit function of a group of entries: their outputs flattened and joined."""
    def fn(ops, **t):
        parts = [_flat(_run(key, ops, [t[f"{key}.{i}"] for i in range(len(_entry(key)[0]))]),
                       lambda ps: ops.concatenate(ps, axis=0), lambda p: ops.reshape(p, (-1,))) for key in keys]
        return ops.concatenate(parts, axis=0)
    return fn


def _sizes(keys) -> list[int]:
    return [_reference(key, [INPUTS[n] for n in _entry(key)[0]]).size for key in keys]


def layer_weights(keys) -> np.ndarray:
    return np.random.default_rng(3).normal(size=sum(_sizes(keys)))


@functools.cache
def _table_gradients(backend_name: str, table: str) -> dict[str, np.ndarray]:
    """Every entry's input gradients in a table on a backend: one compiled gradient, computed once per process."""
    keys = list(TABLES[table][1])
    return gradients(backend_name, _joined(keys), _inputs(keys), layer_weights(keys))


def test_every_public_op_has_a_gradient_entry_or_a_reason():
    """A new op fails here until it has an entry in a table (one that holds its group), a reason among the ops
    without a gradient, or the module that checks its gradient; and no entry names an op that is not public."""
    group_of = {name: cls.__name__ for _, cls in GROUPS for name in op_names(cls)}
    entries = {_op(key): groups for groups, table in TABLES.values() for key in table}
    listed = set(entries) | set(NON_DIFFERENTIABLE) | set(CHECKED_ELSEWHERE)
    assert not sorted(set(group_of) - listed), "ops without an entry or a reason"
    assert not sorted(listed - set(group_of)), "entries of ops that are not public ops"
    assert not sorted(set(entries) & (set(NON_DIFFERENTIABLE) | set(CHECKED_ELSEWHERE))), "listed twice"
    misplaced = {op: groups for op, groups in entries.items() if group_of[op] not in groups}
    assert not misplaced, "entries in a table that does not hold their group"
    tabled = [group for groups, _ in TABLES.values() for group in groups]
    assert sorted(tabled) == sorted(cls.__name__ for _, cls in GROUPS), "every group in exactly one table"
    assert all(reason for reason in {**NON_DIFFERENTIABLE, **CHECKED_ELSEWHERE}.values())


@pytest.mark.parametrize("table", TABLE_NAMES)
def test_gradients_equal_central_differences(backend_name, table):
    """Each entry's float64 gradient, in a random direction, equals the central difference of its NumPy reference
    (weighted by the entry's own slice of the weights)."""
    keys = list(TABLES[table][1])
    grads = _table_gradients(backend_name, table)
    weights, rng, start, failures = layer_weights(keys), np.random.default_rng(5), 0, []
    for key, size in zip(keys, _sizes(keys)):
        w, start = weights[start:start + size], start + size
        names = _entry(key)[0]
        arrays = [INPUTS[n] for n in names]
        direction = [rng.normal(size=a.shape) for a in arrays]
        moved = [_reference(key, [a + sign * DIFFERENCE_STEP * d for a, d in zip(arrays, direction)])
                 for sign in (1.0, -1.0)]
        numeric = float(np.sum((moved[0] - moved[1]) * w)) / (2 * DIFFERENCE_STEP)
        analytic = sum(float(np.sum(grads[f"{key}.{i}"] * d)) for i, d in enumerate(direction))
        if not abs(analytic - numeric) <= GRADIENT_ATOL + GRADIENT_RTOL * abs(numeric):
            failures.append(f"ops.{key}: analytic {analytic!r}, central difference {numeric!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.parity
@needs_all_backends
@pytest.mark.parametrize("table", TABLE_NAMES)
def test_gradients_agree_across_backends(table):
    found = [_table_gradients(name, table) for name in PARITY]
    failures = []
    for key in found[0]:
        if not np.allclose(found[0][key], found[1][key], rtol=PARITY_RTOL, atol=PARITY_ATOL):
            failures.append(f"ops.{key.rsplit('.', 1)[0]}: largest difference "
                            f"{np.max(np.abs(found[0][key] - found[1][key])):.3g}")
    assert not failures, "\n".join(failures)


def _data_parallel_model(keys):
    """Every entry's ops on the model's parameters, their joined outputs weighing each example's features: the loss
    of an example is ``(sum(tanh(x @ c) * ops) - y)**2``, so every op's gradient reaches every example's. It reads
    only its own row (``rows_independent``), so the Theano family's step pads the uneven shards and runs as one
    mapped program over the devices (else it composes the step per device, compiling the gradient per shard size
    and once more on each device: 40% more CPU on Aesara)."""
    fn, inputs = _joined(keys), _inputs(keys)
    size = sum(_sizes(keys))
    spread = np.random.default_rng(9).normal(size=(3, size)) / np.sqrt(size)

    def forward(ops, p, x):
        return ops.sum(ops.tanh(ops.matmul(x, spread)) * fn(ops, **p)[None, :], axis=1, keepdims=True)

    return toolkit.Model(lambda rng: {n: v.copy() for n, v in inputs.items()}, forward,
                         lambda ops, out, y: ops.mean(ops.square(out - y), axis=1), rows_independent=True)


def test_a_step_on_several_devices_moves_by_the_one_device_gradients(backend_name):
    """The fused data-parallel step on MAX_DEVICES over a batch of 5 (uneven shards), SGD with learning rate 1, moves
    the parameters by exactly the gradients on 1 device: the same gradients and the same step, through the ops of
    DEVICE_ENTRIES. (Composing the gradients per device is the single-device function run on each: not repeated.)"""
    model = _data_parallel_model(list(DEVICE_ENTRIES))
    x, y = np.random.default_rng(6).normal(size=(5, 3)), np.ones((5, 1))
    expected = toolkit.DataParallel(model, backend_name, 1, toolkit.optim.SGD(1.0), dtype="float64").gradients(x, y)
    trainer = toolkit.DataParallel(model, backend_name, MAX_DEVICES, toolkit.optim.SGD(1.0), dtype="float64")
    before = trainer.params()
    trainer.step(x, y)
    after = trainer.params()
    failures = [f"{key}: largest difference {np.max(np.abs(before[key] - after[key] - expected[key])):.3g}"
                for key in expected
                if not np.allclose(before[key] - after[key], expected[key], rtol=DEVICES_RTOL, atol=DEVICES_ATOL)]
    assert not failures, f"the step on {MAX_DEVICES} devices differs from the gradients on 1:\n" + "\n".join(failures)
    assert all(np.all(np.isfinite(g)) and np.any(g != 0) for g in expected.values())


def _shard_statistic(ops, p, x):
    """A loop from a constant whose steps add the shard's values (a statistic of the shard, as batch statistics are):
    in a step traced once for all replicas, its carry becomes one value per replica after the first step."""
    h = ops.matmul(x, p["w"])
    total, seen = ops.scan(lambda c, row: (c + ops.sum(row * row), c), np.zeros(()), ops.transpose(h))
    return (total + ops.sum(seen)) * h[:, :1]


def test_a_loop_from_constants_runs_in_a_step_on_several_devices(backend_name):
    """The fused step on MAX_DEVICES moves the parameters by the gradients composed device by device (each shard's
    statistic its own), with ops.scan carrying a constant that meets each replica's values (it failed to trace on
    TensorFlow: the loop's carry was rebuilt as one tensor where each replica had its own)."""
    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(3, 4))}, _shard_statistic,
                          lambda ops, out, y: ops.mean(ops.square(out - y), axis=1))
    x, y = np.random.default_rng(1).normal(size=(5, 3)), np.zeros((5, 1))
    trainer = toolkit.DataParallel(model, backend_name, MAX_DEVICES, toolkit.optim.SGD(1.0), dtype="float64")
    composed, before = trainer.gradients(x, y)["w"], trainer.params()["w"]
    trainer.step(x, y)
    np.testing.assert_allclose(before - trainer.params()["w"], composed, rtol=DEVICES_RTOL, atol=DEVICES_ATOL)
