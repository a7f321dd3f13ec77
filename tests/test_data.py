"""fit, evaluate and predict from sources of batches (toolkit.data): generators, iterables, tf.data datasets and
Keras' PyDataset give the numbers the same batches as arrays give, bit for bit on every backend and device count,
and Keras' own fit's within 1e-10 (float64); steps_per_epoch, validation from a source and validation_split as
Keras takes them; reading ahead on a thread, bounded; bad input refused with the steps taken kept. The tests whose
names hold "keras" need TensorFlow and Keras: CI runs them on every backend (the parity sessions)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import toolkit
from tests.helpers import max_abs_diff
from toolkit.data import PREFETCH_BATCHES

RNG = np.random.default_rng(46)
X, Y, W = RNG.normal(size=(23, 5)), RNG.integers(0, 3, size=23), RNG.uniform(0.5, 2.0, size=23)
VX, VY = RNG.normal(size=(9, 5)), RNG.integers(0, 3, size=9)
MODEL = toolkit.models.mlp([5, 7, 3])
#: 23 examples in batches of 5: four of 5 and a last, smaller one of 3 (split unevenly over 2 and 4 devices).
BATCH = 5
#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -4


def _trainer(backend, n_devices=1, seed=3):
    return toolkit.DataParallel(MODEL, backend, n_devices, toolkit.optim.Adam(0.05), dtype="float64", seed=seed)


def _batches(x, y, w=None, size=BATCH) -> list[tuple]:
    return [(x[i:i + size], y[i:i + size], *(() if w is None else (w[i:i + size],))) for i in range(0, len(y), size)]


class Batches:
    """A re-iterable iterable of batches without a length (each ``iter`` a new pass), counting its passes."""

    def __init__(self, batches: list[tuple]) -> None:
        self.batches, self.passes = batches, 0

    def __iter__(self):
        self.passes += 1
        return iter(self.batches)


def test_a_generator_and_an_iterable_train_evaluate_and_predict_as_arrays_do(backend, n_devices):
    """Each batch of a source is split over the devices as the same array batch is (the uneven last one too), its
    third entry weighs it as sample_weight does: parameters and history bit for bit equal to arrays in order, for an
    iterable (a new pass each epoch, validation from one too) and a generator (one epoch); evaluate and predict
    over a source equal theirs over the arrays in the same batches."""
    arrays = _trainer(backend, n_devices)
    expected = arrays.fit(X, Y, epochs=2, batch_size=BATCH, shuffle=False, sample_weight=W, verbose=0,
                          validation_data=(VX, VY), metrics=["accuracy"]).history
    training, validation = Batches(_batches(X, Y, W)), Batches(_batches(VX, VY))
    streamed = _trainer(backend, n_devices)
    got = streamed.fit(training, epochs=2, shuffle=False, validation_data=validation, verbose=0,
                       metrics=["accuracy"]).history
    assert (training.passes, validation.passes) == (2, 2)
    assert got == expected and max_abs_diff(streamed.params(), arrays.params()) == 0.0
    assert streamed.step_count == 10
    generated = _trainer(backend, n_devices)
    generated.fit((batch for batch in _batches(X, Y, W)), shuffle=False, verbose=0, metrics=["accuracy"])
    one_epoch = _trainer(backend, n_devices)
    one_epoch.fit(X, Y, batch_size=BATCH, shuffle=False, sample_weight=W, verbose=0)
    assert max_abs_diff(generated.params(), one_epoch.params()) == 0.0
    assert streamed.evaluate(iter(_batches(VX, VY, size=4)), metrics=["accuracy"]) == \
        streamed.evaluate(VX, VY, batch_size=4, metrics=["accuracy"])
    batches = iter([(VX[:4],), VX[4:8], (VX[8:], VY[8:])])  # x, (x,) or (x, y): predict takes x
    np.testing.assert_array_equal(streamed.predict(batches), streamed.predict(VX, batch_size=4))


def test_model_parallel_fits_named_inputs_from_a_source(backend):
    """ModelParallel takes the same loop: a generator of batches of named inputs (dicts, as Keras reads them)
    trains as the same arrays in order, bit for bit."""
    from tests.test_model_parallel import data, shared_lstm

    model = shared_lstm()
    x, y = data(model, n=8)
    trainers = [toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.05), dtype="float64") for _ in range(2)]
    trainers[0].fit(x, y, batch_size=3, shuffle=False, verbose=0)
    trainers[1].fit((({k: v[i:i + 3] for k, v in x.items()}, y[i:i + 3]) for i in range(0, 8, 3)), verbose=0,
                    shuffle=False)
    assert trainers[1].step_count == 3 and max_abs_diff(trainers[0].params(), trainers[1].params()) == 0.0


def test_steps_per_epoch_takes_batches_as_keras_does(backend):
    """With steps_per_epoch an epoch takes that many batches and the data goes on into the next epoch where the last
    stopped; a pass that ends inside an epoch (of known length, arrays; or found at its end, an iterable) ends that
    epoch early with Keras' warning, and the next epoch starts a new pass (5 batches, 3 an epoch: batches 0-2, 3-4,
    then a new pass). A generator that runs out ends the fit after that epoch, warned, rather than running epochs of
    no steps."""
    batches = _batches(X, Y)
    by_hand = _trainer(backend)
    for k in (0, 1, 2, 3, 4, 0, 1, 2):
        by_hand.step(*batches[k])
    for data in ({"x": X, "y": Y, "batch_size": BATCH}, {"x": Batches(batches)}):
        trainer = _trainer(backend)
        with pytest.warns(UserWarning, match="ran out of data") as caught:
            history = trainer.fit(**data, epochs=3, steps_per_epoch=3, shuffle=False, verbose=0)
        assert len([w for w in caught if "ran out" in str(w.message)]) == 1
        assert trainer.step_count == 8 and history.epoch == [0, 1, 2]
        assert max_abs_diff(trainer.params(), by_hand.params()) == 0.0
    generator = _trainer(backend)
    with pytest.warns(UserWarning, match="ran out of data") as caught:
        history = generator.fit(iter(batches), epochs=3, steps_per_epoch=3, shuffle=False, verbose=0)
    assert len([w for w in caught if "ran out" in str(w.message)]) == 1
    assert (generator.step_count, generator.epoch_count, history.epoch) == (5, 2, [0, 1])


def test_a_source_read_ahead_on_one_thread_bounded(backend):
    """The batches are read on the reading thread, in order, never more than PREFETCH_BATCHES (+ the one being
    converted) ahead of the step; the fit's numbers are the arrays' (above)."""
    read, threads, ahead = [], set(), []

    def generator():
        for batch in _batches(X, Y):
            threads.add(threading.current_thread().name)
            read.append(len(read))
            yield batch

    class Watch(toolkit.callbacks.Callback):
        def on_step_end(self, step, logs):
            ahead.append(len(read) - step)

    _trainer(backend).fit(generator(), shuffle=False, verbose=0, callbacks=[Watch()])
    assert threads == {"toolkit-prefetch"} and read == list(range(5))
    assert max(ahead) <= PREFETCH_BATCHES + 1


def test_bad_sources_are_refused_and_the_steps_taken_kept(backend):
    """Keras' refusals (y, sample_weight or batch_size with a source; validation_split; an endless source without
    steps_per_epoch), a batch of the wrong structure, dtype or shape, an empty source: typed errors before the
    first step, nothing changed; a generator that raises mid-epoch: DataError naming the batch, its two steps
    kept (the trainer equals one that took them)."""
    trainer = _trainer(backend)
    refusals = [
        (dict(x=Batches(_batches(X, Y)), y=Y), toolkit.ArgumentError, "y must be None when x is an iterable"),
        (dict(x=Batches(_batches(X, Y)), sample_weight=W), toolkit.ArgumentError, "sample_weight must be None"),
        (dict(x=Batches(_batches(X, Y)), batch_size=4), toolkit.ArgumentError, "batch_size must be None"),
        (dict(x=Batches(_batches(X, Y)), validation_split=0.2), toolkit.ArgumentError, "only supported for arrays"),
        (dict(x=iter([(X[:5], Y[:5], W[:5], W[:5])])), toolkit.ShapeError, "batch 0 of an iterator is a tuple of 4"),
        (dict(x=iter([(X[:5].astype(str), Y[:5])])), toolkit.DTypeError, "batch 0 .*dtype <U"),
        (dict(x=iter([(X[:5, :4], Y[:5])])), toolkit.ComputeError, r"\S"),  # the framework's refusal, first batch
        (dict(x=iter([(X[0], Y[0])])), toolkit.ShapeError, "batch 0 of an iterator: x and y need a batch axis"),
        (dict(x=iter([X[:5]])), toolkit.ShapeError, "batch 0 of an iterator has no targets"),
        (dict(x=iter([])), toolkit.ShapeError, r"x \(an iterator\) gave no batch: it is empty"),
        (dict(x=(b for b in [])), toolkit.ShapeError, r"x \(a generator\) gave no batch: it is empty"),
        (dict(x=3), toolkit.ShapeError, "x and y need a batch axis"),
        (dict(x=_batches(X, Y)), toolkit.ShapeError, r"is array data.*iter\(batches\)"),
    ]
    for arguments, error, message in refusals:
        with pytest.raises(error, match=message):
            trainer.fit(**arguments, shuffle=False, verbose=0)
        assert trainer.step_count == 0
    with pytest.raises(toolkit.ArgumentError, match="y must be None when x is an iterator"):
        trainer.evaluate(iter(_batches(X, Y)), Y)

    def failing():
        yield from _batches(X, Y)[:2]
        raise OSError("the disk went away")

    generator = failing()
    with pytest.raises(toolkit.DataError, match="generator raised OSError while giving batch 2.*disk went away"):
        trainer.fit(generator, shuffle=False, verbose=0)
    with pytest.raises(toolkit.DataError, match=r"x \(a generator\) has run out: it ran out in an earlier run"):
        trainer.evaluate(generator)
    by_hand = _trainer(backend)
    for batch in _batches(X, Y)[:2]:
        by_hand.step(*batch)
    assert trainer.step_count == 2 and max_abs_diff(trainer.params(), by_hand.params()) == 0.0
    # a validation iterator that runs out in epoch 2 (3 batches, 3 a validation): named, both epochs' steps kept
    with pytest.warns(UserWarning, match="ran out of data"), \
            pytest.raises(toolkit.DataError, match=r"validation_data \(an iterator\) has run out: it gave 3 batches"):
        trainer.fit(X, Y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0,
                    validation_data=iter(_batches(VX, VY, size=3)), validation_steps=3)
    assert trainer.step_count == 2 + 2 * 5


class _NoLength(Batches):
    """An iterable whose ``__len__`` raises, as a torch IterableDataset's does: a pass of unknown length."""

    def __len__(self):
        raise TypeError("this dataset has no length")


