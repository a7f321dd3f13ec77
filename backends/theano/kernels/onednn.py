"""oneDNN's float32 convolutions (forward, input gradient, kernel gradient) on x86 CPUs, called from the Theano
family's JAX step (``conv_lowering.onednn_conv``: an XLA custom call on XLA's buffers, or ``jax.pure_callback``): the
kernels TensorFlow's CPU build runs (oneDNN's brgemm and JIT
convolutions, AVX-512 where the CPU has it), where XLA's CPU convolution is an Eigen kernel built for a baseline ISA:
oneDNN's passes are several times faster on the bench ResNet's shapes (``tools/bench_conv.py`` measures it per shape;
the measurements are on docs/guides/benchmarks.md, "Convolutions on the Theano family").

The library is the ``onednn-cpu-gomp`` wheel's ``libdnnl.so.3`` (oneDNN 3.2, GNU OpenMP; the ``aesara``,
``pytensor`` and ``pytensor-jax04`` extras install it on x86-64 Linux), found in the environment's ``lib/``, or the file
:data:`LIBRARY_ENV` names; ``MULTIGPU_ONEDNN=off`` keeps XLA's convolution everywhere. Called through ctypes on
oneDNN's C API: no compiler at install time. Activations stay channels-last (oneDNN's ``nhwc``, read and written in
place); the kernel is reordered to the layout oneDNN picks for it (a small copy per call), as TensorFlow does."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import math
import os
import sys
import warnings
from pathlib import Path

import numpy as np

from toolkit.errors import ArgumentError, ComputeError
from toolkit.ops.window_shapes import padded_output_sizes

#: The environment variable that names the oneDNN library to load (a path to ``libdnnl.so.3``), or ``off``.
LIBRARY_ENV = "MULTIGPU_ONEDNN"
#: oneDNN 3's shared library, as the wheel installs it under the environment's prefix.
LIBRARY_NAME = "libdnnl.so.3"

# oneDNN's C API constants (oneapi/dnnl/dnnl_types.h, dnnl_common_types.h of oneDNN 3.2).
_SUCCESS, _F32, _CPU, _IN_ORDER, _FORMAT_ANY = 0, 3, 1, 1, 1
_FORWARD_TRAINING, _DIRECT = 64, 1
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_DIFF_SRC, _ARG_DIFF_DST, _ARG_DIFF_WEIGHTS = 1, 17, 33, 129, 145, 161
_QUERY_WEIGHTS_MD, _QUERY_DIFF_WEIGHTS_MD, _QUERY_SCRATCHPAD_MD = 131, 132, 136
_SCRATCHPAD_USER, _ARG_SCRATCHPAD = 1, 80
_MAX_NDIMS = 12
_ALLOCATE = ctypes.c_void_p(ctypes.c_size_t(-1).value)  # DNNL_MEMORY_ALLOCATE: the library owns the buffer
_Dims = ctypes.c_int64 * _MAX_NDIMS
_Handle = ctypes.c_void_p
#: The passes of a convolution, as :class:`Convolution` runs them.
PASSES = ("forward", "input_gradient", "kernel_gradient")


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _Handle)]


def _dims(values) -> _Dims:
    dims = _Dims()
    dims[:len(values)] = [int(v) for v in values]
    return dims


@functools.lru_cache(maxsize=1)
def library():
    """oneDNN's library with a CPU engine (a stream made to check it), or None where :data:`LIBRARY_ENV` is
    ``off``, or the environment's library is not installed or cannot start (a warning says why once: e.g. no
    libgomp).

    Returns:
        The loaded library, or None.

    Raises:
        ArgumentError: :data:`LIBRARY_ENV` names a file that does not exist, does not load, is not oneDNN
            :data:`MAJOR_VERSION`, or cannot make a CPU engine and stream.
    """
    chosen = os.environ.get(LIBRARY_ENV, "")
    if chosen.lower() == "off":
        return None
    if chosen and not Path(chosen).is_file():
        raise ArgumentError(f"{LIBRARY_ENV}={chosen!r} names no file; expected the path of {LIBRARY_NAME} or 'off'")
    path = Path(chosen) if chosen else Path(sys.prefix) / "lib" / LIBRARY_NAME
    if not path.is_file():
        return None
    # OpenMP's threads sleep between calls instead of spinning, unless the user chose: spinning, they took the
    # cores from XLA's threads between the convolutions. GNU OpenMP reads it when it loads, which is now unless
    # another library loaded it before.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return _load(path)
    except (OSError, AttributeError, ComputeError) as error:
        if chosen:
            raise ArgumentError(f"{LIBRARY_ENV}={chosen!r}: {error}; expected oneDNN {MAJOR_VERSION}'s "
                                f"{LIBRARY_NAME} or 'off'") from None
        warnings.warn(f"oneDNN at {path} did not start ({error}): convolutions stay XLA's", RuntimeWarning,
                      stacklevel=2)
        return None


#: The oneDNN major version whose C API (and enum values above) this module speaks.
MAJOR_VERSION = 3


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int)]


def _load(path: Path) -> _Library:
    lib = ctypes.CDLL(str(path))  # OSError where it or a dependency (libgomp.so.1) cannot load
    lib.dnnl_version.restype = ctypes.POINTER(_Version)  # AttributeError where the file is not oneDNN
    version = lib.dnnl_version().contents
    if version.major != MAJOR_VERSION:
        raise ComputeError(f"it is oneDNN {version.major}.{version.minor}")
    lib.dnnl_primitive_desc_query_md.restype = _Handle
    lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
    engine = _Handle()
    if lib.dnnl_engine_create(ctypes.byref(engine), _CPU, 0) != _SUCCESS:
        raise ComputeError("it could not make a CPU engine")
    loaded = _Library(lib, engine)
    lib.dnnl_stream_destroy(loaded.stream())  # ComputeError where it cannot make a stream
    return loaded


class _Library:
    def __init__(self, lib, engine) -> None:
        self.lib, self.engine = lib, engine
        # The OpenMP runtime the library runs on (its dependency, found through it): None for a oneDNN built on
        # another threading runtime, whose team is then left as it is (:meth:`team`).
        self._omp = getattr(lib, "omp_set_num_threads", None) and lib.omp_get_max_threads
        #: The threads a call may use by default: OpenMP's (the cores this process may run on, or OMP_NUM_THREADS).
        self.cores = self._omp() if self._omp else (len(os.sched_getaffinity(0)) or 1)

    @contextlib.contextmanager
    def team(self, threads: int | None):
        """OpenMP's team size for what the calling thread makes and runs meanwhile (``None``: as it is). oneDNN
        sizes a primitive's parallel loops by the team when it makes the primitive, and some by the team when it
        runs; OpenMP keeps the setting per thread, so it is set in the thread that makes or runs, and put back.
        Without OpenMP nothing is set."""
        if threads is None or not self._omp:
            yield
            return
        before = self._omp()
        self.lib.omp_set_num_threads(threads)
        try:
            yield
        finally:
            self.lib.omp_set_num_threads(before)

    def check(self, status: int, what: str) -> None:
        if status != _SUCCESS:
            raise ComputeError(f"oneDNN's {what} failed with status {status}")

    def stream(self):
        """A new in-order stream: one per caller at a time (a stream is not for concurrent use)."""
        stream = _Handle()
        self.check(self.lib.dnnl_stream_create(ctypes.byref(stream), self.engine, _IN_ORDER), "stream")
        return stream

    def desc(self, dims, strides=None):
        """A float32 memory descriptor: ``strides`` given, or the layout left to the primitive."""
        md = _Handle()
        if strides is None:
            status = self.lib.dnnl_memory_desc_create_with_tag(ctypes.byref(md), len(dims), _dims(dims), _F32,
                                                               _FORMAT_ANY)
        else:
            status = self.lib.dnnl_memory_desc_create_with_strides(ctypes.byref(md), len(dims), _dims(dims), _F32,
                                                                   _dims(strides))
        self.check(status, "memory descriptor")
        return md

    def attributes(self):
        """Primitive attributes with a scratchpad the caller owns (:meth:`scratchpad`). oneDNN's own scratchpad is
        its creating thread's: XLA runs a step's host calls on its worker threads, where a primitive made while
        tracing found none (a write at a null address, under jax 0.10)."""
        attr = _Handle()
        self.check(self.lib.dnnl_primitive_attr_create(ctypes.byref(attr)), "attributes")
        self.check(self.lib.dnnl_primitive_attr_set_scratchpad_mode(attr, _SCRATCHPAD_USER), "scratchpad mode")
        return attr

    def primitive(self, pd):
        """The primitive of ``pd`` (made with :meth:`attributes`)."""
        handle = _Handle()
        self.check(self.lib.dnnl_primitive_create(ctypes.byref(handle), pd), "primitive")
        return handle

    def queried(self, primitive, what: int):
        """A memory descriptor of ``primitive`` (``_QUERY_*``), owned by the primitive."""
        pd = _Handle()
        self.check(self.lib.dnnl_primitive_get_primitive_desc(primitive, ctypes.byref(pd)), "primitive query")
        return _Handle(self.lib.dnnl_primitive_desc_query_md(pd, what, 0))

    def scratchpad(self, primitive):
        """A new scratchpad for ``primitive``, or None where it needs none."""
        md = self.queried(primitive, _QUERY_SCRATCHPAD_MD)
        return self.memory(md) if md and self.lib.dnnl_memory_desc_get_size(md) else None

    def memory(self, md, address: int | None = None):
        """A memory object over the buffer at ``address``, or over one oneDNN allocates."""
        handle = _Handle()
        where = _ALLOCATE if address is None else _Handle(address)
        self.check(self.lib.dnnl_memory_create(ctypes.byref(handle), md, self.engine, where), "memory")
        return handle

    def reorder(self, source, target, attr):
        pd = _Handle()
        self.check(self.lib.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), source, self.engine, target,
                                                               self.engine, attr), "reorder")
        try:
            return self.primitive(pd)
        finally:  # the primitive keeps what it needs of its descriptor
            self.lib.dnnl_primitive_desc_destroy(pd)

    def execute(self, stream, primitive, scratch, args) -> None:
        """Run ``primitive`` on ``stream`` with ``args``, (argument, memory) pairs, and its ``scratch`` pad."""
        args = [*args, (_ARG_SCRATCHPAD, scratch)] if scratch else args
        array = (_Arg * len(args))(*(_Arg(a, m) for a, m in args))
        self.check(self.lib.dnnl_primitive_execute(primitive, stream, len(args), array), "execution")


def _channels_last(dims_nc):
    """oneDNN's ``(n, c, *spatial)`` dimensions and the strides of the same array stored ``[n, *spatial, c]``."""
    n, c, *spatial = dims_nc
    inner = [math.prod(spatial[i + 1:]) * c for i in range(len(spatial))]
    return [n, c, *spatial], [math.prod(spatial) * c, 1, *inner]


