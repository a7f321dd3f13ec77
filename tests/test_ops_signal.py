"""The signal ops (Fourier transforms, framing, short-time transforms: :mod:`toolkit.ops.signal`) against NumPy on
every backend, float32 and float64; gradients by central differences and across backends; Keras' signatures; the
typed refusals; the references against ``keras.ops`` where Keras is installed; and one data-parallel step on 1 and 4
devices.

Each table of cases runs in one compiled function per backend and dtype (the Theano family compiles every graph),
and each gradient group is one directional derivative of all its cases together."""

from __future__ import annotations

import importlib.util
import inspect

import numpy as np
import pytest
import scipy.signal

import toolkit
from tests.conftest import MAX_DEVICES, THEANO, needs_all_backends
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, check_gradients, gradients, one_device_equals_many, run
from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.interface import Ops

RNG = np.random.default_rng(23)
#: A float32 FFT's error grows with the number of points and the values' size (sums of up to 32 terms of order 1).
SPECTRAL_FLOAT32_TOLERANCE = FLOAT32_RTOL * 10


# --- NumPy references ----------------------------------------------------------------------------------------------
def np_sequences(x, length, stride):
    count = max(0, 1 + (x.shape[-1] - length) // stride)
    return np.stack([x[..., i * stride:i * stride + length] for i in range(count)], axis=-2) if count else \
        np.zeros((*x.shape[:-1], 0, length), x.dtype)


def _pair(z):
    return np.real(z), np.imag(z)


def np_window(window, length, fft_length):
    """Keras' window: scipy's periodic hann or hamming, or the array given, centred in ``fft_length`` zeros."""
    if window is None:
        return np.ones(fft_length)
    if isinstance(window, str):
        window = scipy.signal.get_window(window, length)
    before = (fft_length - length) // 2
    return np.pad(window, (before, fft_length - length - before))


def np_stft(x, length, stride, fft_length, window="hann", center=True):
    """Keras' reference (``math_test._stft``, scipy's stft rescaled): the rfft of each windowed sequence."""
    if center:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(fft_length // 2, fft_length // 2)], mode="reflect")
    return _pair(np.fft.rfft(np_sequences(x, fft_length, stride) * np_window(window, length, fft_length)))


def np_istft(real, imag, length, stride, fft_length, out_length=None, window="hann", center=True):
    """Keras' reference (``math_test._istft``, TensorFlow's inverse_stft): each sequence's irfft times the window
    over the periodic sum of the overlapping squared windows (0 where that is 0, as TensorFlow's; the reference
    has NaN there, and Keras' test compares NaN as 0), added at ``stride`` apart."""
    frames = np.fft.irfft(real + 1j * imag, n=fft_length)
    if window is not None:
        win = np_window(window, length, fft_length)
        phases = -(-fft_length // stride) * stride
        denominator = np.pad(np.square(win), (0, phases - fft_length)).reshape(-1, stride).sum(0)
        denominator = np.tile(denominator, phases // stride)[:fft_length]
        frames = frames * np.where(denominator == 0, 0.0, win / np.where(denominator == 0, 1.0, denominator))
    count = frames.shape[-2]
    signal = np.zeros((*frames.shape[:-2], (count - 1) * stride + fft_length))
    for i in range(count):
        signal[..., i * stride:i * stride + fft_length] += frames[..., i, :]
    start = fft_length // 2 if center else 0
    end = start + out_length if out_length is not None else signal.shape[-1] - (fft_length // 2 if center else 0)
    return signal[..., start:end]


# --- inputs and cases ----------------------------------------------------------------------------------------------
INPUTS = {
    "re": RNG.normal(size=(2, 4, 3)), "im": RNG.normal(size=(2, 4, 3)),
    "x10": RNG.normal(size=(2, 3, 10)), "x1": RNG.normal(size=(10,)), "xshort": RNG.normal(size=(2, 2)),
    "sig": RNG.normal(size=(2, 32)), "tiny": RNG.normal(size=(5,)),
    "win": RNG.uniform(0.5, 1.5, size=(8,)),
    "xint": RNG.integers(-4, 5, size=(2, 9)).astype(np.int32),
}
#: Short-time spectra to invert, made by the NumPy stft: name -> (signal, stft arguments); each gives inputs
#: ``<name>_re`` and ``<name>_im``.
SPECTRA = {"s_hann": ("sig", (8, 4, 16)), "s_odd": ("sig", (4, 4, 7)), "s_plain": ("sig", (8, 4, 8, None)),
           "s_edge": ("sig", (8, 4, 8, "hann", False)), "s_win": ("sig", (8, 2, 8, "win"))}
for _name, (_signal, _args) in SPECTRA.items():
    _args = tuple(INPUTS["win"] if a == "win" else a for a in _args)
    INPUTS[f"{_name}_re"], INPUTS[f"{_name}_im"] = np_stft(INPUTS[_signal], *_args)


def _stft_case(signal, *args, **kwargs):
    return (lambda o, t: o.stft(t[signal], *args, **kwargs), lambda t: np_stft(t[signal], *args, **kwargs))


def _istft_case(spectrum, sequence_length, stride, fft_length, window="hann", center=True):
    return (lambda o, t: o.istft((t[f"{spectrum}_re"], t[f"{spectrum}_im"]), sequence_length, stride, fft_length,
                                 window=window, center=center),
            lambda t: np_istft(t[f"{spectrum}_re"], t[f"{spectrum}_im"], sequence_length, stride, fft_length, None,
                               window, center))


#: name -> (the toolkit's op on Tensors, the NumPy reference), both of the inputs dict; a pair result is a tuple.
CASES = {
    "extract_sequences_1d": (lambda o, t: o.extract_sequences(t["x1"], 3, 2), lambda t: np_sequences(t["x1"], 3, 2)),
    "extract_sequences_nd": (lambda o, t: o.extract_sequences(t["x10"], 4, 3),
                             lambda t: np_sequences(t["x10"], 4, 3)),
    "extract_sequences_int": (lambda o, t: o.extract_sequences(t["xint"], 4, 1),
                              lambda t: np_sequences(t["xint"], 4, 1)),
    "extract_sequences_none": (lambda o, t: o.extract_sequences(t["xshort"], 3, 1),  # shorter than a sequence
                               lambda t: np_sequences(t["xshort"], 3, 1)),
    "fft": (lambda o, t: o.fft((t["re"], t["im"])), lambda t: _pair(np.fft.fft(t["re"] + 1j * t["im"]))),
    "fft2": (lambda o, t: o.fft2((t["re"], t["im"])), lambda t: _pair(np.fft.fft2(t["re"] + 1j * t["im"]))),
    "ifft2": (lambda o, t: o.ifft2([t["re"], t["im"]]), lambda t: _pair(np.fft.ifft2(t["re"] + 1j * t["im"]))),
    "rfft": (lambda o, t: o.rfft(t["x10"]), lambda t: _pair(np.fft.rfft(t["x10"]))),
    "rfft_cropped": (lambda o, t: o.rfft(t["x10"], 3), lambda t: _pair(np.fft.rfft(t["x10"], 3))),
    "rfft_padded": (lambda o, t: o.rfft(t["x1"], fft_length=15), lambda t: _pair(np.fft.rfft(t["x1"], 15))),
    "rfft_int": (lambda o, t: o.rfft(t["xint"]), lambda t: _pair(np.fft.rfft(t["xint"]))),  # computation dtype
    "irfft": (lambda o, t: o.irfft((t["re"], t["im"])), lambda t: np.fft.irfft(t["re"] + 1j * t["im"])),
    "irfft_odd": (lambda o, t: o.irfft((t["re"], t["im"]), 5), lambda t: np.fft.irfft(t["re"] + 1j * t["im"], 5)),
    "irfft_cropped": (lambda o, t: o.irfft((t["re"], t["im"]), fft_length=3),
                      lambda t: np.fft.irfft(t["re"] + 1j * t["im"], 3)),
    "irfft_padded": (lambda o, t: o.irfft((t["re"], t["im"]), 15), lambda t: np.fft.irfft(t["re"] + 1j * t["im"], 15)),
    "stft_hann": _stft_case("sig", 8, 4, 16),
    "stft_odd_fft_length": _stft_case("sig", 4, 4, 7),
    "stft_hamming_not_centred": _stft_case("sig", 8, 4, 8, "hamming", False),
    "stft_no_window": _stft_case("sig", 8, 4, 8, window=None),
    "stft_reflected_beyond_signal": _stft_case("tiny", 8, 3, 16),  # pads 8 > 5 entries: NumPy's repeated reflection
    "stft_window_array": (lambda o, t: o.stft(t["sig"], 8, 2, 8, t["win"]),
                          lambda t: np_stft(t["sig"], 8, 2, 8, t["win"])),
    "istft_hann": _istft_case("s_hann", 8, 4, 16),
    "istft_uncovered": _istft_case("s_odd", 4, 4, 7),  # positions no window covers weigh 0
    "istft_no_window": _istft_case("s_plain", 8, 4, 8, window=None),
    "istft_not_centred": _istft_case("s_edge", 8, 4, 8, "hann", False),
    "istft_length": (lambda o, t: o.istft((t["s_win_re"], t["s_win_im"]), 8, 2, 8, 20, t["win"]),
                     lambda t: np_istft(t["s_win_re"], t["s_win_im"], 8, 2, 8, 20, t["win"])),
}


def _inputs(names, dtype):
    return {n: INPUTS[n].astype(dtype) if INPUTS[n].dtype.kind == "f" else INPUTS[n] for n in names}


def _parts(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_signal_ops_equal_numpy(backend, dtype):
    """Every case in one compiled function: values, shapes and dtypes (an integer extract_sequences stays integer)
    against the float64 NumPy references."""
    results = run(backend, lambda ops, **t: {name: fn(ops, t) for name, (fn, _) in CASES.items()},
                  _inputs(INPUTS, dtype), dtype)
    tolerance = SPECTRAL_FLOAT32_TOLERANCE if dtype == "float32" else FLOAT64_RTOL
    for name, (_, reference) in CASES.items():
        expected, got = _parts(reference(INPUTS)), _parts(results[name])
        assert len(got) == len(expected), name
        for want, have in zip(expected, got):
            have = np.asarray(have)
            assert have.shape == want.shape, (name, have.shape, want.shape)
            assert have.dtype == np.dtype(dtype if want.dtype.kind == "f" else want.dtype), (name, have.dtype)
            np.testing.assert_allclose(have, want, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=name)


def test_istft_inverts_stft(backend):
    """The round trip restores the signal: Keras' docstring example (sequences of 1: a window of 1, centred with
    no padding; Keras' own backends return an empty array there, slicing to ``-(1 // 2)``, 0), and disjoint
    unwindowed sequences."""
    x, sig = np.arange(5.0), INPUTS["sig"]
    out = run(backend, lambda ops, x, sig: (ops.istft(ops.stft(x, 1, 1, 1), 1, 1, 1),
                                            ops.istft(ops.stft(sig, 8, 8, 8, None, False), 8, 8, 8, None, None,
                                                      False)), {"x": x, "sig": sig})
    np.testing.assert_allclose(out[0], x, rtol=FLOAT64_RTOL, atol=FLOAT64_RTOL)
    np.testing.assert_allclose(out[1], sig, rtol=FLOAT64_RTOL, atol=FLOAT64_RTOL)


#: Gradient groups: each is one directional derivative, in float64, of all its cases' outputs together (flattened
#: side by side) against central differences of the NumPy references. The window of ``stft_window_array`` and
#: ``istft_length`` is an input, so its gradient is checked too.
GRADIENT_GROUPS = {
    "fft": ["fft", "fft2", "ifft2"],
    "rfft": ["rfft_cropped", "rfft_padded", "irfft", "irfft_odd", "irfft_padded"],
    "stft": ["extract_sequences_nd", "stft_hann", "stft_hamming_not_centred", "stft_window_array"],
    "istft": ["istft_hann", "istft_uncovered", "istft_no_window", "istft_length"],
}


def _group(names):
    """The toolkit function and NumPy reference of a gradient group, and the inputs they read."""
    used = _used(names)

    def fn(ops, **t):
        return ops.concatenate([ops.reshape(part, (-1,)) for name in names for part in _parts(CASES[name][0](ops, t))],
                               axis=0)

    def reference(**t):
        return np.concatenate([part.reshape(-1) for name in names for part in _parts(CASES[name][1]({**INPUTS, **t}))])

    return fn, reference, {n: INPUTS[n] for n in used}


def _used(names) -> list[str]:
    """The inputs the cases' references read."""
    seen = set()

    class Recording(dict):
        def __getitem__(self, key):
            seen.add(key)
            return super().__getitem__(key)

    for name in names:
        CASES[name][1](Recording(INPUTS))
    return sorted(seen)


@pytest.mark.parametrize("group", GRADIENT_GROUPS)
def test_signal_op_gradients_equal_central_differences(backend_name, group):
    fn, reference, inputs = _group(GRADIENT_GROUPS[group])
    check_gradients(backend_name, fn, reference, inputs)


@needs_all_backends
@pytest.mark.parametrize("group", GRADIENT_GROUPS)
def test_signal_op_gradients_agree_across_backends(group):
    fn, reference, inputs = _group(GRADIENT_GROUPS[group])
    weights = np.random.default_rng(3).normal(size=reference(**inputs).shape)
    tf_grads = gradients("tensorflow", fn, inputs, weights)
    theano_grads = gradients(THEANO, fn, inputs, weights)
    assert tf_grads.keys() == theano_grads.keys()
    for name in tf_grads:
        np.testing.assert_allclose(theano_grads[name], tf_grads[name], rtol=1e-12, atol=1e-12, err_msg=name)


SIGNAL_OPS = ["extract_sequences", "fft", "fft2", "ifft2", "rfft", "irfft", "stft", "istft"]


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
@pytest.mark.parametrize("name", SIGNAL_OPS)
def test_signatures_are_keras(name):
    """Parameter names, order, kinds and defaults are ``keras.ops``' (Keras 3.15.1 has no 1-D ``ifft``)."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    ours = list(inspect.signature(getattr(Ops, name)).parameters.values())[1:]  # after self
    theirs = list(inspect.signature(getattr(keras.ops, name)).parameters.values())
    assert [(p.name, p.kind, p.default) for p in ours] == [(p.name, p.kind, p.default) for p in theirs]


#: The case Keras' TensorFlow backend cannot run: a reflection wider than the signal (tf.pad's "reflect" refuses
#: it; NumPy's and JAX's reflect again, as here).
KERAS_TF_REFUSES = {"stft_reflected_beyond_signal"}
#: Keras on TensorFlow rounds the rfft of a NumPy signal (float64 or integer) through float32 (tf.signal.rfft
#: converts its input with float32 preferred).
KERAS_FLOAT32 = {"rfft": 1e-6, "rfft_cropped": 1e-6, "rfft_padded": 1e-6, "rfft_int": 1e-6}


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
@pytest.mark.parametrize("name", sorted(set(CASES) - KERAS_TF_REFUSES))
def test_numpy_references_are_keras_ops(name):
    """The references above are what keras.ops computes (float64, Keras' TensorFlow backend), with the same call,
    so the toolkit's ops, which equal them, have Keras' semantics (Keras' stft/istft tests compare with the same
    formulas)."""
    toolkit.get_backend("tensorflow")
    import keras

    fn, reference = CASES[name]
    tolerance = KERAS_FLOAT32.get(name, 1e-10)
    for got, want in zip(_parts(fn(keras.ops, dict(INPUTS))), _parts(reference(INPUTS))):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=tolerance, atol=tolerance)


sig, pair = INPUTS["sig"], (INPUTS["re"], INPUTS["im"])
#: Calls refused on every backend while the model is traced: (call, error type, part of the message).
REFUSALS = [
    (lambda o: o.extract_sequences(sig, 0, 1), ArgumentError, "sequence_length must be an int >= 1, got 0"),
    (lambda o: o.extract_sequences(sig, 3, 1.5), ArgumentError, "sequence_stride must be an int >= 1, got 1.5"),
    (lambda o: o.extract_sequences(np.float64(1.0), 1, 1), ShapeError, "rank >= 1"),
    (lambda o: o.fft(INPUTS["re"]), ArgumentError, r"needs x as a \(real, imag\) pair"),
    (lambda o: o.fft((INPUTS["re"], INPUTS["im"], INPUTS["im"])), ArgumentError, "of length 3"),
    (lambda o: o.fft((INPUTS["re"], INPUTS["im"][:1])), ShapeError, "need one shape"),
    (lambda o: o.fft((INPUTS["xint"], INPUTS["xint"])), DTypeError, "floating real and imaginary parts"),
    (lambda o: o.fft2((INPUTS["x1"], INPUTS["x1"])), ShapeError, "rank >= 2"),
    (lambda o: o.ifft2((INPUTS["x1"], INPUTS["x1"])), ShapeError, "rank >= 2"),
    (lambda o: o.rfft(sig, 0), ArgumentError, "fft_length must be an int >= 1, got 0"),
    (lambda o: o.rfft(sig[:, :0]), ShapeError, "empty last axis"),
    (lambda o: o.irfft(pair, 8.0), ArgumentError, "fft_length must be an int >= 1, got 8.0"),
    (lambda o: o.irfft((INPUTS["re"][..., :1], INPUTS["im"][..., :1])), ShapeError, "gives 0 points"),
    (lambda o: o.stft(sig, 8, 0, 8), ArgumentError, "sequence_stride must be an int >= 1, got 0"),
    (lambda o: o.stft(sig, 8, 4, 4), ArgumentError, "fft_length must be >= sequence_length"),
    (lambda o: o.stft(sig, 8, 4, 8, "blackman"), ArgumentError, "window must be one of"),
    (lambda o: o.stft(sig, 8, 4, 8, np.ones(7)), ShapeError, r"window must have shape \(8,\)"),
    (lambda o: o.stft(INPUTS["xint"], 4, 2, 4), DTypeError, "float32 or float64 signals, got dtype int32"),
    (lambda o: o.stft(o.cast(sig, "float16"), 4, 2, 4), DTypeError, "got dtype float16"),
    (lambda o: o.istft(pair, 4, -1, 4), ArgumentError, "sequence_stride must be an int >= 1, got -1"),
    (lambda o: o.istft(pair, 4, 2, 4, length=-1), ArgumentError, "length must be None or an int >= 0"),
    (lambda o: o.istft(pair, 4, 2, 4, window="hanning"), ArgumentError, "window must be one of"),
    (lambda o: o.istft((INPUTS["x1"], INPUTS["x1"]), 4, 2, 4), ShapeError, "rank >= 2"),
    (lambda o: o.istft((INPUTS["re"][:, :0], INPUTS["im"][:, :0]), 4, 2, 4), ShapeError, "at least one sequence"),
]


def test_signal_op_refusals_are_typed(backend):
    """Each refusal is the toolkit's typed error, raised while the function is traced, on every backend."""
    for call, error, message in REFUSALS:
        with pytest.raises(error, match=message):
            run(backend, lambda ops, call=call: call(ops), {})


def _spectral_model(ops, p, x):
    """A model applying the signal ops along its feature axis (the batch axis may have no static size in a
    data-parallel step; the ops must not need it)."""
    h = x @ p["w"]                                                                       # [batch, 6]
    spectrum = ops.stft(h, 4, 2, 4)              # framing (with the reflection) and rfft: [batch, 4, 3] twice
    parts = [*spectrum, ops.istft(spectrum, 4, 2, 4, length=6),  # irfft and the overlap-add
             *ops.fft2((ops.reshape(h, (-1, 2, 3)), ops.reshape(h * h, (-1, 2, 3))))]
    return ops.sum(ops.concatenate([ops.reshape(v, (-1, int(np.prod(ops.shape(v)[1:])))) for v in parts], axis=1)
                   ** 2, axis=1, keepdims=True)


def test_signal_ops_in_a_data_parallel_step(backend_name):
    """The same gradients and the same step on 1 device and on 4 over a batch of 5 (uneven shards)."""
    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(3, 6))}, _spectral_model,
                          lambda ops, out, y: ops.mean(ops.square(out - y), axis=1))
    x, y = np.random.default_rng(5).normal(size=(5, 3)), np.ones((5, 1))
    one_device_equals_many(backend_name, model, x, y, 1e-6, MAX_DEVICES)



#: Under the Theano family's C linker the transforms run their JAX functions (and their vjp) on the host
#: (``JaxOp.perform``) and the framing, reflection and overlap-add are the engine's own slices. One gradient graph
#: (each new C graph compiles for seconds on a cold cache): the ops are linear in the signal, so a gradient equal to
#: the reference's central differences also pins their values (up to a constant, which none has).
C_LINKER_GRADIENTS = ["fft2", "stft_reflected_beyond_signal", "istft_length"]


@pytest.mark.parametrize("engine", ["aesara", "pytensor"])
def test_theano_c_linker_signal_op_gradients_equal_central_differences(engine):
    if engine not in toolkit.available_backends():
        pytest.skip(f"{engine} is not installed")
    fn, reference, inputs = _group(C_LINKER_GRADIENTS)
    check_gradients(toolkit.get_backend(engine, linker="c"), fn, reference, inputs)