def test_counts_and_lengths_as_keras_reads_them(backend):
    """Arrays with ``steps`` and no batch_size are split into that many batches (Keras' array adapter; fit's
    steps_per_epoch too: tests/test_data.py's Keras fit); with batch_size, the first ``steps`` batches of it, warned
    where there are fewer; an iterable whose len() raises is read as one of unknown length (a pass an epoch)."""
    x, y = np.concatenate([X] * 4), np.concatenate([Y] * 4)  # 92 examples: 2 steps are batches of 46
    trainer = _trainer(backend)
    assert trainer.evaluate(x, y, steps=2) == trainer.evaluate(x, y, batch_size=46)
    assert len(trainer.predict(x, steps=2)) == 92 and len(trainer.predict(x, batch_size=10, steps=3)) == 30
    with pytest.warns(UserWarning, match="ran out of data"):
        assert trainer.evaluate(x, y, batch_size=40, steps=4) == trainer.evaluate(x, y, batch_size=40)
    source = _NoLength(_batches(X, Y))
    params = []

    class Steps(toolkit.callbacks.Callback):
        def on_train_begin(self):
            params.append(self.params["steps"])

    trainer.fit(source, shuffle=False, verbose=0, callbacks=[Steps()])
    assert params == [None] and trainer.step_count == 5


