"""Where several entries tie for a max or a min, every backend shares the gradient equally among them, as
TensorFlow's ``reduce_max`` and JAX's ``max`` do (and so Keras' ``ops.max`` and ``GlobalMaxPooling2D``): Aesara's
own Max gave each tied entry the whole gradient, and a global max pooling of the digits (whose equal pixel patches
tie) trained 1e-4 apart from TensorFlow in float64 within eight steps."""

from __future__ import annotations

import numpy as np

import toolkit

#: Rows with two, four and two tied maxima (the last at a negative value; -0.0 and 0.0 tie too).
ROWS = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-5.0, -1.0, -7.0, -1.0], [-0.0, 0.0, -2.0, -3.0]])
#: An input whose -log ties at +inf twice (parameters and inputs are finite: the model makes the infinities).
ZEROS_TWICE = np.array([[0.0, 1.0, 0.0, 0.5]])
#: Two one-channel 2x2 images, as a global max pooling reduces them over (1, 2): three ties, then none.
IMAGES = np.array([[[4.0, 4.0], [1.0, 4.0]], [[0.5, 2.0], [1.0, 0.0]]])[..., None]
#: Columns for a min over axis 0 with keepdims: a tie of two, then none.
COLUMNS = np.array([[1.0, 4.0], [1.0, 2.0], [3.0, 5.0]])


def _shares(extremum, value, axis):
    """Each entry's share of its slice's gradient: 1 / (the ties' count) where it ties for the extremum, else 0."""
    ties = value == extremum(value, axis=axis, keepdims=True)
    return ties / ties.sum(axis=axis, keepdims=True)


def test_tied_maxima_and_minima_share_the_gradient_equally(backend):
    """One compiled gradient for every case: a max along an axis, a global max over two axes, a keepdims min."""

    def forward(ops, p, x):
        return (ops.sum(ops.max(p["rows"], axis=1)) + ops.sum(ops.max(p["images"], axis=(1, 2)))
                + ops.sum(ops.min(p["columns"], axis=0, keepdims=True))
                + ops.sum(ops.max(p["shift"] - ops.log(x), axis=1)))

    model = toolkit.Model(lambda rng: {"rows": ROWS, "images": IMAGES, "columns": COLUMNS, "shift": np.zeros(4)},
                          forward, lambda ops, out, y: ops.reshape(out, (1,)))
    trainer = toolkit.DataParallel(model, backend, 1, toolkit.optim.SGD(0.1), dtype="float64")
    grads = trainer.gradients(ZEROS_TWICE, np.zeros(1))
    np.testing.assert_array_equal(grads["shift"], [0.5, 0.0, 0.5, 0.0])
    np.testing.assert_array_equal(grads["rows"], _shares(np.max, ROWS, 1))
    np.testing.assert_array_equal(grads["images"], _shares(np.max, IMAGES, (1, 2)))
    np.testing.assert_array_equal(grads["columns"], _shares(np.min, COLUMNS, 0))


def test_a_tie_shared_extremum_keeps_the_value_and_the_sign_of_zero(backend):
    """The shared gradient changes no value: a max of ``-0.0`` alone is ``-0.0``, NaN propagates, infinities stay."""
    rows = np.array([[-0.0, -1.0], [np.nan, 1.0], [np.inf, np.inf], [-np.inf, -np.inf], [2.0, 2.0]])
    found = backend.call(lambda ops, x: ops.max(x, axis=1), backend.list_devices()[0], {"x": rows}, "float64")
    found = np.asarray(found)
    np.testing.assert_array_equal(found, np.max(rows, axis=1))
    assert np.signbit(found[0]), found
