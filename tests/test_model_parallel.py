"""ModelParallel: chains and merging branches, shared parameters, placement, parity."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends
from tests.helpers import max_abs_diff
from toolkit import Device, Part, PartedModel, layers
from toolkit.backend.interface import Backend
from toolkit.nn.models import sparse_softmax_cross_entropy
from toolkit.placement.devices import parse_device
from toolkit.tolerances import FLOAT64_ATOL

STEPS, FEATURES, UNITS = 4, 3, 5
LSTM = ("lstm/kernel", "lstm/recurrent", "lstm/bias")


def shared_lstm(devices=("cpu:1", "cpu:2", "cpu:0")):
    """Two sequences through one shared LSTM on two devices, merged on a third (the CPU)."""
    def init(rng):
        return {**layers.lstm_init(rng, FEATURES, UNITS), **layers.dense_init(rng, 2 * UNITS, 3, prefix="head")}

    def encode(ops, params, x):
        return layers.lstm(ops, params, x, steps=STEPS, units=UNITS)

    def head(ops, params, a, b):
        return layers.dense(ops, params, ops.concat([a, b], axis=1), prefix="head")

    parts = [Part("enc_a", encode, ("a",), LSTM, devices[0]), Part("enc_b", encode, ("b",), LSTM, devices[1]),
             Part("head", head, ("enc_a", "enc_b"), ("head/kernel", "head/bias"), devices[2])]
    return PartedModel.build(init, parts, sparse_softmax_cross_entropy(3), inputs=("a", "b"), name="shared-lstm")


def chain(devices=("cpu:0", "cpu:1", "cpu:3")):
    """A chain: part 1 on device 0 feeds part 2 on device 1 feeds part 3 on device 3; part 3 also reads the input."""
    def init(rng):
        return {**layers.dense_init(rng, 4, 6, prefix="d1"), **layers.dense_init(rng, 6, 6, prefix="d2"),
                **layers.dense_init(rng, 10, 3, prefix="d3")}

    parts = [
        Part("first", lambda ops, p, x: layers.dense(ops, p, x, prefix="d1", activation="tanh"), ("x",),
             ("d1/kernel", "d1/bias"), devices[0]),
        Part("second", lambda ops, p, h: layers.dense(ops, p, h, prefix="d2", activation="relu"), ("first",),
             ("d2/kernel", "d2/bias"), devices[1]),
        Part("third", lambda ops, p, h, x: layers.dense(ops, p, ops.concat([h, x], axis=1), prefix="d3"),
             ("second", "x"), ("d3/kernel", "d3/bias"), devices[2]),
    ]
    return PartedModel.build(init, parts, sparse_softmax_cross_entropy(3), name="chain")


def data(model, n=6, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    if model.inputs == ("x",):
        return rng.normal(size=(n, 4)), y
    return {"a": rng.normal(size=(n, STEPS, FEATURES)), "b": rng.normal(size=(n, STEPS, FEATURES))}, y


@pytest.mark.parametrize("make_model", [shared_lstm, chain], ids=["branches", "chain"])
def test_model_parallel_equals_the_same_model_on_one_device(backend, make_model):
    model = make_model()
    x, y = data(model)
    parallel = toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.05), dtype="float64")
    single = toolkit.DataParallel(model, backend, 1, toolkit.optim.Adam(0.05), dtype="float64")
    for _ in range(5):
        assert abs(parallel.step(x, y) - single.step(x, y)) <= FLOAT64_ATOL
    assert max_abs_diff(parallel.params(), single.params()) <= FLOAT64_ATOL
    assert parallel.step_count == 5


def test_parameters_live_where_their_first_part_runs(backend):
    model = shared_lstm()
    trainer = toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.05), dtype="float64")
    assert trainer.devices == {"enc_a": Device("cpu", 1), "enc_b": Device("cpu", 2), "head": Device("cpu", 0)}
    homes = trainer.param_devices()
    assert {homes[k] for k in LSTM} == {Device("cpu", 1)} and homes["head/kernel"] == Device("cpu", 0)
    x, y = data(model)
    trainer.step(x, y)
    assert trainer.param_devices() == homes
    for name, var in trainer.training_state.params.items():  # one copy of each parameter, on its home
        assert [backend.device_of(r.value) for r in var.replicas] == [homes[name]]
    for values in trainer.training_state.slots.values():
        assert all(backend.device_of(v.value) == homes[name] == v.device for name, v in values.items())
    moved = toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.05), devices={"enc_a": "/cpu:3"})
    assert moved.devices["enc_a"] == Device("cpu", 3) and moved.param_devices()["lstm/bias"] == Device("cpu", 3)


def test_each_part_computes_on_its_device(backend):
    """The generic per-part path (the Aesara backend's, and available on TensorFlow) leaves every part's output and
    gradients on the part's device and every parameter gradient on its home."""
    model = chain()
    placement = {"first": Device("cpu", 0), "second": Device("cpu", 1), "third": Device("cpu", 3)}
    part = backend.compile_part(model.parts[1].fn, "float64")
    rng = np.random.default_rng(0)
    params = {"d2/kernel": backend.place(rng.normal(size=(6, 6)), placement["second"]),
              "d2/bias": backend.place(np.zeros(6), placement["second"])}
    h = backend.place(rng.normal(size=(4, 6)), placement["second"])
    out = part.forward(params, [h], placement["second"])
    _, grads, (h_grad,) = part.vjp(params, [h], backend.place(np.ones((4, 6)), placement["second"]),
                                   placement["second"])
    assert backend.device_of(out) == placement["second"] == backend.device_of(h_grad)
    assert all(backend.device_of(g) == placement["second"] for g in grads.values())
    trainer = toolkit.ModelParallel(model, backend, toolkit.optim.SGD(0.1), dtype="float64")
    x, y = data(model)
    homes = trainer.param_devices()
    params = {name: backend.place(value, homes[name]) for name, value in trainer.params().items()}
    loss, grads, _ = Backend.compile_parted_gradient(backend, model, placement, "float64")(params, {"x": x}, y)
    assert all(backend.device_of(g) == trainer.param_devices()[name] for name, g in grads.items())
    np.testing.assert_allclose(float(backend.to_numpy(loss)), trainer.loss(x, y), rtol=0, atol=FLOAT64_ATOL)
    expected = trainer.gradients(x, y)
    assert max_abs_diff({k: backend.to_numpy(g) for k, g in grads.items()}, expected) <= FLOAT64_ATOL


def test_tensorflow_places_each_part_under_its_device_scope():
    pytest.importorskip("tensorflow")
    seen = {}

    def record(name, fn):
        def run(ops, params, *inputs):
            out = fn(ops, params, *inputs)
            seen[name] = out.native.device  # inside tf.function: the device the op was placed on
            return out
        return run

    base = chain()
    parts = [Part(p.name, record(p.name, p.fn), p.inputs, p.params, p.device) for p in base.parts]
    model = PartedModel.build(base.init, parts, base.loss, name="recorded-chain")
    trainer = toolkit.ModelParallel(model, "tensorflow", toolkit.optim.SGD(0.1), dtype="float64")
    trainer.step(*data(model))
    assert seen["first"].endswith("CPU:0") and seen["second"].endswith("CPU:1") and seen["third"].endswith("CPU:3")


@pytest.mark.parity
@needs_all_backends
@pytest.mark.parametrize("make_model", [shared_lstm, chain], ids=["branches", "chain"])
@pytest.mark.parametrize("optimizer", [toolkit.optim.SGD(0.1), toolkit.optim.Adam(0.02)], ids=["sgd", "adam"])
def test_model_parallel_agrees_across_backends(make_model, optimizer):
    model = make_model()
    x, y = data(model, n=7, seed=4)
    trainers = {name: toolkit.ModelParallel(model, name, optimizer, dtype="float64")
                for name in ("tensorflow", THEANO)}
    for _ in range(10):
        losses = [t.step(x, y) for t in trainers.values()]
        assert abs(losses[0] - losses[1]) <= FLOAT64_ATOL
    assert max_abs_diff(trainers["tensorflow"].params(), trainers[THEANO].params()) <= FLOAT64_ATOL


def test_model_parallel_checkpoint_restores_into_data_parallel(backend, tmp_path):
    model = shared_lstm()
    x, y = data(model)
    parallel = toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.05), dtype="float64")
    parallel.step(x, y)
    parallel.save(tmp_path / "mp.ckpt")
    single = toolkit.DataParallel(model, backend, 2, toolkit.optim.Adam(0.05), dtype="float64", seed=5)
    single.restore(tmp_path / "mp.ckpt")
    assert parallel.step(x, y) == pytest.approx(single.step(x, y), abs=FLOAT64_ATOL)
    assert max_abs_diff(parallel.params(), single.params()) <= FLOAT64_ATOL


