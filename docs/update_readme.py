"""Rewrite the documentation's generated tables from the committed results: the `multigpu compare` table from
docs/compare/results.json, the built-in models' tables from docs/models.json and docs/lengths.json and the
`multigpu bench` tables from docs/bench.json (TensorFlow and Aesara) and docs/pytensor/bench.json (PyTensor), and
the ops table from the op vocabulary itself (toolkit/ops/table.py). Each table sits between its markers
(``<!-- generated: NAME ... -->`` and ``<!-- end generated: NAME -->``) in whichever page holds them: README.md or a
page under docs/. ``nox -s docs`` runs it after it has measured both; tests/test_readme.py checks that the pages
hold exactly what these files give.

    python docs/update_readme.py
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Each generated block: the results file it comes from and the function that writes it.
BLOCKS = {
    "compare": ("docs/compare/results.json", "toolkit.command.compare:markdown"),
    "models": ("docs/models.json", "toolkit.command.compare:models_markdown"),
    "lengths": ("docs/lengths.json", "toolkit.command.compare:lengths_markdown"),
    "parity": ("docs/parity.json", "toolkit.command.parity:calibration_markdown"),
    "bench": ("docs/bench.json", "toolkit.command.bench:markdown"),
    "bench-pytensor": ("docs/pytensor/bench.json", "toolkit.command.bench:markdown"),
    "ops": (None, "toolkit.ops.table:markdown"),  # from the code itself: the ops and their documented refusals
}


class MarkerError(LookupError):
    """A generated block's markers are in no page, or in more than one."""


def pages() -> list[Path]:
    """The pages that may hold generated blocks: README.md and the Markdown under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def block_pattern(name: str) -> re.Pattern:
    """A generated block: its opening marker (which says where it comes from), the table, its closing marker."""
    return re.compile(rf"(<!-- generated: {name} .*?-->\n)(.*?)(<!-- end generated: {name} -->)", re.S)


def page_holding(name: str) -> Path:
    """The one page that holds block ``name``.

    Raises:
        MarkerError: no page holds it, or more than one does (the message names them).
    """
    holding = [page for page in pages() if block_pattern(name).search(page.read_text())]
    if len(holding) != 1:
        found = ", ".join(p.relative_to(ROOT).as_posix() for p in holding) or "no page"
        raise MarkerError(f"the generated block {name!r} must be in exactly one page (README.md or docs/**/*.md); "
                          f"found in {found}")
    return holding[0]


def generated(name: str) -> str:
    """Block ``name``'s table as its writer makes it from the committed results, with the newlines around it."""
    path, writer = BLOCKS[name]
    module, _, function = writer.partition(":")
    write = getattr(importlib.import_module(module), function)
    return "\n" + (write() if path is None else write(json.loads((ROOT / path).read_text()))) + "\n"


def main() -> int:
    try:  # every block's page found before any page is written, so a misplaced marker changes nothing
        holders = {name: page_holding(name) for name in BLOCKS}
    except MarkerError as error:
        print(error, file=sys.stderr)
        return 1
    texts = {page: page.read_text() for page in holders.values()}
    for name, page in holders.items():
        texts[page] = block_pattern(name).sub(lambda m, name=name: m.group(1) + generated(name) + m.group(3),
                                              texts[page])
    for page, text in texts.items():
        page.write_text(text)
    print(", ".join(f"{page.relative_to(ROOT).as_posix()}: {', '.join(n for n, p in holders.items() if p == page)}"
                    for page in texts) + " -- tables rewritten from the committed results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
