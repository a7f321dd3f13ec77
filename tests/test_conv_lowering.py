"""The Theano family's convolution lowering (backends/theano/kernels/conv_lowering.py): every way it may compute a pass
gives XLA's convolution and gradients (float32, and float64 for the folded product the rule takes there), and the
choice keeps the framework's kernel off the CPU. Pure JAX, eager (no engine graph compiled); the backends' window
tests check the same op through the engines."""

from __future__ import annotations

import os

import numpy as np
import pytest

from toolkit.errors import ArgumentError

jax = pytest.importorskip("jax")

from toolkit.backends.theano.kernels import onednn  # noqa: E402
from toolkit.backends.theano.kernels.conv_lowering import (  # noqa: E402
    MAX_PATCHES_ELEMENTS,
    PASSES,
    convolution,
    lowering,
    vectorized_dtypes,
    xla_conv,
)

#: (input shape, window, strides, explicit padding, dilation): 1-D strided and dilated, 2-D with uneven strides and
#: padding, a 3-D pointwise strided convolution; then for the folded product (strides of 1 but along the last axis),
#: a 2-D dilated one strided along its last axis and a 3-D one with uneven padding.
CASES = (
    ((2, 11, 3), (3,), (2,), ((1, 2),), (2,)),
    ((2, 7, 6, 5), (3, 2), (2, 1), ((1, 1), (0, 1)), (1, 1)),
    ((1, 5, 4, 6, 3), (1, 1, 1), (2, 2, 1), ((0, 0),) * 3, (1, 1, 1)),
)
FOLDED_CASES = (
    ((2, 7, 6, 5), (3, 2), (1, 2), ((1, 1), (0, 1)), (2, 1)),
    ((1, 5, 4, 6, 3), (2, 3, 2), (1, 1, 2), ((0, 1), (1, 1), (0, 0)), (1, 2, 1)),
)
#: Products summed in another order than XLA's kernel: a few units in the last place of each dtype.
RTOL = {"float32": 1e-5, "float64": 1e-13}


def _check(passes, cases, dtype):
    rng = np.random.default_rng(0)
    for shape, window, strides, padding, dilation in cases:
        x = rng.standard_normal(shape).astype(dtype)
        w = rng.standard_normal((*window, shape[-1], 4)).astype(dtype)
        options = {"strides": strides, "padding": padding, "dilation": dilation}
        out_shape = jax.eval_shape(lambda a, b, options=options: xla_conv(a, b, **options), x, w).shape
        cotangent = rng.standard_normal(out_shape).astype(dtype)

        @jax.jit  # one compile per case: eager, the lowerings' many small ops cost more on jax 0.10
        def both(x, w, cotangent, options=options):
            expected, pullback = jax.vjp(lambda u, v: xla_conv(u, v, **options), x, w)
            found, found_pullback = jax.vjp(convolution(passes, **options), x, w)
            return (found, *found_pullback(cotangent)), (expected, *pullback(cotangent))

        for a, b in zip(*both(x, w, cotangent)):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=RTOL[dtype], atol=RTOL[dtype] * float(np.max(np.abs(b))),
                                       err_msg=str(shape))


@pytest.mark.parametrize("passes", [dict.fromkeys(PASSES, "patches"),
                                    {"forward": "xla", "input_gradient": "patches", "kernel_gradient": "xla"},
                                    {"forward": "patches", "input_gradient": "xla", "kernel_gradient": "patches"}],
                         ids=["patches", "xla-patches-xla", "patches-xla-patches"])
def test_every_lowering_gives_xlas_convolution_and_gradients(passes):
    _check(passes, CASES, "float32")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_folded_product_gives_xlas_convolution_and_gradients(dtype):
    with _x64(dtype == "float64"):
        _check(dict.fromkeys(PASSES, "folded"), FOLDED_CASES, dtype)


