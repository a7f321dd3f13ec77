"""Sessions: one test run per backend (each installs only its own framework), a parity run of TensorFlow with each
Theano-family engine (Aesara on NumPy 1, PyTensor on NumPy 2: they cannot share an environment, so their agreement is
shown through a reference file made in Aesara's and checked in PyTensor's), lint, and the demo and the benchmark.
``nox`` runs the test, parity (with Keras' op tests), lint and site (the documentation) sessions; ``nox -s demo``
runs the demo, ``nox -s bench`` the benchmark against native code, ``nox -s docs`` measures again what the
documentation shows (pictures and tables)."""

from __future__ import annotations

import nox

#: ``keras-ops`` is not in the list: ``parity`` and ``parity-pytensor`` run the same suite for their backends in the
#: environments they already have (see :func:`run_keras_ops`), which saves CI three installs of TensorFlow or a
#: Theano-family engine.
nox.options.sessions = ["tests-tensorflow", "tests-aesara", "tests-pytensor", "tests-pytensor-jax04", "parity",
                        "parity-pytensor", "lint", "site"]
nox.options.reuse_existing_virtualenvs = True
#: Environments made and filled by uv where it is installed (``.ci/run`` installs it), by virtualenv and pip otherwise.
#: Measured on the 2-core machine with empty caches: the TensorFlow environment in 26 s with uv against 125 s with pip
#: (pip byte-compiles every file it unpacks; uv downloads in parallel and links from its cache), the five others in
#: 42 s together; the same versions of every package. CI makes eight environments.
nox.options.default_venv_backend = "uv|virtualenv"

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}
#: pytest on two worker processes (pytest-xdist), the CI machine's two cores: a Theano-family test process keeps one
#: core busy (115% CPU measured: graph rewriting and XLA compilation are single-threaded). Tests go to whichever worker
#: is free (xdist's ``load``). Measured on the 2-core machine: the PyTensor session's tests in 7.6 minutes with two
#: workers, 11 to 15 with one; one whole file per worker (``loadfile``) was slower than one worker (14 against 11
#: minutes), as four files hold most of the time. Arguments after ``--`` override it (``-n 0``: one process).
WORKERS = ["-n", "2"]
#: Where ``reference-aesara`` writes the run that ``parity-pytensor`` checks PyTensor against.
REFERENCE = ".nox/_reference-aesara"
#: The reference run: float64 (the backends must agree within 1e-10), 1, 2 and 4 devices, the digits MLP.
REFERENCE_RUN = ["--devices", "1,2,4", "--dtype", "float64", "--steps", "10", "--batch", "64", "--quiet"]


@nox.session(name="tests-tensorflow")
def tests_tensorflow(session: nox.Session) -> None:
    """Every test that needs no Aesara, with only TensorFlow installed (Aesara tests skip with the reason)."""
    session.install("-e", ".[tensorflow,dev]")
    session.run("pytest", *WORKERS, "-m", "not parity", *session.posargs, env=QUIET)


@nox.session(name="tests-aesara")
def tests_aesara(session: nox.Session) -> None:
    """Every test that needs no TensorFlow, with only Aesara and JAX installed."""
    session.install("-e", ".[aesara,dev]")
    session.run("pytest", *WORKERS, "-m", "not parity", *session.posargs, env=QUIET)


#: The test files ``tests-pytensor`` leaves out unless it is given arguments: the training loop, checkpoints and
#: resumption, the command line, the examples and their usage lines. They test the core's policy over
#: ``backends/theano/``, which Aesara and PyTensor share line for line, and the Aesara session runs them all; what
#: differs between the engines (their flags, linker modes, moved names, JAX versions: ``engine.py``) is under every
#: op, gradient, data-parallel, model-state, multi-process and import test, which PyTensor runs, and PyTensor's
#: trained numbers are checked again in ``parity-pytensor`` (against TensorFlow and the Aesara reference run, and
#: every Keras-reference test). Measured in CPU time on PyTensor, these files cost about 700 s, some 6 minutes of
#: the 2-core CI machine (``test_fit.py`` alone 250 s). ``nox -s tests-pytensor -- tests`` runs every file.
PYTENSOR_LEAVES_OUT = ("test_fit.py", "test_cli.py", "test_examples.py", "test_bench.py", "test_readme.py",
                       "test_resume.py", "test_reliability.py", "test_metrics.py")


@nox.session(name="tests-pytensor")
def tests_pytensor(session: nox.Session) -> None:
    """Every test that needs no TensorFlow (less :data:`PYTENSOR_LEAVES_OUT` when no arguments are given), with
    only PyTensor and current JAX installed, on NumPy 2."""
    _pytensor_tests(session, "pytensor")


@nox.session(name="tests-pytensor-jax04")
def tests_pytensor_jax04(session: nox.Session) -> None:
    """``tests-pytensor``'s tests with PyTensor on jax 0.4.30 (the ``pytensor-jax04`` extra: XLA's CPU runtime from
    before its thunk runtime, one device per process across processes), on NumPy 2: the engine's code that depends
    on the jax version (the collectives, XLA's host calls, the convolutions' and sums' rules) under the other jax it
    supports. 3.4 minutes of the 2-core machine."""
    _pytensor_tests(session, "pytensor-jax04")


