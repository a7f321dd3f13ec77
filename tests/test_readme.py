"""README.md's code runs as written, in order, on a CPU-only machine; the examples' usage lines too; and the
README's generated tables hold exactly what the committed results give.

A README block that shows an error says so in a comment on the statement's first line that starts with the error's
class name (``toolkit.parse_device("tpu:0")   # DeviceParseError: cannot parse device 'tpu:0'; ...``): the test
checks that this error is raised there and that its message starts with the text shown (up to a trailing "...").
A block after ``<!-- readme-test: new process -->`` starts a fresh interpreter, as a separate program would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import THEANO, needs_all_backends, needs_backend

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"(?:<!-- readme-test: (?P<directive>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)

#: Run in the child interpreter: executes the blocks statement by statement in one namespace, checking each
#: statement marked with an error. Reports README line numbers.
RUNNER = r'''
import ast, json, re, sys, traceback
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
checked = 0
for start, code in blocks:
    lines = code.splitlines()
    for node in ast.parse(code).body:
        first = lines[node.lineno - 1]
        source = "\n".join(lines[node.lineno - 1:node.end_lineno])
        where = f"README.md line {start + node.lineno}: {first.strip()}"
        shown = re.search(r"#\s*(?P<name>[A-Z]\w*(?:Error|Exception))\b:?\s*(?P<text>.*)$", first)
        try:
            exec(compile(source, where, "exec"), namespace)
        except Exception as error:
            names = [c.__name__ for c in type(error).__mro__]
            if shown is None or shown["name"] not in names:
                traceback.print_exc()
                sys.exit(f"unexpected {type(error).__name__} at {where}")
            text = shown["text"].split("...")[0].strip()
            if text and not str(error).startswith(text):
                sys.exit(f"{where}: the message {str(error)!r} does not start with {text!r}")
            checked += 1
        else:
            if shown is not None:
                sys.exit(f"{where}: {shown['name']} was shown but nothing was raised")
print(json.dumps({"errors_checked": checked}))
'''


def readme_programs() -> list[list[tuple[int, str]]]:
    """The README's python blocks as programs: each a list of (line number before the block, code)."""
    text = README.read_text()
    programs: list[list[tuple[int, str]]] = [[]]
    for match in BLOCK.finditer(text):
        directive = (match["directive"] or "").strip()
        if directive == "new process":
            programs.append([])
        elif directive:
            raise AssertionError(f"unknown readme-test directive {directive!r}")
        start = text.count("\n", 0, match.start("code"))
        programs[-1].append((start, match["code"]))
    return [p for p in programs if p]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}


def test_the_readme_has_code_to_run():
    programs = readme_programs()
    assert len(programs) >= 2 and sum(len(p) for p in programs) >= 10


@needs_all_backends
@pytest.mark.parametrize("index", range(len(readme_programs())), ids=lambda i: f"program{i}")
def test_readme_code_runs_as_written(index, tmp_path):
    """As written with TensorFlow and Aesara; where PyTensor is this environment's Theano-family backend, with
    ``"aesara"`` read as ``"pytensor"`` (the README says the two are the same backend on either engine)."""
    program = [(start, code.replace('"aesara"', f'"{THEANO}"')) for start, code in readme_programs()[index]]
    done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(program),
                          capture_output=True, text=True, timeout=900, cwd=tmp_path, env=clean_env())
    assert done.returncode == 0, done.stderr[-4000:]
    assert "errors_checked" in done.stdout.splitlines()[-1]


def usage_lines() -> list:
    """Every command an example's docstring shows, with the backends it needs. A line that names Aesara runs on this
    environment's Theano-family backend, as the README's programs do."""
    found = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        doc = path.read_text().split('"""')[1]
        for line in doc.splitlines():
            if line.startswith("    ") and re.match(r"\s+(python|multigpu) ", line):
                command = line.strip()
                backend = re.search(r"--backend (\w+)", command)
                mark = needs_backend(_theano_read(backend[1])) if backend else needs_all_backends
                found.append(pytest.param(command, marks=mark, id=f"{path.stem}:{command.split('--', 1)[-1]}"))
    return found


def _theano_read(text: str) -> str:
    return re.sub(r"\baesara\b", THEANO, text)


@pytest.mark.parametrize("command", usage_lines())
def test_example_usage_lines_run_as_written(command, tmp_path):
    """As written; where PyTensor is this environment's Theano-family backend, with ``aesara`` read as ``pytensor``."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the line's relative path, from a scratch folder
    argv = shlex.split(_theano_read(command))
    argv = [sys.executable if a == "python" else a for a in argv]
    if argv[0] == "multigpu":
        argv = [sys.executable, "-m", "toolkit", *argv[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=clean_env())
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip(), "printed nothing"
    if argv[3:5] == ["launch", "-n"]:  # the multiprocess example: every process ends with the same parameters
        lines = done.stdout.splitlines()
        sums = [line.split("parameter checksum ")[1] for line in lines if "parameter checksum" in line]
        assert len(sums) == int(argv[5]) and len(set(sums)) == 1, done.stdout[-3000:]
        losses = [float(line.split("loss ")[1]) for line in lines if "] step " in line]
        assert len(losses) >= 2 and losses[-1] < losses[0], done.stdout[-3000:]


@pytest.mark.parametrize("name", ["compare", "models", "lengths", "bench", "bench-pytensor", "ops"])
def test_the_readme_tables_are_the_committed_results(name):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import update_readme
    finally:
        sys.path.remove(str(ROOT / "docs"))
    match = update_readme.block_pattern(name).search(README.read_text())
    assert match, f"README.md has no generated {name} block"
    assert match.group(2) == update_readme.generated(name), "run: python docs/update_readme.py"
