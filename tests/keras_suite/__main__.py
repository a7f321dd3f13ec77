"""``python -m tests.keras_suite --backend NAME [options] [-- pytest arguments]``: Keras' op tests on a backend.

Downloads (once) the sdist of the installed Keras, runs its op correctness classes with Keras' own ops (once per
Keras version: which tests are eligible) and with ``keras.ops`` replaced by the toolkit's ops on ``NAME``, prints
per op and in all how many tests passed, failed, were refused, not covered or out of scope, writes a JSON report,
and exits non-zero where :func:`~tests.keras_suite.report.verdict` says so.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.keras_suite import report, sdist

REPOSITORY = Path(__file__).resolve().parents[2]
#: Keras' own backend while its tests run (``KERAS_BACKEND``): NumPy in every environment, so that the tests Keras
#: skips for its backend, and hence the eligible tests, are the same for TensorFlow, Aesara and PyTensor (Keras'
#: TensorFlow backend is missing from the Theano-family environments). Measured with the TensorFlow backend of the
#: toolkit (2 workers): Keras on NumPy 555 eligible tests in 19 s; on TensorFlow 581 in 240 s, on JAX 0.4.30 566 in
#: 360 s (the extra ones are TensorFlow- or JAX-only variants: tf.function, jit, sparse inputs that those back).
KERAS_BACKEND = "numpy"
#: pytest's workers (pytest-xdist): the CI machine's two cores.
WORKERS = 2
#: Where the reports go (in the repository's ``.nox``, ignored by git).
REPORTS = REPOSITORY / ".nox" / "_keras-ops"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.keras_suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", required=True, help="tensorflow, aesara or pytensor")
    parser.add_argument("--min-pass", type=float, default=report.REQUIRED_PASS_RATE,
                        help="share of eligible tests that must pass (default %(default)s, the issue's bar)")
    parser.add_argument("--perturb", action="store_true",
                        help="self-test: perturb every toolkit result; passes only if every covered test fails")
    parser.add_argument("--report", default=None, help=f"the JSON report (default: {REPORTS}/<backend>.json)")
    parser.add_argument("--keras-backend", default=KERAS_BACKEND,
                        help="Keras' own backend while its tests run (default %(default)s: the same eligible tests "
                             "in every environment)")
    parser.add_argument("-n", "--workers", type=int, default=None, help=f"pytest-xdist workers (default {WORKERS})")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest's -k: run only the matching tests")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. --tb=short")
    options = parser.parse_args(argv)

    os.environ["KERAS_BACKEND"] = options.keras_backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    # The workers import the plugin from the repository.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))
    root = sdist.unpacked_tests()
    workers = options.workers if options.workers is not None else (
        WORKERS if importlib.util.find_spec("xdist") else 0)
    run = Run(root, workers, options.keyword, options.pytest_args)

    start = time.perf_counter()
    # Which tests are eligible does not depend on the toolkit: Keras' own run is kept per Keras version, Keras
    # backend and the versions its tests' outcomes depend on (NumPy's, and JAX's, which Keras' NumPy backend uses).
    versions = "-".join(_version(name) for name in ("numpy", "jax"))
    reference_path = root / f"reference-{options.keras_backend}-{versions}.json"
    if not reference_path.is_file():
        print(f"keras-ops: running the tests once with Keras' own ops ({options.keras_backend}): which are eligible")
        if not run.pytest(reference_path, "--keras-reference", subset=False):
            return 1
    reference = json.loads(reference_path.read_text())
    suffix = "-perturbed" if options.perturb else ""
    path = Path(options.report or REPORTS / f"{options.backend}{suffix}.json")
    raw = path.with_suffix(".tests.json")
    if not run.pytest(raw, "--toolkit-backend", options.backend, *(["--perturb"] if options.perturb else [])):
        return 1
    tests = json.loads(raw.read_text())
    raw.unlink()
    seconds = time.perf_counter() - start

    summary = report.summarize(tests, reference)
    if summary["failures"]:
        print(report.failure_lines(summary))
        print()
    print(report.table(summary, options.backend))
    path.write_text(json.dumps({"backend": options.backend, "keras": sdist.keras_version(),
                                "keras_backend": options.keras_backend, "perturbed": options.perturb,
                                "seconds": round(seconds, 1), **summary, "tests": tests}, indent=1))
    problems = report.verdict(summary, options.min_pass, perturbed=options.perturb)
    what = "self-test (every toolkit result perturbed)" if options.perturb else "suite"
    print(f"keras-ops on {options.backend}: {what} {'FAILED' if problems else 'passed'} in {seconds:.0f} s "
          f"(Keras {sdist.keras_version()} on {options.keras_backend}, {workers or 1} process(es)); report: {path}")
    for problem in problems:
        print(f"  - {problem}")
    return 1 if problems else 0


def _version(distribution: str) -> str:
    try:
        return f"{distribution}{importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return f"no{distribution}"


class Run:
    """pytest runs of the suite's classes."""

    def __init__(self, root: Path, workers: int, keyword: str | None, extra: list[str]) -> None:
        self.root, self.workers, self.keyword, self.extra = root, workers, keyword, extra

    def pytest(self, out: Path, *options: str, subset: bool = True) -> bool:
        """Run the classes (those of ``-k`` and the extra arguments if ``subset``) with the plugin and ``options``
        in a new process (each replaces keras.ops its own way), each test's outcome and record written to ``out``;
        False (having said why) if pytest stopped before writing it."""
        root = self.root
        targets = [f"{root / name}::{cls}" for name, classes in sdist.suite_classes(root).items() for cls in classes]
        args = [*targets, "-c", str(root / "pytest.ini"), "--rootdir", str(root), "--import-mode=importlib",
                "-p", "no:cacheprovider", "-p", "tests.keras_suite.plugin", "-q", "--tb=no", "--no-header",
                "-W", "ignore::pytest.PytestUnknownMarkWarning", "--keras-tests", str(root), "--suite-report",
                str(out), *options]
        if self.workers:
            args += ["-n", str(self.workers)]
        if subset and self.keyword:
            args += ["-k", self.keyword]
        if subset:
            args += self.extra
        if out.exists():
            out.unlink()
        code = subprocess.run([sys.executable, "-m", "pytest", *args]).returncode
        if code not in (0, 1) or not out.is_file():  # 1: tests failed; anything else: pytest itself stopped
            print(f"keras-ops: pytest stopped (exit code {code}) before the suite's results were written")
            return False
        return True


if __name__ == "__main__":
    sys.exit(main())
