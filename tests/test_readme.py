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

The examples' usage lines share interpreters the same way: the ``python examples/...`` lines of one backend and
device count run one after the other in one child interpreter, each as its script run as ``__main__`` with its own
argv, folder, exit status and output; the ``multigpu launch`` lines (one per backend) run as the programs they are.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import PARITY, THEANO, needs_all_backends, needs_backend

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


#: Run in the child interpreter: runs each usage line's example as ``python examples/<name>.py ...`` would (its
#: folder on sys.path, sys.argv as written, as ``__main__``), each in a folder of its own with its output captured,
#: and writes each line's exit status and output to the file named by the job; every line runs even when one fails.
LINES_RUNNER = r"""
import contextlib, io, json, os, runpy, sys, traceback
import toolkit
job = json.loads(sys.stdin.read())
toolkit.use_logical_devices(job["devices"])  # the lines' count; each example's own call then finds it made
sys.path.insert(0, job["examples"])
results = []
for line in job["lines"]:
    os.chdir(line["folder"])
    out, err, status = io.StringIO(), io.StringIO(), 0
    sys.argv = line["argv"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(line["argv"][0], run_name="__main__")
        except SystemExit as exit:  # as the interpreter reads it: None is 0, a message goes to stderr with 1
            status = exit.code
            if not isinstance(status, int) and status is not None:
                print(status, file=sys.stderr)
                status = 1
        except BaseException:
            traceback.print_exc()
            status = 1
    results.append({"status": status or 0, "stdout": out.getvalue(), "stderr": err.getvalue()})
    with open(job["results"], "w") as file:  # after each line, so a crash still leaves the lines before it
        json.dump(results, file)
"""


@dataclass
class UsageLine:
    """A command an example's docstring shows, as written, and the Theano-family backend read in."""

    example: str
    command: str

    @property
    def argv(self) -> list[str]:
        return shlex.split(_theano_read(self.command))

    @property
    def backend(self) -> str | None:
        found = re.search(r"--backend (\w+)", self.command)
        return _theano_read(found[1]) if found else None

    @property
    def devices(self) -> int:
        found = re.search(r"--devices (\d+)", self.command)
        return int(found[1]) if found else _examples_default_devices()

    @property
    def in_process(self) -> bool:
        """A single-backend ``python examples/...`` line: it runs in the interpreter its backend and device count
        share. The others (``multigpu launch``, a line for every backend) run as the programs they are."""
        return self.argv[0] == "python" and self.backend is not None


