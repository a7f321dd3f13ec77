"""How the Theano family's JAX linker computes a convolution: each pass (the forward, the input's gradient, the
kernel's gradient) either XLA's (``lax.conv_general_dilated`` and its ``jax.vjp``) or the same pass of the
convolution lowered to matrix products: one product of the input's patches (im2col), or one product of a
``window[-1]``-fold copy and a shifted sum (:func:`folded_conv`), chosen per platform, dtype and shape by
:func:`lowering`. Imports JAX only (``tools/bench_conv.py`` measures the choice without an engine,
``tools/bench_conv_step.py`` on a whole training step).

Why: on CPU, XLA's convolution (an Eigen spatial convolution) and more so its gradients run at a few GFLOP/s on
the small-channel, strided and pointwise convolutions of a CIFAR ResNet, where a patches matrix makes each pass one
matrix product; in float64 XLA's CPU convolution is not Eigen's but plain loops, slower than products everywhere.
On a GPU, cuDNN's convolutions are faster than a patches product (which also costs ``window`` times the input's
memory), so there every pass stays XLA's."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import math
import uuid

import jax
import numpy as np

from toolkit.ops.window_shapes import padded_output_sizes

from . import onednn, xla_calls

#: The platforms whose convolutions are computed as a patches product where :func:`lowering` says so. Elsewhere
#: (``"gpu"``, ``"cuda"``, ``"rocm"``, ``"tpu"``) the framework's kernel (cuDNN, the TPU's) is kept.
PATCHES_PLATFORMS = frozenset({"cpu"})
#: The platforms whose float32 convolutions are oneDNN's where its library is installed (:mod:`.onednn`).
ONEDNN_PLATFORMS = frozenset({"cpu"})
#: The dtypes oneDNN convolves on a CPU (it has no float64 convolution there).
ONEDNN_DTYPES = frozenset({"float32"})
#: The passes of a convolution that :func:`lowering` chooses a computation for (oneDNN's own).
PASSES = onednn.PASSES
#: Input channels up to which XLA's CPU convolution is slower than the patches product in every pass (measured at
#: 3 and 1, the bench ResNet's stem and the convnet's first layer; at 16 channels XLA's is faster forward).
FEW_CHANNELS = 4
#: The largest patches matrix (elements) the lowering builds, and the largest copy or column blocks of the folded
#: product: a bound on the memory a step adds for the input's copies (2**27: 512 MiB in float32, 1 GiB in float64),
#: not a measured crossover; the bench ResNet's largest is 4.7 M elements (its first strided 3x3 convolution's
#: patches at batch 128).
MAX_PATCHES_ELEMENTS = 1 << 27
#: The dtypes XLA's CPU compiler convolves with Eigen's vectorized kernel in every JAX; before
#: :data:`FLOAT64_VECTORIZED_FROM` it convolves float64 with plain loops, several times slower than the folded
#: product on the bench ResNet's 3x3 convolutions.
XLA_VECTORIZED_DTYPES = frozenset({"float16", "float32"})
#: The JAX version from which XLA's CPU convolution of float64 is vectorized as float32's, and faster than the
#: folded product on the bench ResNet's 3x3 convolutions: measured on 0.10.2; the versions between 0.4.30 and 0.10
#: were not measured and are taken as 0.4.30.
FLOAT64_VECTORIZED_FROM = (0, 10)


def vectorized_dtypes(version: tuple = tuple(jax.__version_info__)) -> frozenset[str]:
    """The dtypes XLA's CPU compiler convolves with its vectorized kernel under JAX ``version``."""
    return XLA_VECTORIZED_DTYPES | ({"float64"} if tuple(version) >= FLOAT64_VECTORIZED_FROM else set())


