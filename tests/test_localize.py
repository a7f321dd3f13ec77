"""``multigpu localize`` and ``ops.record``: every recorded layer output and gradient against a float64 reference,
the first past the bound named, and the backend farther from the reference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import THEANO, needs_all_backends
from tests.test_cli import _relu_perturbed_backend
from toolkit import Model
from toolkit.command.localize import LOCALIZE_BOUND, LOSS, OUTPUT, compare_runs, localize, relative_error, summarize
from toolkit.command.main import main
from toolkit.command.seeds import run_seeds
from toolkit.command.workloads import Workload
from toolkit.datasets import digits
from toolkit.errors import ArgumentError, ModelStateError
from toolkit.nn import layers
from toolkit.nn.models import sparse_softmax_cross_entropy
from toolkit.nn.ops_training import recording

#: The layer outputs :func:`recorded_mlp` names, in the order its forward records them.
RECORDED = ["dense0", "relu0", "dense1", "relu1", "logits"]


def recorded_mlp() -> Model:
    """A 64-16-16-10 MLP on the digits whose forward names each layer's output with ``ops.record``."""
    def init(rng):
        return {**layers.dense_init(rng, 64, 16, prefix="d0"), **layers.dense_init(rng, 16, 16, prefix="d1"),
                **layers.dense_init(rng, 16, 10, prefix="d2")}

    def forward(ops, params, x):
        h = ops.record("relu0", ops.relu(ops.record("dense0", layers.dense(ops, params, x, "d0"))))
        h = ops.record("relu1", ops.relu(ops.record("dense1", layers.dense(ops, params, h, "d1"))))
        return ops.record("logits", layers.dense(ops, params, h, "d2"))

    return Model(init, forward, sparse_softmax_cross_entropy(10), name="recorded-mlp")


def _found(values: dict[str, dict[str, float]]) -> dict:
    """Runs of two backends made of scalars: ``values[(backend, dtype)] = {name: value}``, outputs a, b and gradients
    w0, w1 (init order)."""
    return {key: {"outputs": {n: np.array([v[n]]) for n in ("a", "b", LOSS)},
                  "gradients": {n: np.array([v[n]]) for n in ("w0", "w1")}} for key, v in values.items()}


def test_rows_follow_the_step_and_name_the_first_past_the_bound_and_the_farther_backend():
    exact = {"a": 1.0, "b": 2.0, LOSS: 3.0, "w0": 1.0, "w1": 1e-12}  # w1: zero in exact arithmetic
    found = _found({("p", "float64"): exact, ("q", "float64"): exact,
                    ("p", "float32"): {**exact, "a": 1 + 1e-7, "b": 2 * (1 + 2e-4), "w1": 5e-8},
                    ("q", "float32"): {**exact, "a": 1 + 2e-7, "w0": 1 + 3e-4, "w1": -5e-8}})
    rows = compare_runs(found, ["p", "q"], "float32", ["w0", "w1"])
    assert [(r["kind"], r["name"]) for r in rows] == [("output", "a"), ("output", "b"), ("loss", LOSS),
                                                       ("gradient", "w1"), ("gradient", "w0")]  # backprop order
    a, b, loss, w1, w0 = rows
    assert a["farther"] == "q" and a["error"]["q"] == pytest.approx(2e-7)
    assert b["error"]["p"] == pytest.approx(2e-4) and b["farther"] == "p" and loss["farther"] is None
    assert w1["unresolved"] and not w0["unresolved"]  # 1e-12 of the largest gradient: its reference is noise
    found_ = summarize({"rows": rows, "bound": LOCALIZE_BOUND}, ["p", "q"], LOCALIZE_BOUND)
    assert found_["first_past"]["name"] == "b" and found_["first_past_by_backend"] == {"p": "b", "q": "w0"}
    assert found_["farther_counts"] == {"output": {"p": 1, "q": 1}, "loss": {"p": 0, "q": 0},
                                        "gradient": {"p": 0, "q": 1}}  # the unresolved w1 is not counted
    assert found_["worst"]["name"] == "w0"
    assert relative_error(np.zeros(2), np.zeros(2), 0.0) == 0.0 and relative_error(np.ones(1), np.zeros(1), 0) > 1e300


def test_record_is_the_identity_outside_a_recording_and_refuses_a_bad_name_and_a_scan_body(backend):
    ops = backend.ops("float32")
    x = ops.convert_to_tensor(np.arange(3.0, dtype=np.float32))
    assert ops.record("x", x) is x
    with pytest.raises(ArgumentError, match="non-empty string"):
        ops.record("", x)
    with recording() as records:
        assert ops.record("x", x) is x and ops.record("x", x * 2) is not None
        with pytest.raises(ModelStateError, match="inside ops.scan"):
            ops.scan(lambda carry, row: (carry + ops.record("inside", row), None), ops.zeros(()), x)
    assert list(records) == ["x", "x#2"]


def test_localize_follows_training_and_finds_float32_within_the_bound(backend_name):
    """One backend alone, float32 against its own float64: every recorded layer, in order, within 1e-4; two
    followed training steps that do not part."""
    workload = Workload("recorded-mlp", recorded_mlp(), digits)
    (seeds,) = run_seeds([0])
    from toolkit.command.compare import OPTIMIZERS

    results = localize(workload, [backend_name], "float32", 16, seeds, steps=2,
                       optimizer=lambda: OPTIMIZERS["adam"](0.01), follow=True)
    names = [row["name"] for row in results["rows"]]
    assert names == [*RECORDED, OUTPUT, LOSS, "d2/bias", "d2/kernel", "d1/bias", "d1/kernel", "d0/bias",
                     "d0/kernel"]
    assert results["first_past"] is None and 0 < results["worst"]["error"][backend_name] < 1e-5
    (run,) = results["trajectories"]
    assert run["backend"] == backend_name and len(run["max_rel_param_diff"]) == 2 and run["split_step"] is None


@needs_all_backends
def test_localize_names_the_layer_a_perturbed_backend_gets_wrong(monkeypatch, tmp_path, capsys):
    """A ReLU off by 1e-3 relative on one backend: localize names the first ReLU's output as the first quantity past
    1e-4, on that backend only, and that backend as the farther from the reference there; the real backends stay
    within float32 rounding everywhere."""
    _relu_perturbed_backend(monkeypatch, 1 + 1e-3)
    code = main(["localize", "--model", "tests.test_localize:recorded_mlp", "--backends",
                 f"tensorflow,{THEANO},perturbed", "--batch", "16", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    results = json.loads((tmp_path / "localize.json").read_text())
    assert results["first_past"]["name"] == "relu0" and results["first_past"]["farther"] == "perturbed"
    assert results["first_past_by_backend"] == {"tensorflow": None, THEANO: None, "perturbed": "relu0"}
    assert results["rows"][0]["name"] == "dense0" and results["rows"][0]["error"]["perturbed"] < 1e-6
    assert "first past 0.0001: output relu0" in printed and "perturbed farther" in printed
