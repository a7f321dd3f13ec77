"""multigpu bench: the natives train exactly like the toolkit, every candidate and ratio is reported, bad requests
are one line. Timings are printed by the command, never asserted (the machines are shared and noisy)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import INSTALLED
from tests.helpers import max_abs_diff
from toolkit.backend.registry import REGISTRY
from toolkit.command.bench import markdown
from toolkit.command.bench import run as bench_run
from toolkit.command.bench.measure import Batches, input_kinds, make_batches
from toolkit.command.bench.natives import natives
from toolkit.command.bench.schema import SCHEMA, SCHEMA_VERSION
from toolkit.command.bench.statistics import cross_backend, fractions, inputs, ratios
from toolkit.command.bench.targets import (
    CROSS_BACKEND_BOUNDS,
    DISPATCH_SCALING_BOUND,
    INPUT_THROUGHPUT_TARGET,
    PEAK_FRACTION_TARGET,
    SCALING_BOUND,
)
from toolkit.command.main import main
from toolkit.tolerances import FLOAT64_ATOL
from toolkit.training.trainer import LABEL_DTYPE

#: The candidates each backend's bench runs at one device and at more.
CANDIDATES = {
    "tensorflow": ({"toolkit", "mirrored-ctl", "keras-fit", "function", "function-xla", "function-checked"},
                   {"toolkit", "mirrored-ctl", "keras-fit"}),
    "aesara": ({"toolkit", "toolkit-c", "function-jax", "function-c", "function-jax-checked", "function-c-checked",
                "jax-jit"},
               {"toolkit"}),
}
CANDIDATES["pytensor"] = CANDIDATES["aesara"]  # the same Theano-family natives
#: The toolkit's fit fed from arrays, a generator and (where TensorFlow is installed) tf.data, at every device count.
CANDIDATES = {name: tuple(kinds | set(input_kinds()) for kinds in both) for name, both in CANDIDATES.items()}
#: The tests' matmul peak, in the dtype of their runs: a 64x64 matmul takes microseconds. The tests check the peak's
#: path and its report, not the machine; the command's default (2048) costs seconds of CPU per library.
PEAK_SIZE, PEAK_DTYPE = 64, "float64"
#: The peak worker's finished process by (backends, dtype, size), what :func:`measure_peak` reads of its request.
_PEAKS: dict[tuple, subprocess.CompletedProcess] = {}


class _PeakOnce:
    """``subprocess`` as :mod:`toolkit.command.bench.run` sees it, but the peak worker runs once per backends, dtype
    and size in a test process, and later bench commands get its output. Every bench command starts a process for the
    peak first (about 9 s of CPU on TensorFlow, most of it the import); one test checks what that process measures,
    the others the models' processes, which still run each time."""

    def __getattr__(self, name):
        return getattr(subprocess, name)

    def run(self, command, **kwargs):
        request = json.loads(command[-1])
        if not request.get("peak"):
            return subprocess.run(command, **kwargs)
        key = (tuple(request["backends"]), request["dtype"], request["peak_size"])
        if key not in _PEAKS:
            _PEAKS[key] = subprocess.run(command, **kwargs)
        return _PEAKS[key]


@pytest.fixture
def peak_once(monkeypatch):
    """The bench command's peak measured once (see :class:`_PeakOnce`); pass ``--dtype PEAK_DTYPE --peak-size
    PEAK_SIZE`` to share it."""
    monkeypatch.setattr(bench_run, "subprocess", _PeakOnce())


def _run(name, rounds, devices, candidate, model="digits-mlp", compute_bound=False):
    rounds = [rounds] * 7 if isinstance(rounds, float) else rounds
    return {"model": model, "backend": name, "candidate": candidate, "devices": devices,
            "median_ms": float(np.median(rounds)), "round_ms": rounds, "label": candidate,
            "compute_bound": compute_bound}