def _kernel_strides(window, channels_in, channels_out):
    """oneDNN's ``(out, in, *window)`` weights stored as the toolkit's ``[*window, in, out]``."""
    inner = [math.prod(window[i + 1:]) * channels_in * channels_out for i in range(len(window))]
    return [channels_out, channels_in, *window], [1, channels_out, *inner]


class Convolution:
    """One convolution's oneDNN primitives, made once per shape (:func:`convolution`): each pass a NumPy function
    of channels-last float32 arrays.

    Args:
        lib: the library (:func:`library`).
        input_shape: ``[n, *spatial, in]``.
        kernel_shape: ``[*window, in, out]``.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.
        threads: OpenMP threads per pass (:meth:`_Library.team`), or None for the library's default.

    Raises:
        ComputeError: oneDNN has no implementation for this convolution.
    """

    def __init__(self, lib: _Library, input_shape, kernel_shape, strides, padding, dilation,
                 threads: int | None = None) -> None:
        self.lib, self.input_shape, self.kernel_shape = lib, tuple(input_shape), tuple(kernel_shape)
        self.threads = threads
        with lib.team(threads):
            self._make(lib, input_shape, kernel_shape, strides, padding, dilation)

    def _make(self, lib: _Library, input_shape, kernel_shape, strides, padding, dilation) -> None:
        window, (channels_in, channels_out) = kernel_shape[:-2], kernel_shape[-2:]
        out = padded_output_sizes(input_shape[1:-1], window, strides, dilation, padding)
        self.output_shape = (input_shape[0], *out, channels_out)
        self.src = lib.desc(*_channels_last([input_shape[0], channels_in, *input_shape[1:-1]]))
        self.dst = lib.desc(*_channels_last([input_shape[0], channels_out, *out]))
        self.kernel = lib.desc(*_kernel_strides(window, channels_in, channels_out))
        chosen = lib.desc([channels_out, channels_in, *window])
        geometry = (_dims(strides), _dims([d - 1 for d in dilation]), _dims([a for a, _ in padding]),
                    _dims([b for _, b in padding]))
        c = lib.lib
        forward, backward_data, backward_weights = _Handle(), _Handle(), _Handle()
        self.shapes = {"forward": self.output_shape, "input_gradient": self.input_shape,
                       "kernel_gradient": self.kernel_shape}
        self.passes = {}
        # What one execution writes besides its result (scratchpads, the reordered kernel, a stream), one set per
        # caller at a time: the logical devices of a process call back at once from their threads, and one
        # Convolution serves every layer and device of its shapes. A set is made when every one is in use and is
        # kept: as many as calls ever ran at once (one per device's thread, and under XLA's thunk runtime, jax
        # 0.10, a device's independent passes too, whose teams may then add up to more threads than cores).
        self._idle = collections.deque()
        attr = lib.attributes()
        try:  # a refusal (no implementation: ComputeError) leaves nothing behind either
            lib.check(c.dnnl_convolution_forward_primitive_desc_create(
                ctypes.byref(forward), lib.engine, _FORWARD_TRAINING, _DIRECT, self.src, chosen, None, self.dst,
                *geometry, attr), "convolution (forward)")
            lib.check(c.dnnl_convolution_backward_data_primitive_desc_create(
                ctypes.byref(backward_data), lib.engine, _DIRECT, self.src, chosen, self.dst, *geometry, forward,
                attr), "convolution (input gradient)")
            lib.check(c.dnnl_convolution_backward_weights_primitive_desc_create(
                ctypes.byref(backward_weights), lib.engine, _DIRECT, self.src, chosen, None, self.dst, *geometry,
                forward, attr), "convolution (kernel gradient)")
            for name, pd, query in (("forward", forward, _QUERY_WEIGHTS_MD),
                                    ("input_gradient", backward_data, _QUERY_WEIGHTS_MD),
                                    ("kernel_gradient", backward_weights, _QUERY_DIFF_WEIGHTS_MD)):
                layout = _Handle(c.dnnl_primitive_desc_query_md(pd, query, 0))  # owned by pd: used before it goes
                to_kernel = name == "kernel_gradient"
                self.passes[name] = (lib.primitive(pd), query, lib.reorder(layout, self.kernel, attr) if to_kernel
                                     else lib.reorder(self.kernel, layout, attr))
        finally:  # the primitives and memories keep what they need of the descriptors and attributes
            for pd in (forward, backward_data, backward_weights):
                if pd:
                    c.dnnl_primitive_desc_destroy(pd)
            c.dnnl_memory_desc_destroy(chosen)
            c.dnnl_primitive_attr_destroy(attr)

    def run(self, name: str, first: int, second: int, result: int) -> None:
        """Pass ``name`` (of :data:`PASSES`) on float32 channels-last arrays at these addresses: ``first`` and
        ``second`` as the pass's NumPy method takes them, ``result`` written.

        Raises:
            ComputeError: oneDNN failed.
        """
        primitive, _, reorder = self.passes[name]
        lib = self.lib
        wrapped = []

        def wrap(md, address):
            wrapped.append(lib.memory(md, address))
            return wrapped[-1]

        try:
            own = self._idle.pop()
        except IndexError:
            own = self._own()
        stream, (scratch, blocked, reordering) = own[0], own[1][name]
        execute = functools.partial(lib.execute, stream)
        try:
            with lib.team(self.threads):
                if name == "forward":
                    execute(reorder, reordering, [(_ARG_SRC, wrap(self.kernel, second)), (_ARG_DST, blocked)])
                    execute(primitive, scratch, [(_ARG_SRC, wrap(self.src, first)), (_ARG_WEIGHTS, blocked),
                                                 (_ARG_DST, wrap(self.dst, result))])
                elif name == "input_gradient":
                    execute(reorder, reordering, [(_ARG_SRC, wrap(self.kernel, second)), (_ARG_DST, blocked)])
                    execute(primitive, scratch, [(_ARG_DIFF_DST, wrap(self.dst, first)), (_ARG_WEIGHTS, blocked),
                                                 (_ARG_DIFF_SRC, wrap(self.src, result))])
                else:
                    execute(primitive, scratch, [(_ARG_SRC, wrap(self.src, first)),
                                                 (_ARG_DIFF_DST, wrap(self.dst, second)), (_ARG_DIFF_WEIGHTS, blocked)])
                    execute(reorder, reordering, [(_ARG_SRC, blocked), (_ARG_DST, wrap(self.kernel, result))])
                lib.check(lib.lib.dnnl_stream_wait(stream), "stream")
        finally:
            self._idle.append(own)
            for memory in wrapped:  # the wrappers only: the buffers are the caller's
                lib.lib.dnnl_memory_destroy(memory)

    def _own(self):
        """A new set of what one caller's executions write: a stream and, per pass, the primitive's scratchpad, the
        reordered kernel's buffer and the reorder's scratchpad (what was made is destroyed where one fails)."""
        lib, made = self.lib, []

        def keep(memory):
            made.append(memory)
            return memory

        stream = lib.stream()
        try:
            return stream, {name: (keep(lib.scratchpad(primitive)), keep(lib.memory(lib.queried(primitive, query))),
                                   keep(lib.scratchpad(reorder)))
                            for name, (primitive, query, reorder) in self.passes.items()}
        except ComputeError:
            lib.lib.dnnl_stream_destroy(stream)
            for memory in filter(None, made):
                lib.lib.dnnl_memory_destroy(memory)
            raise

    def _numpy(self, name, first, second):
        first, second = _c(first), _c(second)
        out = np.empty(self.shapes[name], np.float32)
        self.run(name, first.ctypes.data, second.ctypes.data, out.ctypes.data)
        return out

    def forward(self, inputs, kernel) -> np.ndarray:
        """The convolution of ``inputs`` with ``kernel``: ``[n, *out, out channels]``."""
        return self._numpy("forward", inputs, kernel)

    def input_gradient(self, cotangent, kernel) -> np.ndarray:
        """The gradient for the input of ``cotangent`` (the output's gradient): ``[n, *spatial, in]``."""
        return self._numpy("input_gradient", cotangent, kernel)

    def kernel_gradient(self, inputs, cotangent) -> np.ndarray:
        """The gradient for the kernel: ``[*window, in, out]``."""
        return self._numpy("kernel_gradient", inputs, cotangent)