def lowering(platform: str, dtype, input_shape, kernel_shape, strides, padding, dilation, groups: int,
             transpose: bool) -> dict[str, str]:
    """How a convolution is computed under the JAX linker, per pass: its forward, its input's gradient and its
    kernel's gradient, each ``"xla"`` (the pass of ``lax.conv_general_dilated``), ``"onednn"`` (oneDNN's, called
    back on the host: :func:`onednn_conv`), ``"patches"`` (the same pass of :func:`patches_conv`: one matrix
    product) or ``"folded"`` (of :func:`folded_conv`: one product and a shifted sum).

    The rule, measured with ``tools/bench_conv.py`` on the bench ResNet's and the convnet's shapes (2-core x86,
    jax 0.4.30 and 0.10.2; the measurements are on docs/guides/benchmarks.md): on a platform of
    :data:`ONEDNN_PLATFORMS`, an ungrouped, forward convolution of a dtype of :data:`ONEDNN_DTYPES` is oneDNN's in
    every pass where its library is installed and has an implementation for the shapes (:func:`.onednn.convolution`):
    faster per pass than XLA's and than every product on the bench ResNet's shapes, where XLA's CPU kernels are
    Eigen's built for a baseline ISA and oneDNN's use the CPU's widest vectors, as TensorFlow's do. Otherwise, on a
    platform of :data:`PATCHES_PLATFORMS`, an ungrouped, forward convolution whose intermediates stay under
    :data:`MAX_PATCHES_ELEMENTS` is lowered to products

    - in float32 (and the other dtypes of XLA's vectorized CPU convolution, :func:`vectorized_dtypes`), in every
      pass where the window is one position (a 1x1 convolution: the patches are a strided view of the input, no
      copy; XLA's gradients of the bench ResNet's strided 1x1 shortcuts were several times slower than the product)
      or the input has at most :data:`FEW_CHANNELS` channels (an image's colours: XLA's kernel vectorizes over
      channels, and its passes were slower than the product there). Elsewhere XLA's convolution is kept: with
      several channels its passes were as fast as or faster than every product tried (the patches' window-fold copy,
      the folded product's 3-fold one, Winograd F(2x2, 3x3)'s transforms);
    - in float64 under a JAX whose XLA convolves it with plain loops (before :data:`FLOAT64_VECTORIZED_FROM`), in
      every pass: the folded product where the strides are 1 along all spatial axes but the last (XLA's passes
      were several times slower on the bench ResNet's 3x3 convolutions), else the patches product. From that version
      float64 is chosen for as float32.

    Args:
        platform: the JAX platform the step runs on (``jax.default_backend()``: ``"cpu"``, ``"gpu"``, ...).
        dtype: the convolution's dtype (a NumPy dtype or its name).
        input_shape: ``[n, *spatial, channels]``, static.
        kernel_shape: ``[*window, in, out]``.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.
        groups: the feature groups.
        transpose: a transposed convolution.

    Returns:
        ``{"forward", "input_gradient", "kernel_gradient"}``, each ``"xla"``, ``"onednn"``, ``"patches"`` or
        ``"folded"``.
    """
    xla = dict.fromkeys(PASSES, "xla")
    if transpose or groups != 1:
        return xla
    if (platform in ONEDNN_PLATFORMS and onednn_may_convolve(dtype, groups, transpose)
            and _onednn_primitives(input_shape, kernel_shape, strides, padding, dilation) is not None):
        return dict.fromkeys(PASSES, "onednn")
    if platform not in PATCHES_PLATFORMS:
        return xla
    window, (channels_in, channels_out) = kernel_shape[:-2], kernel_shape[-2:]
    out = padded_output_sizes(input_shape[1:-1], window, strides, dilation, padding)
    if np.dtype(dtype).name not in vectorized_dtypes():
        way = "folded" if math.prod(window) > 1 and all(s == 1 for s in strides[:-1]) else "patches"
    else:
        way = "patches" if math.prod(window) == 1 or channels_in <= FEW_CHANNELS else "xla"
    if way == "folded":  # its copy, and its product's column blocks: a row per padded leading position
        padded_leading = [n + a + b for n, (a, b) in zip(input_shape[1:-2], padding[:-1])]
        largest = (input_shape[0] * math.prod(padded_leading) * out[-1] *
                   max(window[-1] * channels_in, math.prod(window[:-1]) * channels_out))
    else:
        largest = input_shape[0] * math.prod(out) * math.prod(window) * channels_in  # the patches
    return xla if largest > MAX_PATCHES_ELEMENTS else dict.fromkeys(PASSES, way)


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
    ways = {"xla": xla_conv, "patches": patches_conv, "folded": folded_conv, "onednn": onednn_conv}
    forward, by_input, by_kernel = (functools.partial(ways[passes[p]], strides=strides, padding=padding,
                                                      dilation=dilation) for p in PASSES)
    if len(set(passes.values())) == 1:  # one way for every pass: its own gradients (XLA's, or oneDNN's)
        return forward
    return _with_gradients(forward, lambda inputs, kernel, cotangent: (
        jax.vjp(lambda x: by_input(x, kernel), inputs)[1](cotangent)[0],
        jax.vjp(lambda w: by_kernel(inputs, w), kernel)[1](cotangent)[0]))


def traced_conv(inputs, kernel, strides, padding, dilation):
    """An ungrouped, untransposed channels-last convolution as the family's JAX step computes it: each pass the way
    :func:`lowering` chooses for JAX's default platform and these static shapes (:func:`convolution`).

    Args:
        inputs: ``[n, *spatial, in]``.
        kernel: ``[*window, in, out]``.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.

    Returns:
        ``[n, *out, out channels]``.
    """
    passes = lowering(jax.default_backend(), inputs.dtype, inputs.shape, kernel.shape, strides, padding, dilation, 1,
                      False)
    return convolution(passes, strides, padding, dilation)(inputs, kernel)


