"""No silent backend difference: every public op of ``ops`` on every backend against one NumPy reference (Keras'
semantics, as Keras' own NumPy backend gives them), over a table of inputs with NaN, ±inf, -0.0, empty arrays and
empty axes, integers (int32, int64, negative) and booleans.

The table (:mod:`tests.special_values_table`) is data: per op, a call over ``ops``, its reference and the input
kinds that apply, or the typed error every backend must raise for a kind. A coverage test fails on any public op
(``toolkit.ops.table``) that is neither in the table nor excluded with a reason, so a new op needs an entry.

Each backend computes the cases of one input kind and computation dtype in a few traced functions (a dict of results
each, :data:`CASES_PER_FUNCTION` cases in one), so the Theano family compiles a few graphs per kind for the whole
table; where one fails when run, each of its cases runs alone and names the one that failed.
"""

from __future__ import annotations

import functools

import numpy as np
import optree
import pytest

from tests.conftest import THEANO_FAMILY, needs_backend
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, run
from tests.special_values_table import CASES, EXCLUDED, INPUTS, KINDS, KNOWN
from toolkit.backend.registry import REGISTRY
from toolkit.errors import ToolkitError
from toolkit.ops import table as op_table
from toolkit.ops.tensor import Tensor

#: The computation dtypes every case runs in: the dtype of float inputs and of float results from integers.
DTYPES = ("float32", "float64")
#: The kinds the Theano family also runs in float64: each kind's graph takes its engine 20 to 45 s of CPU to compile
#: (measured on 2 cores), so float64, where kernels differ most at NaN and infinities, runs the float kind only.
THEANO_FLOAT64_KINDS = ("float",)
#: The key of an error raised by cases together (followed by the first and last case's ids), not by one of them.
TOGETHER = "(the cases together)"
#: Tolerance of float16 results (a cast's), a few units of its 2**-11 rounding.
FLOAT16_RTOL = 2e-3
#: Cases compiled together. Aesara's compile time grows faster than the graph (JAX's lowering and XLA's compile of one
#: function of a kind's ~330 cases took ~15% more CPU than four functions of ~80; PyTensor's took the same), while each
#: function has a fixed cost (one function per case took half as much again).
CASES_PER_FUNCTION = 80


def _run_cases(backend, cases, kind: str, dtype: str) -> tuple[dict, dict]:
    """``(results, errors)`` of ``cases`` on ``kind``'s inputs in one traced function: NumPy results (Python values
    for ops that return them, such as ``shape``) and the exception each refusing case raised."""
    errors, static = {}, {}

    def every_case(ops, **inputs):
        found = {}
        for case in cases:
            try:
                value = case.call(ops, **inputs)
            except Exception as error:  # noqa: BLE001 - the test judges which errors are right
                errors[case.id] = error
                continue
            if all(isinstance(leaf, Tensor) for leaf in optree.tree_leaves(value)):
                found[case.id] = value
            else:
                static[case.id] = value  # a Python value (shape, ndim, is_tensor): not a graph output
        # A function needs an output (the Theano family refuses one without): a constant where no case gave one.
        return found or {"": ops.zeros(())}

    results = run(backend, every_case, INPUTS[kind], dtype)
    results.pop("", None)
    return {**results, **static}, errors


@functools.cache
def _results(backend_name: str, kind: str, dtype: str) -> tuple[dict, dict]:
    """Every case of ``kind`` on a backend, :data:`CASES_PER_FUNCTION` in one function, computed once per test
    session."""
    import toolkit

    backend = toolkit.get_backend(backend_name)
    cases = [case for case in CASES if kind in case.kinds or kind in case.refuses]
    results, errors = {}, {}
    for start in range(0, len(cases), CASES_PER_FUNCTION):
        found, refused = _run_together(backend, cases[start:start + CASES_PER_FUNCTION], kind, dtype)
        results.update(found)
        errors.update(refused)
    return results, errors


def _run_together(backend, cases, kind: str, dtype: str) -> tuple[dict, dict]:
    """:func:`_run_cases` of ``cases`` in one function, or where that fails when run, of each case alone."""
    try:
        return _run_cases(backend, cases, kind, dtype)
    except Exception as error:  # noqa: BLE001 - a case fails when run: each alone, so the failure is that case's
        results, errors, alone_fails = {}, {}, False
        for case in cases:
            try:
                found, refused = _run_cases(backend, [case], kind, dtype)
            except Exception as alone:  # noqa: BLE001
                found, refused, alone_fails = {}, {case.id: alone}, True
            results.update(found)
            errors.update(refused)
        if not alone_fails:  # every case runs alone but not together (a rewrite across ops): named too
            errors[f"{TOGETHER} {cases[0].id} to {cases[-1].id}"] = error
        return results, errors


def _tolerance(dtype: np.dtype) -> float:
    return {np.float16: FLOAT16_RTOL, np.float32: FLOAT32_RTOL}.get(dtype.type, FLOAT64_RTOL)


