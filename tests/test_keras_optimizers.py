"""What a Keras model was compiled with comes with the model (issue 47): a loaded ``.keras`` model whose optimizer
has trained continues in a trainer given no optimizer as Keras' own fit continues it (step count, slots, losses and
weights, float64 within 1e-10, on two devices); an optimizer or setting the toolkit does not apply is named when
such a trainer is made, and a trainer given an optimizer trains with that one; compile options the trainers do not
apply are refused at the import."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from toolkit.keras.optimizers import TRANSLATED

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None
                                or importlib.util.find_spec("tensorflow") is None,
                                reason='needs keras on TensorFlow (pip install "multigpu-toolkit[tensorflow]")')

#: float64 agreement with Keras on TensorFlow: the same formulas, summed in possibly different orders.
TOLERANCE = 1e-10
#: 4 batches an epoch; Keras trains 2 epochs before the model is saved, then each side one more.
EXAMPLES, BATCH, EPOCHS_BEFORE = 16, 4, 2
RNG = np.random.default_rng(147)
X, Y = RNG.normal(size=(EXAMPLES, 3)), RNG.normal(size=(EXAMPLES, 1))
#: Hyperparameters exact in float32: Keras on TensorFlow keeps the rate in float32 and computes Adam's bias
#: correction from float32 betas (beta_2=0.999 puts its float64 weights 1e-7 from the formula's).
ADAM = {"learning_rate": 2.0 ** -6, "beta_1": 0.875, "beta_2": 1 - 2.0 ** -10}
#: One Keras optimizer of each translated kind, with the settings the translation applies.
OPTIMIZERS = {"SGD": {"learning_rate": 2.0 ** -4, "momentum": 0.5, "clipnorm": 0.5},
              "Adam": ADAM, "AdamW": {**ADAM, "weight_decay": 2.0 ** -7},
              "RMSprop": {"learning_rate": 2.0 ** -6, "global_clipnorm": 0.5}}


def _model(keras, optimizer):
    keras.utils.set_random_seed(47)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
    model.compile(optimizer, "mse")
    return model


def _fit(fitter, epochs: int = 1):
    return fitter.fit(X, Y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0).history["loss"]


def test_a_loaded_keras_model_continues_as_keras_fit_continues_it(keras, backend, tmp_path):
    """Each translated optimizer: trained 2 epochs in Keras, saved and loaded, then one epoch in Keras' fit and in
    a trainer given no optimizer, on two devices: the trainer starts at Keras' step with Keras' slots, and ends
    with Keras' losses and weights."""
    assert set(OPTIMIZERS) == set(TRANSLATED)
    for kind, settings in OPTIMIZERS.items():
        model = _model(keras, getattr(keras.optimizers, kind)(**settings))
        _fit(model, EPOCHS_BEFORE)
        model.save(tmp_path / f"{kind}.keras")
        loaded = keras.models.load_model(tmp_path / f"{kind}.keras")
        trainer = toolkit.DataParallel(toolkit.from_keras(loaded), backend, 2, dtype="float64")
        assert type(trainer.optimizer).__name__ == kind
        assert trainer.step_count == int(loaded.optimizer.iterations) == EPOCHS_BEFORE * EXAMPLES // BATCH
        first = loaded.optimizer.momentums[0] if kind == "SGD" else loaded.optimizer._velocities[0]
        slot = "velocity" if kind == "SGD" else "v"
        kernel = next(iter(trainer.params()))  # the first Dense layer's
        assert np.array_equal(trainer.optimizer_state()[slot][kernel], first.numpy()), kind
        mine, theirs = _fit(trainer), _fit(loaded)
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=TOLERANCE, err_msg=kind)
        for (name, value), keras_value in zip(trainer.params().items(), loaded.get_weights()):
            np.testing.assert_allclose(value, keras_value, rtol=0, atol=TOLERANCE, err_msg=f"{kind}: {name}")
        assert trainer.step_count == int(loaded.optimizer.iterations)


