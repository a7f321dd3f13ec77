"""How the Theano family's JAX linker computes a convolution: each pass (the forward, the input's gradient, the
kernel's gradient) either XLA's (``lax.conv_general_dilated`` and its ``jax.vjp``) or the same pass of the
convolution lowered to one matrix product of the input's patches (im2col), chosen per platform and shape by
:func:`lowering`. Imports JAX only (``tools/bench_conv.py`` measures the choice without an engine).

Why: on CPU, XLA's convolution (an Eigen spatial convolution) and more so its gradients run at a few GFLOP/s on
the small-channel, strided and pointwise convolutions of a CIFAR ResNet, where a patches matrix makes each pass one
matrix product. On a GPU, cuDNN's convolutions are faster than a patches product (which also costs ``window``
times the input's memory), so there every pass stays XLA's."""

from __future__ import annotations

import functools
import itertools
import math

import jax
import numpy as np

#: The platforms whose convolutions are computed as a patches product where :func:`lowering` says so. Elsewhere
#: (``"gpu"``, ``"cuda"``, ``"rocm"``, ``"tpu"``) the framework's kernel (cuDNN, the TPU's) is kept.
PATCHES_PLATFORMS = frozenset({"cpu"})
#: The passes of a convolution that :func:`lowering` chooses a computation for.
PASSES = ("forward", "input_gradient", "kernel_gradient")
#: Input channels up to which XLA's CPU convolution is slower than the patches product in every pass (measured:
#: 3 and 1, the bench ResNet's stem and the convnet's first layer, 2-5x; 16 channels: XLA's is faster forward).
FEW_CHANNELS = 4
#: The largest patches matrix (elements) the lowering builds: a bound on the memory a step adds for the
#: ``window``-fold copy of the input (2**27: 512 MiB in float32), not a measured crossover; the bench ResNet's
#: largest is 4.7 M elements (its first strided 3x3 convolution at batch 128).
MAX_PATCHES_ELEMENTS = 1 << 27


def out_sizes(sizes, window, strides, dilation, padding) -> list[int]:
    """The output's spatial sizes of a convolution over ``sizes`` with explicit (before, after) ``padding``."""
    return [(n + a + b - (k - 1) * d - 1) // s + 1
            for n, k, s, d, (a, b) in zip(sizes, window, strides, dilation, padding)]


def lowering(platform: str, input_shape, kernel_shape, strides, padding, dilation, groups: int,
             transpose: bool) -> dict[str, str]:
    """How a convolution is computed under the JAX linker, per pass: its forward, its input's gradient and its
    kernel's gradient, each ``"xla"`` (the pass of ``lax.conv_general_dilated``) or ``"patches"`` (the same pass of
    :func:`patches_conv`: a matrix product).

    The rule, measured with ``tools/bench_conv.py`` on the bench ResNet's and the convnet's shapes (2-core x86,
    jax 0.4.30 and 0.10.2): on a platform of :data:`PATCHES_PLATFORMS`, an ungrouped,
    forward convolution whose patches matrix stays under :data:`MAX_PATCHES_ELEMENTS` takes the patches product

    in every pass where the window is one position (a 1x1 convolution: the patches are a strided view of the
    input, no copy; XLA's gradients of the bench ResNet's strided 1x1 shortcuts took 5-10x the product's) or the
    input has at most :data:`FEW_CHANNELS` channels (an image's colours: XLA's kernel vectorizes over channels and
    ran at 2-4 GFLOP/s there, its passes 2-3x the product's).

    Elsewhere XLA's convolution is kept. With several channels the patches are a window-fold copy of the input,
    whose memory traffic cost more than XLA's kernel loses at stride 1 (2-6x slower forward); at stride 2 the
    products' gradients were 1.5-2x faster than XLA's alone, but a whole ResNet step with them was not faster
    (within noise in plain JAX, slower through the engine), so they are not taken.

    Args:
        platform: the JAX platform the step runs on (``jax.default_backend()``: ``"cpu"``, ``"gpu"``, ...).
        input_shape: ``[n, *spatial, channels]``, static.
        kernel_shape: ``[*window, in, out]``.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.
        groups: the feature groups.
        transpose: a transposed convolution.

    Returns:
        ``{"forward", "input_gradient", "kernel_gradient"}``, each ``"xla"`` or ``"patches"``.
    """
    xla = dict.fromkeys(PASSES, "xla")
    if platform not in PATCHES_PLATFORMS or transpose or groups != 1:
        return xla
    window = kernel_shape[:-2]
    out = out_sizes(input_shape[1:-1], window, strides, dilation, padding)
    if input_shape[0] * math.prod(out) * math.prod(window) * kernel_shape[-2] > MAX_PATCHES_ELEMENTS:
        return xla
    return dict.fromkeys(PASSES, "patches" if math.prod(window) == 1 or kernel_shape[-2] <= FEW_CHANNELS else "xla")


