"""The documentation's shape, without building it or starting a framework: README.md is short, every relative link of
README.md and of the pages under docs/ reaches a file (and heading) that exists, and the API reference
(docs/reference/, rendered by mkdocstrings' ``::: module`` directives) documents every public name.

``nox -s site`` builds the site in strict mode, which also fails on a broken link; these tests say the same in the
test run, with the page and the link named, and check what a build cannot: that no public name is left out.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest

import toolkit

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
REFERENCE = DOCS / "reference"
#: The issue's bound: what the project is, the quick start, install, one example, the feature table and links into
#: the site fit in it; the rest is the site's.
README_MAX_LINES = 250
#: Files besides pages that the site carries (mkdocs.yml's exclude_docs leaves out the scripts and the JSON).
SITE_ASSETS = (".png", ".svg", ".jpg", ".jpeg", ".gif")

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(?P<target>\S+)", re.M)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"(?P<target>[^\"]+)\"")
HEADING = re.compile(r"^#{1,6}\s+(?P<text>.+?)\s*#*\s*$", re.M)
EXPLICIT_ID = re.compile(r"\{[^}]*#(?P<id>[\w.:-]+)[^}]*\}|\b(?:id|name)=\"(?P<html>[^\"]+)\"")
DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)\n(?P<options>(?:[ \t]+.*\n?)*)", re.M)


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


# --- README ---------------------------------------------------------------------------------------------------------
def test_the_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, more than {README_MAX_LINES}: move some to docs/"


# --- links ----------------------------------------------------------------------------------------------------------
def _prose(text: str) -> str:
    """The text less its code blocks and code spans, where a bracket or a parenthesis is code, not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    prose = _prose(text)
    return [m["target"] for pattern in (LINK, DEFINITION, HTML_LINK) for m in pattern.finditer(prose)]


def _heading_text(markdown: str) -> str:
    """A heading's text as rendered: links by their text, code spans by their content, no emphasis marks."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"\{[^}]*\}\s*$", "", text)  # attr_list's {#id .class}
    return re.sub(r"`|\*\*?|(?<!\w)_|_(?!\w)", "", text)


def site_slug(text: str) -> str:
    """Python-Markdown's toc slug (the site's anchors)."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def github_slug(text: str) -> str:
    """GitHub's heading anchor (README.md's links are read there and in a clone)."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path, slug) -> set[str]:
    """The anchors of page ``path``: its headings' slugs (a repeated one numbered as ``slug`` numbers it), explicit ids
    and, on an API reference page, the rendered names (``toolkit.DataParallel`` and its members)."""
    text = path.read_text()
    found: set[str] = set()
    for match in HEADING.finditer(FENCE.sub("", text)):
        base = slug(_heading_text(match["text"]))
        anchor, n = base, 0
        while anchor in found:
            n += 1
            anchor = f"{base}_{n}" if slug is site_slug else f"{base}-{n}"
        found.add(anchor)
    found |= {m["id"] or m["html"] for m in EXPLICIT_ID.finditer(text)}
    return found


def _reference_anchor(path: Path, anchor: str) -> bool:
    """Whether an API reference page has ``anchor``: a heading of its own, a module it renders, or a name it renders
    (``toolkit.DataParallel``) or a member of one (``toolkit.DataParallel.fit``)."""
    found = [d for d in directives() if d.page == path]
    names = {d.path if d.obj is not None else f"{d.path}.{name}" for d in found for name in d.names()}
    return (anchor in anchors(path, site_slug) or anchor in {d.path for d in found}
            or any(anchor == n or anchor.startswith(n + ".") for n in names))


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """What is wrong with each relative link of ``page`` (of ``text`` as if it were that page): a target that does
    not exist, a docs page linking out of docs/ (the site has only what docs/ holds), or an anchor that is no heading
    of the target."""
    problems = []
    in_docs = DOCS in page.parents
    for target in links(page.read_text() if text is None else text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # a URL: not the site's to check
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            problems.append(f"{target}: no file {resolved.relative_to(ROOT) if ROOT in resolved.parents else resolved}")
            continue
        if in_docs and DOCS not in resolved.parents:
            problems.append(f"{target}: outside docs/, so not in the site (link a page, or the file on GitHub)")
            continue
        if in_docs and resolved.suffix != ".md" and resolved.suffix.lower() not in SITE_ASSETS:
            problems.append(f"{target}: not a page or a picture, so not in the site (mkdocs.yml's exclude_docs)")
            continue
        if anchor and resolved.suffix == ".md":
            if REFERENCE in resolved.parents:
                ok = _reference_anchor(resolved, anchor)
            else:
                ok = anchor in anchors(resolved, site_slug if in_docs else github_slug)
            if not ok:
                problems.append(f"{target}: {resolved.relative_to(ROOT)} has no heading or id {anchor!r}")
    return problems


@pytest.mark.parametrize("page", [README, *doc_pages()], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: " + "; ".join(broken_links(page))


def test_a_broken_link_is_found():
    """Links as if on a page of the API reference (whose pages are always there): the good ones pass, each broken
    one is named."""
    text = ("[ok](toolkit.md) [heading](index.md#api-reference) [name](toolkit.md#toolkit.DataParallel.fit) "
            "[gone](missing.md) [out](../../noxfile.py) [data](../bench.json) [no heading](index.md#nope) "
            "[no name](toolkit.md#toolkit.NoSuchName) `[code](missing.md)`\n")
    problems = broken_links(REFERENCE / "self-test.md", text)
    assert [p.split(":")[0] for p in problems] == ["missing.md", "../../noxfile.py", "../bench.json",
                                                   "index.md#nope", "toolkit.md#toolkit.NoSuchName"], problems


# --- the API reference ----------------------------------------------------------------------------------------------
class Directive:
    """One ``::: path`` of a reference page: a module (with its ``members:`` list if it has one), or one class."""

    def __init__(self, page: Path, path: str, options: str):
        self.page, self.path = page, path
        listed = re.search(r"^\s+members:\s*\n((?:\s+- .*\n?)+)", options, re.M)
        self.members = re.findall(r"- (\S+)", listed[1]) if listed else None
        self.inherited = re.search(r"^\s+inherited_members:\s*true\s*$", options, re.M) is not None
        module, _, name = path.rpartition(".")
        try:
            self.module, self.obj = importlib.import_module(path), None
        except ModuleNotFoundError:
            self.module = importlib.import_module(module)
            self.obj = getattr(self.module, name)

    def names(self) -> list[str]:
        """The names of ``self.module`` it renders (a class's directive: that class's name)."""
        if self.obj is not None:
            return [self.path.rpartition(".")[2]]
        return self.members if self.members is not None else public_names(self.module)


def directives() -> list[Directive]:
    return [Directive(page, m["path"], m["options"])
            for page in sorted(REFERENCE.glob("*.md")) for m in DIRECTIVE.finditer(page.read_text())]


def public_modules() -> list[str]:
    """``toolkit``, its public submodules, their public submodules (``toolkit.optim.schedules``), and the errors."""
    found = ["toolkit", *(f"toolkit.{name}" for name in toolkit.SUBMODULES), "toolkit.errors"]
    for name in list(found):
        module = importlib.import_module(name)
        found += [f"{name}.{n}" for n in public_names(module) if isinstance(getattr(module, n), ModuleType)]
    return list(dict.fromkeys(found))


def public_names(module: ModuleType) -> list[str]:
    """A module's ``__all__``, or where it has none, the names it defines at its top level without an underscore."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    names = []
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