def test_validation_split_is_keras(backend):
    """The last fraction of the arrays, before any shuffling, is held out (floor of the training share, as Keras):
    the fit equals one on the first examples validated on the rest; a split that leaves nothing is refused."""
    split = _trainer(backend)
    history = split.fit(X, Y, epochs=2, batch_size=BATCH, validation_split=0.25, verbose=0).history
    by_hand = _trainer(backend)  # floor(23 * 0.75) = 17 training examples
    expected = by_hand.fit(X[:17], Y[:17], epochs=2, batch_size=BATCH, validation_data=(X[17:], Y[17:]),
                           verbose=0).history
    assert history == expected and max_abs_diff(split.params(), by_hand.params()) == 0.0
    for fraction, error in ((0.99, toolkit.ShapeError), (1.0, toolkit.ArgumentError), ("0.2", toolkit.ArgumentError)):
        with pytest.raises(error, match="validation_split"):
            split.fit(X, Y, validation_split=fraction, verbose=0)
    # validation_data overrides the split (Keras' precedence): every example trains, on arrays and a source alike
    for x, y, batch_size in ((X, Y, BATCH), (Batches(_batches(X, Y)), None, None)):
        overridden, whole = _trainer(backend), _trainer(backend)
        got = overridden.fit(x, y, batch_size=batch_size, shuffle=False, validation_split=0.25,
                             validation_data=(VX, VY), validation_batch_size=BATCH, verbose=0).history
        assert got == whole.fit(X, Y, batch_size=BATCH, shuffle=False, validation_data=(VX, VY), verbose=0).history
        assert overridden.step_count == 5 and max_abs_diff(overridden.params(), whole.params()) == 0.0


