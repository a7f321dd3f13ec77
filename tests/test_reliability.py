"""Bad input, atomic steps, the NaN policy and checkpoints, on each backend."""

from __future__ import annotations

import math
import re
import zipfile

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends, needs_backend
from tests.helpers import FEATURES, SMALL_MLP, batch, max_abs_diff
from toolkit.tolerances import FLOAT64_ATOL
from toolkit.training import checkpoint as checkpoint_module  # where the file's layout names are, private ones too
from toolkit.training.trainer import NAN_POLICIES


def snapshot(trainer) -> dict:
    """Everything a failed call must leave untouched."""
    return {"params": trainer.params(), "replicas": trainer.replica_params(), "state": trainer.optimizer_state(),
            "step": trainer.step_count, "skipped": trainer.skipped_steps, "rng": trainer.rng.bit_generator.state}


def assert_unchanged(trainer, before: dict) -> None:
    after = snapshot(trainer)
    assert after["step"] == before["step"] and after["skipped"] == before["skipped"] and after["rng"] == before["rng"]
    assert max_abs_diff(after["params"], before["params"]) == 0.0
    for replica in after["replicas"]:
        assert max_abs_diff(replica, before["params"]) == 0.0
    for slot, values in before["state"].items():
        assert max_abs_diff(after["state"][slot], values) == 0.0


@pytest.fixture
def trained(backend):
    """A trainer on 2 devices after 2 good Adam steps, so it has input shapes and optimizer state to protect."""
    trainer = toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.Adam(0.05), dtype="float64")
    x, y = batch(6)
    trainer.step(x, y)
    trainer.step(x, y)
    return trainer


X, Y = batch(6)
BAD_BATCHES = {
    "x rank": ((X[..., None], Y), toolkit.ShapeError,
               "keep the shapes of the first batch: {'x': (5,), 'y': ()}; got x (5, 1)"),
    "x features": ((X[:, :4], Y), toolkit.ShapeError, "got x (4,)"),
    "y rank": ((X, Y[:, None]), toolkit.ShapeError, "got y (1,)"),
    "lengths": ((X, Y[:5]), toolkit.ShapeError, "same number of examples; got 6 and 5"),
    "empty": ((X[:0], Y[:0]), toolkit.ShapeError, "batch is empty"),
    "scalar": ((np.float64(1.0), Y), toolkit.ShapeError, "need a batch axis"),
    "x strings": ((X.astype(str), Y), toolkit.DTypeError, "x must hold numbers, got dtype <U"),
    "x complex": ((X.astype(complex), Y), toolkit.DTypeError, "x must hold numbers, got dtype complex128"),
    "y floats": ((X, Y.astype(float)), toolkit.DTypeError, "y must stay integer labels"),
    "x nan": ((np.where(np.arange(6)[:, None] == 3, np.nan, X), Y), toolkit.NonFiniteError,
              "x has 5 NaN or Inf value(s), the first in example 3"),
    "x inf": ((np.where(X == X.max(), -np.inf, X), Y), toolkit.NonFiniteError, "x has 1 NaN or Inf value(s)"),
}


def _as_cast(array):
    """``array`` in the dtype the float64 trainer casts it to (floats float64, integers int32): a batch that the
    check's fast path (arrays like the batches before) looks at first."""
    array = np.asarray(array)
    return array.astype(np.float64) if array.dtype.kind == "f" else (
        array.astype(np.int32) if array.dtype.kind in "iu" else array)


@pytest.mark.parametrize("cast", [False, True], ids=["as-given", "cast"])
@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_bad_batch_raises_typed_error_and_changes_nothing(trained, case, cast):
    args, error, words = BAD_BATCHES[case]
    if cast:
        args = tuple(_as_cast(a) for a in args)
    before = snapshot(trained)
    for call in (trained.step, trained.gradients, trained.loss):
        with pytest.raises(error) as info:
            call(*args)
        assert words in str(info.value)
    assert_unchanged(trained, before)


def test_wrong_shape_on_the_first_batch_is_a_compute_error(backend):
    trainer = toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.SGD(0.1), dtype="float64")
    before = snapshot(trainer)
    x, y = batch(6)
    with pytest.raises(toolkit.ComputeError, match=r"failed on cpu:0 \(shard x \(3, 4\), y \(3,\)\)"):
        trainer.step(x[:, :4], y)
    assert_unchanged(trainer, before)
    trainer.step(x, y)  # and it still trains
    assert trainer.step_count == 1