def _key(name: str, value) -> object:
    """What identifies a documented thing: the object for a class, function or module; a constant by its name."""
    return id(value) if inspect.isclass(value) or callable(value) or isinstance(value, ModuleType) else name


def undocumented(found: list[Directive]) -> list[str]:
    """The public names no directive of ``found`` renders (a module counts as rendered where it has a directive)."""
    rendered = {_key(n, getattr(d.module, n)) for d in found for n in d.names()}
    rendered |= {id(d.module) for d in found}  # a module with a directive of its own or of its names has a page
    missing = []
    for name in public_modules():
        module = importlib.import_module(name)
        missing += [f"{name}.{n}" for n in public_names(module) if _key(n, getattr(module, n)) not in rendered]
    return missing


def test_the_api_reference_documents_every_public_name():
    assert not undocumented(directives()), "add them to a page of docs/reference/"


def test_a_public_name_left_out_of_the_reference_is_found():
    """The check can fail: without the toolkit page's ``::: toolkit.DataParallel``, that name is undocumented."""
    found = [d for d in directives() if d.path != "toolkit.DataParallel"]
    assert len(found) == len(directives()) - 1
    assert undocumented(found) == ["toolkit.DataParallel"]


def test_every_documented_class_and_function_has_a_docstring():
    """mkdocstrings renders the docstring: a name without one would show its signature and nothing else."""
    bare = sorted({f"{d.module.__name__}.{n}" for d in directives() for n in d.names()
                   if (inspect.isclass(obj := getattr(d.module, n)) or inspect.isfunction(obj))
                   and not (obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__)})
    assert not bare, f"no docstring: {bare}"


def _constant_documented(module: ModuleType, name: str) -> bool:
    """Whether constant ``name`` has a ``#:`` comment above its assignment or a string under it, in the module that
    assigns it (followed through ``from ... import``): mkdocstrings shows it only then."""
    source = inspect.getsource(module)
    lines, body = source.splitlines(), ast.parse(source).body
    for index, node in enumerate(body):
        if isinstance(node, ast.ImportFrom) and node.module and any((a.asname or a.name) == name for a in node.names):
            return _constant_documented(importlib.import_module(node.module), name)
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        elements = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        names = {e.id for e in elements if isinstance(e, ast.Name)}
        if name in names:
            after = body[index + 1] if index + 1 < len(body) else None
            return lines[node.lineno - 2].lstrip().startswith("#:") or (
                isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str))
    return False


def test_every_documented_constant_has_a_docstring():
    constants = {(d.module, n) for d in directives() for n in d.names()
                 if _key(n, getattr(d.module, n)) == n}
    bare = sorted(f"{module.__name__}.{name}" for module, name in constants if not _constant_documented(module, name))
    assert not bare, f"no '#:' comment or docstring, so the reference would leave them out: {bare}"


def test_methods_a_class_inherits_are_documented_with_it():
    """A public class whose public methods come from a base the reference does not render (``DataParallel``'s
    ``fit`` and ``predict``, from the trainer's private bases) is rendered with ``inherited_members: true``."""
    found = directives()
    rendered = {id(getattr(d.module, n)) for d in found for n in d.names()}
    hidden = []
    for d in found:
        for name in d.names():
            cls = getattr(d.module, name)
            if not inspect.isclass(cls) or d.inherited:
                continue
            for base in cls.__mro__[1:]:
                if base.__module__.startswith("toolkit") and id(base) not in rendered:
                    hidden += [f"{name}.{k}" for k in vars(base) if not k.startswith("_") and k not in vars(cls)]
    assert not hidden, f"inherited from a base the reference does not show: {hidden}"