NOISY = [1.0, 1.12, 0.93, 1.2, 0.9, 1.08, 0.97]  # median 1.0, but rounds as far as 1.2


def test_ratios_attach_the_targets_and_a_verdict_with_its_interval():
    runs = [_run("tensorflow", 2.0, 1, "toolkit"), _run("tensorflow", 2.0, 1, "mirrored-ctl"),
            _run("tensorflow", 3.0, 4, "toolkit"), _run("tensorflow", 2.5, 4, "mirrored-ctl"),
            _run("aesara", NOISY, 1, "toolkit"), _run("aesara", 1.0, 1, "function-jax"),
            _run("aesara", 1.2, 4, "toolkit"), _run("aesara", 1.0, 4, "function-jax")]
    runs += [_run("aesara", 1.1, 1, "jax-jit"), _run("aesara", 1.0, 1, "toolkit", "resnet-bench", True),
             _run("aesara", 0.8, 1, "jax-jit", "resnet-bench", True),
             _run("aesara", 1.1, 4, "toolkit", "resnet-bench", True)]
    every = ratios(runs)
    found = {(r["backend"], r["candidate"], r["baseline"], r["devices"]): r for r in every
             if r["model"] == "digits-mlp"}
    exact = found[("tensorflow", "toolkit", "mirrored-ctl", 1)]
    assert (exact["ratio"], exact["low"], exact["high"], exact["verdict"]) == (1.0, 1.0, 1.0, "met")
    assert found[("tensorflow", "toolkit", "mirrored-ctl", 4)]["verdict"] == "not met"  # 3.0 / 2.5 > 1.05
    noisy = found[("aesara", "toolkit", "function-jax", 1)]  # the median meets 1.05, the rounds do not settle it
    assert noisy["ratio"] == 1.0 and noisy["low"] < 1.0 < 1.05 < noisy["high"] and noisy["verdict"] == "within noise"
    assert found[("aesara", "toolkit", "function-jax", 4)]["target"] is None  # one-device baseline only
    assert found[("aesara", "toolkit", "function-jax", 4)]["verdict"] is None
    scaling = found[("aesara", "toolkit", "toolkit", 4)]
    assert scaling["ratio"] == pytest.approx(1.2) and scaling["target"] == DISPATCH_SCALING_BOUND
    assert found[("tensorflow", "toolkit", "toolkit", 4)]["verdict"] == "not met"  # 3.0 / 2.0 > 1.3
    assert found[("aesara", "toolkit", "jax-jit", 1)]["target"] is None  # jax.jit's 1.15: compute-bound models only
    compute = {(r["candidate"], r["baseline"], r["devices"]): r for r in every if r["model"] == "resnet-bench"}
    assert set(compute) == {("toolkit", "jax-jit", 1), ("toolkit", "toolkit", 4)}  # models never mix
    assert compute[("toolkit", "jax-jit", 1)]["target"] == 1.15 and compute[("toolkit", "jax-jit", 1)]["verdict"] == \
        "not met"  # 1.0 / 0.8
    assert compute[("toolkit", "toolkit", 4)]["target"] == SCALING_BOUND  # 1.1 <= 1.15
    assert compute[("toolkit", "toolkit", 4)]["verdict"] == "met"
    assert ("tensorflow", "mirrored-ctl", "mirrored-ctl", 4) in found and \
        found[("tensorflow", "mirrored-ctl", "mirrored-ctl", 4)]["target"] is None  # context, not a target


