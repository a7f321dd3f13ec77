"""TensorFlow-only behaviour of the backend: the fused step calls its traced function with flat tensors, and falls
back to the structured call where TensorFlow lacks the flat one or the inputs do not match it."""

from __future__ import annotations

import pytest

from tests.conftest import needs_backend

pytestmark = needs_backend("tensorflow")


class _WithoutFlatCall:
    """A concrete function as a TensorFlow without ``_call_flat`` would give it: the structured call only."""

    def __init__(self, concrete) -> None:
        self._concrete = concrete
        self.inputs, self.captured_inputs = concrete.inputs, concrete.captured_inputs

    def __call__(self, *args):
        return self._concrete(*args)


@pytest.fixture(scope="module")
def concrete_step():
    from toolkit.backends.tensorflow.compiling import tf, traced

    scale = tf.Variable(2.0)  # a captured input, as the trainer's variables are

    def step(pair, offsets, rows):
        return {"sum": (pair[0] + pair[1]) * scale, "rows": rows}, tf.reduce_sum(offsets[0])

    args = ((tf.constant(1.0), tf.constant(3.0)), [tf.constant([1.0, 2.0])], 4)
    function = traced(step)
    return tf, function.get_concrete_function(*args), args


def _numbers(result):
    outputs, total = result
    return float(outputs["sum"]), outputs["rows"], float(total)


def test_flat_call_gives_the_structured_result(concrete_step):
    from toolkit.backends.tensorflow.compiling import call_concrete

    tf, concrete, args = concrete_step
    flat = [tf.convert_to_tensor(a) for a in tf.nest.flatten(args[:2])]
    assert _numbers(call_concrete(concrete, flat, args)) == _numbers(concrete(*args)) == (8.0, 4, 3.0)


@pytest.mark.parametrize("case", ["no flat call", "inputs that do not match"])
def test_flat_call_falls_back_to_the_structured_call(concrete_step, case):
    from toolkit.backends.tensorflow.compiling import call_concrete

    tf, concrete, args = concrete_step
    flat = [tf.convert_to_tensor(a) for a in tf.nest.flatten(args[:2])]
    if case == "no flat call":
        concrete = _WithoutFlatCall(concrete)
    else:
        flat = flat[:-1]  # one input short: the flat call would bind the wrong tensors
    assert _numbers(call_concrete(concrete, flat, args)) == (8.0, 4, 3.0)