def _reference(case, kind: str, dtype: str):
    """The case's reference on ``kind``'s inputs (float ones in the computation dtype where the case says so)."""
    inputs = INPUTS[kind]
    if case.in_dtype:
        inputs = {name: v.astype(dtype) if v.dtype.kind == "f" else v for name, v in inputs.items()}
    return case.reference(**inputs)


def _check(got, want, dtype: str, where: str, signed_zeros: bool = True) -> None:
    """``got`` equals the reference ``want`` in structure, shapes, dtypes (a float64 reference stands for the
    computation dtype) and values: NaN where it has NaN, infinities of its sign, zeros of its sign."""
    got_leaves, got_spec = optree.tree_flatten(got, none_is_leaf=True)
    want_leaves, want_spec = optree.tree_flatten(want, none_is_leaf=True)
    assert len(got_leaves) == len(want_leaves), f"{where}: {got_spec} != {want_spec}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        at = f"{where}, output {i}"
        if isinstance(w, (bool, int)) and not isinstance(w, np.generic):
            assert g == w and type(g) is type(w), f"{at}: {g!r} != {w!r}"
            continue
        if isinstance(w, tuple):
            assert tuple(g) == w, f"{at}: {g!r} != {w!r}"
            continue
        g, w = np.asarray(g), np.asarray(w)
        wanted = np.dtype(dtype) if w.dtype == np.float64 else w.dtype
        assert g.shape == w.shape, f"{at}: shape {g.shape} != {w.shape}"
        assert g.dtype == wanted, f"{at}: dtype {g.dtype} != {wanted}"
        if w.dtype.kind == "f":
            tolerance = _tolerance(g.dtype)
            np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=at)
            zeros = (w == 0) & (g == 0) if signed_zeros else np.zeros(w.shape, bool)
            np.testing.assert_array_equal(np.signbit(g[zeros]), np.signbit(w[zeros]), err_msg=f"{at}: signed zeros")
        else:
            np.testing.assert_array_equal(g, w, err_msg=at)


def test_every_op_is_in_the_table_or_excluded():
    """A public op without a case or an exclusion fails here: the table keeps up with the vocabulary."""
    ops = {name for _, cls in op_table.GROUPS for name in op_table.op_names(cls)}
    tabled = {case.op for case in CASES}
    assert not tabled & set(EXCLUDED), f"both in the table and excluded: {sorted(tabled & set(EXCLUDED))}"
    missing, unknown = sorted(ops - tabled - set(EXCLUDED)), sorted((tabled | set(EXCLUDED)) - ops)
    assert not missing, f"ops with no special-value case and no exclusion (add one to the table): {missing}"
    assert not unknown, f"table entries for names that are not ops: {unknown}"
    assert all(reason.strip() for reason in EXCLUDED.values())
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"


def _runs():
    """``(backend, kind, dtype)`` of every run: each backend each kind in each dtype, but the Theano family's float64
    (:data:`THEANO_FLOAT64_KINDS`)."""
    for name in REGISTRY:
        for kind in KINDS:
            for dtype in DTYPES:
                if name in THEANO_FAMILY and dtype == "float64" and kind not in THEANO_FLOAT64_KINDS:
                    continue
                yield pytest.param(name, kind, dtype, marks=needs_backend(name), id=f"{name}-{kind}-{dtype}")


@pytest.mark.parametrize(("backend_name", "kind", "dtype"), list(_runs()))
def test_ops_match_reference(backend_name, kind, dtype):
    """Every case that applies to ``kind`` gives the reference's values and dtypes, and every refusal the table names
    is that typed toolkit error; all cases are checked, the failures listed together."""
    results, errors = _results(backend_name, kind, dtype)
    failures = {}
    for case in CASES:
        if kind in case.refuses:
            error, expected = errors.get(case.id), case.refuses[kind]
            if not (isinstance(error, expected) and isinstance(error, ToolkitError)):
                failures[case.id] = (f"expected {expected.__name__}, got "
                                     f"{type(error).__name__ if error else 'a result'}: {error}")
        elif kind in case.kinds:
            if case.id in errors:
                error = errors[case.id]
                failures[case.id] = f"raised {type(error).__name__}: {str(error)[:300]}"
                continue
            try:
                _check(results[case.id], _reference(case, kind, dtype), dtype, case.id, case.signed_zeros)
            except Exception as error:  # noqa: BLE001 - a reference that fails is reported with the others
                failures[case.id] = f"{type(error).__name__}: {str(error)[:1500]}"
    for key, error in errors.items():
        if key.startswith(TOGETHER):
            failures[key] = f"raised {type(error).__name__}: {str(error)[:600]}"
    known = {key[0]: why for key, why in KNOWN.items()
             if key[1:3] == (backend_name, kind) and key[3:] in ((), (dtype,))}
    for case_id, why in known.items():
        if failures.pop(case_id, None) is None:
            failures[case_id] = f"listed in KNOWN ({why}) but matches the reference now: remove it"
    assert not failures, (f"{len(failures)} cases differ on {backend_name}, {kind}, {dtype}: {', '.join(failures)}\n\n"
                          + "\n\n".join(f"{name}: {text}" for name, text in failures.items()))