def _x64(enabled: bool):
    """JAX's float64 switch for a block: ``jax.enable_x64`` (jax 0.10) or ``jax.experimental.enable_x64`` (0.4)."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(enabled)
    from jax.experimental import enable_x64

    return enable_x64(enabled)


@pytest.fixture
def without_onednn(monkeypatch):
    """The rule as it is where oneDNN is not installed (``MULTIGPU_ONEDNN=off``)."""
    monkeypatch.setenv(onednn.LIBRARY_ENV, "off")
    _forget_onednn()
    yield
    monkeypatch.undo()
    _forget_onednn()


def _forget_onednn():
    onednn.library.cache_clear()
    onednn.convolution.cache_clear()


def _installed_onednn():
    if onednn.library() is None:
        pytest.skip("oneDNN's library is not installed here (the aesara, pytensor and pytensor-jax04 extras "
                    "install it on x86-64 Linux)")


def test_the_extras_onednn_loads_where_it_is_installed():
    """Where the extra installed the wheel, the library loads: the oneDNN tests below must not skip there."""
    from importlib import metadata

    try:
        metadata.version("onednn-cpu-gomp")
    except metadata.PackageNotFoundError:
        pytest.skip("onednn-cpu-gomp is not installed (the extras install it on x86-64 Linux only)")
    if os.environ.get(onednn.LIBRARY_ENV):
        pytest.skip(f"{onednn.LIBRARY_ENV} chooses the library here")
    if onednn.library() is None:  # say why: a missing libgomp.so.1, a moved file
        import ctypes
        import sys
        from pathlib import Path

        path = Path(sys.prefix) / "lib" / onednn.LIBRARY_NAME
        try:
            ctypes.CDLL(str(path))
            reason = "it loads; its engine or stream could not be made"
        except OSError as error:
            reason = str(error)
        pytest.fail(f"onednn-cpu-gomp is installed but {path} did not load: {reason}")


def test_onednn_gives_xlas_convolution_and_gradients():
    _installed_onednn()
    _check(dict.fromkeys(PASSES, "onednn"), CASES + FOLDED_CASES, "float32")


def test_onednn_is_chosen_for_float32_ungrouped_convolutions_on_the_cpu():
    _installed_onednn()

    def rule(platform="cpu", kernel=(3, 3, 16, 16), dtype="float32", groups=1, transpose=False, shape=(8, 16, 16, 16)):
        return lowering(platform, dtype, shape, kernel, (1, 1), ((1, 1), (1, 1)), (1, 1), groups, transpose)

    ways = dict.fromkeys(PASSES, "onednn")
    assert rule() == rule(kernel=(3, 3, 16, 3)) == rule(kernel=(1, 1, 16, 32)) == ways
    assert rule(platform="gpu") == dict.fromkeys(PASSES, "xla")  # cuDNN's kernels
    assert "onednn" not in rule(dtype="float64").values()  # oneDNN has no float64 convolution on a CPU
    assert rule(groups=2, kernel=(3, 3, 8, 16)) == rule(transpose=True) == dict.fromkeys(PASSES, "xla")
    assert "onednn" not in rule(shape=(0, 16, 16, 16)).values()  # nothing to convolve


def test_the_onednn_setting_turns_it_off_or_names_a_missing_file(monkeypatch):
    monkeypatch.setenv(onednn.LIBRARY_ENV, "off")
    _forget_onednn()
    try:
        assert onednn.library() is None and onednn.convolution((1, 4, 4, 2), (3, 3, 2, 2), (1, 1), ((1, 1),) * 2,
                                                               (1, 1)) is None
        monkeypatch.setenv(onednn.LIBRARY_ENV, "/no/such/libdnnl.so.3")
        _forget_onednn()
        with pytest.raises(ArgumentError, match="MULTIGPU_ONEDNN='/no/such/libdnnl.so.3' names no file"):
            onednn.library()
        monkeypatch.setenv(onednn.LIBRARY_ENV, __file__)  # a file, not a library: the loader's reason is given
        _forget_onednn()
        with pytest.raises(ArgumentError, match=r"test_conv_lowering.py'.*expected oneDNN 3's libdnnl.so.3"):
            onednn.library()
    finally:
        monkeypatch.undo()
        _forget_onednn()


def test_the_framework_kernel_is_kept_off_the_cpu_and_where_products_do_not_pay(without_onednn):
    def rule(platform="cpu", shape=(8, 16, 16, 16), kernel=(3, 3, 16, 16), strides=(1, 1), groups=1,
             transpose=False, dtype="float32"):
        return lowering(platform, dtype, shape, kernel, strides, ((1, 1), (1, 1)), (1, 1), groups, transpose)

    xla = dict.fromkeys(PASSES, "xla")
    assert rule(platform="gpu", kernel=(1, 1, 16, 16)) == xla  # cuDNN's kernels
    assert rule(platform="gpu", dtype="float64") == xla
    assert rule(groups=2, kernel=(1, 1, 8, 16)) == xla and rule(transpose=True, kernel=(1, 1, 16, 16)) == xla
    assert rule() == xla  # stride 1, several channels: XLA's kernel reads the input once
    assert rule(kernel=(3, 3, 3, 16)) == dict.fromkeys(PASSES, "patches")  # an image's colours
    assert rule(kernel=(1, 1, 16, 16)) == dict.fromkeys(PASSES, "patches")  # pointwise: the patches are the input
    assert rule(strides=(2, 2)) == xla  # the window-fold copy of a 16-channel input
    assert rule(dtype=np.float64, kernel=(1, 1, 16, 16)) == dict.fromkeys(PASSES, "patches")
    if "float64" in vectorized_dtypes():  # as float32
        assert rule(dtype="float64") == rule(dtype="float64", strides=(2, 2)) == xla
    else:  # XLA's CPU convolution is plain loops: every pass is a product
        assert rule(dtype="float64") == rule(dtype="float64", strides=(1, 2)) == dict.fromkeys(PASSES, "folded")
        assert rule(dtype="float64", strides=(2, 2)) == dict.fromkeys(PASSES, "patches")
    too_big = (MAX_PATCHES_ELEMENTS // (16 * 16 * 9 * 3) + 1, 16, 16, 3)
    assert rule(shape=too_big, kernel=(3, 3, 3, 16)) == xla
    assert rule(shape=too_big, kernel=(3, 3, 3, 16), dtype="float64") == xla


def test_float64_is_vectorized_from_the_measured_jax():
    assert vectorized_dtypes((0, 4, 30)) == {"float16", "float32"}
    assert vectorized_dtypes((0, 10, 2)) == {"float16", "float32", "float64"}


def test_onednn_runs_on_a_thread_other_than_the_one_that_made_its_primitives():
    """XLA calls the passes from its worker threads, and the primitives are made where the step is traced: each
    primitive brings its own scratchpad (oneDNN's default one is its creating thread's: a write at a null address
    from any other thread, found under jax 0.10)."""
    import threading

    _installed_onednn()
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 13, 3)).astype(np.float32), rng.standard_normal((3, 3, 4)).astype(np.float32)
    options = {"strides": (2,), "padding": ((1, 2),), "dilation": (2,)}  # a shape no other test makes
    conv = onednn.convolution(x.shape, w.shape, (2,), ((1, 2),), (2,))
    expected, pullback = jax.vjp(lambda u, v: xla_conv(u, v, **options), x, w)
    cotangent = rng.standard_normal(expected.shape).astype(np.float32)
    found = {}
    thread = threading.Thread(target=lambda: found.update(
        forward=conv.forward(x, w), input_gradient=conv.input_gradient(cotangent, w),
        kernel_gradient=conv.kernel_gradient(x, cotangent)))
    thread.start()
    thread.join()
    for name, value in zip(PASSES, (expected, *pullback(cotangent))):
        np.testing.assert_allclose(found[name], value, rtol=RTOL["float32"], atol=1e-5, err_msg=name)


def test_onednn_calls_from_several_threads_at_once_each_get_their_own_values():
    """The logical devices of a process call the same shapes' passes at once from their threads (nothing makes
    them take turns): each call writes its own scratchpads and reordered kernel, so each gets its own inputs'
    values, also with the cores split between the callers (one thread each)."""
    import threading

    _installed_onednn()
    rng = np.random.default_rng(4)
    shape, kernel, options = (4, 9, 9, 5), (3, 3, 5, 6), {"strides": (1, 1), "padding": ((1, 1),) * 2,
                                                          "dilation": (1, 1)}
    callers, rounds = 4, 20
    inputs = [(rng.standard_normal(shape).astype(np.float32), rng.standard_normal(kernel).astype(np.float32))
              for _ in range(callers)]
    expected = []
    for x, w in inputs:
        out, pullback = jax.vjp(lambda u, v: xla_conv(u, v, **options), x, w)
        cotangent = rng.standard_normal(out.shape).astype(np.float32)
        expected.append((cotangent, (out, *pullback(cotangent))))
    for threads in (None, 1):
        conv = onednn.convolution(shape, kernel, *options.values(), threads)
        start, wrong = threading.Barrier(callers), []
        workers = [threading.Thread(target=_call_passes, args=(conv, *inputs[i], *expected[i], start, rounds, wrong))
                   for i in range(callers)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(JOIN_SECONDS)
        assert not any(worker.is_alive() for worker in workers), f"a caller still runs after {JOIN_SECONDS} s"
        assert not wrong, (threads, sorted(set(wrong)))


#: How long the callers of the test above may take (each ~0.1 s of work): past it, they are taken as hung.
JOIN_SECONDS = 60
#: The absolute slack of oneDNN's passes there against XLA's: sums of 45 products of unit normals, in another order.
CONCURRENT_ATOL = 1e-4


def _call_passes(conv, x, w, cotangent, values, start, rounds, wrong):
    """Each of ``conv``'s passes ``rounds`` times once every caller is at ``start``; the passes that differ from
    ``values``, or the error a call raised, are appended to ``wrong`` (a thread's exception would only warn)."""
    try:
        start.wait()
        for _ in range(rounds):
            found = (conv.forward(x, w), conv.input_gradient(cotangent, w), conv.kernel_gradient(x, cotangent))
            wrong.extend(name for name, a, b in zip(PASSES, found, values)
                         if not np.allclose(a, b, rtol=RTOL["float32"], atol=CONCURRENT_ATOL))
    except Exception as error:  # noqa: BLE001 - reported by the test's assertion
        wrong.append(repr(error))


def test_devices_sharing_the_cores_split_them_between_their_onednn_calls(monkeypatch):
    """The split rule, its choice reaching the primitives traced under :func:`sharing_cores`, and OpenMP's team set
    to it in the thread that runs a pass, and put back after (also where the pass fails)."""
    _installed_onednn()
    lib = onednn.library()
    monkeypatch.setattr(lib, "cores", 12)  # a team of 3 below: not this machine's default
    assert onednn.threads_sharing(1) is None  # one device: the library's default, every core
    assert [onednn.threads_sharing(n) for n in (2, 4, 12, 64)] == [6, 3, 1, 1]
    from toolkit.backends.theano.kernels import conv_lowering

    shapes = ((2, 5, 5, 3), (3, 3, 3, 2), (1, 1), ((1, 1),) * 2, (1, 1))
    with conv_lowering.sharing_cores(4):
        conv = conv_lowering._onednn_primitives(*shapes)
    assert conv.threads == 3 and conv_lowering._onednn_primitives(*shapes).threads is None
    teams, execute = [], lib.execute
    monkeypatch.setattr(lib, "execute", lambda *a: teams.append(lib.lib.omp_get_max_threads()) or execute(*a))
    before = lib.lib.omp_get_max_threads()
    x, w = np.ones(shapes[0], np.float32), np.ones(shapes[1], np.float32)
    conv.forward(x, w)
    assert set(teams) == {3} and lib.lib.omp_get_max_threads() == before != 3

    def fail(*args):
        raise onednn.ComputeError("a failed execution")

    monkeypatch.setattr(lib, "execute", fail)
    with pytest.raises(onednn.ComputeError):
        conv.forward(x, w)
    assert lib.lib.omp_get_max_threads() == before
