"""The wheel installs one top-level name, ``toolkit`` (the backends inside it, as ``toolkit.backends``), and an
installed wheel trains on two devices from outside the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools leaves build/ in the source tree, and a stale build/ would leak into the wheel.
    source = tmp_path_factory.mktemp("source") / "multigpu-toolkit"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv*", ".nox", "build", "dist", "results",
                                                                "*.egg-info", "__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (found,) = out.glob("multigpu_toolkit-*.whl")
    return found


def test_the_wheel_has_one_top_level_name_and_every_module(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == ["toolkit"]
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"toolkit"}
    sources = {f"toolkit/{p.relative_to(ROOT / 'toolkit')}" for p in (ROOT / "toolkit").rglob("*.py")}
    sources |= {f"toolkit/backends/{p.relative_to(ROOT / 'backends')}" for p in (ROOT / "backends").rglob("*.py")}
    assert sources - set(names) == set()  # no module of the repository is left out of the wheel


def test_only_the_aesara_extra_caps_numpy(wheel):
    """Aesara 2.9.4 needs NumPy 1; PyTensor 3 and current jax need NumPy 2: the base requirement takes either, so that
    ``pip install ".[tensorflow,pytensor]"`` gets NumPy 2."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [line.split(":", 1)[1].strip() for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    numpy = sorted(r.replace(" ", "") for r in requires if r.replace(" ", "").startswith("numpy"))
    assert numpy == ['numpy<2;extra=="aesara"', "numpy>=1.26"]
    assert any(r.startswith("pytensor") and 'extra == "pytensor"' in r for r in requires)


def test_an_installed_wheel_trains_on_two_devices_outside_the_checkout(wheel, backend_name, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # The frameworks come from this environment's site-packages, added as plain paths: their .pth files (among them
    # this checkout's editable install) are not run, so `toolkit` can only come from the installed wheel.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "frameworks.pth").write_text("\n".join(sorted(ours)) + "\n")
    code = textwrap.dedent(f"""
        import numpy as np
        import toolkit
        assert toolkit.__file__.startswith({str(venv)!r}), toolkit.__file__
        toolkit.use_logical_devices(2)
        trainer = toolkit.DataParallel(toolkit.models.mlp([4, 8, 3]), "{backend_name}", 2, toolkit.optim.SGD(0.1))
        rng = np.random.default_rng(0)
        x, y = rng.normal(size=(6, 4)), rng.integers(0, 3, 6)
        first = trainer.step(x, y)
        print(trainer.backend.__module__, [str(d) for d in trainer.devices], trainer.step(x, y) < first)
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"toolkit.backends.{backend_name}.backend", "['cpu:0',", "'cpu:1']", "True"]
