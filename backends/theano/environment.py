"""The engine's and JAX's set-up that must happen around importing them (flags, logical devices, the JAX
conversions an engine lacks). Imports neither unless already imported."""

from __future__ import annotations

import ctypes
import functools
import importlib
import itertools
import linecache
import logging
import os
import re
import sys
import weakref

from toolkit.backend.logical_devices import apply_logical_devices

from . import engine

_COUNT_FLAG = "--xla_force_host_platform_device_count"


def imported(module: str, name: str):
    """``from <engine>.<module> import <name>``, with ``module`` and ``name`` as Aesara names them (the engine's
    ``MOVED`` says where PyTensor moved or renamed a symbol)."""
    module, _, name = engine.MOVED.get(f"{module}.{name}", f"{module}.{name}").rpartition(".")
    return getattr(importlib.import_module(f"{engine.NAME}.{module}"), name)


def set_quiet_defaults() -> None:
    """XLA's C++ logging to errors only (a value the user set is kept). Without a BLAS named in the engine's flags
    (``AESARA_FLAGS``, ``PYTENSOR_FLAGS``), the engine probes for one at import and warns at length when it
    falls back to NumPy's dot. An explicit empty ``blas__ldflags`` skips the probe and the fallback (correct, only
    slower) is used without a warning. A user's own ``blas__ldflags`` (e.g. ``-lopenblas``) is kept and used."""
    # JAX sets TF_CPP_MIN_LOG_LEVEL=1 on import if unset, which TensorFlow then inherits in this process and in
    # every child process: XLA's and TensorFlow's C++ logging read the same variable, so errors-only is set first.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    flags = os.environ.get(engine.FLAGS, "")
    match = re.search(r"(?:^|,)\s*blas__ldflags\s*=([^,]*)", flags)
    if match is None:
        os.environ[engine.FLAGS] = ",".join(f for f in (flags, "blas__ldflags=") if f)
    if match is None or not match.group(1).strip():
        logging.getLogger(engine.BLAS_LOGGER).setLevel(logging.ERROR)


def _fix_jax_reductions() -> None:
    """Aesara 2.9's and PyTensor 3.0's JAX dispatch of ``CAReduce`` (sum, prod, max, ...) casts the result to the
    op's accumulator dtype, which is float64 for float32 sums, so float32 graphs came back float64. Cast to the output
    dtype that the graph declares, as the C linker does. A floating sum is written in levels where XLA would make a
    slow reduce-window of it (:mod:`.reductions`, chosen when traced: the platform is known then)."""
    import jax

    from .kernels.reductions import levelled, levelled_sum

    jax_funcify = imported("link.jax.dispatch", "jax_funcify")
    jax_funcify_CAReduce = imported("link.jax.dispatch.elemwise", "jax_funcify_CAReduce")
    CAReduce = imported("tensor.elemwise", "CAReduce")
    Add = imported("scalar", "Add")

    @jax_funcify.register(CAReduce)
    def careduce_in_output_dtype(op, node=None, **kwargs):
        reduce = jax_funcify_CAReduce(op, node=node, **kwargs)
        if node is None:
            return reduce
        dtype = node.outputs[0].dtype
        is_sum = isinstance(op.scalar_op, Add)

        def careduce(x):
            if is_sum and levelled(jax.default_backend(), x.dtype):
                return levelled_sum(x.astype(dtype), op.axis)
            return reduce(x).astype(dtype)

        return careduce


def _add_jax_split() -> None:
    """Aesara 2.9 has no JAX conversion for ``Split``, which the gradient of ``concatenate`` uses. With static input
    shapes (how the backend compiles for JAX) the split sizes are constants, so the conversion is a ``jnp.split``
    at fixed offsets; with symbolic sizes it raises, as before, naming the reason."""
    import jax.numpy as jnp
    import numpy as np

    Constant = imported("graph.basic", "Constant")
    jax_funcify = imported("link.jax.dispatch", "jax_funcify")
    Split = imported("tensor.basic", "Split")

    @jax_funcify.register(Split)
    def jax_funcify_Split(op, node=None, **kwargs):
        constants = [getattr(v, "data", None) if isinstance(v, Constant) else None for v in node.inputs[1:]]
        if any(c is None for c in constants):
            raise NotImplementedError("JAX needs constant split sizes; compile with static input shapes")
        axis, sizes = int(constants[0]), np.asarray(constants[1])
        offsets = [int(o) for o in np.cumsum(sizes)[:-1]]

        def split(x, *_):
            return tuple(jnp.split(x, offsets, axis=axis))

        return split


def _add_jax_argmax() -> None:
    """Aesara 2.9 has no JAX conversion for ``Argmax``. ``ops.argmax`` reduces one axis (or the flattened array), so
    the conversion is ``jnp.argmax`` over that axis, in the dtype Aesara's graph declares."""
    import jax.numpy as jnp

    jax_funcify = imported("link.jax.dispatch", "jax_funcify")
    Argmax = imported("tensor.math", "Argmax")

    @jax_funcify.register(Argmax)
    def jax_funcify_Argmax(op, node=None, **kwargs):
        axes = op.axis
        if axes is not None and len(axes) != 1:
            raise NotImplementedError("JAX argmax over several axes; ops.argmax takes one axis")
        dtype = node.outputs[0].dtype

        def argmax(x):
            return jnp.argmax(x, axis=None if axes is None else int(axes[0])).astype(dtype)

        return argmax