def xla_conv(inputs, kernel, strides, padding, dilation):
    """``lax.conv_general_dilated`` of a channels-last input and a ``[*window, in, out]`` kernel."""
    spatial = "DHW"[3 - len(strides):]
    return jax.lax.conv_general_dilated(inputs, kernel, strides, padding, rhs_dilation=dilation,
                                        dimension_numbers=(f"N{spatial}C", f"{spatial}IO", f"N{spatial}C"))


def convolution(passes: dict[str, str], strides, padding, dilation):
    """The convolution as a JAX function of ``(inputs, kernel)`` whose forward and gradients are computed as
    ``passes`` says (:func:`lowering`): a ``jax.custom_vjp`` whose backward takes each gradient from ``jax.vjp`` of
    its pass's computation (the unused forward of that ``vjp`` is dropped by XLA).

    Args:
        passes: :func:`lowering`'s choice.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.

    Returns:
        ``conv(inputs, kernel) -> output``.
    """
    ways = {"xla": xla_conv, "patches": patches_conv}
    forward, by_input, by_kernel = (functools.partial(ways[passes[p]], strides=strides, padding=padding,
                                                      dilation=dilation) for p in PASSES)
    if set(passes.values()) == {"xla"}:
        return forward

    @jax.custom_vjp
    def conv(inputs, kernel):
        return forward(inputs, kernel)

    def conv_forward(inputs, kernel):
        return forward(inputs, kernel), (inputs, kernel)

    def conv_backward(saved, cotangent):
        inputs, kernel = saved
        return (jax.vjp(lambda x: by_input(x, kernel), inputs)[1](cotangent)[0],
                jax.vjp(lambda w: by_kernel(inputs, w), kernel)[1](cotangent)[0])

    conv.defvjp(conv_forward, conv_backward)
    return conv


def patches_conv(inputs, kernel, strides, padding, dilation):
    """A channels-last, ungrouped convolution as one matrix product: the input's strided, dilated slices (one per
    window offset, in the kernel's row-major order) side by side, ``[n * out positions, window * in]``, times the
    kernel as ``[window * in, out]``. Its gradients (``jax.vjp``) are a product with the transposed kernel folded
    back by pads, and the patches' transpose times the cotangent: matrix products again.

    Args:
        inputs: ``[n, *spatial, in]``.
        kernel: ``[*window, in, out]``.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.

    Returns:
        ``[n, *out, out channels]``, in the inputs' dtype.
    """
    x = jax.lax.pad(inputs, np.zeros((), inputs.dtype), [(0, 0, 0), *((a, b, 0) for a, b in padding), (0, 0, 0)])
    window, (channels_in, channels_out) = kernel.shape[:-2], kernel.shape[-2:]
    out = out_sizes(x.shape[1:-1], window, strides, dilation, [(0, 0)] * len(window))
    parts = []
    for offset in itertools.product(*map(range, window)):
        start = (0, *(o * d for o, d in zip(offset, dilation)), 0)
        limit = (x.shape[0], *(b + (m - 1) * s + 1 for b, m, s in zip(start[1:-1], out, strides)), x.shape[-1])
        parts.append(jax.lax.slice(x, start, limit, (1, *strides, 1)))
    patches = parts[0] if len(parts) == 1 else jax.numpy.concatenate(parts, axis=-1)
    rows = x.shape[0] * math.prod(out)
    found = jax.numpy.dot(patches.reshape(rows, len(parts) * channels_in),
                          kernel.reshape(len(parts) * channels_in, channels_out),
                          preferred_element_type=inputs.dtype)
    return found.reshape(x.shape[0], *out, channels_out)
