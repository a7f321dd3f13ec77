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


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_imports(path: Path, name: str, is_package: bool, known=None) -> list[str]:
    """``module.name`` for each private name (one leading underscore) ``path`` takes from another toolkit module:
    imported (``from m import _x``), or read from a module it imported (``m._x``)."""
    known = modules() if known is None else known
    here = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    found, bound = [], {}  # bound: local names of imported toolkit modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update({alias.asname: alias.name for alias in node.names if alias.asname and alias.name in known})
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] == "toolkit":
                found += [f"{base}.{a.name}:{node.lineno}" for a in node.names if _private(a.name)]
                bound.update({a.asname or a.name: f"{base}.{a.name}" for a in node.names
                              if f"{base}.{a.name}" in known})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr) \
                and bound.get(node.value.id, name) != name:
            found.append(f"{bound[node.value.id]}.{node.attr}:{node.lineno}")
    return found


def test_no_module_imports_another_modules_private_name():
    known = modules()
    found = {name: hits for name, (path, is_package) in known.items()
             if (hits := _private_imports(path, name, is_package, known))}
    assert not found, f"private names imported from other modules (make them public, or move them): {found}"


def test_the_private_import_check_finds_one(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from toolkit.keras.translation import Call, _Hidden\nfrom .ops import __all__\n"
                      "from toolkit.keras import losses as kl\nkl.compile_config(m), kl._private_one(m)\n")
    assert _private_imports(source, "toolkit.keras.m", False) == ["toolkit.keras.translation._Hidden:1",
                                                                  "toolkit.keras.losses._private_one:4"]


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


#: The variables' write primitives, and the modules that define them (there they are the variables' own).
WRITE_PRIMITIVES = ("store", "hold", "defer", "_write")
VARIABLE_MODULES = {REPO / "toolkit" / "placement" / "variables.py", STATE_OWNER,
                    *(REPO / "backends").glob("*/variables.py")}


def _primitive_writes(path: Path) -> list[str]:
    """Each call in ``path`` of a variable's write primitive (``v.store(x)``, ``v.hold(x)``, ``v.defer(f)``, a traced
    ``v.value.assign(x)``) or assignment of its value (``v._value = x``) outside a function the module hands to
    the state's commit as its ``write=`` primitive."""
    tree = ast.parse(path.read_text())
    writers = {keyword.value.id for node in ast.walk(tree) if isinstance(node, ast.Call)
               for keyword in node.keywords if keyword.arg == "write" and isinstance(keyword.value, ast.Name)}
    found = []

    def visit(node, function: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        primitive = call and ast.unparse(node.func.value) != "self" and (node.func.attr in WRITE_PRIMITIVES or (
            node.func.attr == "assign" and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "value"))
        assigned = isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Attribute) and target.attr in ("_value", "_pending")
            and ast.unparse(target.value) != "self" for target in node.targets)  # an object's own: not a variable
        if (primitive or assigned) and function not in writers:
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:60]}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def test_variables_are_written_only_through_the_state_owner():
    writes = [hit for path, _ in modules().values() if path not in VARIABLE_MODULES for hit in _primitive_writes(path)]
    assert not writes, f"variables written outside TrainerState.commit's write primitives: {writes}"


def test_the_primitive_write_check_finds_one(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def put(v, x):\n    v.store(x)\n\nstate.commit(p, write=put)\nv.hold(1)\nv._value = 2\n"
                      "def other(r, x):\n    r.value.assign(x)\n    self._write(x)\n")
    assert [hit.split(": ")[1] for hit in _primitive_writes(source)] == ["v.hold(1)", "v._value = 2",
                                                                         "r.value.assign(x)"]


def test_no_source_file_is_longer_than_the_limit():
    long = {str(path.relative_to(REPO)): n for path, _ in modules().values()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines (split them by job): {long}"


def test_backend_docstrings_keep_no_timings():
    """Timings and their history belong on the benchmarks page: a backend's docstrings say why, not how fast."""
    timing = re.compile(r"\b\d+(\.\d+)?\s?(ms\b|µs\b|us\b|% (more|less|faster|slower)|x (faster|slower))")
    found = []
    for path in sorted((REPO / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                found += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in timing.finditer(doc)]
    assert not found, f"timings in backend docstrings (move them to docs/guides/benchmarks.md): {found}"
