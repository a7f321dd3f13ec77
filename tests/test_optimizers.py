"""Each optimizer, with gradient clipping and schedules, against Keras' optimizer of the same name on the same
parameters and gradients, on every backend; and the refusals of bad hyperparameters."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit

optim = toolkit.optim
RNG = np.random.default_rng(11)
PARAMS = {"kernel": RNG.normal(size=(4, 3)), "bias": RNG.normal(size=(3,))}
#: Three steps of gradients; the second is large so that clipping bites, the third has a zero gradient.
GRADS = [{k: RNG.normal(size=v.shape) * scale for k, v in PARAMS.items()} for scale in (0.3, 5.0, 0.0)]
#: Keras rounds its learning rate and betas to float32: these are the same numbers in float64.
LR, BETA1, BETA2, RHO = 2.0 ** -5, 0.875, 1 - 2.0 ** -10, 0.75

# id -> (toolkit optimizer, Keras optimizer class name and arguments)
CASES = {
    "sgd_momentum": (optim.SGD(LR, momentum=0.5), ("SGD", {"learning_rate": LR, "momentum": 0.5})),
    "adam": (optim.Adam(LR, BETA1, BETA2), ("Adam", {"learning_rate": LR, "beta_1": BETA1, "beta_2": BETA2})),
    "rmsprop": (optim.RMSprop(LR, RHO), ("RMSprop", {"learning_rate": LR, "rho": RHO})),
    "adamw": (optim.AdamW(LR, weight_decay=0.25, beta1=BETA1, beta2=BETA2),
              ("AdamW", {"learning_rate": LR, "weight_decay": 0.25, "beta_1": BETA1, "beta_2": BETA2})),
    "adam_clipnorm": (optim.Adam(LR, BETA1, BETA2, clipnorm=1.5),
                      ("Adam", {"learning_rate": LR, "beta_1": BETA1, "beta_2": BETA2, "clipnorm": 1.5})),
    "sgd_global_clipnorm": (optim.SGD(LR, global_clipnorm=2.0), ("SGD", {"learning_rate": LR,
                                                                         "global_clipnorm": 2.0})),
    "adamw_schedule_clipnorm": (
        optim.AdamW(optim.schedules.PiecewiseConstantDecay([1], [LR, LR / 4]), weight_decay=0.5, beta1=BETA1,
                    beta2=BETA2, clipnorm=0.75),
        ("AdamW", {"learning_rate": "piecewise", "weight_decay": 0.5, "beta_1": BETA1, "beta_2": BETA2,
                   "clipnorm": 0.75})),
}


def _toolkit_run(backend, optimizer):
    state = {slot: {k: np.zeros_like(v) for k, v in PARAMS.items()} for slot in optimizer.state_slots()}
    params, device = dict(PARAMS), backend.list_devices()[0]
    for step, grads in enumerate(GRADS, start=1):
        params, state, finite = backend.call(
            lambda ops, p, g, s, t: optimizer.update(ops, p, g, s, t), device,
            {"p": params, "g": grads, "s": state, "t": np.asarray(float(step))}, "float64")
        assert bool(backend.to_numpy(finite))
        params = {k: backend.to_numpy(v) for k, v in params.items()}
        state = {slot: {k: backend.to_numpy(v) for k, v in values.items()} for slot, values in state.items()}
    return params


@pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                    reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("name", list(CASES))
def test_optimizer_equals_keras(backend, name):
    toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    import keras

    optimizer, (cls, kwargs) = CASES[name]
    if kwargs["learning_rate"] == "piecewise":
        kwargs = {**kwargs, "learning_rate": keras.optimizers.schedules.PiecewiseConstantDecay([1], [LR, LR / 4])}
    variables = [keras.Variable(PARAMS[k], dtype="float64") for k in PARAMS]
    keras_optimizer = getattr(keras.optimizers, cls)(**kwargs)
    for grads in GRADS:
        keras_optimizer.apply_gradients([(np.asarray(grads[k]), v) for k, v in zip(PARAMS, variables)])
    expected = {k: np.asarray(v) for k, v in zip(PARAMS, variables)}
    found = _toolkit_run(backend, optimizer)
    for k in PARAMS:
        # Keras writes Adam's moments as m + (g - m) * (1 - beta1), the toolkit as beta1 * m + (1 - beta1) * g: the
        # same number but for rounding.
        np.testing.assert_allclose(found[k], expected[k], rtol=0, atol=1e-13)


def test_clipping_scales_as_documented(backend):
    """Without Keras: clipnorm caps each gradient's norm, global_clipnorm the joint norm; small gradients pass."""
    grads = {"a": np.array([3.0, 4.0]), "b": np.array([0.0, 0.0]), "c": np.array([0.3, 0.4])}
    device = backend.list_devices()[0]

    def clip(optimizer):
        out = backend.call(lambda ops, g: optimizer.clipped(ops, g), device, {"g": grads}, "float64")
        return {k: backend.to_numpy(v) for k, v in out.items()}

    each = clip(optim.SGD(0.1, clipnorm=1.0))
    np.testing.assert_allclose(each["a"], [0.6, 0.8], rtol=1e-15)
    np.testing.assert_array_equal(each["b"], [0.0, 0.0])
    np.testing.assert_allclose(each["c"], [0.3, 0.4], rtol=1e-15)
    joint = clip(optim.SGD(0.1, global_clipnorm=2.5))  # joint norm sqrt(25 + 0.25) = 5.0249...
    scale = 2.5 / np.sqrt(25.25)
    for k in grads:
        np.testing.assert_allclose(joint[k], grads[k] * scale, rtol=1e-15)


@pytest.mark.parametrize("make, words", [
    (lambda: optim.Adam(0.1, clipnorm=1.0, global_clipnorm=1.0), "give clipnorm or global_clipnorm, not both"),
    (lambda: optim.SGD(0.1, clipnorm=0.0), "SGD clipnorm must be a finite number"),
    (lambda: optim.RMSprop(0.1, global_clipnorm=float("inf")), "RMSprop global_clipnorm must be a finite number"),
    (lambda: optim.AdamW(0.1, weight_decay=-1.0), "AdamW weight_decay must be a finite number"),
    (lambda: optim.AdamW(0.1, beta1=2.0), "AdamW beta1 must be a finite number"),
])
def test_bad_hyperparameters_are_refused(make, words):
    with pytest.raises(ValueError, match=words):
        make()
