"""The documentation's code runs as written: every python block of README.md and of every page under docs/, in
order per page, on a CPU-only machine; the examples' usage lines too; and the generated tables hold exactly what
the committed results give.

Each page is a program of its own, as a reader would copy it, run in a fresh namespace and a scratch folder of its
own. To keep the test's time flat, pages share interpreters: the pages that ask for the same number of logical
devices (``toolkit.use_logical_devices(n)``, which must come before any framework starts, so one count per
process) run one after the other in one child interpreter, where a framework imported and a function compiled by
one page serve the next. ``<!-- readme-test: new process -->`` before a block starts a fresh interpreter for it and
what follows on its page, as a separate program would be (a job of several processes, say).

A block that shows an error says so in a comment on the statement's first line that starts with the error's class
name (``toolkit.parse_device("tpu:0")   # DeviceParseError: cannot parse device 'tpu:0'; ...``): the test checks
that this error is raised there and that its message starts with the text shown (up to a trailing "..."). Failures
name the page and line (``docs/guides/devices.md line 43``); every page of an interpreter runs even when one fails.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import THEANO, needs_all_backends, needs_backend

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Pages rendered from docstrings, with no code of their own to run.
REFERENCE = DOCS / "reference"
BLOCK = re.compile(r"(?:<!-- readme-test: (?P<directive>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)
#: A program's count of logical devices: the first call that is not itself shown failing.
LOGICAL_DEVICES = re.compile(r"^[^#\n]*use_logical_devices\((\d+)\)(?![^\n]*#\s*\w*Error)", re.M)

#: Run in the child interpreter: runs each page's blocks statement by statement in a namespace and a folder of the
#: page's own, checking each statement marked with an error. Reports page line numbers; runs every page, then exits
#: non-zero if any failed; prints each page's CPU seconds (what the page costs CI).
RUNNER = r'''
import ast, json, os, re, sys, time, traceback
failures, checked, seconds = [], 0, {}
for page in json.loads(sys.stdin.read()):
    namespace, started = {"__name__": "__main__"}, time.process_time()
    os.makedirs(page["folder"], exist_ok=True)
    os.chdir(page["folder"])
    try:
        for start, code in page["blocks"]:
            lines = code.splitlines()
            for node in ast.parse(code).body:
                first = lines[node.lineno - 1]
                source = "\n".join(lines[node.lineno - 1:node.end_lineno])
                where = f"{page['name']} line {start + node.lineno}: {first.strip()}"
                shown = re.search(r"#\s*(?P<name>[A-Z]\w*(?:Error|Exception))\b:?\s*(?P<text>.*)$", first)
                try:
                    exec(compile(source, where, "exec"), namespace)
                except Exception as error:
                    names = [c.__name__ for c in type(error).__mro__]
                    if shown is None or shown["name"] not in names:
                        traceback.print_exc()
                        raise AssertionError(f"unexpected {type(error).__name__} at {where}") from None
                    text = shown["text"].split("...")[0].strip()
                    if text and not str(error).startswith(text):
                        raise AssertionError(f"{where}: the message {str(error)!r} does not start with {text!r}")
                    checked += 1
                else:
                    if shown is not None:
                        raise AssertionError(f"{where}: {shown['name']} was shown but nothing was raised")
    except AssertionError as failure:
        print(failure, file=sys.stderr)
        failures.append(str(failure))
    seconds[page["name"]] = round(time.process_time() - started, 1)
if failures:
    sys.exit("\n".join(failures))
print(json.dumps({"errors_checked": checked, "cpu_seconds": seconds}))
'''


@dataclass
class Program:
    """Blocks of one page that run in one namespace: each block as (lines of the page before its code, code)."""

    page: str
    blocks: list[tuple[int, str]] = field(default_factory=list)
    new_process: bool = False

    @property
    def devices(self) -> int | None:
        found = LOGICAL_DEVICES.search("\n".join(code for _, code in self.blocks))
        return int(found[1]) if found else None


def pages() -> list[Path]:
    """README.md, then every page under docs/ but the API reference's, in path order."""
    found = sorted(p for p in DOCS.rglob("*.md") if REFERENCE not in p.parents)
    return [ROOT / "README.md", *found]


def page_programs(path: Path) -> list[Program]:
    """A page's python blocks as programs: one, and one more after each ``new process`` directive."""
    text, name = path.read_text(), path.relative_to(ROOT).as_posix()
    programs = [Program(name)]
    for match in BLOCK.finditer(text):
        directive = (match["directive"] or "").strip()
        if directive == "new process":
            programs.append(Program(name, new_process=True))
        elif directive:
            raise AssertionError(f"{name}: unknown readme-test directive {directive!r}")
        programs[-1].blocks.append((text.count("\n", 0, match.start("code")), match["code"]))
    return [p for p in programs if p.blocks]


def interpreters() -> list[list[Program]]:
    """The programs grouped by the interpreter that runs them: the pages' first programs by their count of logical
    devices (in page order), and each program after a ``new process`` directive alone."""
    shared: dict[int | None, list[Program]] = {}
    alone: list[list[Program]] = []
    for path in pages():
        for program in page_programs(path):
            if program.new_process:
                alone.append([program])
            else:
                shared.setdefault(program.devices, []).append(program)
    return [*shared.values(), *alone]


def _interpreter_id(programs: list[Program]) -> str:
    return "+".join(Path(p.page).stem + (f"@{p.blocks[0][0]}" if p.new_process else "") for p in programs)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}


def test_the_documentation_has_code_to_run():
    programs = [program for group in interpreters() for program in group]
    assert len(programs) >= 2 and sum(len(p.blocks) for p in programs) >= 10
    assert any(p.page == "README.md" for p in programs), "README.md has no python block"


@needs_all_backends
@pytest.mark.parametrize("programs", interpreters(), ids=_interpreter_id)
def test_documentation_code_runs_as_written(programs, tmp_path):
    """As written with TensorFlow and Aesara; where PyTensor is this environment's Theano-family backend, with
    ``"aesara"`` read as ``"pytensor"`` (the pages say the two are the same backend on either engine)."""
    pages = [{"name": p.page, "folder": str(tmp_path / f"{index}-{Path(p.page).stem}"),
              "blocks": [(start, code.replace('"aesara"', f'"{THEANO}"')) for start, code in p.blocks]}
             for index, p in enumerate(programs)]
    done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(pages),
                          capture_output=True, text=True, timeout=900, cwd=tmp_path, env=clean_env())
    assert done.returncode == 0, done.stderr[-6000:]
    assert "errors_checked" in done.stdout.splitlines()[-1]


def usage_lines() -> list:
    """Every command an example's docstring shows, with the backends it needs. A line that names Aesara runs on this
    environment's Theano-family backend, as the documentation's programs do."""
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


def _update_readme():
    sys.path.insert(0, str(DOCS))
    try:
        import update_readme
    finally:
        sys.path.remove(str(DOCS))
    return update_readme


@pytest.mark.parametrize("name", ["compare", "models", "lengths", "bench", "bench-pytensor", "ops"])
def test_the_generated_tables_are_the_committed_results(name):
    update_readme = _update_readme()
    page = update_readme.page_holding(name)  # raises where no page, or more than one, holds the block
    match = update_readme.block_pattern(name).search(page.read_text())
    assert match.group(2) == update_readme.generated(name), "run: python docs/update_readme.py"
