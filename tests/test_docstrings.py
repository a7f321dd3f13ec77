"""Every public function and class has a docstring, and every public function that takes arguments documents each of
them in a Google-style ``Args:`` section (a class: in ``Args:`` or, for a dataclass, ``Attributes:``).

Public: the names ``toolkit`` and its public submodules (``toolkit.SUBMODULES``, ``toolkit.optim.schedules``) give,
and the public methods and properties of those classes, wherever they are written. Reads the code only: no
framework is imported.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import toolkit
from tests.test_import import public_names
from toolkit.ops import table as op_table
from toolkit.ops.interface import Ops

#: The op vocabulary (:class:`toolkit.Ops` and the ``ops_*`` mixins) has keras.ops' names, signatures and meanings:
#: an op's docstring says what it computes and, in ``Raises:``, what it refuses (read into the README's op table by
#: :mod:`toolkit.ops.table`); its arguments are keras.ops', documented there. So an op needs a docstring
#: (:func:`test_every_op_has_a_docstring`) and no ``Args:``: Args sections on some 330 one-line docstrings would
#: bury the differences from Keras they state.
VOCABULARY = frozenset(name for _, group in op_table.GROUPS for name in op_table.op_names(group))


def public_modules() -> list:
    return [toolkit, *(importlib.import_module(f"toolkit.{name}") for name in (*toolkit.SUBMODULES,
                                                                                "optim.schedules"))]


def public_objects() -> dict[str, object]:
    """Every public function and class once, by the first public name it has."""
    found: dict[int, tuple[str, object]] = {}
    for module in public_modules():
        for name in getattr(module, "__all__", None) or public_names(module):
            value = getattr(module, name)
            if inspect.isfunction(value) or inspect.isclass(value):
                found.setdefault(id(value), (f"{module.__name__}.{name}", value))
    return dict(found.values())


def section(doc: str, *headings: str) -> str | None:
    """The text of the first of ``headings`` (``"Args"``) in a Google-style docstring, up to the next unindented
    line; None without one."""
    for heading in headings:
        match = re.search(rf"^{heading}:\n((?:[ \t]+.*\n?|\n)*)", doc, re.M)
        if match:
            return match.group(1)
    return None


def parameters(fn) -> list[str]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature
        return []
    return [name for name in signature.parameters if name not in ("self", "cls")]


def undocumented(doc: str | None, names: list[str], headings=("Args",)) -> str | None:
    """What ``doc`` lacks for a callable taking ``names``, or None."""
    if not doc:
        return "no docstring"
    if not names:
        return None
    text = section(doc, *headings)
    if text is None:
        return f"no {' or '.join(h + ':' for h in headings)} section for {names}"
    missing = [name for name in names if not re.search(rf"\b{re.escape(name)}\b", text)]
    return f"{'/'.join(headings)} does not name {missing}" if missing else None


def defining_class(cls: type, name: str) -> type:
    return next(klass for klass in cls.__mro__ if name in vars(klass))


def problems_of_class(qualname: str, cls: type) -> dict[str, tuple[str, str]]:
    """``{name: (module where it is written, problem)}`` for a public class and its public members."""
    out: dict[str, tuple[str, str]] = {}
    own = inspect.cleandoc(cls.__doc__) if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}(") else None
    init = defining_class(cls, "__init__")
    if init.__module__.startswith("toolkit"):  # constructors of builtins (exceptions) take the message
        names = parameters(cls)
        doc = "\n".join(d for d in (own, inspect.getdoc(init.__init__) if init is cls else None) if d) or None
        problem = undocumented(doc, names, ("Args", "Attributes")) if own else "no docstring"
        if problem:
            out[qualname] = (cls.__module__, problem)
    elif not own:
        out[qualname] = (cls.__module__, "no docstring")
    vocabulary = issubclass(cls, Ops)
    for name in dir(cls):
        if name.startswith("_"):
            continue
        klass = defining_class(cls, name)
        member = inspect.getattr_static(klass, name)
        if not klass.__module__.startswith("toolkit") or (vocabulary and name in VOCABULARY):
            continue
        if isinstance(member, property):
            problem = None if inspect.getdoc(member) else "no docstring"
        elif isinstance(member, (staticmethod, classmethod)) or inspect.isfunction(member):
            method = getattr(cls, name)
            problem = undocumented(inspect.getdoc(method), parameters(method))
        else:
            continue
        if problem:
            out[f"{qualname}.{name}"] = (klass.__module__, problem)
    return out


def all_problems() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for qualname, value in public_objects().items():
        if inspect.isclass(value):
            out.update(problems_of_class(qualname, value))
        else:
            problem = undocumented(inspect.getdoc(value), parameters(value))
            if problem:
                out[qualname] = (value.__module__, problem)
    return out


def test_every_public_function_and_class_documents_its_arguments():
    problems = all_problems()
    assert not problems, "public names without a docstring or an Args: entry for each argument:\n" + "\n".join(
        f"  {name} ({module}): {problem}" for name, (module, problem) in sorted(problems.items()))


def test_every_op_has_a_docstring():
    missing = sorted(name for name in VOCABULARY if not inspect.getdoc(getattr(Ops, name)))
    assert not missing, f"ops without a docstring: {missing}"


def test_the_walk_sees_the_public_names():
    """The walk reaches names of every kind (a function, a class and its methods, a dataclass, an op), so the test
    above cannot pass by finding nothing."""
    found = public_objects()
    assert {"toolkit.get_backend", "toolkit.layers.dense", "toolkit.callbacks.EarlyStopping",
            "toolkit.optim.schedules.CosineDecay", "toolkit.Device", "toolkit.Ops"} <= set(found)
    assert len(found) > 100
    assert len(VOCABULARY) > 300


@pytest.mark.parametrize("doc, names, expected", [
    ("Sum.\n\n    Args:\n        x: a tensor.\n        axis: the axis.\n", ["x", "axis"], None),
    ("Sum.\n\n    Args:\n        x, axis: as numpy.sum.\n", ["x", "axis"], None),
    ("Sum.\n\n    Args:\n        x: a tensor.\n\n    Returns:\n        axis sums.\n", ["x", "axis"],
     "Args does not name ['axis']"),
    ("Sum of x over axis.", ["x", "axis"], "no Args: section for ['x', 'axis']"),
    (None, [], "no docstring"),
    ("Sum.", [], None),
])
def test_a_missing_docstring_or_argument_is_found(doc, names, expected):
    def fn():
        pass

    fn.__doc__ = doc
    assert undocumented(inspect.getdoc(fn), names) == expected
