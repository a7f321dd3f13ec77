"""Every example runs on every backend on 1 and 2 devices, and is checked for its result, not just its exit status.

They run in this process: an example run as a script, in a process of its own without the tests' XLA_FLAGS, is what
each usage line of the examples' docstrings checks (tests/test_readme.py, in the same sessions), and that a program
training on any backend writes nothing to stderr is tests/test_import.py's (a process here too cost about 8 s of CPU
on TensorFlow for nothing more)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import THEANO, needs_all_backends, needs_backend

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))


def run(name, backend_name, devices, *extra):
    module = importlib.import_module(name)
    return module.main(["--backend", backend_name, "--devices", str(devices), *extra])


@pytest.fixture(params=[1, 2], ids=lambda n: f"{n}dev")
def devices(request):
    return request.param


def test_vector_add(backend_name, devices):
    result = run("vector_add", backend_name, devices)
    assert result["shape"] == [1000, 100] and result["max_abs_error"] == 0.0
    assert result["devices"] == [f"cpu:{i}" for i in range(devices)] and result["result_device"] == "cpu:0"


def test_polynomial_fit(backend_name, devices):
    result = run("polynomial_fit", backend_name, devices, "--steps", "300")
    np.testing.assert_allclose(result["coefficients"], [5, 0, 3], atol=0.05)


def test_mlp_classifier(backend_name, devices):
    result = run("mlp_classifier", backend_name, devices, "--epochs", "2", "--hidden", "32")
    assert result["test_accuracy"] > 0.6  # chance is 0.1


def test_mlp_classifier_reads_an_mnist_file(backend_name, tmp_path):
    rng = np.random.default_rng(0)  # an mnist.npz-shaped file: images whose class is their brightest quadrant
    def images(n):
        labels = rng.integers(0, 4, n)
        x = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, label in enumerate(labels):
            r, c = divmod(int(label), 2)
            x[i, 14 * r:14 * r + 14, 14 * c:14 * c + 14] += 150
        return x, labels.astype(np.uint8)
    (x_train, y_train), (x_test, y_test) = images(512), images(128)
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    result = run("mlp_classifier", backend_name, 2, "--data", str(path), "--epochs", "2", "--hidden", "16")
    assert result["data"] == str(path) and result["test_accuracy"] > 0.9


@pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                    reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("backend_name", [pytest.param("tensorflow", marks=needs_backend("tensorflow")),
                                          pytest.param(THEANO, marks=needs_all_backends)])
@pytest.mark.parametrize("name, options", [("keras_seed_mlp", ()), ("keras_convnet", ("--filters", "8"))])
def test_keras_models(backend_name, devices, name, options):
    result = run(name, backend_name, devices, "--epochs", "3", *options)
    assert result["test_accuracy"] > 0.6  # chance is 0.1; the MLP reaches 0.95, the convnet 0.9 at 32 filters
    assert abs(result["keras_test_accuracy"] - result["test_accuracy"]) <= 1 / 360  # one digit of the test set
    assert result["keras_max_abs_diff"] < 1e-5  # float32


def test_conv_classifier(backend_name, devices):
    result = run("conv_classifier", backend_name, devices, "--epochs", "3", "--filters", "16")
    assert result["test_accuracy"] > 0.3  # chance is 0.1; 8 full epochs reach about 0.87


def test_shared_lstm_model_parallel(backend_name, devices):
    result = run("shared_lstm_model_parallel", backend_name, devices, "--units", "8", "--train-steps", "40")
    assert result["test_accuracy"] > 0.7  # chance is 0.5
    assert result["part_devices"] == {"encode_a": "cpu:0", "encode_b": f"cpu:{devices - 1}", "classify": "cpu:0"}
    assert result["param_devices"]["lstm/kernel"] == "cpu:0"


@pytest.mark.parametrize("spelling, expected", [("/cpu:1", "cpu:1"), ("/device:CPU:1", "cpu:1"), ("cpu", "cpu:0")])
def test_shared_variable_on_device(backend_name, spelling, expected, capsys):
    result = run("shared_variable_on_device", backend_name, 2, "--device", spelling, "--json")
    assert result["variable_device"] == expected and result["result_device"] == expected and result["correct"]
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == result  # --json: the result, one line


def test_shared_variable_on_a_missing_gpu_says_so(backend_name):
    with pytest.raises(SystemExit, match="has no device gpu:1"):
        run("shared_variable_on_device", backend_name, 2, "--device", "cuda1")


def test_towers_then_cpu_merge(backend_name, devices):
    result = run("towers_then_cpu_merge", backend_name, devices, "--epochs", "2", "--hidden", "16")
    assert result["test_accuracy"] > 0.6
    assert result["part_devices"] == {"left_tower": "cpu:0", "right_tower": f"cpu:{devices - 1}", "merge": "cpu:0"}


@needs_all_backends
def test_the_demo_prints_and_writes_one_run_with_its_options(tmp_path, capsys):
    import digits_data_parallel

    summary = digits_data_parallel.main(["--devices", "4", "--dtype", "float64", "--epochs", "2", "--batch", "256",
                                         "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["config"]["dtype"] == "float64" and results["config"]["devices"] == [4]
    assert {(r["backend"], r["devices"]) for r in results["runs"]} == {("tensorflow", 4), (THEANO, 4)}
    for run in results["runs"]:  # the epoch losses printed are those of the steps written: 6 steps per epoch
        losses = run["losses"]
        assert len(losses) == 12 and summary["accuracy"][run["backend"]] == run["accuracy"]
        np.testing.assert_allclose(summary["epoch_losses"][run["backend"]], [np.mean(losses[:6]), np.mean(losses[6:])])
    assert summary["max_param_difference"] <= 1e-10
    printed = capsys.readouterr().out
    assert "mean training loss per epoch" in printed and f"wrote {tmp_path / 'results.json'}" in printed
