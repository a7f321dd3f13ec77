"""What the suite's results mean: each Keras test's status, the counts per op and in all, the pass rate, and
whether the run passes.

A test's status, in this order:

- ``skipped``: Keras itself skipped it (not eligible);
- ``out of scope``: it called an op with a sparse, ragged or symbolic (KerasTensor) input (not eligible);
- ``keras fails``: it fails here with Keras' own ops too (this environment cannot run it: NumPy 1.26 has no
  ``numpy.trapezoid``, which Keras' test_trapezoid calls) (not eligible);
- ``not covered``: it called a Keras op the toolkit lacks (or no op at all): it ran partly on Keras' own ops;
- ``passed``: every op it called was the toolkit's, and Keras' assertions held;
- ``refused``: the toolkit raised a typed error (a :class:`toolkit.errors.ToolkitError`, not a
  :class:`~toolkit.errors.ComputeError`): it refuses that combination, saying so;
- ``failed``: a wrong value (an ``AssertionError`` of Keras' test) or a raw error (any other exception).

Eligible tests are those neither skipped nor out of scope; the pass rate is passed / eligible.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

#: The issue's bar (issue 27, "Done when"): the share of eligible Keras tests that must pass on every backend.
REQUIRED_PASS_RATE = 0.8
#: Keras tests that pass however wrong the toolkit's arrays are (checked by hand): they build inputs with ops only to
#: check that another op raises. The self-test does not count them.
INSENSITIVE = {
    "NumpyArrayCreateOpsCorrectnessTest::test_eye_raises_error_with_floats": "eye(max(arange(4.0))) must raise",
    # On Keras' NumPy backend test_custom_gradient only decorates: its assertions are in its TensorFlow, JAX and
    # PyTorch branches (the toolkit's custom gradients are checked in tests/test_ops_functional.py).
    **dict.fromkeys((f"CoreOpsCorrectnessTest::test_custom_gradient_{v}" for v in ("false", "true")),
                    "asserts nothing on Keras' NumPy backend"),
}
#: The statuses, in the order the tables show them.
STATUSES = ("passed", "failed", "refused", "not covered", "out of scope", "keras fails", "skipped")
#: The statuses of tests that are not eligible.
NOT_ELIGIBLE = ("out of scope", "keras fails", "skipped")


def status(test: Mapping[str, Any], reference: Mapping[str, Any] | None = None) -> str:
    """The status of one test from its pytest outcome (``passed``/``failed``/``skipped``), its record of calls
    (``toolkit``, ``keras``, ``out_of_scope``) and its error (``refused`` true for a typed toolkit error).

    ``reference`` is the same test run with Keras' own ops: whether a test is eligible is a property of the test,
    not of the backend (a test that fails on the toolkit before it reaches its symbolic call is still out of
    scope), so a test skipped or out of scope there is so here too."""
    record = test.get("record") or {}
    if test["outcome"] == "skipped" or (reference is not None and reference["outcome"] == "skipped"):
        return "skipped"
    if record.get("out_of_scope") or (reference is not None and (reference.get("record") or {}).get("out_of_scope")):
        return "out of scope"
    if reference is not None and reference["outcome"] == "failed":
        return "keras fails"
    if record.get("keras") or not record.get("toolkit"):
        return "not covered"
    if test["outcome"] == "passed":
        return "passed"
    return "refused" if (test.get("error") or {}).get("refused") else "failed"


def summarize(tests: Iterable[Mapping[str, Any]],
              reference: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Totals, the pass rate and per-op counts of a run's tests (each test counts for every op it called);
    ``reference``: the tests run with Keras' own ops (see :func:`status`)."""
    tests = list(tests)
    by_id = {t["nodeid"]: t for t in reference or ()}
    totals: Counter = Counter()
    per_op: dict[str, Counter] = defaultdict(Counter)
    failures = []
    for test in tests:
        kind = status(test, by_id.get(test["nodeid"]))
        totals[kind] += 1
        record = test.get("record") or {}
        for op in {*record.get("toolkit", ()), *record.get("keras", ()), *record.get("out_of_scope", {})}:
            per_op[op][kind] += 1
        if kind in ("failed", "refused"):
            error = test.get("error") or {}
            failures.append({"test": test["nodeid"], "status": kind, "ops": sorted(record.get("toolkit", ())),
                             "error": error.get("type", ""), "message": error.get("message", "")})
    eligible = len(tests) - sum(totals[k] for k in NOT_ELIGIBLE)
    keras_own = sorted(t["nodeid"] for t in by_id.values()
                       if t["outcome"] == "failed" and not (t.get("record") or {}).get("out_of_scope"))
    return {
        "totals": {k: totals[k] for k in STATUSES},
        "collected": len(tests),
        "eligible": eligible,
        "covered": sum(totals[k] for k in ("passed", "failed", "refused")),
        "pass_rate": totals["passed"] / eligible if eligible else 0.0,
        "per_op": {op: {k: counts[k] for k in STATUSES if k != "skipped"} for op, counts in sorted(per_op.items())},
        "failures": sorted(failures, key=lambda f: f["test"]),
        "fail_with_keras_own_ops": keras_own,
        # Passed tests that received arrays from the toolkit (with --perturb, there should be none; a passed test
        # that received none checks errors or Python values, which a perturbation does not change).
        "passed_with_arrays": sorted(t["nodeid"].split("::", 1)[-1] for t in tests
                                     if status(t, by_id.get(t["nodeid"])) == "passed"
                                     and t["nodeid"].split("::", 1)[-1] not in INSENSITIVE
                                     and (t.get("record") or {}).get("arrays", 1)),
    }


