"""Device parsing and selection."""

from __future__ import annotations

import pytest

import toolkit
from tests.conftest import MAX_DEVICES
from toolkit import Device, parse_device


@pytest.mark.parametrize("text, expected", [
    ("gpu:1", Device("gpu", 1)),
    ("GPU:1", Device("gpu", 1)),
    ("/gpu:1", Device("gpu", 1)),
    ("/device:GPU:1", Device("gpu", 1)),
    ("/job:localhost/replica:0/task:0/device:GPU:1", Device("gpu", 1)),
    ("cuda1", Device("gpu", 1)),
    ("cuda:1", Device("gpu", 1)),
    ("gpu1", Device("gpu", 1)),
    ("cuda", Device("gpu", 0)),
    ("/device:GPU", Device("gpu", 0)),
    ("cpu", Device("cpu", 0)),
    ("/cpu:0", Device("cpu", 0)),
    ("CPU:3", Device("cpu", 3)),
    (" /device:CPU:2 ", Device("cpu", 2)),
])
def test_parse_every_spelling(text, expected):
    assert parse_device(text) == expected


def test_device_is_a_hashable_value_printed_canonically():
    assert str(parse_device("/device:GPU:1")) == "gpu:1"
    assert parse_device("cuda1") == parse_device("gpu:1")
    assert len({parse_device("cuda1"), parse_device("/gpu:1"), Device("gpu", 1)}) == 1
    assert parse_device(Device("cpu", 2)) == Device("cpu", 2)


@pytest.mark.parametrize("text", ["", "tpu:0", "gpu:-1", "gpu:x", "/device:", "cpu0:1", "gpu::1", "cuda 1", 3, None])
def test_unparseable_device_lists_accepted_forms(text):
    with pytest.raises(ValueError) as info:
        parse_device(text)
    assert isinstance(info.value, toolkit.DeviceParseError)
    assert repr(text) in str(info.value) and "/device:GPU:1" in str(info.value) and "cuda1" in str(info.value)


def test_device_rejects_bad_fields():
    with pytest.raises(ValueError):
        Device("tpu", 0)
    with pytest.raises(ValueError):
        Device("gpu", -1)


def test_use_logical_devices_rejects_bad_counts():
    for bad in (0, -1, 2.0, "2", True):
        with pytest.raises(ValueError):
            toolkit.use_logical_devices(bad)


def test_list_devices_shows_the_logical_devices(backend):
    cpus = backend.list_devices("cpu")
    assert cpus == [Device("cpu", i) for i in range(MAX_DEVICES)]
    assert backend.list_devices() == cpus + backend.list_devices("gpu")
    assert all(isinstance(backend.native_name(d), str) for d in cpus)
    with pytest.raises(toolkit.DeviceSpecError):
        backend.list_devices("tpu")


@pytest.mark.parametrize("spec, expected", [
    ("all", [f"cpu:{i}" for i in range(MAX_DEVICES)]),
    (2, ["cpu:0", "cpu:1"]),
    ("cpu:0,cpu:2", ["cpu:0", "cpu:2"]),
    ("/device:CPU:3", ["cpu:3"]),
    (["cpu:1", Device("cpu", 0)], ["cpu:1", "cpu:0"]),
    (Device("cpu", 1), ["cpu:1"]),
])
def test_select_devices(backend, spec, expected):
    if backend.list_devices("gpu"):
        pytest.skip("expectations are written for a machine without GPUs")
    assert [str(d) for d in backend.select_devices(spec)] == expected


@pytest.mark.parametrize("spec, error, words", [
    ("gpu:0", toolkit.DeviceNotFoundError, "has no device gpu:0; it sees: cpu:0, cpu:1"),
    ("cuda7", toolkit.DeviceNotFoundError, "has no device gpu:7"),
    ("cpu:9", toolkit.DeviceNotFoundError, "has no device cpu:9"),
    (MAX_DEVICES + 1, toolkit.DeviceNotFoundError, f"{MAX_DEVICES + 1} devices asked for"),
    (0, toolkit.DeviceSpecError, "must be >= 1"),
    ([], toolkit.DeviceSpecError, "no devices"),
    ("cpu:0,cpu:0", toolkit.DeviceSpecError, "named more than once"),
    (["cpu:1", "/cpu:1"], toolkit.DeviceSpecError, "named more than once"),
    ("cpu:0,tpu:1", toolkit.DeviceParseError, "cannot parse device 'tpu:1'"),
    (2.5, toolkit.DeviceSpecError, "cannot select devices from 2.5"),
])
def test_select_devices_errors(backend, spec, error, words):
    if backend.list_devices("gpu"):
        pytest.skip("expectations are written for a machine without GPUs")
    with pytest.raises(error) as info:
        backend.select_devices(spec)
    assert words in str(info.value)