def _fix_jax_specify_shape() -> None:
    """Aesara 2.9's JAX ``SpecifyShape`` compares the whole shape, so a partly specified shape such as
    ``(1, None, None)`` (made by the gradient of ``stack``) fails on any real array. Check only the given sizes."""
    jax_funcify = imported("link.jax.dispatch", "jax_funcify")
    SpecifyShape = imported("tensor.shape", "SpecifyShape")

    @jax_funcify.register(SpecifyShape)
    def jax_funcify_SpecifyShape(op, node=None, **kwargs):
        def specify_shape(x, *shape):
            expected = tuple(None if s is None else int(s) for s in shape)
            if x.ndim != len(expected) or any(e is not None and e != a for e, a in zip(expected, x.shape)):
                raise AssertionError(f"SpecifyShape: got shape {x.shape}, expected {expected}")
            return x

        return specify_shape


def _batched_dot_without_blas() -> None:
    """Aesara 2.9's C code for ``BatchedDot`` (a matmul with batch axes on both sides: attention's scores) calls
    BLAS's ``dgemm_`` itself, so with no BLAS library named (``blas__ldflags`` empty, as :func:`set_quiet_defaults`
    leaves it unless the user names one) the C linker could not load it ("undefined symbol: dgemm_"). Without a BLAS
    the op says it has no C code, and the C linker runs its NumPy implementation."""
    config = importlib.import_module(engine.NAME).config
    MethodNotDefined = imported("graph.utils", "MethodNotDefined")
    BatchedDot = imported("tensor.blas", "BatchedDot")

    with_blas = BatchedDot.c_code

    def c_code(self, *args, **kwargs):
        if not config.blas__ldflags.strip():
            raise MethodNotDefined("BatchedDot's C code needs a BLAS library (blas__ldflags)")
        return with_blas(self, *args, **kwargs)

    BatchedDot.c_code = c_code


def _keep_generated_sources_in_memory() -> None:
    """The JAX linker turns each graph into Python source and compiles it with ``link.utils.compile_function_src``,
    which writes the source to a new temporary file that it never deletes, only so that tracebacks can show its
    lines: a long run leaves one file per compiled function in the temporary directory (some 200,000 after a day of
    this project's tests). Both engines do it. The source goes to ``linecache`` instead, which tracebacks and
    ``inspect`` read first, and leaves it when the function is collected."""
    utils = importlib.import_module(f"{engine.NAME}.link.utils")
    counter = itertools.count()

    def compile_function_src(src, function_name, global_env=None, local_env=None):
        filename = f"<{engine.NAME} generated {function_name} #{next(counter)}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
        local_env = {} if local_env is None else local_env
        exec(compile(src, filename, mode="exec"), {} if global_env is None else global_env, local_env)
        function = local_env[function_name]
        function.__source__ = src
        weakref.finalize(function, linecache.cache.pop, filename, None)
        return function

    # The JAX linker's caller (fgraph_to_python) looks the name up in its own module at each call.
    utils.compile_function_src = compile_function_src


#: The fixes an engine's ``FIXES`` can name, applied in this order after the engine's import.
JAX_FIXES = {
    "reductions": _fix_jax_reductions,
    "split": _add_jax_split,
    "argmax": _add_jax_argmax,
    "specify_shape": _fix_jax_specify_shape,
    "batched_dot_without_blas": _batched_dot_without_blas,
}


@functools.cache
def import_framework():
    """Import the engine (Aesara or PyTensor) and JAX quietly, with the logical CPU devices asked for by
    ``toolkit.use_logical_devices``, and the JAX conversions the engine lacks.

    Returns:
        ``(engine's module, jax)``.
    """
    apply_logical_devices(sys.modules[__name__], "JAX")
    set_quiet_defaults()
    framework = importlib.import_module(engine.NAME)
    importlib.import_module(f"{engine.NAME}.link.jax.dispatch")  # sets jax_enable_x64 from floatX; turned on below
    import jax

    # The engine sets x64 from floatX; float64 graphs need it on, and float32 graphs stay float32 with it on
    # because every input is typed explicitly. Other JAX code in the process sees it too.
    jax.config.update("jax_enable_x64", True)
    for fix in engine.FIXES:
        JAX_FIXES[fix]()
    _keep_generated_sources_in_memory()
    keep_step_memory()
    run_steps_inline(jax)
    return framework, jax