def test_failure_on_one_device_leaves_every_replica_unchanged(backend):
    def forward(ops, params, x):  # works on a 3-row shard, fails on a 2-row one
        return ops.reshape(ops.matmul(ops.reshape(x, (3, -1)), params["w"]), (-1, 3))

    def init(rng):
        return {"w": rng.normal(size=(FEATURES, 3))}

    model = toolkit.Model(init, forward, lambda ops, out, y: ops.sum(ops.square(out), axis=1))
    trainer = toolkit.DataParallel(model, backend, 2, toolkit.optim.Adam(0.1), dtype="float64")
    x, y = batch(6)
    trainer.step(x, y)  # 3 + 3 rows: fine
    before = snapshot(trainer)
    with pytest.raises(toolkit.ComputeError, match=r"failed on cpu:1 \(shard x \(2, 5\)") as raised:
        trainer.step(*batch(5))  # 3 + 2 rows: device 1 fails after device 0 succeeded
    assert not isinstance(raised.value.__cause__, toolkit.ComputeError)  # the device's own error is the cause
    assert_unchanged(trainer, before)


def test_a_failed_fused_step_reports_its_own_error_not_the_composed_paths(backend):
    """A model whose replicas must run together (a cross-replica sum) and that then fails: the step reports the
    model's own error, not the ModelStateError that composing the step per device to locate it meets first."""
    def forward(ops, params, x):
        total = ops.cross_replica_sum(ops.sum(x, axis=0))
        raise ArithmeticError(f"the model's own failure, after a sum of shape {ops.shape(total)}")

    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(FEATURES, 3))}, forward,
                          lambda ops, out, y: ops.sum(out, axis=1))
    trainer = toolkit.DataParallel(model, backend, 2, toolkit.optim.SGD(0.1), dtype="float64")
    before = snapshot(trainer)
    with pytest.raises(toolkit.ComputeError, match="ArithmeticError: the model's own failure") as raised:
        trainer.step(*batch(6))
    assert isinstance(raised.value.__cause__, ArithmeticError) and trainer.last_step_path is None
    assert_unchanged(trainer, before)


@pytest.mark.parametrize("case", ["missing", "extra", "shape", "nan", "strings"])
def test_bad_params_raise_and_change_nothing(trained, case):
    good = {k: np.zeros(v.shape) for k, v in trained.params().items()}
    params, error = {
        "missing": ({k: v for k, v in good.items() if k != "b0"}, toolkit.ParamsError),
        "extra": ({**good, "w9": np.zeros(2)}, toolkit.ParamsError),
        "shape": ({**good, "w0": np.zeros((5, 9))}, toolkit.ParamsError),
        "nan": ({**good, "b1": np.full(3, np.nan)}, toolkit.NonFiniteError),
        "strings": ({**good, "b1": np.array(["a", "b", "c"])}, toolkit.DTypeError),
    }[case]
    before = snapshot(trained)
    with pytest.raises(error):
        trained.set_params(params)
    assert_unchanged(trained, before)


def test_bad_constructor_arguments(backend):
    for devices, error in (("cpu:0,/cpu:0", toolkit.DeviceSpecError), ("gpu:5", toolkit.DeviceNotFoundError),
                           ("cpu:x", toolkit.DeviceParseError)):
        with pytest.raises(error):
            toolkit.DataParallel(SMALL_MLP, backend, devices, toolkit.optim.SGD(0.1))
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        toolkit.DataParallel(SMALL_MLP, backend, 1, toolkit.optim.SGD(0.1), nan_policy="ignore")
    for weights in ([1, 0], [1, -2]):
        with pytest.raises(ValueError, match="finite numbers > 0"):
            toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.SGD(0.1), weights=weights)
    with pytest.raises(ValueError, match="SGD lr"):
        toolkit.optim.SGD(-1.0)


def _log_model():
    """Loss log(x) @ w: NaN for a negative input, although the input itself is finite."""
    return toolkit.Model(lambda rng: {"w": rng.normal(size=(FEATURES, 1))},
                         lambda ops, p, x: ops.matmul(ops.log(x), p["w"]),
                         lambda ops, out, y: ops.sum(ops.square(out), axis=1))


def _norm_model():
    """Loss |x @ w|: finite (0) at w = 0, where its gradient is 0/0 = NaN."""
    return toolkit.Model(lambda rng: {"w": np.zeros((FEATURES, 2))},
                         lambda ops, p, x: ops.matmul(x, p["w"]),
                         lambda ops, out, y: ops.sqrt(ops.sum(ops.square(out), axis=1)))