def test_a_fit_of_steps_per_epoch_resumed_inside_an_epoch_takes_that_epochs_steps(backend, tmp_path):
    """Interrupted after step 3 (the first of epoch 1, 2 steps an epoch), the same fit again resumes from its
    backup and takes the one step left of that epoch: 4 steps in all, equal to the fit never interrupted."""

    class Interrupt(toolkit.callbacks.Callback):
        def on_step_end(self, step, logs):
            if step == 3:
                raise RuntimeError("interrupted")

    def fit(trainer, *callbacks):
        return trainer.fit(Batches(_batches(X, Y)), epochs=2, steps_per_epoch=2, shuffle=False, verbose=0,
                           callbacks=[toolkit.callbacks.BackupAndRestore(tmp_path / "backup", save_freq=1),
                                      *callbacks])

    straight, resumed = _trainer(backend), _trainer(backend)
    expected = fit(straight).history
    with pytest.raises(RuntimeError, match="interrupted"):
        fit(resumed, Interrupt())
    assert fit(resumed).history == expected
    assert resumed.step_count == 4 and max_abs_diff(resumed.params(), straight.params()) == 0.0


def test_a_blocked_source_does_not_hang_the_end_of_a_fit(backend, monkeypatch):
    """A generator blocked in reading (a network read, say) after the fit's last step: the fit ends after
    CLOSE_TIMEOUT_S, warned, its reading thread left to finish."""
    monkeypatch.setattr(toolkit.data.feed, "CLOSE_TIMEOUT_S", 0.2)
    release = threading.Event()

    def generator():
        yield from _batches(X, Y)[:2]
        release.wait(60)
        yield from _batches(X, Y)[2:]

    trainer = _trainer(backend)
    with pytest.warns(RuntimeWarning, match="still being read 0.2 s after its run ended"):
        trainer.fit(generator(), steps_per_epoch=2, shuffle=False, verbose=0)
    release.set()
    assert trainer.step_count == 2


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow", reason='needs tensorflow (pip install "multigpu-toolkit[tensorflow]")')


def _keras_model(keras):
    keras.utils.set_random_seed(5)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(7, activation="tanh"), keras.layers.Dense(3)],
                             name="mlp")
    model.compile(optimizer=keras.optimizers.SGD(LR), loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True), metrics=["accuracy"])
    return model


def test_a_keras_fit_from_tf_data_equals_keras_own(keras, tf, backend):
    """A from_keras model fitted from tf.data datasets equals Keras' own fit on the same datasets within 1e-10 in
    float64 (history and weights): ``.repeat()`` with steps_per_epoch (an epoch crossing the end of a pass),
    validation from a dataset with validation_steps, and a finite dataset of an uneven last batch; and
    validation_split over arrays. Keras warns that shuffle does not apply to a dataset; so does the toolkit."""
    data = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)  # 6 batches, the last of 3
    validation = tf.data.Dataset.from_tensor_slices((VX, VY)).batch(4)
    runs = [dict(x=data.repeat(), epochs=2, steps_per_epoch=4, validation_data=validation.repeat(),
                 validation_steps=2),
            dict(x=data, epochs=2, validation_data=validation),
            dict(x=X, y=Y, epochs=2, batch_size=4, validation_split=0.25, shuffle=False),
            # no batch_size: batches of ceil(23 / 3) = 8, validated in batches of ceil(9 / 2) = 5 (Keras' adapter)
            dict(x=X, y=Y, epochs=1, steps_per_epoch=3, validation_data=(VX, VY), validation_steps=2, shuffle=False)]
    for run in runs:
        model = _keras_model(keras)
        trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 2, toolkit.optim.SGD(LR), dtype="float64")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # shuffle's warning, Keras' and the toolkit's
            got = trainer.fit(**run, verbose=0).history
            expected = model.fit(**run, verbose=0).history
        assert sorted(got) == sorted(expected), run
        for name, values in expected.items():
            np.testing.assert_allclose(got[name], values, rtol=0, atol=1e-10, err_msg=name)
        weights = {w.path.removeprefix("mlp/"): np.asarray(w.numpy()) for w in model.weights}
        assert max_abs_diff(trainer.params(), weights) <= 1e-10
    with pytest.raises(toolkit.ShapeError, match="look like single examples"):
        trainer.fit(tf.data.Dataset.from_tensor_slices((X, Y)), verbose=0)
    for call in (trainer.fit, trainer.evaluate):
        with pytest.raises(toolkit.ArgumentError, match="never ends .* pass (steps_per_epoch|steps) "):
            call(data.repeat(), verbose=0) if call == trainer.fit else call(data.repeat())


