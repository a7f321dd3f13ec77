"""Rewrite README.md's generated tables from the committed results: the `multigpu compare` table from
docs/compare/results.json, the built-in models' tables from docs/models.json and docs/lengths.json and the
`multigpu bench` tables from
docs/bench.json (TensorFlow and Aesara) and docs/pytensor/bench.json (PyTensor), and the ops table from the op
vocabulary itself (toolkit/nn/op_table.py). ``nox -s docs`` runs it after it
has measured both; tests/test_readme.py checks that the README holds exactly what these files give.

    python docs/update_readme.py
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Each generated block of the README: the results file it comes from and the function that writes it.
BLOCKS = {
    "compare": ("docs/compare/results.json", "toolkit.command.compare:markdown"),
    "models": ("docs/models.json", "toolkit.command.compare:models_markdown"),
    "lengths": ("docs/lengths.json", "toolkit.command.compare:lengths_markdown"),
    "bench": ("docs/bench.json", "toolkit.command.bench:markdown"),
    "bench-pytensor": ("docs/pytensor/bench.json", "toolkit.command.bench:markdown"),
    "ops": (None, "toolkit.nn.op_table:markdown"),  # from the code itself: the ops and their documented refusals
}


def block_pattern(name: str) -> re.Pattern:
    """A generated block: its opening marker (which says where it comes from), the table, its closing marker."""
    return re.compile(rf"(<!-- generated: {name} .*?-->\n)(.*?)(<!-- end generated: {name} -->)", re.S)


def generated(name: str) -> str:
    path, writer = BLOCKS[name]
    module, _, function = writer.partition(":")
    write = getattr(importlib.import_module(module), function)
    return "\n" + (write() if path is None else write(json.loads((ROOT / path).read_text()))) + "\n"


def main() -> int:
    readme = (ROOT / "README.md").read_text()
    for name in BLOCKS:
        pattern = block_pattern(name)
        if not pattern.search(readme):
            print(f"README.md has no generated block {name!r}", file=sys.stderr)
            return 1
        readme = pattern.sub(lambda m, name=name: m.group(1) + generated(name) + m.group(3), readme)
    (ROOT / "README.md").write_text(readme)
    print("README.md: tables rewritten from " + ", ".join(path or writer for path, writer in BLOCKS.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
