"""What the gradient tables (:mod:`tests.gradient_cases`) share: the named float64 inputs every entry reads, the
helpers that make NaN holes inside a model, and :func:`_from_table`, which makes entries of another test module's
cases (adding their inputs to :data:`INPUTS`)."""

from __future__ import annotations

import numpy as np

_R = np.random.default_rng(2026)
_A = _R.normal(size=(2, 3, 3)) * 0.3 + 2 * np.eye(3)  # well-conditioned square matrices
#: Named float64 inputs, small: each compiled gradient holds every entry of its table.
INPUTS = {
    "x": _R.normal(size=(3, 4)), "y": _R.normal(size=(3, 4)), "v": _R.normal(size=5), "w": _R.normal(size=3),
    "t": _R.normal(size=(2, 3, 4)), "s": _R.normal(size=(4, 3, 2)),
    "u": _R.uniform(-0.8, 0.8, (3, 4)),      # inside (-1, 1): arccos, arctanh, erfinv
    "p": _R.uniform(0.5, 2.0, (3, 4)),       # positive: log, sqrt, rsqrt, power's base
    "g": _R.uniform(1.2, 3.0, (3, 4)),       # above 1: arccosh
    "zeros": np.array([[1.5, 0.0, -2.0, 0.7, 1.2], [0.0, 3.0, 0.0, 1.1, 0.4], [0.9, -1.3, 2.2, 0.4, 0.0]]),  # prod
    # Away from every activation's kinks (0, +-0.5, +-1, +-3, 6) by more than the difference step.
    "z": np.array([-7.0, -3.6, -2.2, -1.3, -0.8, -0.3, 0.2, 0.7, 1.4, 2.7, 4.6, 6.4, 9.0]),
    "a": _A, "spd": _A @ np.swapaxes(_A, -1, -2) + np.eye(3), "b": _R.normal(size=(2, 3, 2)),
    "m": _R.normal(size=(4, 3)),
}
_HOLES = np.eye(3, 4, dtype=bool)  # NaN made inside the model: a trainer refuses NaN parameters
_IDS = np.array([[2, 0, 1, 3], [1, 1, 0, 2], [3, 2, 2, 0]])


def _nan(o, x):
    return o.where(_HOLES, np.nan, x)


def _np_nan(x):
    return np.where(_HOLES, np.nan, x)


def _pairs(*names):
    return {name: (("x", "y"), None, getattr(np, name)) for name in names}


def _from_table(prefix: str, cases: dict, inputs: dict, chosen: dict[str, str], used) -> dict:
    """Entries made from another test module's cases ``name: (call(ops, t), reference(t))`` over its dict of inputs
    ``t``, for ``chosen``'s ``{case name: op}``: the float inputs a case reads (``used(name)``) become the entry's,
    added to :data:`INPUTS` as ``"<prefix>:<input>"``; the others stay constants. The entry is ``"<op>.<case>"``."""
    entries = {}
    for name, op in chosen.items():
        floats = tuple(n for n in used(name) if inputs[n].dtype.kind == "f")
        INPUTS.update({f"{prefix}:{n}": inputs[n] for n in floats})

        def call(o, *arrays, name=name, floats=floats):
            return cases[name][0](o, {**inputs, **dict(zip(floats, arrays))})

        def reference(*arrays, name=name, floats=floats):
            return cases[name][1]({**inputs, **dict(zip(floats, arrays))})

        entries[f"{op}.{name}"] = (tuple(f"{prefix}:{n}" for n in floats), call, reference)
    return entries