@functools.cache
def _examples_default_devices() -> int:
    """examples/_cli.py's ``--devices`` default: a line that gives none runs on that many logical devices."""
    spec = importlib.util.spec_from_file_location("_examples_cli", ROOT / "examples" / "_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports toolkit only, no framework
    return module.parser("-").get_default("devices")


def all_usage_lines() -> list[UsageLine]:
    """Every command an example's docstring shows. A line that names Aesara runs on this environment's Theano-family
    backend, as the documentation's programs do."""
    found = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        doc = path.read_text().split('"""')[1]
        for line in doc.splitlines():
            if line.startswith("    ") and re.match(r"\s+(python|multigpu) ", line):
                found.append(UsageLine(path.stem, line.strip()))
    return found


def usage_line_groups() -> list:
    """The usage lines grouped by the interpreter that runs them: the in-process lines by backend and count of
    logical devices (the framework's import, seconds of CPU each, made once per group), every other line alone."""
    shared: dict[tuple[str, int], list[UsageLine]] = {}
    alone: list[list[UsageLine]] = []
    for line in all_usage_lines():
        if line.in_process:
            shared.setdefault((line.backend, line.devices), []).append(line)
        else:
            alone.append([line])
    params = []
    for key, lines in shared.items():
        params.append(pytest.param(lines, marks=needs_backend(key[0]),
                                   id=f"{key[0]}@{key[1]}dev:" + "+".join(line.example for line in lines)))
    for (line,) in alone:
        mark = needs_backend(line.backend) if line.backend else needs_all_backends
        params.append(pytest.param([line], marks=mark, id=f"{line.example}:{line.command.split('--', 1)[-1]}"))
    return params


def _theano_read(text: str) -> str:
    return re.sub(r"\baesara\b", THEANO, text)


def test_every_backend_has_a_usage_line_run_as_a_program():
    """The in-process lines share an interpreter; the command line itself is still run, for each backend, by a line
    that runs as a program of its own (the multiprocess example under ``multigpu launch``)."""
    lines = all_usage_lines()
    assert any(line.in_process for line in lines), "no line runs in a shared interpreter: the grouping is unused"
    for backend in PARITY:
        assert any(not line.in_process and line.backend == backend for line in lines), \
            f"no example's usage line runs as a program on {backend}"


@pytest.mark.parametrize("lines", usage_line_groups())
def test_example_usage_lines_run_as_written(lines, tmp_path):
    """As written; where PyTensor is this environment's Theano-family backend, with ``aesara`` read as ``pytensor``.
    Each line must exit with status 0 and print something, and an in-process one nothing on stderr; a failure
    names the line."""
    if lines[0].in_process:
        results = _run_in_one_interpreter(lines, tmp_path)
    else:
        results = [_run_as_a_program(lines[0], tmp_path)]
    failures = []
    for line, (status, stdout, stderr) in zip(lines, results):
        if status != 0:
            failures.append(f"{line.command}: exit status {status}\n{stderr[-4000:]}")
        elif not stdout.strip():
            failures.append(f"{line.command}: printed nothing")
        elif line.in_process and stderr:  # the example's own stderr (warnings among it), captured apart
            failures.append(f"{line.command}: printed on stderr\n{stderr[-4000:]}")
        elif line.argv[1:3] == ["launch", "-n"]:  # the multiprocess example: every process ends with the same
            out = stdout.splitlines()  # parameters, and its loss went down
            sums = [text.split("parameter checksum ")[1] for text in out if "parameter checksum" in text]
            losses = [float(text.split("loss ")[1]) for text in out if "] step " in text]
            if not (len(sums) == int(line.argv[3]) and len(set(sums)) == 1 and len(losses) >= 2
                    and losses[-1] < losses[0]):
                failures.append(f"{line.command}: the processes' checksums or losses are wrong\n{stdout[-3000:]}")
    assert not failures, "\n\n".join(failures)


def _scratch(tmp_path: Path) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the line's relative path, from a scratch folder
    return tmp_path


def _run_as_a_program(line: UsageLine, tmp_path: Path) -> tuple[int, str, str]:
    argv = [sys.executable if a == "python" else a for a in line.argv]
    if argv[0] == "multigpu":
        argv = [sys.executable, "-m", "toolkit", *argv[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=_scratch(tmp_path),
                          env=clean_env())
    return done.returncode, done.stdout, done.stderr


def _run_in_one_interpreter(lines: list[UsageLine], tmp_path: Path) -> list[tuple[int, str, str]]:
    results = tmp_path / "results.json"
    job = {"devices": lines[0].devices, "examples": str(ROOT / "examples"), "results": str(results),
           "lines": [{"argv": line.argv[1:], "folder": str(_scratch(tmp_path / f"{index}-{line.example}"))}
                     for index, line in enumerate(lines)]}
    done = subprocess.run([sys.executable, "-c", LINES_RUNNER], input=json.dumps(job), capture_output=True,
                          text=True, timeout=600 * len(lines), cwd=tmp_path, env=clean_env())
    found = json.loads(results.read_text()) if results.exists() else []
    ran = [(r["status"], r["stdout"], r["stderr"]) for r in found]
    crashed = f"the interpreter ended (status {done.returncode}) before this line finished\n{done.stderr[-4000:]}"
    return ran + [(done.returncode or 1, "", crashed)] * (len(lines) - len(ran))


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