def _pytensor_tests(session: nox.Session, extra: str) -> None:
    session.install("-e", f".[{extra},dev]")
    selection = session.posargs or [f"--ignore=tests/{name}" for name in PYTENSOR_LEAVES_OUT]
    session.run("pytest", *WORKERS, "-m", "not parity", *selection, env=QUIET)


@nox.session(name="reference-aesara")
def reference_aesara(session: nox.Session) -> None:
    """The Aesara run that PyTensor is checked against (``multigpu compare --out``: results.json and params.npz)."""
    session.install("-e", ".[aesara]")
    session.run("multigpu", "compare", "--backends", "aesara", *REFERENCE_RUN, "--out", REFERENCE, env=QUIET)


#: The Keras whose own op tests ``keras-ops`` runs (the sdist of this version is downloaded at test time): one
#: version in every environment, so that each backend runs the same tests.
KERAS = "keras==3.15.1"
#: What each backend's ``keras-ops`` environment installs besides the toolkit's extra: Keras, and the JAX that
#: Keras' NumPy backend (the suite's, see tests/keras_suite/__main__.py) and its math tests import (the Theano
#: family's extras bring their own).
KERAS_OPS_INSTALL = {"tensorflow": [KERAS, "jax[cpu]>=0.10,<0.11"], "aesara": [KERAS], "pytensor": [KERAS]}


def run_keras_ops(session: nox.Session, backend: str, *args: str) -> None:
    """Keras' own op tests with ``keras.ops`` replaced by the toolkit's ops on ``backend`` (tests/keras_suite).
    Keras' own backend is NumPy while they run, so an environment that also has TensorFlow or the other engine runs
    the same tests: ``parity`` runs Aesara's and ``parity-pytensor`` TensorFlow's and PyTensor's."""
    session.run("python", "-m", "tests.keras_suite", "--backend", backend, *args, env=QUIET)


@nox.session(name="keras-ops")
@nox.parametrize("backend", list(KERAS_OPS_INSTALL))
def keras_ops(session: nox.Session, backend: str) -> None:
    """Keras' own op tests (keras/src/ops/*_test.py, the correctness classes) with keras.ops replaced by the
    toolkit's ops on one backend per environment (tests/keras_suite): prints per op and in all the tests passed,
    failed, refused, not covered and out of scope; fails on a failed covered test or a pass rate under the issue's
    80%. Arguments after ``--`` go to the harness: ``--min-pass 0.5``, ``--perturb`` (the self-test: every toolkit
    result perturbed, every covered test must fail), ``-k pad``, ``-- --tb=short``. CI runs the same suites inside
    ``parity`` and ``parity-pytensor``."""
    session.install("-e", f".[{backend},dev]", *KERAS_OPS_INSTALL[backend])
    run_keras_ops(session, backend, *session.posargs)


#: What ``parity-pytensor`` also leaves out of PyTensor's Keras-reference tests: the walk over every constructor
#: argument of every supported layer and Keras' rank rules for losses (90 tests, about 2 s of CPU each on the Theano
#: family), the importer's policy, which the ``parity`` session runs on Aesara. PyTensor still imports and trains
#: every layer kind (test_keras_layers*.py), the keras.io-style models and the Keras graphs against Keras.
PYTENSOR_KERAS_LEAVES_OUT = ("test_keras_import_settings.py",)


@nox.session(name="parity-pytensor", requires=["reference-aesara"])
def parity_pytensor(session: nox.Session) -> None:
    """TensorFlow and PyTensor on NumPy 2: the parity tests, the PyTensor cases of the tests whose reference is Keras
    (less :data:`PYTENSOR_LEAVES_OUT` when no arguments are given), PyTensor against the Aesara reference run (same
    seed, batches and steps: float64 within 1e-10), then Keras' op tests on TensorFlow and on PyTensor
    (``keras-ops``; arguments after ``--`` go to pytest only)."""
    session.install("-e", ".[tensorflow,pytensor,dev]", *KERAS_OPS_INSTALL["tensorflow"])
    # The files of PYTENSOR_LEAVES_OUT are left out here too, for the same reason (their parity cases run in
    # ``parity``); so are PYTENSOR_KERAS_LEAVES_OUT and the slow keras.io-style models (tests/test_keras_models.py),
    # about 110 s of CPU on PyTensor, which run on Aesara only.
    selection = session.posargs or [f"--ignore=tests/{name}" for name in PYTENSOR_LEAVES_OUT]
    session.run("pytest", *WORKERS, "-m", "parity", *selection, env=QUIET)
    keras_selection = session.posargs or [*selection, *(f"--ignore=tests/{name}" for name in PYTENSOR_KERAS_LEAVES_OUT)]
    session.run("pytest", *WORKERS, "-m", "not parity and not slow", "-k", "pytensor and keras", *keras_selection,
                env=QUIET)
    session.run("multigpu", "parity", "--backends", "pytensor", "--against", f"{REFERENCE}/results.json", env=QUIET)
    run_keras_ops(session, "tensorflow")
    run_keras_ops(session, "pytensor")