def test_a_keras_pydataset_fits_with_its_order_drawn_from_the_trainer(keras, backend):
    """A PyDataset's batches in an order drawn from the trainer's RNG each epoch (shuffle, as Keras shuffles its
    indices), read by 1 or 2 threads alike; on_epoch_end called each epoch; use_multiprocessing refused by name."""

    class Digits(keras.utils.PyDataset):
        def __init__(self, **options):
            super().__init__(**options)
            self.batches, self.ends = _batches(X, Y), 0

        def __len__(self):
            return len(self.batches)

        def __getitem__(self, index):
            return self.batches[index]

        def on_epoch_end(self):
            self.ends += 1

    by_hand = _trainer(backend)
    for _ in range(2):
        for index in by_hand.rng.permutation(5):
            by_hand.step(*_batches(X, Y)[index])
    for workers in (1, 2):
        trainer, data = _trainer(backend), Digits(workers=workers, max_queue_size=3)
        trainer.fit(data, epochs=2, verbose=0)
        assert data.ends == 2 and max_abs_diff(trainer.params(), by_hand.params()) == 0.0
        assert trainer.rng.bit_generator.state == by_hand.rng.bit_generator.state
    with pytest.raises(toolkit.ArgumentError, match="use_multiprocessing=True is not supported"):
        trainer.fit(Digits(use_multiprocessing=True), verbose=0)


#: The memory test's file: 128 MiB of float32 rows of 256 features (CI's machines hold it on disk), read in batches
#: of 1 MiB.
MEMORY_ROWS, MEMORY_FEATURES, MEMORY_BATCH = 1 << 17, 256, 1024
#: The bound: a pass over the file grows the process's peak resident memory by less than this share of the file.
MEMORY_SHARE = 0.10
#: One fit from NpyBatches in a fresh process (its peak memory its own): a first fit of 4 batches compiles the step
#: and fills the read-ahead queue, then a pass over the whole file; prints the peak's growth in bytes over the pass.
_MEMORY_RUN = """
import sys
import toolkit
from toolkit.data import NpyBatches

x, y, backend, batch = sys.argv[1:]
def peak():
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))
trainer = toolkit.DataParallel(toolkit.models.mlp([256, 16, 10]), backend, 1, toolkit.optim.SGD(0.01),
                               dtype="float32")
data = NpyBatches(x, y, int(batch))
trainer.fit(data, steps_per_epoch=4, verbose=0)
before = peak()
trainer.fit(data, verbose=0)
assert trainer.step_count == 4 + len(data)
print(peak() - before)
"""


def test_training_from_npy_files_larger_than_memory_keeps_memory_flat(backend_name, tmp_path):
    """A pass over a 128 MiB .npy file through NpyBatches (file reads into batch-sized arrays, read ahead on the
    thread) grows the peak RSS by less than 10% of the file (where a generator over np.load(mmap_mode="r") slices
    grows it by the whole file, measured: its mapped pages count as resident; toolkit/data/files.py)."""
    import subprocess
    import sys

    x = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype="float32",
                                  shape=(MEMORY_ROWS, MEMORY_FEATURES))
    x[:] = RNG.normal(size=(1, MEMORY_FEATURES)).astype("float32")
    x.flush()
    del x
    np.save(tmp_path / "y.npy", np.arange(MEMORY_ROWS) % 10)
    run = subprocess.run([sys.executable, "-c", _MEMORY_RUN, str(tmp_path / "x.npy"), str(tmp_path / "y.npy"),
                          backend_name, str(MEMORY_BATCH)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    grown, size = int(run.stdout.split()[-1]), MEMORY_ROWS * MEMORY_FEATURES * 4
    assert grown < MEMORY_SHARE * size, f"the peak RSS grew {grown / 2**20:.1f} MiB over a {size / 2**20:.0f} MiB file"