def _c(array) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float32)


@functools.cache
def convolution(input_shape: tuple, kernel_shape: tuple, strides: tuple, padding: tuple, dilation: tuple,
                threads: int | None = None) -> Convolution | None:
    """The oneDNN primitives of one float32 convolution (channels-last input, ``[*window, in, out]`` kernel, no
    groups), made once per shape; None where oneDNN is not there (:func:`library`), an array is empty, or oneDNN
    has no implementation for it.

    Args:
        input_shape: ``[n, *spatial, in]``, static.
        kernel_shape: ``[*window, in, out]``.
        strides: the strides per spatial axis.
        padding: explicit (before, after) pairs per spatial axis.
        dilation: the kernel's dilation per spatial axis.
        threads: OpenMP threads per pass, or None for the library's default (:func:`threads_sharing`).

    Returns:
        A :class:`Convolution`, or None.
    """
    lib = library()
    if lib is None or 0 in input_shape or 0 in kernel_shape:
        return None
    try:
        return Convolution(lib, input_shape, kernel_shape, strides, padding, dilation, threads)
    except ComputeError:
        return None


def threads_sharing(devices: int) -> int | None:
    """OpenMP threads for each oneDNN call of a step whose ``devices`` logical CPU devices run at once on this
    process's cores: the cores split between them (at least one), or None (the library's default) for one device.
    With every core each, and one call at a time, a call's team waited for cores that the other devices' XLA
    threads held, and the bench ResNet's step on 4 devices was slower than on one; with the cores split and the
    calls at once it is not.

    Args:
        devices: the logical CPU devices that run the step together.

    Returns:
        The threads, or None where the library is not loaded or one device runs.
    """
    lib = library()
    if lib is None or devices <= 1:
        return None
    return max(1, lib.cores // devices)
