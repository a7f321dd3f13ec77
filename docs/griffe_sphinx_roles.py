"""A griffe extension for the site's API reference: the Sphinx roles the docstrings cross-reference with
(``:class:`~toolkit.Ops```, ``:func:`fans```, ``:data:`DEFAULT_TIMEOUT```) become links to the names' entries, and
reST's ``::`` before a formula shows as ``:``.

mkdocstrings reads docstrings as Markdown, where a role would show as it is written. Each role becomes an optional
cross-reference (mkdocs-autorefs): a link where the name is rendered on some page, plain code where it is not (a
private helper, a name of a framework), so that a role never breaks the strict build. A name without dots is
looked up from the docstring's object outwards (its class, its module), as Sphinx does. ``~`` shows the last part
of the name only, as in Sphinx.
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|const):`(?P<target>[^`]+)`")
#: reST's ``text::`` before an indented block (which Markdown shows as code too): shown as ``text:``, as Sphinx does.
LITERAL_BLOCK = re.compile(r"(?<=\S)::(?=[ \t]*\n[ \t]*\n)")


def _identifier(obj: griffe.Object, target: str) -> str:
    """The full path a role's target names, seen from ``obj``; the target as written where it resolves to nothing."""
    name = target.lstrip(".")
    try:
        return obj.resolve(name)
    except Exception:  # noqa: BLE001 -- griffe raises NameResolutionError or a lookup error: the name is kept as it is
        return name


def _link(obj: griffe.Object, match: re.Match) -> str:
    target = re.sub(r"\s+", "", match["target"])  # a role's name may be wrapped across docstring lines
    if "<" in target and target.endswith(">"):  # :class:`title <path>`
        title, _, target = match["target"].strip()[:-1].partition("<")
        title, target = " ".join(title.split()), re.sub(r"\s+", "", target)
    else:
        title = target.lstrip("~.").rsplit(".", 1)[-1] if target.startswith("~") else target.lstrip(".")
    identifier = _identifier(obj, target.lstrip("~"))
    return (f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code>'
            "</autoref>")


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring of the loaded package (once the whole package is loaded, so that a
    role may name something defined later or elsewhere)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        self._rewrite(pkg, set())

    def _rewrite(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None and ":" in obj.docstring.value:
            text = ROLE.sub(lambda m: _link(obj, m), obj.docstring.value)
            obj.docstring.value = LITERAL_BLOCK.sub(":", text)
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite(member, seen)
