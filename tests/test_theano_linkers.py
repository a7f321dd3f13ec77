"""The Theano-family engine's C linker (host only) and JAX linker (devices) compute the same training run."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_backend
from tests.helpers import SMALL_MLP, batch, check_fused_step_follows_outside_writes, max_abs_diff
from toolkit.tolerances import FLOAT32_RTOL, FLOAT64_ATOL

pytestmark = needs_backend(THEANO)


def test_c_linker_matches_jax_linker():
    c_backend = toolkit.get_backend(THEANO, linker="c")
    x, y = batch(16, seed=7)
    runs = {}
    for name, backend in (("c", c_backend), ("jax", toolkit.get_backend(THEANO))):
        trainer = toolkit.DataParallel(SMALL_MLP, backend, 1, toolkit.optim.Adam(0.05), dtype="float64")
        runs[name] = ([trainer.step(x, y) for _ in range(10)], trainer.params())
    assert max(abs(a - b) for a, b in zip(runs["c"][0], runs["jax"][0])) <= FLOAT64_ATOL
    assert max_abs_diff(runs["c"][1], runs["jax"][1]) <= FLOAT64_ATOL


@pytest.mark.parametrize("name", ["lstm", "transformer", "resnet"])
def test_c_linker_trains_models_like_the_jax_linker(name):
    """The masked LSTM's time loop (one op that is a lax.scan under the JAX linker), attention's batched matmul
    (whose C code needs a BLAS library, absent here) and the ResNet's convolutions (XLA's under the JAX linker, an
    im2col graph under the C linker) give the same losses and parameters on both linkers."""
    rng = np.random.default_rng(0)
    if name == "resnet":
        model = toolkit.models.resnet((8, 8, 3), width=4, blocks=(1, 1))
        x, y = rng.normal(size=(8, 8, 8, 3)), rng.integers(0, 10, size=8)
    elif name == "lstm":
        model = toolkit.models.lstm_text(seq_len=6)
        x, y = rng.integers(1, 32, size=(8, 6)), rng.integers(0, 2, size=8)
        x[:4, 3:] = 0
    else:
        model = toolkit.models.transformer_lm(vocab=16, seq_len=6, width=8, heads=2, depth=1, dropout=0.0)
        x, y = rng.integers(0, 16, size=(8, 6)), rng.integers(0, 16, size=(8, 6))
    runs = {}
    for linker, backend in (("c", toolkit.get_backend(THEANO, linker="c")), ("jax", toolkit.get_backend(THEANO))):
        trainer = toolkit.DataParallel(model, backend, 1, toolkit.optim.Adam(0.05), dtype="float64")
        runs[linker] = ([trainer.step(x, y) for _ in range(3)], trainer.params())
    assert max(abs(a - b) for a, b in zip(runs["c"][0], runs["jax"][0])) <= FLOAT64_ATOL
    assert max_abs_diff(runs["c"][1], runs["jax"][1]) <= FLOAT64_ATOL


def test_float32_convolutions_through_onednn_train_like_xlas_on_both_linkers(monkeypatch):
    """Where oneDNN is installed, a float32 convnet's convolutions are oneDNN's on the JAX linker (called from the
    compiled step, on one device and from each of four in the mesh step) and on the C linker (the op calls the
    library on the host itself) and train as XLA's do (``MULTIGPU_ONEDNN=off``): SGD, so float32's bound of the
    parameter scale applies (toolkit.tolerances.parity_bound). The four devices split the cores between their
    calls."""
    import importlib

    onednn = importlib.import_module(f"toolkit.backends.{THEANO}.kernels.onednn")
    if onednn.library() is None:
        pytest.skip("oneDNN's library is not installed here (the engines' extras install it on x86-64 Linux)")
    rng = np.random.default_rng(0)
    model = toolkit.models.mnist_convnet((8, 8, 3), filters=(4, 8), padding="same")
    x, y = rng.normal(size=(8, 8, 8, 3)), rng.integers(0, 10, size=8)

    def train(backend, devices=1):
        trainer = toolkit.DataParallel(model, backend, devices, toolkit.optim.SGD(0.05), dtype="float32", seed=0)
        losses = [trainer.step(x, y) for _ in range(3)]
        return losses, trainer.params()

    calls = []
    run = onednn.Convolution.run
    monkeypatch.setattr(onednn.Convolution, "run", lambda self, *a: calls.append((a[0], self.threads)) or run(self, *a))
    passes = {"forward", "input_gradient", "kernel_gradient"}
    ops_windows = importlib.import_module(f"toolkit.backends.{THEANO}.ops_windows")

    def through_jax(op):
        raise AssertionError(f"the C linker ran {op} through JAX, not oneDNN directly")

    with monkeypatch.context() as patched:  # the C linker calls oneDNN itself, without a jitted JAX function
        patched.setattr(ops_windows._Conv, "function", through_jax)
        patched.setattr(ops_windows._ConvGradient, "function", through_jax)
        runs = {"c": train(toolkit.get_backend(THEANO, linker="c"))}
    assert {(p, None) for p in passes} == set(calls)  # oneDNN computed them, with every core
    calls.clear()
    runs["jax"] = train(toolkit.get_backend(THEANO))
    assert {(p, None) for p in passes} == set(calls)
    calls.clear()
    devices = 4  # their threads call oneDNN at once, the cores split between them
    runs["jax, 4 devices"] = train(toolkit.get_backend(THEANO), devices)
    assert {(p, onednn.threads_sharing(devices)) for p in passes} == set(calls)
    monkeypatch.setenv(onednn.LIBRARY_ENV, "off")
    onednn.library.cache_clear(), onednn.convolution.cache_clear()
    try:
        runs["xla"] = train(toolkit.get_backend(THEANO))
        runs["xla, 4 devices"] = train(toolkit.get_backend(THEANO), 4)
    finally:
        monkeypatch.undo()
        onednn.library.cache_clear(), onednn.convolution.cache_clear()
    scale = max(float(np.max(np.abs(p))) for p in runs["xla"][1].values())
    for name, xla in (("c", "xla"), ("jax", "xla"), ("jax, 4 devices", "xla, 4 devices")):
        assert max(abs(a - b) for a, b in zip(runs[name][0], runs[xla][0])) <= FLOAT32_RTOL * abs(runs[xla][0][0])
        assert max_abs_diff(runs[name][1], runs[xla][1]) <= FLOAT32_RTOL * scale, name


def test_c_linker_fit_scores_training_metrics_like_the_jax_linker():
    """The C linker's shared-variable step gives the model state and the training metrics as the JAX linker's
    step does (a batch-normalized model; a metric that is the loss itself equals the step's loss)."""
    from tests.test_model_state import BATCH_NORM, X, Y

    metrics = ["accuracy", toolkit.metrics.Metric("loss_again", BATCH_NORM.loss)]
    histories, states = {}, {}
    for linker, backend in (("c", toolkit.get_backend(THEANO, linker="c")), ("jax", toolkit.get_backend(THEANO))):
        trainer = toolkit.DataParallel(BATCH_NORM, backend, 1, toolkit.optim.Adam(0.05), dtype="float64", seed=3)
        histories[linker] = trainer.fit(X, Y, epochs=2, batch_size=5, verbose=0, metrics=metrics).history
        states[linker] = trainer.state()
    assert list(histories["c"]) == ["loss", "accuracy", "loss_again"]
    for metric, values in histories["jax"].items():
        assert max(abs(a - b) for a, b in zip(histories["c"][metric], values)) <= FLOAT64_ATOL, metric
    assert max(abs(a - b) for a, b in zip(histories["c"]["loss_again"], histories["c"]["loss"])) <= FLOAT64_ATOL
    assert max_abs_diff(states["c"], states["jax"]) <= FLOAT64_ATOL


def test_c_linker_fused_step_follows_outside_writes(tmp_path):
    check_fused_step_follows_outside_writes(toolkit.get_backend(THEANO, linker="c"), 1, tmp_path / "c.npz")


def test_c_linker_has_one_host_device():
    backend = toolkit.get_backend(THEANO, linker="c")
    assert [str(d) for d in backend.list_devices()] == ["cpu:0"]
    with pytest.raises(toolkit.DeviceNotFoundError, match=f"2 devices asked for, but {THEANO} sees 1 CPU"):
        backend.select_devices(2)


def test_unknown_linker():
    with pytest.raises(ValueError, match="linker must be one of"):
        toolkit.get_backend(THEANO, linker="numba")


@pytest.mark.parametrize("linker", ["jax", "c"])
def test_conv_is_one_xla_convolution_under_the_jax_linker_only(linker):
    """Under the JAX linker ``ops.conv`` (and its gradient) is one op each, lax.conv_general_dilated and its vjp;
    under the C linker it is the im2col graph the engine compiles to C. Their values are checked against each other
    by the training test above and against Keras and central differences in tests/test_op_vocabulary.py."""
    import importlib

    graphs = importlib.import_module(f"toolkit.backends.{THEANO}.graphs")
    tt = graphs.tt
    ops = importlib.import_module(f"toolkit.backends.{THEANO}.ops").TheanoOps("float64", linker)
    x, k = tt.tensor(dtype="float64", shape=(2, 9, 9, 3)), tt.tensor(dtype="float64", shape=(3, 3, 3, 5))
    out = ops.call(lambda o, x, k: o.conv(x, k, strides=2, padding="same"), x, k)
    assert out.type.shape == (2, 5, 5, 5)
    grads = graphs.theano.grad(tt.sum(out), [x, k])
    nodes = {type(node.op).__name__ for node in graphs.io_toposort([x, k], [out, *grads])}
    assert nodes & {"_Conv", "_ConvGradient"} == ({"_Conv", "_ConvGradient"} if linker == "jax" else set())


@pytest.mark.parametrize("optimizer", [toolkit.optim.SGD(0.1), toolkit.optim.Adam(0.1)], ids=["sgd", "adam"])
def test_c_linker_step_computes_each_product_once(optimizer):
    """A two-layer MLP's step has 5 products (2 forward, 2 weight gradients, 1 input gradient). The engine's
    dot22scalar rewrite made a second, scaled copy of each weight gradient for the update while the finiteness
    check kept the first (7); the toolkit's C mode leaves it out (backends/theano/backend.py C_EXCLUDED_REWRITES)."""
    trainer = toolkit.DataParallel(SMALL_MLP, toolkit.get_backend(THEANO, linker="c"), 1, optimizer,
                                   dtype="float32")
    trainer.step(*batch(16))
    (function,) = trainer.fused_step().functions
    products = [type(node.op).__name__ for node in function.maker.fgraph.toposort()
                if type(node.op).__name__ in {"Dot", "Dot22", "Dot22Scalar", "Gemm", "Gemv", "Ger"}]
    assert len(products) == 5, products


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_c_linker_selects_without_branches_and_the_same_bits(dtype):
    """Under the C linker the toolkit's functions compute every elementwise switch (a ReLU, its gradient, fused into
    other elementwise work) with c_kernels.BitSelect, whose values are the engine's own switch's bit for bit:
    NaN, signed zeros and infinities on either side, and integers (which keep the engine's code)."""
    import importlib

    compiling = importlib.import_module(f"toolkit.backends.{THEANO}.compiling")
    c_kernels = importlib.import_module(f"toolkit.backends.{THEANO}.kernels.c_kernels")
    tt = compiling.tt
    x, g = tt.tensor(dtype=dtype, shape=(3, 4, 5)), tt.tensor(dtype=dtype, shape=(3, 4, 5))
    relu = tt.switch(tt.le(x, 0), 0, x)
    outputs = [relu, tt.switch(tt.gt(x, 1), g * 2 + x, g), tt.switch(tt.le(x, 0), 0, g)]
    if dtype != "int32":
        outputs.append(compiling.theano.grad(tt.sum(relu * g), x))
    values = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.5, 7.0] * 8)[:60] if dtype != "int32" else \
        np.arange(-30, 30)
    rng = np.random.default_rng(0)
    args = [rng.permutation(values).reshape(3, 4, 5).astype(dtype) for _ in range(2)]
    ours = compiling.Function([x, g], outputs, "c")
    plain = compiling.theano.function([x, g], outputs, mode=_engine_c_mode(compiling))
    selects = {type(s).__name__ for node in ours._run.maker.fgraph.toposort() for s in _scalar_ops(node.op)}
    assert "BitSelect" in selects and "Switch" not in selects, selects
    for a, b in zip(ours(*args), plain(*args)):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert c_kernels.bit_select.c_code_cache_version() != c_kernels.Switch(name="s").c_code_cache_version()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_c_linker_sums_leading_axes_as_the_engine_does(dtype):
    """Under the C linker a float sum over leading axes (a batch normalization's statistics) is
    c_kernels.LeadingSum, which accumulates in float64 as the engine's sum does: the same float32 values, float64's
    to rounding; on contiguous and strided inputs, over every axis (a scalar), with no rows, and where the sum is
    not over leading axes (the engine's, unchanged)."""
    import importlib

    compiling = importlib.import_module(f"toolkit.backends.{THEANO}.compiling")
    tt = compiling.tt
    x = tt.tensor(dtype=dtype, shape=(None, 6, 5, 4))
    outputs = [tt.sum(x, axis=(0, 1, 2)), tt.sum(x * 2, axis=(0, 1)), tt.sum(x.dimshuffle(3, 1, 2, 0), axis=0),
               tt.sum(x), tt.sum(x, axis=(1, 2)), tt.sum(x[:, ::2], axis=0)]
    ours = compiling.Function([x], outputs, "c")
    plain = compiling.theano.function([x], outputs, mode=_engine_c_mode(compiling))
    kinds = [type(node.op).__name__ for node in ours._run.maker.fgraph.toposort()]
    assert kinds.count("LeadingSum") == 5 and kinds.count("Sum") == 1, kinds
    rng = np.random.default_rng(1)
    for rows in (7, 0):
        value = (rng.normal(size=(rows, 6, 5, 4)) * 10.0 ** rng.integers(-3, 4, size=(rows, 6, 5, 4))).astype(dtype)
        for a, b in zip(ours(value), plain(value)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=0 if dtype == "float32" else 1e-15, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_c_linker_row_loops_compute_what_the_engines_loops_do(dtype):
    """Under the C linker the toolkit's elementwise ops of two axes or more are c_kernels.RowElemwise, whose loop
    over rows (taken where every operand is contiguous and spans the whole output or its trailing axes) gives the
    engine's values bit for bit: channel vectors shorter than a row block (repeated, with a partial last block)
    and longer, trailing operands over two axes, in-place outputs (also one of a channel vector's shape),
    boolean and integer operands, no rows, a strided input, and a broadcast and scalars only that the row loop
    does not take (the engine's loop)."""
    import importlib

    compiling = importlib.import_module(f"toolkit.backends.{THEANO}.compiling")
    c_kernels = importlib.import_module(f"toolkit.backends.{THEANO}.kernels.c_kernels")
    tt = compiling.tt
    x, wide = tt.tensor(dtype=dtype, shape=(None, 3, 5, 7)), tt.tensor(dtype=dtype, shape=(3, 300))
    v, w, plane = tt.vector(dtype=dtype), tt.vector(dtype=dtype), tt.matrix(dtype=dtype)
    k = tt.tensor(dtype="int32", shape=(None, 3, 5, 7))
    channel = v.dimshuffle("x", "x", "x", 0)
    outputs = [(x - channel) * 2.5 / channel,  # a channel vector of 7: split 3, blocks of 259
               tt.sqr(wide - w.dimshuffle("x", 0)) + 1,  # a row of 300: split 1, one row a block
               x * plane.dimshuffle("x", "x", 0, 1) - x,  # trailing over two axes: split 2
               tt.exp(tt.cumsum(x, axis=1)) * channel,  # in place on the cumulative sum's output
               tt.switch(x > 0, k, 3) * 2,  # boolean and integer operands
               x * tt.sum(x, axis=(1, 2), keepdims=True),  # [N, 1, 1, C]: the engine's loop
               tt.exp(tt.sum(x, axis=(0, 1, 2), keepdims=True) * channel),  # [1, 1, 1, C], in place
               tt.exp(tt.cumsum(v)[:1]).dimshuffle("x", "x", "x", 0) * 2.0 + 1.0]  # scalars only, in place
    inputs = [x, wide, v, w, plane, k]
    ours = compiling.Function(inputs, outputs, "c")
    plain = compiling.theano.function(inputs, outputs, mode=_engine_c_mode(compiling))
    nodes = [node for node in ours._run.maker.fgraph.toposort() if isinstance(node.op, c_kernels.Elemwise)
             and node.outputs[0].ndim >= 2]
    assert all(type(node.op) is c_kernels.RowElemwise for node in nodes), [str(n.op) for n in nodes]
    # which nodes fusion makes differs between the engines (PyTensor fuses outputs of different broadcasts)
    assert {c_kernels.row_split(node) for node in nodes} >= {1, 3, None}
    assert any(node.op.inplace_pattern for node in nodes)
    rng = np.random.default_rng(2)
    for rows in (4, 0):
        values = [rng.normal(size=(rows, 3, 5, 7)), rng.normal(size=(3, 300)), rng.normal(size=7) + 3,
                  rng.normal(size=300), rng.normal(size=(5, 7))]
        values = [a.astype(dtype) for a in values] + [rng.integers(-5, 5, size=(rows, 3, 5, 7)).astype("int32")]
        strided = [np.repeat(values[0], 2, axis=2)[:, :, ::2], *values[1:]]  # not contiguous: the engine's loop
        for args in (values, strided):
            for a, b in zip(ours(*args), plain(*args)):
                assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_c_linker_kernels_follow_the_engines_conversions_and_run_time_broadcasting():
    """A select of a float32 and an int32 converts both to their common type first, as the engine's ``?:`` does
    (16777217 is 16777216.0 in float32, then float64); an input whose static shape does not say it broadcasts but
    which has one row at run time (Aesara broadcasts it; PyTensor refuses) is not read as a whole output by the row
    loop."""
    import importlib

    compiling = importlib.import_module(f"toolkit.backends.{THEANO}.compiling")
    tt = compiling.tt
    c, f, k = (tt.tensor(dtype=d, shape=(None, None)) for d in ("bool", "float32", "int32"))
    x, y = tt.tensor(dtype="float32", shape=(None, 4)), tt.tensor(dtype="float32", shape=(None, 4))
    cases = [([c, f, k], [tt.switch(c, f, k)],
              [np.zeros((2, 3), bool), np.zeros((2, 3), "float32"), np.full((2, 3), 16777217, "int32")]),
             ([x, y], [x * 2 + y], [np.arange(4000, dtype="float32").reshape(1000, 4),
                                     np.arange(4, dtype="float32").reshape(1, 4)])]
    for inputs, outputs, args in cases:
        ours = compiling.Function(inputs, outputs, "c")
        plain = compiling.theano.function(inputs, outputs, mode=_engine_c_mode(compiling))
        try:
            expected = plain(*args)
        except ValueError:  # PyTensor: no broadcasting at run time
            with pytest.raises(ValueError):
                ours(*args)
            continue
        for a, b in zip(ours(*args), expected):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_c_linker_row_loop_raises_the_engines_errors():
    """An integer division by zero inside the row loop (a function of its own in the generated code) raises the
    engine's ZeroDivisionError, as the engine's loop does, and the function computes the next call's values."""
    import importlib

    compiling = importlib.import_module(f"toolkit.backends.{THEANO}.compiling")
    c_kernels = importlib.import_module(f"toolkit.backends.{THEANO}.kernels.c_kernels")
    tt = compiling.tt
    a, b = tt.tensor(dtype="int32", shape=(3, 300)), tt.tensor(dtype="int32", shape=(3, 300))
    ours = compiling.Function([a, b], [a // b + 1], "c")
    plain = compiling.theano.function([a, b], [a // b + 1], mode=_engine_c_mode(compiling))
    assert [c_kernels.row_split(n) for n in ours._run.maker.fgraph.toposort()
            if type(n.op) is c_kernels.RowElemwise] == [0]
    rng = np.random.default_rng(3)
    x, y = rng.integers(-50, 50, size=(2, 3, 300)).astype("int32")
    y[y == 0] = 7
    zero = y.copy()
    zero[2, 150] = 0
    for function in (plain, ours):
        with pytest.raises(ZeroDivisionError):
            function(x, zero)
    assert ours(x, y)[0].tobytes() == plain(x, y)[0].tobytes()


def _engine_c_mode(compiling):
    """The engine's own mode of the linker the toolkit's C mode uses (PyTensor's FAST_RUN is Numba's, not C)."""
    return compiling.theano.compile.mode.get_mode(compiling.engine.MODES["c"])


def _scalar_ops(op):
    """The scalar ops an elementwise op computes: its own, or those of its fused (Composite) scalar graph."""
    scalar = getattr(op, "scalar_op", None)
    if scalar is None:
        return []
    inner = getattr(scalar, "fgraph", None)
    return [node.op for node in inner.toposort()] if inner is not None else [scalar]


def test_jax_linker_leaves_no_source_file_behind(tmp_path, monkeypatch):
    """The engines write every compiled graph's Python source to a temporary file and never delete it; the toolkit
    keeps it in linecache instead, where tracebacks still find its lines."""
    import importlib
    import linecache
    import tempfile

    backend = toolkit.get_backend(THEANO)  # imports the engine, with the toolkit's fixes
    environment = importlib.import_module(f"toolkit.backends.{THEANO}.environment")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    compile_source = environment.imported("link.utils", "compile_function_src")
    add_one = compile_source("def add_one(x):\n    return x + 1\n", "add_one")
    assert add_one(1) == 2
    assert linecache.getline(add_one.__code__.co_filename, 2) == "    return x + 1\n"
    trainer = toolkit.DataParallel(toolkit.models.mlp([3, 5, 2]), backend, 2, toolkit.optim.SGD(0.1))
    rng = np.random.default_rng(0)
    trainer.step(rng.normal(size=(4, 3)), rng.integers(0, 2, size=4))
    assert list(tmp_path.iterdir()) == []