def _with_gradients(forward, gradients):
    """``forward(inputs, kernel)`` as a ``jax.custom_vjp`` whose gradients are ``gradients(inputs, kernel,
    cotangent) -> (by input, by kernel)``."""

    @jax.custom_vjp
    def conv(inputs, kernel):
        return forward(inputs, kernel)

    def conv_forward(inputs, kernel):
        return forward(inputs, kernel), (inputs, kernel)

    def conv_backward(saved, cotangent):
        return gradients(*saved, cotangent)

    conv.defvjp(conv_forward, conv_backward)
    return conv


def onednn_may_convolve(dtype, groups: int, transpose: bool) -> bool:
    """Whether oneDNN may compute a convolution of this kind on a CPU: ungrouped, not transposed, of a dtype of
    :data:`ONEDNN_DTYPES`, its library loaded. Whether it has an implementation for the shapes is known once they
    are (:func:`.onednn.convolution`, when the step is traced); the C linker decides with this alone when it builds
    its graph.

    Args:
        dtype: the convolution's dtype.
        groups: the feature groups.
        transpose: a transposed convolution.

    Returns:
        True where oneDNN may compute it.
    """
    return (not transpose and groups == 1 and np.dtype(dtype).name in ONEDNN_DTYPES
            and onednn.library() is not None)


#: How many logical CPU devices run the step being traced at once on this process's cores (:func:`sharing_cores`).
_SHARING = contextvars.ContextVar("devices sharing the cores", default=1)


@contextlib.contextmanager
def sharing_cores(devices: int):
    """Trace a step that ``devices`` logical CPU devices of this process run at once (a ``shard_map`` over them):
    its oneDNN convolutions get the cores split between the devices (:func:`.onednn.threads_sharing`).

    Args:
        devices: the process's CPU devices in the step's mesh.
    """
    token = _SHARING.set(devices)
    try:
        yield
    finally:
        _SHARING.reset(token)


def _onednn_primitives(input_shape, kernel_shape, strides, padding, dilation):
    return onednn.convolution(tuple(input_shape), tuple(kernel_shape), tuple(strides),
                              tuple(map(tuple, padding)), tuple(dilation), onednn.threads_sharing(_SHARING.get()))


def host_onednn(dtype, input_shape, kernel_shape, strides, padding, dilation, groups: int,
                transpose: bool) -> onednn.Convolution | None:
    """oneDNN's primitives for a convolution computed on the host CPU, where :func:`lowering` chooses oneDNN for
    every pass of it there, else None. The C linker calls them directly on its NumPy arrays: the same library calls
    as through a jitted JAX function on the CPU, without JAX's dispatch and its copies of the inputs and of the
    result, which slowed the bench ResNet's C-linker step under jax 0.10 (docs/guides/benchmarks.md).

    Args:
        dtype: the convolution's dtype.
        input_shape: ``[n, *spatial, in]``.
        kernel_shape: ``[*window, in, out]``.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.
        groups: the feature groups.
        transpose: a transposed convolution.

    Returns:
        A :class:`.onednn.Convolution`, or None.
    """
    passes = lowering("cpu", dtype, input_shape, kernel_shape, strides, padding, dilation, groups, transpose)
    if set(passes.values()) != {"onednn"}:
        return None
    return _onednn_primitives(input_shape, kernel_shape, strides, padding, dilation)


def onednn_conv(inputs, kernel, strides, padding, dilation):
    """A channels-last, ungrouped float32 convolution computed by oneDNN (:mod:`.onednn`) on the host, forward and
    both gradients (a ``jax.custom_vjp``), each a call from the compiled step into the library (:func:`_host_call`):
    under ``shard_map`` every device calls with its own shard. Only where :func:`lowering` chose it (the library
    is there and has the shapes).

    Args:
        inputs: ``[n, *spatial, in]``, float32.
        kernel: ``[*window, in, out]``, float32.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.

    Returns:
        ``[n, *out, out channels]``, float32.
    """
    return _onednn_function(_onednn_primitives(inputs.shape, kernel.shape, strides, padding, dilation))(inputs,
                                                                                                      kernel)


@functools.cache
def _onednn_function(primitives: onednn.Convolution):
    forward, by_input, by_kernel = (_host_call(primitives, name) for name in PASSES)
    return _with_gradients(forward, lambda inputs, kernel, cotangent: (by_input(cotangent, kernel),
                                                                        by_kernel(inputs, cotangent)))