def test_cross_backend_ratios_divide_by_the_fastest_backends_toolkit_step_in_the_same_rounds():
    slow = [2.0 * r for r in NOISY]  # twice TensorFlow's in every round: the paired interval is exactly 2
    runs = [_run("tensorflow", NOISY, 1, "toolkit", "resnet-bench", True),
            _run("tensorflow", 0.5, 1, "function", "resnet-bench", True),  # a native: not compared across
            _run("aesara", slow, 1, "toolkit", "resnet-bench", True),
            _run("aesara", [2.5 * r for r in NOISY], 1, "toolkit-c", "resnet-bench", True),
            _run("aesara", 1.0, 4, "toolkit", "resnet-bench", True),  # alone at 4 devices: nothing to compare
            _run("tensorflow", 1.0, 1, "toolkit"), _run("aesara", 0.9, 1, "toolkit")]  # dispatch-bound
    for run in runs:
        run["peak_fraction"] = 0.5
    found = {(c["model"], c["backend"], c["candidate"]): c for c in cross_backend(runs)}
    assert set(found) == {("resnet-bench", "tensorflow", "toolkit"), ("resnet-bench", "aesara", "toolkit"),
                          ("resnet-bench", "aesara", "toolkit-c"), ("digits-mlp", "tensorflow", "toolkit"),
                          ("digits-mlp", "aesara", "toolkit")}
    jax_linker, c_linker = found[("resnet-bench", "aesara", "toolkit")], found[("resnet-bench", "aesara", "toolkit-c")]
    assert (jax_linker["fastest"], jax_linker["ratio"], jax_linker["low"], jax_linker["high"]) == \
        ("tensorflow", 2.0, 2.0, 2.0)
    assert jax_linker["target"] == CROSS_BACKEND_BOUNDS["toolkit"] and jax_linker["verdict"] == "not met"
    assert c_linker["ratio"] == pytest.approx(2.5) and c_linker["target"] == CROSS_BACKEND_BOUNDS["toolkit-c"]
    fastest = found[("resnet-bench", "tensorflow", "toolkit")]
    assert (fastest["ratio"], fastest["verdict"]) == (1.0, "met")
    mlp = found[("digits-mlp", "tensorflow", "toolkit")]  # Aesara is the faster there; no target off compute-bound
    assert mlp["fastest"] == "aesara" and mlp["ratio"] == pytest.approx(1 / 0.9) and mlp["target"] is None
    results = {"config": {"lr": 0.05, "dtype": "float32", "rounds": 7}, "runs": [], "ratios": [],
               "machine": {"cpu": "x", "cores": 2, "python": "3", "versions": {}},
               "peak": {"gflops": {"jax": 100.0}, "dtype": "float32", "size": 64},
               "cross_backend": list(found.values())}
    row = "| resnet-bench, 1: aesara, toolkit DataParallel | 2.0 | 2.00 (2.00-2.00) over tensorflow | <= 1.0: not met"
    assert row in markdown(results)


def test_fractions_of_peak_judge_the_faster_backend_on_compute_bound_models():
    runs = [_run("tensorflow", 10.0, 1, "toolkit", "resnet-bench", True),
            _run("aesara", NOISY, 1, "toolkit", "resnet-bench", True),
            _run("aesara", 1.0, 2, "toolkit", "resnet-bench", True),  # not one device: not a fraction
            _run("aesara", 1.0, 1, "toolkit")]  # dispatch-bound: not a fraction
    for run in runs:
        run["gflop_per_step"] = 0.1  # GFLOP: 100 GFLOP/s at 1 ms
        run["gflops"] = run["gflop_per_step"] / (run["median_ms"] / 1e3)
        run["peak_fraction"] = run["gflops"] / 150.0
        run["products_alone_gflops"] = None
    runs[0]["products_alone_gflops"] = 125.0  # TensorFlow's products alone: 0.8 ms, 10 GFLOP/s of them in the step
    found = {f["backend"]: f for f in fractions(runs, best_peak_gflops=150.0)}
    assert set(found) == {"tensorflow", "aesara"}
    faster, slower = found["aesara"], found["tensorflow"]
    assert faster["fraction"] == pytest.approx(100 / 150) and faster["low"] < faster["fraction"] < faster["high"]
    assert faster["target"] == PEAK_FRACTION_TARGET and faster["verdict"] == "within noise"  # rounds reach 0.56
    assert slower["target"] is None and slower["verdict"] is None and slower["fraction"] == pytest.approx(10 / 150)
    assert slower["products_alone_fraction"] == pytest.approx(125 / 150)
    assert slower["of_products_alone"] == pytest.approx(10 / 125)
    assert faster["products_alone_fraction"] is None and faster["of_products_alone"] is None