@pytest.mark.parametrize("make_model, what", [(_log_model, "loss"), (_norm_model, "gradient")])
def test_non_finite_step_raises_by_default_and_changes_nothing(backend, n_devices, make_model, what):
    good_x = np.abs(batch(8)[0]) + 0.5
    trainer = toolkit.DataParallel(make_model(), backend, n_devices, toolkit.optim.Adam(0.1), dtype="float64")
    if what == "loss":
        trainer.step(good_x, np.zeros(8))
    before = snapshot(trainer)
    bad_x = good_x.copy()
    bad_x[-1, 0] = -1.0
    with pytest.raises(toolkit.NonFiniteError, match=r"the loss \(.*\) or a gradient is NaN or Inf; nothing was"):
        trainer.step(bad_x if what == "loss" else good_x, np.zeros(8))
    assert_unchanged(trainer, before)


@needs_backend(THEANO)
@pytest.mark.parametrize("make_model, what", [(_log_model, "loss"), (_norm_model, "gradient")])
def test_non_finite_step_with_the_aesara_c_linker_changes_nothing(make_model, what):
    # Its fused step runs on shared variables with guarded updates (not the shared code of the fused steps).
    test_non_finite_step_raises_by_default_and_changes_nothing(toolkit.get_backend(THEANO, linker="c"), 1,
                                                                make_model, what)


def test_skip_policy_skips_and_counts(backend):
    good_x = np.abs(batch(8)[0]) + 0.5
    bad_x = good_x.copy()
    bad_x[0, 0] = -1.0
    trainer = toolkit.DataParallel(_log_model(), backend, 2, toolkit.optim.Adam(0.1), dtype="float64",
                                   nan_policy="skip")
    trainer.step(good_x, np.zeros(8))
    before = snapshot(trainer)
    assert np.isnan(trainer.step(bad_x, np.zeros(8)))
    assert trainer.skipped_steps == 1
    before["skipped"] = 1
    assert_unchanged(trainer, before)
    trainer.step(good_x, np.zeros(8))
    assert trainer.step_count == 2


class _InfiniteAtSecondUpdate(toolkit.optim.schedules.Schedule):
    """0.05 at the first update, then 0.05 / 0: Inf (a schedule gone wrong; the gradients stay finite)."""

    def __call__(self, ops, step):
        return 0.05 / (1.0 - step)

    def peak(self):
        return math.inf


@pytest.mark.parametrize("nan_policy", NAN_POLICIES)
def test_an_infinite_learning_rate_is_refused_at_its_step(backend, nan_policy, tmp_path):
    """Finite loss and gradients but Inf new parameters and optimizer state: the step writes nothing and raises or
    skips, per nan_policy, on the fused path and the composed one (micro-batches); the trainer stays usable: its own
    checkpoint restores."""
    trainer = toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.Adam(_InfiniteAtSecondUpdate()),
                                   dtype="float64", nan_policy=nan_policy)
    x, y = batch(8)
    trainer.step(x, y)
    before = snapshot(trainer)
    for micro_batches in (1, 2):
        if nan_policy == "raise":
            with pytest.raises(toolkit.NonFiniteError, match="step 2: the loss"):
                trainer.step(x, y, micro_batches=micro_batches)
        else:
            assert math.isfinite(trainer.step(x, y, micro_batches=micro_batches))
            before["skipped"] += 1
        assert_unchanged(trainer, before)
    trainer.save(tmp_path / "after.npz")
    trainer.restore(tmp_path / "after.npz")
    assert_unchanged(trainer, before)


# --------------------------------------------------------------------------------------------------------------------
# Checkpoints


def test_checkpoint_round_trip(trained, tmp_path):
    path = tmp_path / "run" / "model.ckpt"
    trained.rng.random(3)  # the RNG has moved on since init
    trained.save(path)
    checkpoint = toolkit.load_checkpoint(path)
    assert checkpoint.step == 2 and checkpoint.metadata["dtype"] == "float64"
    assert checkpoint.metadata["backend"] == trained.backend.name
    assert checkpoint.metadata["optimizer"] == "Adam" and checkpoint.metadata["model"] == SMALL_MLP.name
    assert checkpoint.metadata["toolkit_version"] == toolkit.__version__
    assert max_abs_diff(checkpoint.params, trained.params()) == 0.0
    assert set(checkpoint.state) == {"m", "v"}
    with np.load(path, allow_pickle=False) as archive:  # a plain archive: no pickled objects anywhere
        assert all(archive[key].dtype != object for key in archive.files)

    other = toolkit.DataParallel(SMALL_MLP, trained.backend, 1, toolkit.optim.Adam(0.05), dtype="float64", seed=9)
    other.restore(path)
    assert other.step_count == 2
    assert other.rng.bit_generator.state == trained.rng.bit_generator.state
    assert max_abs_diff(other.params(), trained.params()) == 0.0
    for slot, values in trained.optimizer_state().items():
        assert max_abs_diff(other.optimizer_state()[slot], values) == 0.0
    x, y = batch(10, seed=3)
    # One device against two: the batch's sum is added in another order (equal in Aesara 2.9, 2e-16 apart in PyTensor).
    assert abs(other.step(x, y) - trained.step(x, y)) <= FLOAT64_ATOL
    assert max_abs_diff(other.params(), trained.params()) <= FLOAT64_ATOL