#: glibc's ``mallopt`` parameters (malloc.h) and the values :func:`keep_step_memory` gives them: no ``mmap`` for
#: large blocks; freed memory at the top of the main heap returned to the system only past 1 GiB; and 64 MiB of top
#: pad, glibc's largest heap of a thread's arena on 64-bit Linux (``HEAP_MAX_SIZE``), which keeps a thread's emptied
#: heap from being unmapped (glibc's ``heap_trim`` keeps it where the pad would not fit in the heap before it).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4
_KEPT_BYTES, _TOP_PAD_BYTES = 1 << 30, 64 << 20
#: The environment variables by which a user sets those parameters or the threshold they override (or glibc's malloc
#: tunables); one set leaves glibc as the user set it.
MALLOC_VARIABLES = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
#: The JAX flag that runs a one-device computation on the CPU in the calling thread (True: on XLA's threads), and the
#: environment variable by which a user sets it.
ASYNC_DISPATCH_FLAG, ASYNC_DISPATCH_ENV = "jax_cpu_enable_async_dispatch", "JAX_CPU_ENABLE_ASYNC_DISPATCH"


def keep_step_memory() -> bool:
    """On Linux, have glibc's malloc keep freed memory for the next step (:data:`MALLOC_VARIABLES` says how).

    Why: JAX's CPU client allocates a compiled step's scratch memory with ``malloc`` at every call (one block: 230 MiB
    for the bench ResNet at batch 128, 126 MiB for the bench Transformer's step under jax 0.10), which glibc serves by
    a fresh ``mmap`` for a block over 32 MiB and unmaps when freed: every page is faulted in again every step, a
    large part of the step's time. The C linker's functions allocate their intermediate arrays with ``malloc`` at
    every call too, and whether glibc then gives them back to the system at every step depends on the thresholds it
    adapted to what the process freed before: after TensorFlow's ResNet steps in the same process, PyTensor's
    C-linker step faulted its pages in again at every step. With ``mmap`` off for large blocks and freed memory kept
    on the heaps, blocks are reused as TensorFlow's allocator reuses its own. The threads of XLA's CPU client, which
    allocate a multi-device step's memory (and a one-device step's where :func:`run_steps_inline` could not apply),
    allocate from arenas of their own, whose heaps glibc unmaps once empty: the top pad keeps them (the bench
    Transformer on 4 devices faulted without it); a block over a thread's 64 MiB heap is still mapped afresh there.
    A process-wide change: large blocks then live on the heaps, whose freed memory is not returned to the system,
    and every arena keeps its heaps, so the process keeps about the sum of its arenas' peaks (measured on 2 cores
    only; more cores, more arenas; on a GPU too, where the host's scratch memory matters less). Nothing changes where
    a user set :data:`MALLOC_VARIABLES` or glibc's malloc tunables (``GLIBC_TUNABLES``), or off glibc. The page
    faults and step times measured are on docs/guides/benchmarks.md.

    Returns:
        Whether glibc's settings were changed.
    """
    user_set = any(v in os.environ for v in MALLOC_VARIABLES) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")
    if not sys.platform.startswith("linux") or user_set:
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return False
    return all(libc.mallopt(parameter, value) for parameter, value in (
        (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, _KEPT_BYTES), (_M_TOP_PAD, _TOP_PAD_BYTES)))


def run_steps_inline(jax) -> bool:
    """Have JAX's CPU client run a one-device computation in the thread that calls it: :data:`ASYNC_DISPATCH_FLAG`
    off (jax 0.4.30's default, "after resolving [a] memory increase issue" says its source; jax 0.10's is on), where
    this JAX has the flag and its backends have not started (the client reads it when it is made), unless the user
    set :data:`ASYNC_DISPATCH_ENV`. A multi-device computation still runs on XLA's threads, one per device.

    Why: dispatched to XLA's threads, the step's scratch memory is allocated in their malloc arenas, where glibc
    serves a block larger than a thread's heap (64 MiB) by ``mmap`` whatever :func:`keep_step_memory` set, and unmaps
    it when freed: the bench Transformer's step under jax 0.10 faulted in its 126 MiB every step; run inline, the
    block comes from the calling thread's heap and is kept, and the step faults no page. The step's
    caller waits for its result anyway (the step's loss and finiteness are read at every step). Process-wide: the
    user's other one-device JAX computations in the process run inline too.

    Args:
        jax: the imported ``jax`` module.

    Returns:
        Whether the flag was changed.
    """
    if ASYNC_DISPATCH_ENV in os.environ or ASYNC_DISPATCH_FLAG not in jax.config.values or _jax_started():
        return False
    jax.config.update(ASYNC_DISPATCH_FLAG, False)
    return True


def _jax_started() -> bool:
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def _jax_cpu_count() -> int:
    return len(sys.modules["jax"].devices("cpu"))


def logical_devices_problem(n: int) -> str | None:
    """Why JAX cannot get ``n`` logical CPU devices now, or None if it can."""
    if _jax_started() and _jax_cpu_count() != n:
        return (f"JAX has already started with {_jax_cpu_count()} CPU device(s) "
                f"(XLA_FLAGS={_COUNT_FLAG} is read only when JAX starts)")
    return None


def configure_logical_devices(n: int) -> None:
    """Set JAX's host device count for when it starts (``XLA_FLAGS``, replacing an earlier count)."""
    if _jax_started():
        return  # already started with n devices, or logical_devices_problem said so
    flags = re.sub(rf"{_COUNT_FLAG}=\S*", "", os.environ.get("XLA_FLAGS", "")).split()
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{_COUNT_FLAG}={n}"])
