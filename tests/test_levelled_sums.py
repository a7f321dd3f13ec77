"""The Theano family's CPU sums under a JAX whose XLA makes slow reduce-windows of them (backends/theano/
reductions.py): the levels give NumPy's sums, leave XLA no reduce-window, and apply only where they were measured to
pay. Pure JAX."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from toolkit.backends.theano.kernels.reductions import LEVEL, PLAIN_SUMS_FROM, levelled, levelled_sum  # noqa: E402

#: (shape, axes): a batch normalization's sum (leading axes, a multiple of the level), middle and trailing axes, a
#: length that is not a multiple of the level (padded), every axis, axes that are not adjacent (jnp.sum), a sum of
#: at most one level (jnp.sum), an empty array.
CASES = (((64, 8, 8, 3), (0, 1, 2)), ((3, 50, 7, 2), (1, 2)), ((4, 5, 1000), (2,)), ((2, 3, 4, 5), None),
         ((40, 3, 40), (0, 2)), ((5, 32), (1,)), ((0, 70), (1,)))


@pytest.mark.parametrize("shape, axes", CASES)
def test_levelled_sums_give_numpys_sums(shape, axes):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) + 3
    found = np.asarray(jax.jit(lambda a: levelled_sum(a, axes))(x))
    expected = x.astype(np.float64).sum(axis=axes)
    assert found.shape == expected.shape and found.dtype == np.float32
    # A float32 sum of up to 3,000 entries: each level adds a few units in the last place.
    np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-6)


def _reduce_window_operands(hlo: str) -> list[int]:
    """The sizes of the arrays XLA's compiled ``hlo`` reduces with reduce-windows."""
    return [math.prod(int(d) for d in dims.split(",") if d)
            for dims in re.findall(r"reduce-window\(\w+\[([0-9,]*)\]", hlo)]


def test_levelled_sums_leave_xla_no_reduce_window_over_the_input():
    """What the levels are for: XLA's tree-reduction pass (before jax 0.10) turns a plain sum of more than the level
    into a reduce-window over the whole input, slow on a CPU. The levels' first sum is within the pass's window
    (XLA merges the later, small levels back and may make a reduce-window of those: 1/32 of the input or less)."""
    x = jax.ShapeDtypeStruct((128, 16, 16, 8), np.float32)
    size = math.prod(x.shape)
    levels = _reduce_window_operands(jax.jit(lambda a: levelled_sum(a, (0, 1, 2))).lower(x).compile().as_text())
    assert all(n <= size // LEVEL for n in levels)
    if tuple(jax.__version_info__) < PLAIN_SUMS_FROM:  # the pass is there: the plain sum shows it
        plain = jax.jit(lambda a: a.sum(axis=(0, 1, 2))).lower(x).compile().as_text()
        assert size in _reduce_window_operands(plain)


def test_sums_are_levelled_on_a_cpu_before_the_measured_jax_only():
    assert levelled("cpu", "float32", (0, 4, 30)) and levelled("cpu", np.float64, (0, 4, 30))
    assert not levelled("cpu", "float32", PLAIN_SUMS_FROM)  # XLA's own sums are as fast there
    assert not levelled("gpu", "float32", (0, 4, 30)) and not levelled("cpu", "int32", (0, 4, 30))
    assert not levelled("cpu", "float16", (0, 4, 30))  # jnp.sum accumulates it in float32: left to it
