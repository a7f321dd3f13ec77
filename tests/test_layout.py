"""The code's layout holds (docs/development.md's folder map): the public import paths stay where users find them,
no module imports another module's private name, no module writes a trainer's private attributes but the owner of
its state, and no source file grows past :data:`MAX_LINES`. Reads the sources, or imports only the toolkit: no
framework starts."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import toolkit
from tests.test_import_cycles import modules

REPO = Path(__file__).resolve().parent.parent
#: The longest a source file of toolkit/ or backends/ may be: past it a file has more than one job (STYLE.md).
MAX_LINES = 450

#: What users import, as the README, the guides and the API reference write it, and where each is written now.
PUBLIC_PATHS = {
    "toolkit.Ops": "toolkit.ops.interface.Ops",
    "toolkit.ops.Ops": "toolkit.ops.interface.Ops",
    "toolkit.ops.Tensor": "toolkit.ops.tensor.Tensor",
    "toolkit.from_keras": "toolkit.keras.importer.from_keras",
    "toolkit.to_keras": "toolkit.keras.importer.to_keras",
    "toolkit.Backend": "toolkit.backend.interface.Backend",
    "toolkit.get_backend": "toolkit.backend.registry.get_backend",
    "toolkit.available_backends": "toolkit.backend.registry.available_backends",
    "toolkit.registry.get_backend": "toolkit.backend.registry.get_backend",
    "toolkit.use_logical_devices": "toolkit.backend.logical_devices.use_logical_devices",
    "toolkit.Model": "toolkit.nn.model.Model",
    "toolkit.State": "toolkit.nn.model.State",
    "toolkit.layers.dense": "toolkit.nn.layers.core.dense",
    "toolkit.models.mlp": "toolkit.nn.models.mlp",
    "toolkit.models.sparse_softmax_cross_entropy": "toolkit.nn.models.sparse_softmax_cross_entropy",
    "toolkit.metrics.Metric": "toolkit.training.metrics.Metric",
    "toolkit.callbacks.EarlyStopping": "toolkit.training.callbacks.EarlyStopping",
    "toolkit.checkpoint.load_checkpoint": "toolkit.training.checkpoint.load_checkpoint",
    "toolkit.optim.Adam": "toolkit.training.optim.Adam",
    "toolkit.DataParallel": "toolkit.training.data_parallel.DataParallel",
    "toolkit.distributed.initialize": "toolkit.processes.distributed.initialize",
    "toolkit.workloads.Workload": "toolkit.command.workloads.Workload",
}


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("public", sorted(PUBLIC_PATHS))
def test_public_import_paths_stay(public):
    assert _resolve(public) is _resolve(PUBLIC_PATHS[public])


def test_every_public_submodule_gives_its_names():
    for name in toolkit.SUBMODULES:
        module = importlib.import_module(f"toolkit.{name}")
        assert getattr(toolkit, name) is module
        for exported in getattr(module, "__all__", ()):
            assert hasattr(module, exported), f"toolkit.{name}.__all__ names {exported}, which it lacks"
    for name in toolkit.__all__:
        assert hasattr(toolkit, name), name


def _private_imports(path: Path, name: str, is_package: bool) -> list[str]:
    """``module.name`` for each private name (one leading underscore) ``path`` imports from another toolkit module."""
    here = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] == "toolkit":
                found += [f"{base}.{a.name}:{node.lineno}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_name():
    found = {name: hits for name, (path, is_package) in modules().items()
             if (hits := _private_imports(path, name, is_package))}
    assert not found, f"private names imported from other modules (make them public, or move them): {found}"


def test_the_private_import_check_finds_one(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from toolkit.keras.translation import Call, _Hidden\nfrom .ops import __all__\n")
    assert _private_imports(source, "toolkit.keras.m", False) == ["toolkit.keras.translation._Hidden:1"]


#: The trainer's state (its parameters, optimizer and model state, counts, RNG, fit progress) is written by
#: toolkit/training/state.py alone: an assignment to one of these attributes of anything but ``self`` elsewhere is
#: a second writer.
TRAINER_STATE = ("training_state", "_params", "_state", "_model_state", "_fit_progress", "step_count",
                 "skipped_steps", "epoch_count", "rng", "seed")
#: The one module that writes them.
STATE_OWNER = REPO / "toolkit" / "training" / "state.py"


#: The trainer's own classes: there ``self`` is the trainer, so a write of ``self.<state>`` is a second writer too.
TRAINER_MODULES = {REPO / "toolkit" / "training" / name for name in ("trainer.py", "trainer_variables.py",
                                                                      "data_parallel.py", "model_parallel.py",
                                                                      "evaluation.py")}


def _state_writes(path: Path, trainer_class: bool = False) -> list[str]:
    """Each assignment in ``path`` to a trainer's state attribute: ``trainer.rng = ...``, ``trainer._params[name] =
    ...`` (an item of it too), ``trainer.step_count += 1``; of ``self`` too where ``trainer_class``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        while targets:
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets += target.elts
                continue
            while isinstance(target, (ast.Attribute, ast.Subscript)):  # a.b[k].c = ...: c, then b, then a
                if isinstance(target, ast.Attribute) and target.attr in TRAINER_STATE:
                    made = isinstance(node, ast.Assign) and ast.unparse(node.value).startswith("TrainerState(")
                    if not (made and ast.unparse(target) == "self.training_state") and (
                            trainer_class or ast.unparse(target.value) != "self"):
                        found.append(f"{path.name}:{node.lineno}: {ast.unparse(target)}")
                    break
                target = target.value
    return found


def test_only_the_state_owner_writes_a_trainers_state():
    writes = [hit for path, _ in modules().values() if path != STATE_OWNER
              for hit in _state_writes(path, path in TRAINER_MODULES)]
    assert not writes, f"the trainer's state written outside {STATE_OWNER.name}: {writes}"


def test_the_state_write_check_finds_one(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("trainer.rng = rng\ntrainer._params['w'] = 1\nself.rng = 2\nx.step_count += 1\n"
                      "trainer.rng.bit_generator.state = s\na, trainer.seed = 1, 2\nself.other = 3\n"
                      "trainer.training_state.params = {}\nself.training_state = TrainerState(0)\n")
    assert [hit.split(": ")[1] for hit in _state_writes(source)] == ["trainer.rng", "trainer._params", "x.step_count",
                                                                     "trainer.rng", "trainer.seed",
                                                                     "trainer.training_state"]
    assert len(_state_writes(source, trainer_class=True)) == 7  # self.rng too; the owner made in __init__ is not


def test_no_source_file_is_longer_than_the_limit():
    long = {str(path.relative_to(REPO)): n for path, _ in modules().values()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines (split them by job): {long}"


def test_backend_docstrings_keep_no_timings():
    """Timings and their history belong on the benchmarks page: a backend's docstrings say why, not how fast."""
    timing = re.compile(r"\b\d+(\.\d+)?\s?(ms|µs|us)\b")
    found = []
    for path in sorted((REPO / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                found += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in timing.finditer(doc)]
    assert not found, f"timings in backend docstrings (move them to docs/guides/benchmarks.md): {found}"