def test_products_alone_run_every_product_and_both_of_its_gradients(backend_name):
    """The call that times a step's matmuls and convolutions alone computes, for each, the gradients for both
    operands: every product is linear in each operand, so <cotangent, output> = <grad_a, a> = <grad_b, b>, and a
    matmul's output is NumPy's."""

    import toolkit
    from toolkit.command.flops import forward_products, products_alone

    model = toolkit.models.resnet((8, 8, 3), width=4, blocks=(1, 1))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(4, 8, 8, 3)), rng.integers(0, 10, size=4)
    trainer = toolkit.DataParallel(model, backend_name, 1, toolkit.optim.SGD(0.1), dtype="float64")
    found = forward_products(model, trainer.backend, trainer.params(), trainer.state(), x, y, "float64")
    assert [p.kind for p in found] == ["conv"] * 6 + ["matmul"]  # stem, 2 + 2 + shortcut, head
    assert found[3].options == (("strides", 2), ("padding", "same"), ("dilation_rate", 1))
    native = natives(backend_name)
    seen = {}

    def make(products, operands, cotangents, dtype):
        run = native.products(products, operands, cotangents, dtype)
        seen.update(operands=operands, cotangents=cotangents, run=run)
        return run

    assert products_alone(found, make, "float64", repeats=1) > 0
    outputs, grads = seen["run"]()  # the forward outputs too: unreturned, the compiler would drop those products
    for product, (a, b), c, out, (ga, gb) in zip(found, seen["operands"], seen["cotangents"], outputs, grads):
        out, ga, gb = np.asarray(out), np.asarray(ga), np.asarray(gb)
        assert (ga.shape, gb.shape, out.shape) == (a.shape, b.shape, c.shape)
        np.testing.assert_allclose(np.sum(ga * a), np.sum(gb * b), rtol=1e-10)
        np.testing.assert_allclose(np.sum(ga * a), np.sum(c * out), rtol=1e-10)
        if product.kind == "matmul":
            np.testing.assert_allclose(out, a @ b, rtol=1e-10)


