"""The Theano family's convolution lowering (backends/theano/conv_lowering.py): every way it may compute a pass
gives XLA's convolution and gradients, and the choice keeps the framework's kernel off the CPU. Pure JAX, eager
(no engine graph compiled); the backends' window tests check the same op through the engines."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from toolkit.backends.theano.conv_lowering import (  # noqa: E402
    MAX_PATCHES_ELEMENTS,
    PASSES,
    convolution,
    lowering,
    xla_conv,
)

#: (input shape, window, strides, explicit padding, dilation): 1-D strided and dilated, 2-D with uneven strides and
#: padding, a 3-D pointwise strided convolution.
CASES = (
    ((2, 11, 3), (3,), (2,), ((1, 2),), (2,)),
    ((2, 7, 6, 5), (3, 2), (2, 1), ((1, 1), (0, 1)), (1, 1)),
    ((1, 5, 4, 6, 3), (1, 1, 1), (2, 2, 1), ((0, 0),) * 3, (1, 1, 1)),
)
#: float32 products summed in another order (patches against XLA's kernel): a few units in the last place.
RTOL = 1e-5


@pytest.mark.parametrize("passes", [dict.fromkeys(PASSES, "patches"),
                                    {"forward": "xla", "input_gradient": "patches", "kernel_gradient": "xla"},
                                    {"forward": "patches", "input_gradient": "xla", "kernel_gradient": "patches"}],
                         ids=["patches", "xla-patches-xla", "patches-xla-patches"])
def test_every_lowering_gives_xlas_convolution_and_gradients(passes):
    rng = np.random.default_rng(0)
    for shape, window, strides, padding, dilation in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((*window, shape[-1], 4)).astype(np.float32)
        options = {"strides": strides, "padding": padding, "dilation": dilation}
        expected, pullback = jax.vjp(lambda a, b, options=options: xla_conv(a, b, **options), x, w)
        found, found_pullback = jax.vjp(convolution(passes, **options), x, w)
        cotangent = rng.standard_normal(expected.shape).astype(np.float32)
        for a, b in zip((found, *found_pullback(cotangent)), (expected, *pullback(cotangent))):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * float(np.max(np.abs(b))), err_msg=str(shape))


def test_the_framework_kernel_is_kept_off_the_cpu_and_where_patches_do_not_pay():
    def rule(platform="cpu", shape=(8, 16, 16, 16), kernel=(3, 3, 16, 16), strides=(1, 1), groups=1,
             transpose=False):
        return lowering(platform, shape, kernel, strides, ((1, 1), (1, 1)), (1, 1), groups, transpose)

    xla = dict.fromkeys(PASSES, "xla")
    assert rule(platform="gpu", kernel=(1, 1, 16, 16)) == xla  # cuDNN's kernels
    assert rule(groups=2, kernel=(1, 1, 8, 16)) == xla and rule(transpose=True, kernel=(1, 1, 16, 16)) == xla
    assert rule() == xla  # stride 1, several channels: XLA's kernel reads the input once
    assert rule(kernel=(3, 3, 3, 16)) == dict.fromkeys(PASSES, "patches")  # an image's colours
    assert rule(kernel=(1, 1, 16, 16)) == dict.fromkeys(PASSES, "patches")  # pointwise: the patches are the input
    assert rule(strides=(2, 2)) == xla  # the window-fold copy of a 16-channel input
    too_big = (MAX_PATCHES_ELEMENTS // (16 * 16 * 9 * 3) + 1, 16, 16, 3)
    assert rule(shape=too_big, kernel=(3, 3, 3, 16)) == xla