@nox.session
def parity(session: nox.Session) -> None:
    """The tests that compare TensorFlow and Aesara, with both installed; then the Aesara cases of the tests whose
    reference is Keras (it comes with TensorFlow, so the Aesara-only session skips them); then Keras' op tests on
    Aesara (``keras-ops``; arguments after ``--`` go to pytest only)."""
    session.install("-e", ".[all,dev]", *KERAS_OPS_INSTALL["aesara"])
    session.run("pytest", *WORKERS, "-m", "parity", *session.posargs, env=QUIET)
    session.run("pytest", *WORKERS, "-m", "not parity", "-k", "aesara and keras", *session.posargs, env=QUIET)
    run_keras_ops(session, "aesara")


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


#: The documentation site's tools, pinned so that a build that passes today passes in a fresh clone: MkDocs with the
#: Material theme, mkdocstrings' Python handler (griffe reads the sources statically: no framework is installed), the
#: griffe extension that reads the ``#:`` comments documenting constants, and ruff, which lays out long signatures.
SITE_TOOLS = ["mkdocs==1.6.1", "mkdocs-material==9.8.2", "mkdocstrings==1.0.8", "mkdocstrings-python==2.0.11",
              "griffelib==2.4.1", "griffe-sphinx==0.3.1", "ruff==0.17.6"]


@nox.session
def site(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml: the pages under docs/ and the API reference from the docstrings) built
    into site/ in strict mode: a broken link, cross-reference, nav entry or docstring section fails it. Arguments
    after ``--`` go to ``mkdocs build`` (``nox -s site -- --verbose``)."""
    session.install(*SITE_TOOLS)
    # Material's banner about MkDocs 2 goes to every build's output; it says nothing about this site.
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def demo(session: nox.Session) -> None:
    """Data-parallel digits MLP on 2 logical devices on both backends: losses, step times, parity, and the same run
    written as ``multigpu compare`` writes it (table, results/results.json, plots). Options after ``--`` go to the
    script (``nox -s demo -- --devices 4 --dtype float64``)."""
    session.install("-e", ".[all]")
    session.run("python", "examples/digits_data_parallel.py", "--devices", "2", "--out", "results", *session.posargs,
                env=QUIET)


@nox.session
def bench(session: nox.Session) -> None:
    """``multigpu bench``: the toolkit against native TensorFlow (tf.function with and without XLA, MirroredStrategy
    custom loop, Keras fit), plain Aesara functions and plain JAX on the digits MLP and the compute-bound ResNet and
    Transformer, on 1, 2 and 4 logical devices, with the machine's matmul peak; prints the ratios and fractions of
    peak with their spread, writes docs/bench.json and regenerates the performance tables from it (in whichever page
    holds them: docs/update_readme.py).
    Arguments after ``--`` go to the command (``nox -s bench -- --model digits-mlp --rounds 9``)."""
    session.install("-e", ".[all]")
    session.run("multigpu", "bench", "--out", "docs", *session.posargs, env=QUIET)
    session.run("python", "docs/update_readme.py")
    session.run("python", "docs/bench_chart.py")


@nox.session(name="bench-pytensor")
def bench_pytensor(session: nox.Session) -> None:
    """``multigpu bench --backends tensorflow,pytensor`` in a PyTensor environment (NumPy 2, jax 0.10): the toolkit
    against a plain ``pytensor.function`` step (JAX and C linkers) and plain JAX, and TensorFlow's candidates in the
    same run, so that PyTensor's steps are compared with TensorFlow's across backends (Aesara's are, in ``bench``);
    writes docs/pytensor/bench.json and the PyTensor tables. Arguments after ``--`` go to the command."""
    session.install("-e", ".[tensorflow,pytensor]")
    session.run("multigpu", "bench", "--backends", "tensorflow,pytensor", "--out", "docs/pytensor", *session.posargs,
                env=QUIET)
    session.run("python", "docs/update_readme.py")
    session.run("python", "docs/bench_chart.py", "docs/pytensor/bench.json", "docs/pytensor/bench.png")


@nox.session
def docs(session: nox.Session) -> None:
    """Measure again what the documentation shows: ``multigpu compare`` into docs/compare/ (results.json, the plots),
    ``multigpu bench`` into docs/ (bench.json), the built-in models into docs/models.json (docs/models.py), then the
    documentation's tables from those files (docs/update_readme.py).
    Commit the lot together; tests/test_readme.py checks the pages' tables against the files."""
    session.install("-e", ".[all]")
    session.run("multigpu", "compare", "--devices", "1,2,4", "--steps", "40", "--out", "docs/compare", "--quiet",
                env=QUIET)
    session.run("multigpu", "bench", "--out", "docs", "--quiet", *session.posargs, env=QUIET)
    session.run("python", "docs/models.py", env=QUIET)
    session.run("python", "docs/update_readme.py")
    session.run("python", "docs/bench_chart.py")