def test_the_theano_familys_products_alone_convolve_as_its_step(backend_name, monkeypatch):
    """The Theano family's products alone are timed with the convolutions its step runs (oneDNN's float32 passes
    where they are installed), not XLA's: a share of the peak and a step-over-products ratio that compare like with
    like. Their values are plain JAX's (XLA's) within float32 rounding."""
    if backend_name == "tensorflow":
        pytest.skip("TensorFlow's products are its own kernels, as its step's")
    import toolkit
    from toolkit.command.bench.natives import plain_jax
    from toolkit.command.flops import Product

    toolkit.get_backend(backend_name)  # the engine's package, whose modules lower the convolutions
    onednn = importlib.import_module(f"toolkit.backends.{backend_name}.kernels.onednn")
    if onednn.library() is None:
        pytest.skip("oneDNN's library is not installed here (the aesara and pytensor extras install it)")
    passes, run = [], onednn.Convolution.run
    monkeypatch.setattr(onednn.Convolution, "run", lambda self, name, *a: (passes.append(name), run(self, name, *a)))
    found = [Product("conv", ((2, 6, 6, 3), (3, 3, 3, 4)), (("strides", 1), ("padding", "same"),
                                                             ("dilation_rate", 1)), 0)]
    rng = np.random.default_rng(0)
    operands = [tuple(rng.standard_normal(shape).astype(np.float32) for shape in found[0].shapes)]
    cotangents = [rng.standard_normal((2, 6, 6, 4)).astype(np.float32)]
    found_outputs, found_grads = natives(backend_name).products(found, operands, cotangents, "float32")()
    assert sorted(set(passes)) == ["forward", "input_gradient", "kernel_gradient"]
    outputs, grads = plain_jax.products(found, operands, cotangents, "float32")()
    for a, b in zip((*found_outputs, *found_grads[0]), (*outputs, *grads[0]), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_inputs_compare_each_source_with_fit_from_arrays_as_a_throughput():
    runs = [_run("aesara", 1.0, 1, "fit-arrays"), _run("aesara", 2.0, 1, "fit-tfdata"),
            _run("aesara", NOISY, 1, "fit-generator"), _run("aesara", 1.0, 2, "fit-generator"),  # no arrays at 2
            _run("aesara", 0.5, 1, "toolkit"), _run("aesara", 0.4, 1, "function-jax")]
    found = {(i["candidate"], i["devices"]): i for i in inputs(runs)}
    assert set(found) == {("fit-tfdata", 1), ("fit-generator", 1)}
    slow = found[("fit-tfdata", 1)]  # half the throughput in every round
    assert (slow["throughput"], slow["low"], slow["high"], slow["baseline"]) == (0.5, 0.5, 0.5, "fit-arrays")
    assert slow["target"] == INPUT_THROUGHPUT_TARGET and slow["verdict"] == "not met"
    assert found[("fit-generator", 1)]["verdict"] == "within noise"  # median 1.0, rounds down to 1/1.2
    assert {(r["candidate"], r["baseline"]) for r in ratios(runs)} == {("toolkit", "function-jax")}  # not natives
    results = {"config": {"lr": 0.05, "dtype": "float32", "rounds": 7}, "runs": [], "ratios": [],
               "machine": {"cpu": "x", "cores": 2, "python": "3", "versions": {}},
               "peak": {"gflops": {"jax": 100.0}, "dtype": "float32", "size": 64}, "inputs": inputs(runs)}
    assert "| from tf.data: digits-mlp, aesara, 1 | 0.50 (0.50-0.50) | >= 0.95: not met |" in markdown(results)


def test_batches_cycle_in_order_with_label_and_float_dtypes():
    x, y = np.arange(40.0).reshape(20, 2), np.arange(20) % 3
    batches = make_batches(x, y, 4, 3, seed=0, dtype="float32")
    assert len(batches) == 3 and batches.x.dtype == np.float32 and batches.y.dtype == np.int32
    for i in range(3):
        bx, by = batches[i]
        assert bx.shape == (4, 2) and len(set(bx[:, 0])) == 4  # without replacement within a batch
        np.testing.assert_array_equal(by, (bx[:, 0] // 2).astype(int) % 3)  # rows stay paired
    with pytest.raises(ValueError, match="larger than the 20 training examples"):
        make_batches(x, y, 21, 1, seed=0, dtype="float32")


def test_bench_measures_every_candidate_and_the_natives_train_alike(backend_name, tmp_path, capsys, peak_once):
    _PEAKS.clear()  # the test of the peak: its own process measures it (the next bench tests reuse it)
    # Keras keeps the learning rate in a float32 variable: 2**-4 is the same number in float32 and float64.
    argv = ["bench", "--model", "digits-mlp", "--backends", backend_name, "--devices", "1,2", "--dtype", PEAK_DTYPE,
            "--steps", "2", "--rounds", "1", "--batch", "16", "--lr", "0.0625", "--peak-size", str(PEAK_SIZE),
            "--out", str(tmp_path)]
    assert main(argv) == 0
    results = json.loads((tmp_path / "bench.json").read_text())
    assert (results["schema"], results["version"]) == (SCHEMA, SCHEMA_VERSION)
    assert results["machine"]["cores"] >= 1 and backend_name in results["machine"]["versions"]
    library = {"tensorflow": "tensorflow", "aesara": "jax", "pytensor": "jax"}[backend_name]
    peak = results["peak"]
    assert (peak["size"], peak["dtype"], set(peak["gflops"])) == (PEAK_SIZE, PEAK_DTYPE, {"numpy", library})
    assert all(gflops > 0 for gflops in peak["gflops"].values())
    step = 3 * 2 * 16 * (64 * 128 + 128 * 10) / 1e9  # digits-mlp 64-128-10, batch 16: forward and twice backward
    for run in results["runs"]:
        assert run["gflop_per_step"] == pytest.approx(step, rel=1e-12)
        assert run["gflops"] == pytest.approx(step / (run["median_ms"] / 1e3), rel=1e-12)
        assert run["peak_fraction"] == pytest.approx(run["gflops"] / max(peak["gflops"].values()), rel=1e-12)
        assert run["library"].startswith("C linker" if run["candidate"] in ("toolkit-c", "function-c",
                                                                            "function-c-checked") else
                                         "TensorFlow kernels" if backend_name == "tensorflow" and
                                         run["candidate"] != "function-xla" else "XLA")
    one, more = CANDIDATES[backend_name]
    assert {r["candidate"] for r in results["runs"] if r["devices"] == 1} == one
    assert {r["candidate"] for r in results["runs"] if r["devices"] == 2} == more
    for run in results["runs"]:
        assert run["median_ms"] > 0 and run["min_ms"] <= run["median_ms"] <= run["max_ms"]
        assert (run["model"], run["batch"], run["steps"], run["compute_bound"]) == ("digits-mlp", 16, 2, False)
        assert 0 < run["compile_s"] <= run["warmup_s"]
        assert run["first_peak_mb"] >= 0 and run["step_peak_mb"] >= 0  # this machine is Linux
        if run["candidate"] != "toolkit":  # same start, same batches, same SGD steps: the same parameters
            assert run["param_diff"] <= FLOAT64_ATOL, run
        if run["candidate"].startswith("toolkit"):  # its step outside the backend's compiled call
            assert 0 <= run["host_ms"] <= run["max_ms"], run
        else:
            assert run["host_ms"] is None
    kinds = {(r["candidate"], r["baseline"], r["devices"]) for r in results["ratios"]}
    assert ("toolkit", "toolkit", 2) in kinds  # scaling
    assert any(r["target"] is not None for r in results["ratios"])
    for r in results["ratios"]:
        assert r["low"] <= r["high"] and (r["verdict"] is None) == (r["target"] is None)
    assert {(i["candidate"], i["devices"]) for i in results["inputs"]} == {
        (kind, n) for kind in input_kinds()[1:] for n in (1, 2)}
    table = markdown(results)
    assert table.count("\n| ") >= len(results["runs"])  # every candidate has a row of times and one of GFLOP/s
    assert f"Machine peak, {PEAK_DTYPE} {PEAK_SIZE}x{PEAK_SIZE} matmul" in table
    assert "**digits-mlp**: global batch 16" in table
    assert "The toolkit's host work a step" in table
    assert "| from a generator: digits-mlp, " + backend_name + ", 1 |" in table
    printed = capsys.readouterr().out
    assert "inputs:" in printed and "ratios" in printed and "machine:" in printed and "wrote" in printed
    assert "Machine peak" in printed


def test_bench_of_a_token_model_keeps_its_ids_and_the_natives_train_alike(backend_name, tmp_path, peak_once):
    x, y = np.arange(12).reshape(6, 2), np.arange(6) % 2
    assert make_batches(x, y, 2, 1, seed=0, dtype="float32").x.dtype == np.int32  # ids stay integers
    argv = ["bench", "--model", "lstm-text", "--backends", backend_name, "--devices", "1", "--dtype", PEAK_DTYPE,
            "--steps", "2", "--rounds", "1", "--batch", "8", "--lr", "0.0625", "--peak-size", str(PEAK_SIZE),
            "--out", str(tmp_path), "--quiet", "--no-inputs"]
    assert main(argv) == 0
    for run in json.loads((tmp_path / "bench.json").read_text())["runs"]:
        assert run["candidate"] == "toolkit" or run["param_diff"] <= FLOAT64_ATOL, run


def test_bench_natives_carry_model_state_like_the_toolkit(backend_name, tmp_path, peak_once):
    """Batch normalization's moving statistics: each native keeps them as its framework's variables (averaged over
    the replicas under MirroredStrategy), and after the same steps parameters and state equal the toolkit's."""
    # Two devices only where natives run there too (MirroredStrategy's); the Theano family's run on one device.
    devices = "1,2" if CANDIDATES[backend_name][1] - {"toolkit", *input_kinds()} else "1"
    argv = ["bench", "--model", "tests.helpers:bn_digits_mlp", "--backends", backend_name, "--devices", devices,
            "--dtype", PEAK_DTYPE, "--steps", "2", "--rounds", "1", "--batch", "16", "--lr", "0.0625",
            "--peak-size", str(PEAK_SIZE), "--out", str(tmp_path), "--quiet", "--no-inputs"]
    assert main(argv) == 0
    runs = json.loads((tmp_path / "bench.json").read_text())["runs"]
    assert {r["candidate"] for r in runs if r["devices"] == 1} == CANDIDATES[backend_name][0] - set(input_kinds())
    for run in runs:
        assert run["candidate"] == "toolkit" or run["param_diff"] <= FLOAT64_ATOL, run


def test_all_or_nothing_natives_keep_everything_after_a_non_finite_step(backend_name):
    """The natives with the toolkit's guarantee (``*-checked``) write nothing when the loss, a gradient or the new
    state is not finite, and train like the plain natives otherwise; the plain natives write the NaNs."""

    import toolkit
    from tests.helpers import bn_digits_mlp

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 64)), rng.integers(0, 10, size=32).astype(LABEL_DTYPE)
    x[16:, 3] = np.nan  # the second batch
    trainer = toolkit.DataParallel(bn_digits_mlp(), backend_name, 1, toolkit.optim.SGD(0.0625), dtype="float64")
    runners = natives(backend_name).runners(trainer.model, trainer.params(), trainer.state(), Batches(x, y, 16),
                             trainer.devices, trainer.backend, "float64", 0.0625)
    checked = {name for name in runners if name.endswith("-checked")}
    assert checked == {name for name in CANDIDATES[backend_name][0] if name.endswith("-checked")}
    first = {}
    for name, runner in runners.items():
        assert np.isfinite(runner.run(1))
        first[name] = runner.params()
        assert np.isnan(runner.run(1))
        after = runner.params()
        if name in checked:
            assert max_abs_diff(after, first[name]) == 0.0, name
            assert max_abs_diff(first[name], first[name.removesuffix("-checked")]) <= FLOAT64_ATOL, name
        else:
            assert any(np.isnan(value).any() for value in after.values()), name


def test_bench_refuses_a_model_with_dropout(backend_name, capsys, peak_once):
    """Dropout: the natives run plain framework code, without the toolkit's per-example keys, so they would not
    draw the same noise; bench says so rather than compare different work. (Through the command: a measurement
    runs in a process of its own, with its own logical devices.)"""
    argv = ["bench", "--model", "transformer", "--backends", backend_name, "--devices", "1", "--steps", "1",
            "--rounds", "1", "--batch", "4", "--dtype", PEAK_DTYPE, "--peak-size", str(PEAK_SIZE), "--quiet"]
    assert main(argv) != 0
    assert re.search("transformer draws noise .* measure it with multigpu compare", capsys.readouterr().err)


@pytest.mark.parametrize("argv, words", [
    (["bench", "--steps", "0"], "--steps must be >= 1"),
    (["bench", "--batch", "100000"], "larger than the 1438 training examples"),
    (["bench", "--backends", "torch"], "unknown backend 'torch'"),
    (["bench", "--model", "vgg16"], "unknown model 'vgg16'"),
    (["bench", "--timeout", "0"], "--timeout must be > 0"),
    (["bench", "--peak-size", "0"], "--peak-size must be >= 1"),
])
def test_bad_bench_requests_are_one_line_and_exit_2(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_bench_of_a_missing_backend_says_how_to_install_it(capsys):
    missing = sorted(set(REGISTRY) - INSTALLED)[0]  # Aesara and PyTensor never share an environment
    assert main(["bench", "--backends", missing]) == 2
    assert "pip install" in capsys.readouterr().err


def _step_flops(backend_name, model, x, y):
    import toolkit
    from toolkit.command.flops import forward_flops

    trainer = toolkit.DataParallel(model, backend_name, 1, toolkit.optim.SGD(0.1), dtype="float32")
    return forward_flops(model, trainer.backend, trainer.params(), trainer.state(), x, y, "float32")


def test_flops_are_counted_from_the_shapes_of_matmuls_convolutions_and_loop_iterations(backend_name):
    """The count behind bench's achieved FLOP/s (2 per multiply-add), against the formulas: a dense layer
    ``2 * batch * in * out``, a convolution ``2 * output elements * kh * kw * c_in``, an LSTM
    ``2 * batch * steps * 4 * units * (inputs + units)`` (its loop counted once per step), attention's matmuls."""
    from toolkit import models
    from toolkit.command.workloads import load_workload

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 64)), rng.integers(0, 10, size=6)
    assert _step_flops(backend_name, load_workload("digits-mlp").model, x, y) == 2 * 6 * (64 * 128 + 128 * 10)
    conv = 2 * 6 * 6 * 6 * 16 * 3 * 3 * 1  # 3x3 kernel, 1 -> 16 channels, 8x8 -> 6x6 ("valid")
    assert _step_flops(backend_name, load_workload("digits-conv").model, x, y) == conv + 2 * 6 * 16 * 10
    ids = rng.integers(1, 32, size=(6, 7))
    lstm = 2 * 6 * 7 * 4 * 32 * (16 + 32)
    assert _step_flops(backend_name, models.lstm_text(seq_len=7), ids, y % 2) == lstm + 2 * 6 * 32 * 2
    width, seq, vocab = 8, 5, 16
    lm = models.transformer_lm(vocab=vocab, seq_len=seq, width=width, heads=2, depth=1, dropout=0.0)
    projections = 2 * 6 * seq * (4 * width * width + 2 * width * 4 * width) + 2 * 6 * seq * width * vocab
    attention = 2 * 2 * 6 * seq * seq * width  # scores and weighted values, over the heads
    tokens = rng.integers(0, vocab, size=(6, seq))
    assert _step_flops(backend_name, lm, tokens, tokens) == projections + attention


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (it comes with the aesara "
                    "or pytensor extra)")
def test_jax_mesh_floor_times_plain_jax_on_one_two_and_four_devices():
    """docs/jax_mesh_floor.py, the plain-JAX floor the benchmarks page's scaling notes cite, runs and reports each count
    against one device (a few steps: the numbers are its output, not asserted)."""
    script = Path(__file__).resolve().parents[1] / "docs" / "jax_mesh_floor.py"
    done = subprocess.run([sys.executable, str(script), "--steps", "3", "--rounds", "1"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr
    assert re.search(r"1 device, jax\.jit: [\d.]+ ms a step", done.stdout), done.stdout
    for n in (2, 4):
        assert re.search(rf"{n} devices, jit of shard_map: batch put each step [\d.]+ ms \([\d.]+x\), "
                         r"batch placed once [\d.]+ ms \([\d.]+x\)", done.stdout), done.stdout