def test_an_optimizer_the_toolkit_does_not_apply_is_named(keras, backend):
    """A Keras optimizer or setting the translation does not apply: the import works, a trainer given no optimizer
    is refused naming it (before anything is placed), and one given an optimizer takes that one."""
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    cases = [(keras.optimizers.Nadam(), "Nadam is not supported"),
             (keras.optimizers.SGD(0.1, momentum=0.5, nesterov=True), "SGD has nesterov=True"),
             (keras.optimizers.Adam(amsgrad=True), "Adam has amsgrad=True"),
             (keras.optimizers.Adam(clipvalue=1.0), "Adam has clipvalue=1.0"),
             (keras.optimizers.Adam(use_ema=True), "Adam has use_ema=True"),
             (keras.optimizers.RMSprop(momentum=0.5), "RMSprop has momentum=0.5"),
             (keras.optimizers.SGD(weight_decay=0.1), "SGD has weight_decay=0.1"),
             (keras.optimizers.Adam(schedule), "Adam has the learning-rate schedule ExponentialDecay")]
    excluded = keras.optimizers.AdamW()
    excluded.exclude_from_weight_decay(var_names=["bias"])
    cases.append((excluded, "AdamW has exclude_from_weight_decay"))
    for optimizer, words in cases:
        model = toolkit.from_keras(_model(keras, optimizer))
        with pytest.raises(toolkit.ArgumentTypeError, match=f"no optimizer given, and the model's cannot be used: "
                                                            f"the model's optimizer {words}"):
            toolkit.DataParallel(model, backend, 1, dtype="float64")
    trainer = toolkit.DataParallel(model, backend, 1, toolkit.optim.SGD(0.5), dtype="float64")
    assert repr(trainer.optimizer).startswith("SGD(lr=0.5") and trainer.step_count == 0
    uncompiled = toolkit.Model(model.init, model.forward, model.loss, name="plain")
    with pytest.raises(toolkit.ArgumentTypeError, match="no optimizer given, and the model 'plain' brings none"):
        toolkit.DataParallel(uncompiled, backend, 1, dtype="float64")


def test_compile_options_the_trainers_do_not_apply_are_refused(keras):
    """run_eagerly=True and steps_per_execution other than 1 are refused by name at the import."""
    for options, words in [({"run_eagerly": True}, "compiled with run_eagerly=True"),
                           ({"steps_per_execution": 4}, "compiled with steps_per_execution=4")]:
        model = _model(keras, "sgd")
        model.compile("sgd", "mse", **options)
        with pytest.raises(toolkit.KerasImportError, match=words):
            toolkit.from_keras(model)


def test_a_trainers_run_written_back_continues_in_keras(keras, backend, tmp_path):
    """to_keras with the optimizer state: the Keras model, saved as .keras and loaded, continues the trainer's run
    as the trainer does (Adam, whose step count and both slots matter); a state the model's optimizer cannot take is
    refused, nothing written."""
    model = _model(keras, keras.optimizers.Adam(**ADAM))  # not built: to_keras builds it
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, dtype="float64")
    _fit(trainer)
    before = [w.copy() for w in model.get_weights()]
    wrong = toolkit.optim.OptimizerState(trainer.step_count, {"velocity": trainer.optimizer_state()["m"]})
    with pytest.raises(toolkit.KerasImportError, match=r"slots \['velocity'\], the model's Adam keeps \['m', 'v'\]"):
        toolkit.to_keras(trainer.params(), model, trainer.state(), optimizer_state=wrong)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), before)) and not model.optimizer.built
    toolkit.to_keras(trainer.params(), model, trainer.state(),
                     optimizer_state=toolkit.optim.OptimizerState(trainer.step_count, trainer.optimizer_state()))
    model.save(tmp_path / "run.keras")
    loaded = keras.models.load_model(tmp_path / "run.keras")
    assert int(loaded.optimizer.iterations) == trainer.step_count == EXAMPLES // BATCH
    np.testing.assert_allclose(_fit(loaded), _fit(trainer), rtol=0, atol=TOLERANCE)
    for value, keras_value in zip(trainer.params().values(), loaded.get_weights()):
        np.testing.assert_allclose(value, keras_value, rtol=0, atol=TOLERANCE)
