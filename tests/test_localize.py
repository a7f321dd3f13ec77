"""``multigpu localize`` and ``ops.record``: every recorded layer output and gradient against a float64 reference,
the first past the bound named, and the backend farther from the reference."""

from __future__ import annotations

import importlib
import json
import re

import numpy as np
import optree
import pytest

import toolkit
from tests.conftest import THEANO, needs_backend
from tests.test_cli import _relu_perturbed_backend
from toolkit import Model
from toolkit.command.localize import LOCALIZE_BOUND, LOSS, OUTPUT, compare_runs, localize, relative_error, summarize
from toolkit.command.main import main
from toolkit.command.seeds import run_seeds
from toolkit.command.workloads import Workload
from toolkit.datasets import digits, zen_corpus
from toolkit.errors import ArgumentError, ModelStateError
from toolkit.nn import layers
from toolkit.nn.models import mlp, sparse_softmax_cross_entropy, transformer_lm
from toolkit.ops.training import TrainingOps, recording

#: The layer outputs :func:`recorded_mlp` records, in order: the built-in dense layers' (under their prefix) and the
#: ReLUs its forward names itself.
RECORDED = ["d0", "relu0", "d1", "relu1", "d2"]


def recorded_mlp() -> Model:
    """A 64-16-16-10 MLP on the digits whose forward names its ReLUs' outputs with ``ops.record`` (the dense layers
    record theirs)."""
    def init(rng):
        return {**layers.dense_init(rng, 64, 16, prefix="d0"), **layers.dense_init(rng, 16, 16, prefix="d1"),
                **layers.dense_init(rng, 16, 10, prefix="d2")}

    def forward(ops, params, x):
        h = ops.record("relu0", ops.relu(layers.dense(ops, params, x, "d0")))
        h = ops.record("relu1", ops.relu(layers.dense(ops, params, h, "d1")))
        return layers.dense(ops, params, h, "d2")

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


#: The tiny Transformer's size (one block: every kind of layer it has).
TINY_SEQ_LEN, TINY_WIDTH = 4, 8
#: What the built-in Transformer records, in the order its forward records them (transformer_lm's docstring).
TRANSFORMER_RECORDED = ["tokens", "positions", "embeddings", "b0/ln1", "b0/mha/query", "b0/mha/key", "b0/mha/value",
                        "b0/mha/heads", "b0/mha/attention_output", "b0/residual1", "b0/ln2", "b0/mlp1", "b0/mlp2",
                        "b0", "final_ln", "head"]


def tiny_transformer() -> Workload:
    """The built-in Transformer at one block of width 8 over windows of 4 characters of the Zen of Python."""
    return Workload("tiny-transformer", transformer_lm(seq_len=TINY_SEQ_LEN, width=TINY_WIDTH, heads=2, depth=1,
                                                       mlp_ratio=2), lambda seed: zen_corpus(TINY_SEQ_LEN, seed=seed))


#: What the built-in 64-16-16-10 MLP records, in order (mlp's docstring).
MLP_RECORDED = ["dense0", "relu0", "dense1", "relu1", "dense2"]


def built_in_mlp():
    """The built-in MLP, 64-16-16-10, on the digits."""
    return mlp([64, 16, 16, 10])


