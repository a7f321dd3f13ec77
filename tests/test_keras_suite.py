"""The Keras-ops harness (tests/keras_suite) on its own, without downloading Keras' tests: how a test's status is
decided and the run judged, how the sdist's tests are unpacked and found, and, end to end on a small Keras-style
test file, that the toolkit's ops replace ``keras.ops`` (a perturbed backend fails every covered test)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.keras_suite import report, sdist
from tests.keras_suite.replacement import computation_dtype, out_of_scope, perturbed

REPOSITORY = Path(__file__).resolve().parents[1]


def _test(outcome="passed", toolkit=("add",), keras=(), out=None, refused=None, nodeid="t"):
    error = None if refused is None else {"type": "E", "refused": refused, "message": "m"}
    return {"nodeid": nodeid, "outcome": outcome, "error": error,
            "record": {"toolkit": list(toolkit), "keras": list(keras), "out_of_scope": out or {}}}


def test_status_order_and_reference():
    assert report.status(_test()) == "passed"
    assert report.status(_test("failed", refused=False)) == "failed"
    assert report.status(_test("failed", refused=True)) == "refused"
    assert report.status(_test("failed", keras=("fft",), refused=False)) == "not covered"
    assert report.status(_test(toolkit=())) == "not covered"  # no op called at all
    assert report.status(_test("failed", out={"add": "sparse=True"}, refused=False)) == "out of scope"
    assert report.status(_test("skipped", out={"add": "sparse=True"})) == "skipped"
    # Eligibility comes from Keras' own run: a test that failed before its symbolic call is still out of scope.
    assert report.status(_test("failed", refused=False), _test(out={"add": "symbolic"})) == "out of scope"
    assert report.status(_test(), _test("skipped")) == "skipped"
    # A test Keras' own ops fail here too (an environment without what the test needs) is not eligible.
    assert report.status(_test("failed", refused=False), _test("failed", refused=False)) == "keras fails"


def test_summary_counts_per_op_and_verdict():
    tests = [_test(nodeid="a", toolkit=("add", "sum")), _test("failed", nodeid="b", refused=False),
             _test("failed", nodeid="c", toolkit=("pad",), refused=True), _test(nodeid="d", keras=("fft",)),
             _test(nodeid="e", out={"add": "ragged input"}), _test("skipped", nodeid="f")]
    summary = report.summarize(tests)
    assert summary["totals"] == {"passed": 1, "failed": 1, "refused": 1, "not covered": 1, "out of scope": 1,
                                 "keras fails": 0, "skipped": 1}
    assert (summary["eligible"], summary["covered"], summary["pass_rate"]) == (4, 3, 0.25)
    assert summary["per_op"]["add"] == {"passed": 1, "failed": 1, "refused": 0, "not covered": 1, "out of scope": 1,
                                        "keras fails": 0}
    assert summary["per_op"]["sum"]["passed"] == 1 and summary["per_op"]["fft"]["not covered"] == 1
    assert [f["test"] for f in summary["failures"]] == ["b", "c"]
    problems = report.verdict(summary, min_pass=0.2)
    assert len(problems) == 1 and "1 covered Keras test(s) failed" in problems[0]
    assert len(report.verdict(summary, min_pass=0.5)) == 2
    assert report.verdict(report.summarize([tests[0], tests[2], tests[3]]), min_pass=1 / 3) == []
    # The self-test passes only if no covered test passed and some test was covered.
    assert report.verdict(summary, 0.0, perturbed=True) and not report.verdict(
        report.summarize(tests[1:]), 0.0, perturbed=True)
    assert report.verdict(report.summarize(tests[3:]), 0.0, perturbed=True)
    no_arrays = _test(nodeid="g")
    no_arrays["record"]["arrays"] = 0  # a test of errors or of Python values: a perturbation cannot fail it
    assert report.verdict(report.summarize([no_arrays, *tests[1:]]), 0.0, perturbed=True) == []
    assert "add" in report.table(summary, "tensorflow") and "FAILED" in report.failure_lines(summary)


def test_arguments_dtype_scope_and_perturbation():
    assert computation_dtype([np.zeros(2, np.float32), np.zeros(2, np.int64)], {}) == "float32"
    assert computation_dtype([np.zeros(2, np.float64)], {}) == "float64"
    assert computation_dtype([], {"dtype": "float64"}) == "float64"
    assert computation_dtype([], {"dtype": "not a dtype"}) == "float32"
    assert out_of_scope((np.zeros(2),), {"sparse": True}) == "sparse=True"
    assert out_of_scope((np.zeros(2),), {"sparse": False, "axis": 1}) is None
    assert "symbolic" in out_of_scope((type("KerasTensor", (), {})(),), {})
    assert "ragged" in out_of_scope(([type("RaggedTensor", (), {})()],), {})
    x = np.array([0.0, 1.0, -2.0], np.float32)
    assert perturbed(x).dtype == np.float32 and not np.isclose(perturbed(x), x, rtol=1e-6, atol=1e-6).any()
    assert (perturbed(np.array([1, 2], np.int32)) == [2, 3]).all()
    assert (perturbed(np.array([True, False])) == [False, True]).all()


def test_unpack_tests_and_finder(tmp_path):
    archive = tmp_path / "keras-9.9.9.tar.gz"
    files = {name: f"# {name}\n" for name in sdist.TEST_FILES}
    files["keras/src/layers/helper_test.py"] = "VALUE = 42\n"
    files["keras/src/layers/layer.py"] = "raise RuntimeError('not a test: never unpacked')\n"
    files["keras/src/ops/numpy_test.py"] = ("class NumpyTwoInputOpsCorrectnessTest(object):\n    pass\n"
                                           "class NumpyDtypeTest(object):\n    pass\nclass LogsumexpTest(object):\n")
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"keras-9.9.9/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    root = tmp_path / "keras-9.9.9"
    sdist.unpack_tests(archive, root)
    assert (root / "keras/src/layers/helper_test.py").is_file() and not (root / "keras/src/layers/layer.py").exists()
    assert (root / "pytest.ini").is_file()
    assert sdist.unpacked_tests("9.9.9", tmp_path) == root  # already there: no download
    classes = sdist.suite_classes(root)
    assert classes["keras/src/ops/numpy_test.py"] == ["NumpyTwoInputOpsCorrectnessTest", "LogsumexpTest"]
    finder = sdist.KerasTestFinder(root)
    assert finder.find_spec("keras.src.layers.helper_test").origin == str(root / "keras/src/layers/helper_test.py")
    assert finder.find_spec("keras.src.layers.layer") is None and finder.find_spec("numpy_test") is None


# A Keras-style correctness test file: the call forms the real ones use (module functions, op classes, Python lists,
# keyword arguments, several outputs), one op the toolkit lacks, one sparse call and one skip.
KERAS_STYLE_TESTS = '''
import numpy as np
import pytest

from keras.src import ops, testing
from keras.src.ops import math as kmath
from keras.src.ops import nn as knn
from keras.src.ops import numpy as knp


class FakeOpsCorrectnessTest(testing.TestCase):
    def test_add(self):
        x, y = np.array([[1.0, 2.0, 3.0]]), np.array([[4.0], [5.0]], np.float32)
        self.assertAllClose(knp.add(x, y), np.add(x, y))
        self.assertAllClose(knp.Add()(x, [1.0, 2.0, 3.0]), x + 1.0 + np.arange(3))

    def test_sum_class_and_function(self):
        x = np.arange(6, dtype="float32").reshape(2, 3)
        self.assertAllClose(knp.Sum(axis=1)(x), x.sum(axis=1))
        self.assertAllClose(ops.sum(x, axis=0, keepdims=True), x.sum(axis=0, keepdims=True))

    def test_integer_result(self):
        self.assertAllEqual(knp.argmax(np.array([[1, 5, 2], [7, 0, 3]]), axis=1), [1, 0])

    def test_two_outputs(self):
        x = np.array([[1.0, 2.0], [3.0, 5.0]])
        mean, variance = knn.moments(x, axes=[0])
        self.assertAllClose(mean, [2.0, 3.5])
        self.assertAllClose(variance, [1.0, 2.25])

    def test_list_of_arrays(self):
        x, y = np.ones((2, 2)), np.zeros((1, 2))
        self.assertAllClose(knp.concatenate([x, y], axis=0), np.concatenate([x, y]))
        self.assertAllClose(knp.Concatenate(axis=0)([x, y]), np.concatenate([x, y]))

    def test_class_arguments_by_name(self):
        # Pad(pad_width, mode)(x, constant_values): pad(x, pad_width, mode, constant_values) with x first.
        self.assertAllClose(knp.Pad([(1, 2)])(np.array([1.0, 2.0]), constant_values=0), [0.0, 1.0, 2.0, 0.0, 0.0])

    def test_op_the_toolkit_lacks(self):
        from tests.keras_suite.replacement import KerasFunction

        # A complex result: the toolkit has no complex dtype, so view_as_complex stays Keras' own.
        self.assertIsInstance(kmath.view_as_complex, KerasFunction)
        x = np.ones((2, 4, 2), np.float32)
        self.assertEqual(kmath.view_as_complex(x).shape, x.shape[:-1])

    def test_sparse(self):
        self.assertAllClose(knn.one_hot(np.array([1, 0]), 2, sparse=True), np.eye(2)[[1, 0]])

    def test_skipped(self):
        pytest.skip("Keras skips this one")
'''


def _fake_keras_root(tmp_path: Path) -> Path:
    root = tmp_path / "tests"
    (root / "keras/src/ops").mkdir(parents=True)
    (root / "keras/src/ops/fake_test.py").write_text(textwrap.dedent(KERAS_STYLE_TESTS))
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


def _run(root: Path, backend: str, out: Path, *options: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY), "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0",
           # Keras' NumPy backend imports JAX; where it is missing, Keras' TensorFlow backend serves as well here.
           "KERAS_BACKEND": "numpy" if importlib.util.find_spec("jax") else "tensorflow"}
    done = subprocess.run([sys.executable, "-m", "pytest", str(root / "keras/src/ops/fake_test.py"), "-c",
                           str(root / "pytest.ini"), "--rootdir", str(root), "--import-mode=importlib", "-p",
                           "no:cacheprovider", "-p", "tests.keras_suite.plugin", "-q", "--tb=short", "-n", "0",
                           "--keras-tests", str(root), "--toolkit-backend", backend, "--suite-report", str(out),
                           *options], env=env, capture_output=True, text=True, timeout=600)
    assert out.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return {t["nodeid"].rsplit("::", 1)[-1]: t for t in json.loads(out.read_text())}


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed (pip install keras)")
def test_keras_style_tests_run_on_the_toolkit_and_fail_perturbed(backend_name, tmp_path):
    """The harness end to end on a small Keras-style file (two pytest processes): the toolkit's ops replace
    keras.ops in every call form; each test gets its status; with every toolkit result perturbed, every covered
    test fails (so the assertions see the toolkit's values, not Keras')."""
    root = _fake_keras_root(tmp_path)
    tests = _run(root, backend_name, tmp_path / "run.json")
    statuses = {name: report.status(test) for name, test in tests.items()}
    covered = ["test_add", "test_sum_class_and_function", "test_integer_result", "test_two_outputs",
               "test_list_of_arrays", "test_class_arguments_by_name"]
    assert statuses == {**dict.fromkeys(covered, "passed"), "test_op_the_toolkit_lacks": "not covered",
                        "test_sparse": "out of scope", "test_skipped": "skipped"}, tests
    assert tests["test_sum_class_and_function"]["record"]["toolkit"] == ["sum"]
    assert len(tests["test_op_the_toolkit_lacks"]["record"]["keras"]) == 1

    perturbed_tests = _run(root, backend_name, tmp_path / "perturbed.json", "--perturb")
    assert {name: report.status(perturbed_tests[name]) for name in covered} == dict.fromkeys(covered, "failed")
    assert report.verdict(report.summarize(perturbed_tests.values()), 0.0, perturbed=True) == []