def _host_call(primitives: onednn.Convolution, name: str):
    """Pass ``name`` of ``primitives`` as an operation of the compiled step, a function of its two arrays: one that
    runs it on XLA's own buffers where the JAX allows (:mod:`.xla_calls`; made once per convolution shape, with
    :func:`_onednn_function`), else a ``jax.pure_callback``."""
    result = jax.ShapeDtypeStruct(primitives.shapes[name], np.float32)
    if not xla_calls.available():  # a JAX whose FFI this module does not know
        return functools.partial(jax.pure_callback, getattr(primitives, name), result)
    # XLA's registry keeps every target for the process's life: each gets a name of its own, unique in the process
    # even where this module is loaded twice (as each engine's and as the family's); _onednn_function's cache keeps
    # the HostFunction, so its ctypes callback, alive as long
    return xla_calls.HostFunction(f"multigpu_onednn_{uuid.uuid4().hex}_{name}",
                                  lambda out, first, second: primitives.run(name, first, second, out), result.shape, 2)


def _padded(inputs, kernel, strides, padding, dilation):
    """What both product lowerings start from: the inputs padded explicitly, the window, the channels in and out,
    and the output's spatial sizes."""
    x = jax.lax.pad(inputs, np.zeros((), inputs.dtype), [(0, 0, 0), *((a, b, 0) for a, b in padding), (0, 0, 0)])
    window, (channels_in, channels_out) = kernel.shape[:-2], kernel.shape[-2:]
    out = padded_output_sizes(x.shape[1:-1], window, strides, dilation, [(0, 0)] * len(window))
    return x, window, channels_in, channels_out, out


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
    x, window, channels_in, channels_out, out = _padded(inputs, kernel, strides, padding, dilation)
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


def folded_conv(inputs, kernel, strides, padding, dilation):
    """A channels-last, ungrouped convolution with strides of 1 along all spatial axes but the last, as one matrix
    product and a shifted sum: the input's slices along the last spatial axis (one per window offset there) side
    by side, ``[rows, window[-1] * in]`` with a row per batch entry, padded position of the leading spatial axes
    and output position of the last, times the kernel as ``[window[-1] * in, offsets * out]`` (one column block per
    offset of the leading axes). The output at a row is the sum over those offsets of their block at the row
    shifted by the offset along the leading axes (a whole number of rows: the strides there are 1); rows past the
    leading axes' outputs are dropped. A ``window[-1]``-fold copy of the input instead of the patches'
    ``prod(window)``-fold one; its gradients (``jax.vjp``) are products and shifted sums again.

    Args:
        inputs: ``[n, *spatial, in]``.
        kernel: ``[*window, in, out]``.
        strides: the strides per spatial axis, 1 on all but the last.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.

    Returns:
        ``[n, *out, out channels]``, in the inputs' dtype.
    """
    x, window, channels_in, channels_out, out = _padded(inputs, kernel, strides, padding, dilation)
    leading = x.shape[1:-2]
    last = len(window)  # the last spatial axis
    parts = []
    for offset in range(window[-1]):
        start = offset * dilation[-1]
        parts.append(jax.lax.slice_in_dim(x, start, start + (out[-1] - 1) * strides[-1] + 1, strides[-1], axis=last))
    folded = parts[0] if len(parts) == 1 else jax.numpy.concatenate(parts, axis=-1)
    rows = x.shape[0] * math.prod(leading) * out[-1]
    offsets = list(itertools.product(*map(range, window[:-1])))
    # [*leading window, last window, in, out] -> [last window * in, leading offsets * out]
    weights = kernel.reshape(len(offsets), window[-1] * channels_in, channels_out)
    weights = weights.transpose(1, 0, 2).reshape(window[-1] * channels_in, len(offsets) * channels_out)
    blocks = jax.numpy.dot(folded.reshape(rows, window[-1] * channels_in), weights,
                           preferred_element_type=inputs.dtype).reshape(rows, len(offsets), channels_out)
    row_strides = [math.prod(leading[i + 1:]) * out[-1] for i in range(len(leading))]
    shifts = [sum(o * d * r for o, d, r in zip(offset, dilation, row_strides)) for offset in offsets]
    # Every output row kept lies below this (its shifted rows stay in its batch entry); none in an empty batch.
    kept = max(rows - max(shifts), 0)
    total = functools.reduce(jax.numpy.add, (blocks[shift:shift + kept, k] for k, shift in enumerate(shifts)))
    total = jax.lax.pad(total, np.zeros((), inputs.dtype), [(0, rows - kept, 0), (0, 0, 0)])
    found = total.reshape(x.shape[0], *leading, out[-1], channels_out)
    return found[(slice(None), *(slice(0, m) for m in out[:-1]))]
