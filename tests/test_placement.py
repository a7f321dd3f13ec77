"""Variables, mirrored variables, split, average and make_parallel on each backend."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from toolkit import Device


def test_variable_lives_on_its_device(backend):
    var = backend.variable(np.arange(6.0).reshape(2, 3), "/device:CPU:1", name="v")
    assert var.device == Device("cpu", 1)
    assert backend.device_of(var.value) == Device("cpu", 1)
    assert (var.shape, var.dtype, var.name) == ((2, 3), "float64", "v")
    np.testing.assert_array_equal(var.numpy(), np.arange(6.0).reshape(2, 3))
    var.assign(np.ones((2, 3)))
    np.testing.assert_array_equal(var.numpy(), np.ones((2, 3)))
    assert backend.device_of(var.value) == Device("cpu", 1)
    var.assign([[1, 2, 3], [4, 5, 6]])  # a list has no dtype: converted to the variable's
    assert var.numpy().dtype == np.float64


def test_variable_assign_checks_shape_and_dtype_and_keeps_value(backend):
    var = backend.variable(np.zeros(3, np.float32), "cpu:2")
    with pytest.raises(toolkit.ShapeError, match=r"expected shape \(3,\), got \(4,\)"):
        var.assign(np.ones(4, np.float32))
    with pytest.raises(toolkit.DTypeError, match="expected dtype float32, got float64"):
        var.assign(np.ones(3))
    np.testing.assert_array_equal(var.numpy(), np.zeros(3, np.float32))


def test_variable_on_missing_device(backend):
    with pytest.raises(toolkit.DeviceNotFoundError):
        backend.variable(np.zeros(2), "gpu:3")


def test_mirrored_variable_updates_every_replica(backend, n_devices):
    mirrored = backend.mirrored_variable(np.zeros((2, 2)), n_devices, name="m")
    assert mirrored.devices == tuple(Device("cpu", i) for i in range(n_devices))
    assert [backend.device_of(r.value) for r in mirrored.replicas] == list(mirrored.devices)
    mirrored.assign(np.full((2, 2), 3.0))
    for replica in mirrored.replicas:
        np.testing.assert_array_equal(replica.numpy(), np.full((2, 2), 3.0))
    with pytest.raises(toolkit.ShapeError):
        mirrored.assign(np.zeros(3))
    for replica in mirrored.replicas:  # a refused assign changes no replica
        np.testing.assert_array_equal(replica.numpy(), np.full((2, 2), 3.0))


@pytest.mark.parametrize("rows, weights", [(10, None), (7, None), (2, None), (9, [2, 1, 1, 1])])
def test_split_places_each_shard(backend, rows, weights):
    devices = backend.select_devices(4)
    array = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
    shards = backend.split(array, devices, weights=weights)
    sizes = toolkit.split_sizes(rows, 4, weights)
    assert [len(backend.to_numpy(s)) for s in shards] == sizes
    assert [backend.device_of(s) for s in shards] == devices
    np.testing.assert_array_equal(np.concatenate([backend.to_numpy(s) for s in shards]), array)


def test_average_is_weighted_and_placed(backend, n_devices):
    devices = backend.select_devices(n_devices)
    rng = np.random.default_rng(0)
    trees = [{"a": rng.normal(size=(3, 2)), "b": [rng.normal(size=4)]} for _ in devices]
    placed = [{"a": backend.place(t["a"], d), "b": [backend.place(t["b"][0], d)]} for t, d in zip(trees, devices)]
    weights = list(range(1, n_devices + 1))
    result = backend.average(placed, weights=weights, device=devices[-1])
    expected_a = sum(w * t["a"] for w, t in zip(weights, trees)) / sum(weights)
    np.testing.assert_allclose(backend.to_numpy(result["a"]), expected_a, rtol=1e-14)
    assert backend.device_of(result["a"]) == devices[-1]
    assert backend.device_of(result["b"][0]) == devices[-1]
    plain = backend.average(placed)
    np.testing.assert_allclose(backend.to_numpy(plain["b"][0]), np.mean([t["b"][0] for t in trees], axis=0),
                               rtol=1e-14)
    assert backend.device_of(plain["a"]) == devices[0]


def test_average_skips_zero_weights_and_rejects_bad_ones(backend):
    devices = backend.select_devices(2)
    values = [backend.place(np.array([1.0, 3.0]), devices[0]), backend.place(np.array([np.nan, np.nan]), devices[1])]
    np.testing.assert_array_equal(backend.to_numpy(backend.average(values, weights=[5, 0])), [1.0, 3.0])
    for bad in ([1], [0, 0], [1, -1], [1, float("nan")]):
        with pytest.raises(ValueError, match="one finite weight >= 0 per value"):
            backend.average(values, weights=bad)
    with pytest.raises(ValueError):
        backend.average([])


def test_make_parallel_splits_runs_and_concatenates(backend, n_devices):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(11, 3)), rng.normal(size=(11, 3))

    def fn(ops, a, b):
        return ops.tanh(a) * 2.0 + b, ops.sum(ops.square(a), axis=1)

    out, norms = backend.make_parallel(fn, n_devices, a=a, b=b)
    np.testing.assert_allclose(backend.to_numpy(out), np.tanh(a) * 2.0 + b, rtol=1e-12)
    np.testing.assert_allclose(backend.to_numpy(norms), np.sum(a * a, axis=1), rtol=1e-12)
    assert backend.device_of(out) == Device("cpu", 0)


def test_make_parallel_errors(backend):
    with pytest.raises(ValueError, match="share a non-empty axis 0"):
        backend.make_parallel(lambda ops, a, b: a + b, 2, a=np.ones((3, 1)), b=np.ones((4, 1)))
    with pytest.raises(ValueError, match="at least one keyword input"):
        backend.make_parallel(lambda ops: 0, 2)
