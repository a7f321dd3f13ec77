"""No import cycle among the modules of toolkit/ and backends/: each module's module-level imports (those that run
when it is imported, not those inside functions or under ``if TYPE_CHECKING:``) form a graph without a cycle, so a
module is always complete when another imports it, whatever the order; and counting the imports inside functions
too, no cycle either, except through an import whose comment says which cycle it avoids (``# import cycle: a -> b
-> c``), and only if it does close one. Reads the sources only: no framework, and no toolkit module, is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Where each installed package's sources are (pyproject.toml's package-dir: backends/ installs as toolkit.backends).
PACKAGES = {"toolkit": REPO / "toolkit", "toolkit.backends": REPO / "backends"}


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module by its dotted name: its file and whether it is a package (an ``__init__.py``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            found[".".join((package, *(parts[:-1] if is_package else parts)))] = (path, is_package)
    return found


#: The comment that marks an import inside a function as breaking a cycle on purpose, followed by the cycle.
CYCLE_COMMENT = "# import cycle:"


def _runs_at_import(body: list[ast.stmt], functions: bool = False) -> Iterator[ast.stmt]:
    """The statements of ``body`` that run when the module is imported (with ``functions``, also those that run
    when its functions are called): not the branch of ``if TYPE_CHECKING:``, which never runs."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if functions:
                yield from _runs_at_import(node.body, functions)
            continue
        if isinstance(node, ast.If):
            checking = ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            yield from _runs_at_import(node.orelse if checking else node.body + node.orelse, functions)
        elif isinstance(node, (ast.Try, ast.With, ast.ClassDef, ast.For, ast.While)):
            nested = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                      *(stmt for handler in getattr(node, "handlers", []) for stmt in handler.body)]
            yield from _runs_at_import(nested, functions)
        else:
            yield node


def imports(source: str, name: str, is_package: bool, known: Mapping[str, object], functions: bool = False,
            marked: set[str] | None = None) -> set[str]:
    """The modules of ``known`` that module ``name`` imports at module level (``from p import m`` of a module ``m``
    is ``p.m``; of any other name, ``p``).

    Args:
        source: the module's source.
        name: its dotted name.
        is_package: whether it is a package's ``__init__``.
        known: the modules considered, by dotted name.
        functions: count the imports inside functions too, less those marked with :data:`CYCLE_COMMENT`.
        marked: where given, receives the modules imported by marked imports.
    """
    found = set()
    here = name if is_package else name.rpartition(".")[0]
    lines = source.splitlines()
    for node in _runs_at_import(ast.parse(source).body, functions):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{anchor}.{base}" if base else anchor
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        is_marked = functions and CYCLE_COMMENT in lines[node.end_lineno - 1]
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name inside a.b: a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                if not is_marked:
                    found.add(target)
                elif marked is not None:
                    marked.add(target)
    return found


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (``[a, b, ..., a]``), or None.

    Args:
        graph: the modules each module imports.
    """
    done: set[str] = set()
    for start in sorted(graph):
        path, on_path, stack = [], set(), [(start, iter(sorted(graph[start])))]
        if start in done:
            continue
        path.append(start)
        on_path.add(start)
        while stack:
            node, successors = stack[-1]
            step = next((s for s in successors if s not in done), None)
            if step is None:
                stack.pop()
                done.add(path.pop())
                on_path.discard(node)
            elif step in on_path:
                return path[path.index(step):] + [step]
            else:
                path.append(step)
                on_path.add(step)
                stack.append((step, iter(sorted(graph.get(step, ())))))
    return None


def test_no_import_cycle_among_toolkit_and_backends():
    known = modules()
    graph = {name: imports(path.read_text(), name, is_package, known) for name, (path, is_package) in known.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "an import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_counting_imports_inside_functions_except_marked_ones_that_close_one():
    known = modules()
    graph, marked = {}, {}
    for name, (path, is_package) in known.items():
        marked[name] = set()
        graph[name] = imports(path.read_text(), name, is_package, known, functions=True, marked=marked[name])
    cycle = find_cycle(graph)
    assert cycle is None, ("an import cycle through an import inside a function: " + " -> ".join(cycle)
                           + f"; move the import, or mark it with '{CYCLE_COMMENT} ...' if it breaks the cycle")
    for name, targets in marked.items():
        for target in targets:  # a marked import is needed: without the function-level import there is a cycle
            assert find_cycle({**graph, name: graph[name] | {target}}) is not None, (
                f"{name} marks its import of {target} as breaking an import cycle, but importing it closes none")
    assert any(marked.values())  # the Keras importer's wrappers translate the layers they wrap: one marked cycle


def test_the_check_reads_module_level_imports_and_finds_a_cycle():
    known = dict.fromkeys(["toolkit", "toolkit.a", "toolkit.b", "toolkit.c", "toolkit.pkg", "toolkit.pkg.d"])
    source = """
from typing import TYPE_CHECKING
import numpy
from toolkit import b, Name
from .pkg import d
import toolkit.pkg.d.inner
if TYPE_CHECKING:
    from toolkit import c
def f():
    from toolkit import c
try:
    import toolkit.c as c
except ImportError:
    pass
"""
    assert imports(source, "toolkit.a", False, known) == {"toolkit.b", "toolkit", "toolkit.pkg.d", "toolkit.c"}
    assert imports("from . import d\nfrom .. import b", "toolkit.pkg", True, known) == {"toolkit.pkg.d", "toolkit.b"}
    marked = set()
    inside = "def f():\n    from toolkit import c\n    from toolkit import b  # import cycle: b -> a\n"
    assert imports(inside, "toolkit.a", False, known) == set()
    assert imports(inside, "toolkit.a", False, known, functions=True, marked=marked) == {"toolkit.c"}
    assert marked == {"toolkit.b"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