def verdict(summary: Mapping[str, Any], min_pass: float, perturbed: bool = False) -> list[str]:
    """Why the run fails (empty: it passes). Normally: a covered test failed (a wrong value or a raw error), or
    fewer than ``min_pass`` of the eligible tests passed. Perturbed (the self-test): a covered test passed, so the
    toolkit's arrays did not reach its assertions (a test given none, one checking errors or Python values such as
    ``ndim``, cannot see a perturbation), or no test was covered at all."""
    totals = summary["totals"]
    if perturbed:
        problems = []
        if summary["covered"] == 0:
            problems.append("no Keras test was covered: the self-test proves nothing")
        if summary["passed_with_arrays"]:
            problems.append(f"{len(summary['passed_with_arrays'])} covered test(s) passed although the toolkit gave "
                            f"them perturbed arrays: {', '.join(summary['passed_with_arrays'])}")
        return problems
    problems = []
    if totals["failed"]:
        problems.append(f"{totals['failed']} covered Keras test(s) failed (a wrong value or a raw framework error)")
    if summary["pass_rate"] < min_pass:
        problems.append(f"{totals['passed']}/{summary['eligible']} eligible Keras tests passed "
                        f"({summary['pass_rate']:.1%}), below the required {min_pass:.0%}")
    return problems


def table(summary: Mapping[str, Any], backend: str) -> str:
    """The per-op counts and the totals as text."""
    columns = [k for k in STATUSES if k != "skipped"]
    width = max([len("op"), *map(len, summary["per_op"])])
    lines = [f"Keras op tests on {backend}: per op (a test counts for every op it calls)",
             f"{'op':<{width}}  " + "  ".join(f"{c:>12}" for c in columns)]
    for op, counts in summary["per_op"].items():
        lines.append(f"{op:<{width}}  " + "  ".join(f"{counts[c]:>12}" for c in columns))
    totals = summary["totals"]
    lines.append("")
    lines.append(f"{backend}: " + ", ".join(f"{totals[k]} {k}" for k in STATUSES) + f" ({summary['collected']} tests)")
    lines.append(f"{backend}: {totals['passed']}/{summary['eligible']} eligible tests passed "
                 f"({summary['pass_rate']:.1%}); {summary['covered']} covered (only toolkit ops)")
    if summary.get("fail_with_keras_own_ops"):
        names = ", ".join(t.split("::", 1)[-1] for t in summary["fail_with_keras_own_ops"])
        lines.append(f"not eligible here, since they fail with Keras' own ops too: {names}")
    return "\n".join(lines)


def failure_lines(summary: Mapping[str, Any]) -> str:
    """One line per failed or refused test: its name, the ops it called and the error."""
    lines = []
    for failure in summary["failures"]:
        test = failure["test"].split("::", 1)[-1]
        lines.append(f"{failure['status'].upper():8} {test} [{', '.join(failure['ops'])}] "
                     f"{failure['error']}: {failure['message']}")
    return "\n".join(lines)