def test_model_parallel_errors(backend):
    model = chain()
    with pytest.raises(toolkit.DeviceSpecError, match=r"unknown parts \['fourth'\]"):
        toolkit.ModelParallel(model, backend, toolkit.optim.SGD(0.1), devices={"fourth": "cpu:0"})
    unplaced = PartedModel.build(model.init, [Part(p.name, p.fn, p.inputs, p.params) for p in model.parts],
                                 model.loss)
    with pytest.raises(toolkit.DeviceSpecError, match=r"parts \['first', 'second', 'third'\] have no device"):
        toolkit.ModelParallel(unplaced, backend, toolkit.optim.SGD(0.1))
    with pytest.raises(toolkit.DeviceNotFoundError):
        toolkit.ModelParallel(model, backend, toolkit.optim.SGD(0.1), devices={"first": "gpu:3"})
    with pytest.raises(TypeError, match="PartedModel"):
        toolkit.ModelParallel(toolkit.models.mlp([2, 2]), backend, toolkit.optim.SGD(0.1))
    extra = PartedModel.build(lambda rng: {**model.init(rng), "unused": np.zeros(2)}, model.parts, model.loss)
    with pytest.raises(toolkit.ParamsError, match="'unused' made by model.init is read by no part"):
        toolkit.ModelParallel(extra, backend, toolkit.optim.SGD(0.1))
    trainer = toolkit.ModelParallel(shared_lstm(), backend, toolkit.optim.SGD(0.1))
    x, y = data(shared_lstm())
    with pytest.raises(toolkit.ShapeError, match=r"x must have exactly the inputs \['a', 'b'\]"):
        trainer.step({"a": x["a"]}, y)