def test_crash_during_save_keeps_the_previous_checkpoint(trained, tmp_path, monkeypatch):
    path = tmp_path / "model.ckpt"
    trained.save(path)
    trained.step(*batch(6))

    def crash(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(checkpoint_module.os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        trained.save(path)
    assert toolkit.load_checkpoint(path).step == 2
    assert [p.name for p in tmp_path.iterdir()] == ["model.ckpt"]  # no temporary file left behind


def test_truncated_corrupted_and_foreign_files_are_refused(trained, tmp_path):
    path = tmp_path / "model.ckpt"
    trained.save(path)
    data = path.read_bytes()
    cases = {
        "truncated": data[: len(data) // 2],
        "flipped": data[:200] + bytes([data[200] ^ 0xFF]) + data[201:],
        "empty": b"",
    }
    for name, content in cases.items():
        broken = tmp_path / f"{name}.ckpt"
        broken.write_bytes(content)
        with pytest.raises(toolkit.CheckpointError, match="truncated or corrupted|is corrupted"):
            toolkit.load_checkpoint(broken)

    # A valid archive whose contents were changed without updating the checksum.
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays["params/0"] = arrays["params/0"] + 1.0
    tampered = tmp_path / "tampered.ckpt"
    with open(tampered, "wb") as file:
        np.savez(file, **arrays)
    with pytest.raises(toolkit.CheckpointError, match="checksum does not match"):
        toolkit.load_checkpoint(tampered)

    pickled = tmp_path / "pickled.ckpt"
    with open(pickled, "wb") as file:
        np.savez(file, **{**arrays, "params/0": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(toolkit.CheckpointError):
        toolkit.load_checkpoint(pickled)
    with pytest.raises(toolkit.CheckpointError, match="no checkpoint at"):
        toolkit.load_checkpoint(tmp_path / "missing.ckpt")
    with zipfile.ZipFile(tmp_path / "foreign.ckpt", "w") as archive:
        archive.writestr("x.npy", b"not numpy")
    with pytest.raises(toolkit.CheckpointError):
        toolkit.load_checkpoint(tmp_path / "foreign.ckpt")


#: Bits flipped in the bit-flip test, drawn from a seeded generator out of the 14,168 bits of its 1,771-byte
#: checkpoint: about 3 s on CI's machine (2 ms a load). Before every parser error became a CheckpointError, 100 of
#: those bits (0.7%: zip methods, "encrypted" flags) escaped as other errors; 1,500 draws hit some with a probability
#: of 1 - 0.993 ** 1500 > 0.9999 (this seed hits 8).
FLIPS_SAMPLED = 1500


def _small_checkpoint() -> toolkit.Checkpoint:
    metadata = {"step": 3, "skipped_steps": 0, "epoch": 1, "seed": 0, "dtype": "float64", "optimizer": "Adam",
                "rng_state": np.random.default_rng(0).bit_generator.state, "model": "tiny"}
    return toolkit.Checkpoint({"w": np.arange(3.0)}, {"m": {"w": np.ones(3)}}, metadata, {"bn": np.zeros(2)})


def test_every_bit_flip_loads_the_contents_or_raises_a_checkpoint_error(tmp_path):
    """Flip one bit of a valid checkpoint at a time: each load gives back the contents (a flip in bytes that do not
    carry them, such as a zip timestamp) or raises CheckpointError, never another error or other contents."""
    path = checkpoint_module.save_checkpoint(tmp_path / "good.npz", _small_checkpoint())
    data, good = path.read_bytes(), toolkit.load_checkpoint(path)
    flipped, outcomes = tmp_path / "flipped.npz", {"contents": 0, "refused": 0}
    for bit in np.random.default_rng(32).choice(8 * len(data), size=min(FLIPS_SAMPLED, 8 * len(data)),
                                                replace=False):
        changed = bytearray(data)
        changed[bit // 8] ^= 1 << (bit % 8)
        flipped.write_bytes(changed)
        try:
            loaded = toolkit.load_checkpoint(flipped)
        except toolkit.CheckpointError:
            outcomes["refused"] += 1
            continue
        assert loaded.metadata == good.metadata, bit
        for got, expected in ((loaded.params, good.params), (loaded.model_state, good.model_state),
                              (loaded.state["m"], good.state["m"])):
            assert got.keys() == expected.keys() and all(
                got[k].dtype == expected[k].dtype and np.array_equal(got[k], expected[k]) for k in got), bit
        outcomes["contents"] += 1
    assert outcomes["refused"] > 0 and outcomes["contents"] > 0, outcomes  # both outcomes happen: the test can fail


def test_files_that_are_not_checkpoints_are_refused(tmp_path):
    np.save(tmp_path / "w.npy", np.zeros(3))
    with pytest.raises(toolkit.CheckpointError, match="single NumPy array, not a toolkit checkpoint"):
        toolkit.load_checkpoint(tmp_path / "w.npy")
    (tmp_path / "text.npz").write_text("step,loss\n1,0.5\n")
    with pytest.raises(toolkit.CheckpointError, match="truncated or corrupted"):
        toolkit.load_checkpoint(tmp_path / "text.npz")
    # A valid archive and checksum around metadata of the wrong shape.
    arrays = {"params/0": np.arange(3.0), checkpoint_module._METADATA: checkpoint_module._text_array('{"params": 1}')}
    arrays[checkpoint_module._CHECKSUM] = checkpoint_module._text_array(checkpoint_module._checksum(arrays))
    np.savez(tmp_path / "names.npz", **arrays)
    with pytest.raises(toolkit.CheckpointError, match="'params' must be a list of names"):
        toolkit.load_checkpoint(tmp_path / "names.npz")


@pytest.mark.parametrize("key, value, words", [
    ("step", None, "'step' must be an int >= 0, got None (missing)"),
    ("step", -1, "'step' must be an int >= 0, got -1"),
    ("epoch", "2", "'epoch' must be an int >= 0, got '2'"),
    ("seed", 1.5, "'seed' must be an int"),
    ("rng_state", {"bit_generator": "PCG64"}, "RNG state is unusable"),
])
def test_restore_of_bad_metadata_is_typed_and_assigns_nothing(trained, key, value, words):
    checkpoint = checkpoint_module.trainer_checkpoint(trained)
    checkpoint.params = {name: value + 1.0 for name, value in checkpoint.params.items()}
    if value is None:
        del checkpoint.metadata[key]
    else:
        checkpoint.metadata[key] = value
    before = snapshot(trained)
    with pytest.raises(toolkit.CheckpointError, match=re.escape(words)):
        trained.restore(checkpoint)
    assert_unchanged(trained, before)


def test_restore_refuses_a_checkpoint_that_does_not_fit(trained, tmp_path, backend):
    path = tmp_path / "model.ckpt"
    trained.save(path)
    cases = [
        (toolkit.DataParallel(SMALL_MLP, backend, 1, toolkit.optim.Adam(0.05), dtype="float32"), "dtype float64"),
        (toolkit.DataParallel(SMALL_MLP, backend, 1, toolkit.optim.SGD(0.1), dtype="float64"), "written with Adam"),
        (toolkit.DataParallel(toolkit.models.mlp([FEATURES, 4, 3]), backend, 1, toolkit.optim.Adam(0.05),
                              dtype="float64"), "expected shape"),
    ]
    for trainer, words in cases:
        before = snapshot(trainer)
        with pytest.raises(toolkit.CheckpointError, match=words):
            trainer.restore(path)
        assert_unchanged(trainer, before)


@pytest.mark.parity
@needs_all_backends
@pytest.mark.parametrize("source, target", [("tensorflow", THEANO), (THEANO, "tensorflow")])
def test_checkpoint_moves_between_backends_with_parity(source, target, tmp_path):
    x, y = batch(64, seed=12)

    def run(trainer, steps):
        for _ in range(steps):
            index = trainer.rng.choice(len(x), size=7, replace=False)
            trainer.step(x[index], y[index])

    uninterrupted = toolkit.DataParallel(SMALL_MLP, source, 2, toolkit.optim.Adam(0.02), dtype="float64")
    run(uninterrupted, 15)
    first = toolkit.DataParallel(SMALL_MLP, source, 2, toolkit.optim.Adam(0.02), dtype="float64")
    run(first, 5)
    first.save(tmp_path / "model.ckpt")
    moved = toolkit.DataParallel(SMALL_MLP, target, 4, toolkit.optim.Adam(0.02), dtype="float64", seed=99)
    moved.restore(tmp_path / "model.ckpt")
    run(moved, 10)
    assert moved.step_count == 15
    assert max_abs_diff(moved.params(), uninterrupted.params()) <= FLOAT64_ATOL