@needs_backend(THEANO)
def test_localize_names_the_built_in_layer_a_perturbed_backend_gets_wrong(monkeypatch, tmp_path, capsys):
    """A built-in model records every layer's output, in step order; with ReLU off by 1e-3 relative on one backend,
    localize names the first ReLU's output as the first quantity past 1e-4, on that backend only, and that backend as
    the farther from the reference there; every layer before it is within float32 rounding."""
    _relu_perturbed_backend(monkeypatch, 1 + 1e-3)
    code = main(["localize", "--model", "tests.test_localize:built_in_mlp", "--backends", f"{THEANO},perturbed",
                 "--batch", "16", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    results = json.loads((tmp_path / "localize.json").read_text())
    assert [row["name"] for row in results["rows"] if row["kind"] == "output"] == [*MLP_RECORDED, OUTPUT]
    assert results["first_past"]["name"] == "relu0" and results["first_past"]["farther"] == "perturbed"
    assert results["first_past_by_backend"] == {THEANO: None, "perturbed": "relu0"}
    assert results["rows"][0]["error"]["perturbed"] < 1e-6
    assert "first past 0.0001: output relu0" in printed and "perturbed farther" in printed


def _traced_ops(backend_name: str, forward, params: dict, x: np.ndarray) -> list[str]:
    """The ops of the graph ``forward`` is traced to on the backend, in order (what a compiled step is built from)."""
    ops = toolkit.get_backend(backend_name).ops("float32")
    cast = {name: value.astype(np.float32) for name, value in params.items()}
    if backend_name == "tensorflow":
        import tensorflow as tf

        specs = optree.tree_map(lambda v: tf.TensorSpec(v.shape, tf.as_dtype(v.dtype)), (cast, x))
        graph = tf.function(lambda p, ids: ops.call(forward, p, ids)).get_concrete_function(*specs).graph
        return [node.op for node in graph.as_graph_def().node]
    compiling = importlib.import_module(f"toolkit.backends.{backend_name}.compiling")
    graphs = importlib.import_module(f"toolkit.backends.{backend_name}.graphs")
    symbols = optree.tree_map(compiling.symbol, (cast, x))
    with compiling.building("float32"):
        output = ops.call(forward, *symbols)
    return [str(node.op) for node in graphs.io_toposort(optree.tree_leaves(symbols), [output])]


def test_built_in_layers_record_their_outputs_and_add_nothing_to_a_traced_graph_outside_a_recording(backend_name,
                                                                                                   monkeypatch):
    """The built-in Transformer's forward, traced (not compiled): under a recording every layer's output is recorded
    under its layer's name, in order; outside one the graph has the same ops, in the same order, as with
    ``ops.record`` replaced by a function returning its input (the records are free in a compiled step)."""
    workload = tiny_transformer()
    params = workload.model.init(np.random.default_rng(0))
    x = workload.data(0)[0][:2]
    with recording() as records:
        _traced_ops(backend_name, workload.model.forward, params, x)
    assert list(records) == TRANSFORMER_RECORDED
    recorded = _traced_ops(backend_name, workload.model.forward, params, x)
    monkeypatch.setattr(TrainingOps, "record", lambda self, name, value: value)
    assert recorded == _traced_ops(backend_name, workload.model.forward, params, x) and len(recorded) > 50


#: The Keras layers of :func:`keras_digits_model`, in the order its graph runs them.
KERAS_LAYERS = ["hidden", "norm", "logits"]


def keras_digits_model():
    """A tiny Keras model of the digits (64 inputs, 10 classes) imported with ``toolkit.from_keras``: what ``multigpu
    localize --model module:function`` takes for a user's Keras model."""
    import keras

    inputs = keras.Input((64,))
    hidden = keras.layers.Dense(16, activation="relu", name=KERAS_LAYERS[0])(inputs)
    outputs = keras.layers.Dense(10, name=KERAS_LAYERS[2])(keras.layers.LayerNormalization(name=KERAS_LAYERS[1])(
        keras.ops.tanh(hidden)))
    model = keras.Model(inputs, outputs)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return toolkit.from_keras(model)


def test_localize_lists_an_imported_keras_models_layers_in_order(keras, backend_name, tmp_path):
    """``multigpu localize`` on an imported Keras model: one row per Keras layer and operation, named as Keras names
    them, in the order the graph runs them (the built-in layers the import translates to add none of their own)."""
    code = main(["localize", "--model", "tests.test_localize:keras_digits_model", "--backends", backend_name,
                 "--batch", "8", "--out", str(tmp_path), "--quiet"])
    assert code == 0
    results = json.loads((tmp_path / "localize.json").read_text())
    names = [row["name"] for row in results["rows"] if row["kind"] == "output"]
    assert names[:1] + names[2:] == [*KERAS_LAYERS, OUTPUT]
    assert re.fullmatch(r"tanh(_\d+)? \(Tanh: keras\.ops\.tanh\)", names[1])  # Keras numbers a name used before
    assert results["first_past"] is None