def test_parted_model_definition_errors():
    fn = lambda ops, p, x: x  # noqa: E731
    with pytest.raises(ValueError, match="neither data inputs nor earlier parts"):
        PartedModel.build(lambda rng: {}, [Part("p", fn, ("h",))], lambda ops, o, y: o)
    with pytest.raises(ValueError, match="used twice"):
        PartedModel.build(lambda rng: {}, [Part("p", fn, ("x",)), Part("p", fn, ("x",))], lambda ops, o, y: o)
    with pytest.raises(ValueError, match="needs at least one input"):
        Part("p", fn, ())
    with pytest.raises(ValueError, match="non-empty list of Part"):
        PartedModel.build(lambda rng: {}, [], lambda ops, o, y: o)


def _backward_devices(graph) -> dict[str, set]:
    """The devices of a traced step's backward matrix products (under ``gradients/``, or ``gradient_tape/`` for a
    tape), by the forward op they differentiate."""
    found: dict[str, set] = {}
    for op in graph.get_operations():
        scope, _, rest = op.name.partition("/")
        forward = rest.split("/")[0]
        if scope in ("gradients", "gradient_tape") and op.type == "MatMul":
            found.setdefault(forward.removesuffix("_grad"), set()).add(op.device.split("/device:")[-1])
    return found


def test_tensorflow_runs_each_backward_pass_where_its_forward_ran():
    """Each gradient op sits on its forward op's device: a GradientTape called outside the device scopes left them
    unplaced, so every replica's (and every part's) backward pass ran on the default device."""
    tf = pytest.importorskip("tensorflow")
    model = chain(("cpu:1", "cpu:2", "cpu:3"))
    trainer = toolkit.ModelParallel(model, "tensorflow", toolkit.optim.SGD(0.1), dtype="float64")
    x, y = data(model)
    trainer.step(x, y)
    placement = {part.name: parse_device(part.device) for part in model.parts}
    homes = trainer.param_devices()
    params = {name: trainer.backend.place(value, homes[name]) for name, value in trainer.params().items()}
    run = trainer.backend.compile_parted_gradient(model, placement, "float64")
    graph = run.function.get_concrete_function(params, {"x": tf.constant(x)}, tf.constant(y)).graph
    expected = {"MatMul": {"CPU:1"}, "MatMul_1": {"CPU:2"}, "MatMul_2": {"CPU:3"}}
    assert {k: v for k, v in _backward_devices(graph).items() if k in expected} == expected

    parallel = toolkit.DataParallel(toolkit.models.mlp([4, 8, 3]), "tensorflow", "cpu:2,cpu:3",
                                    toolkit.optim.SGD(0.1), dtype="float64")
    fused, calls = parallel.fused_step(), []

    def record(step):  # the arguments of the step's call: the shards as the trainer laid them out
        def call(*args):
            calls.append(args)
            return step(*args)
        return call

    assert parallel.wrap_fused_step(record)
    parallel.step(x, y)
    [(indices, xs, ys, shares, step)] = calls
    graph = fused.function.get_concrete_function(
        tuple(indices), list(xs), list(ys), tf.constant(shares, tf.float64), step).graph
    devices = _backward_devices(graph)
    assert devices and all(len(d) == 1 for d in devices.values())
    assert set().union(*devices.values()) == {"CPU:2", "CPU:3"}
