"""Training a Keras model of several outputs: ``fit(x, [y1, y2])`` or a dict by output name, a loss per output and
``loss_weights`` as Keras compiles them, each output's loss logged as ``<output>_loss`` (and ``val_<output>_loss``)
as Keras' history names them, the targets carried through batches, shuffles, shards and padding like one array.
Compared with Keras' own fit in float64 on 1 and 2 devices."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit

RNG = np.random.default_rng(31)
#: Ten examples in batches of four: the last batch (two) is smaller, and split over 2 devices, uneven shards.
X = RNG.normal(size=(10, 3))
SCORES, KINDS = RNG.normal(size=(10, 2)), RNG.integers(0, 3, size=10)
WEIGHTS = np.array([1.0, 0.0, 2.5, 0.5, 1.5, 3.0, 1.0, 0.75, 2.0, 0.125])
VALIDATION = (RNG.normal(size=(5, 3)), [RNG.normal(size=(5, 2)), RNG.integers(0, 3, size=5)])
BATCH, EPOCHS = 4, 2
#: Keras rounds learning rates, betas and epsilon to float32: these are the same numbers in float64.
LR, BETA2, EPS = 2.0 ** -4, 1 - 2.0 ** -10, 2.0 ** -20
TOLERANCE = 1e-10
SEED = 0


def _two_heads(keras, optimizer: str):
    """A shared hidden layer and two heads: a regression (mse) and a classifier (sparse crossentropy)."""
    keras.utils.set_random_seed(9)
    x = keras.Input((3,))
    h = keras.layers.Dense(4, activation="tanh")(x)
    model = keras.Model(x, [keras.layers.Dense(2, name="score")(h),
                            keras.layers.Dense(3, activation="softmax", name="kind")(h)])
    keras_optimizer = (keras.optimizers.SGD(LR) if optimizer == "sgd"
                       else keras.optimizers.Adam(LR, beta_1=0.875, beta_2=BETA2, epsilon=EPS))
    model.compile(optimizer=keras_optimizer, loss={"score": "mse", "kind": "sparse_categorical_crossentropy"},
                  loss_weights=[0.5, 2.0])
    return model


def _optimizer(name: str):
    return toolkit.optim.SGD(LR) if name == "sgd" else toolkit.optim.Adam(LR, beta1=0.875, beta2=BETA2, eps=EPS)


# Each fit compiles a few graphs on the Theano family: one device count each covers one shard (the host step) and
# uneven, padded shards (the mesh)
@pytest.mark.parametrize(("optimizer", "targets", "n_devices"), [("sgd", "list", 2), ("adam", "dict", 1)],
                         ids=["sgd-list-2dev", "adam-dict-1dev"])
def test_keras_fit_of_several_outputs(keras, backend, n_devices, optimizer, targets):
    model = _two_heads(keras, optimizer)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, n_devices, _optimizer(optimizer),
                                   dtype="float64", seed=SEED)
    y = [SCORES, KINDS] if targets == "list" else {"kind": KINDS, "score": SCORES}
    weighing = {"sample_weight": WEIGHTS} if optimizer == "sgd" else {}  # one weight per example, every output's
    vx, (vs, vk) = VALIDATION
    validation = (vx, [vs, vk] if targets == "list" else {"score": vs, "kind": vk})  # shaped like the training's
    history = trainer.fit(X, y, epochs=EPOCHS, batch_size=BATCH, shuffle=True, validation_data=validation,
                          verbose=0, **weighing)
    # Keras shuffles in its own order: its fit is given the orders the trainer drew (its rng, seeded with SEED,
    # draws nothing else for an imported model), unshuffled
    drawn = np.random.default_rng(SEED)
    orders = [drawn.permutation(len(X)) for _ in range(EPOCHS)]
    expected = {}
    for order in orders:
        epoch = model.fit(X[order], [SCORES[order], KINDS[order]], epochs=1, batch_size=BATCH, shuffle=False,
                          validation_data=VALIDATION, verbose=0,
                          **{k: v[order] for k, v in weighing.items()}).history
        for name, values in epoch.items():
            expected.setdefault(name, []).extend(values)
    assert sorted(history.history) == sorted(expected)  # loss, score_loss, kind_loss and their val_
    for name, values in expected.items():
        assert np.max(np.abs(np.subtract(history.history[name], values))) <= TOLERANCE, name
    keras_weights = {"/".join(w.path.split("/")[-2:]): np.asarray(w.numpy()) for w in model.weights}
    for name, value in keras_weights.items():
        assert np.max(np.abs(trainer.params()[name] - value)) <= TOLERANCE, name


def test_targets_of_several_outputs_are_checked_before_any_step(keras, backend):
    trainer = toolkit.DataParallel(toolkit.from_keras(_two_heads(keras, "sgd")), backend, 2, _optimizer("sgd"),
                                   dtype="float64")
    before = trainer.params()
    with pytest.raises(toolkit.ArgumentError, match="class_weight is only supported for a model of one output"):
        trainer.fit(X, [SCORES, KINDS], class_weight={0: 2.0}, verbose=0)
    with pytest.raises(toolkit.ShapeError, match="same number of examples"):
        trainer.fit(X, [SCORES, KINDS[:9]], verbose=0)
    bad = SCORES.copy()
    bad[3, 1] = np.nan
    with pytest.raises(toolkit.NonFiniteError, match=r"y\[0\] has 1 NaN"):
        trainer.fit(X, [bad, KINDS], verbose=0)
    with pytest.raises(toolkit.ShapeError, match="shaped like the training data's"):
        trainer.fit(X, [SCORES, KINDS], validation_data=(X, [SCORES[:, :1], KINDS]), verbose=0)
    assert trainer.step_count == 0
    for name, value in trainer.params().items():
        np.testing.assert_array_equal(value, before[name])
