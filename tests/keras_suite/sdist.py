"""Keras' own op tests, fetched at test time: the sdist of the installed Keras version (the wheel has no tests) is
downloaded once into a cache directory, and its ``*_test.py`` files are unpacked there. Nothing is copied into the
repository.

The unpacked tests import each other as Keras modules (``nn_test.py`` takes its NumPy references from
``keras.src.layers.convolutional.conv_test``): :class:`KerasTestFinder` serves every ``keras.src.*_test`` module
from the cache, beside the installed Keras.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

#: The test files the suite runs, relative to the sdist's root.
TEST_FILES = ("keras/src/ops/numpy_test.py", "keras/src/ops/nn_test.py", "keras/src/ops/math_test.py",
              "keras/src/ops/core_test.py")
#: The classes run in those files (issue 27): every ``*CorrectnessTest`` (values against NumPy) and these.
EXTRA_CLASSES = ("DotProductAttentionGQATest", "LogsumexpTest")
#: Where the sdist is kept: ``$KERAS_SUITE_CACHE``, else ``.nox/_keras-sdist`` in the repository (beside nox's
#: environments, ignored by git, pytest and ruff).
CACHE_ENV = "KERAS_SUITE_CACHE"
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".nox" / "_keras-sdist"


def keras_version() -> str:
    """The installed Keras version (from its metadata: Keras is not imported)."""
    try:
        return importlib.metadata.version("keras")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("keras is not installed in this environment: pip install keras (the suite runs the tests of "
                         "the installed version)") from None


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def unpacked_tests(version: str | None = None, cache: Path | None = None) -> Path:
    """The root of the unpacked tests of Keras ``version`` (default: the installed one), downloading the sdist with
    pip the first time (``pip download --no-deps --no-binary :all: keras==<version>``)."""
    version = version or keras_version()
    cache = cache or cache_dir()
    root = cache / f"keras-{version}"
    if all((root / name).is_file() for name in TEST_FILES):
        return root
    archive = cache / f"keras-{version}.tar.gz"
    if not archive.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        print(f"keras-ops: downloading the Keras {version} sdist (its tests) into {cache}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"keras=={version}", "--dest", str(cache)], check=True)
    unpack_tests(archive, root)
    return root


def unpack_tests(archive: Path, root: Path) -> None:
    """Unpack every ``keras/src/**/*_test.py`` of the sdist ``archive`` under ``root`` (the other files are the
    installed Keras'), and a ``pytest.ini`` that makes ``root`` pytest's root directory."""
    prefix = archive.name[:-len(".tar.gz")] + "/"
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name[len(prefix):] if member.name.startswith(prefix) else ""
            if not (member.isfile() and name.startswith("keras/src/") and name.endswith("_test.py")):
                continue
            if ".." in Path(name).parts:
                raise ValueError(f"{archive}: unexpected member path {member.name!r}")
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
    missing = [name for name in TEST_FILES if not (root / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{archive} lacks {missing}: not a Keras 3 sdist with its tests")
    (root / "pytest.ini").write_text("[pytest]\n")


def suite_classes(root: Path) -> dict[str, list[str]]:
    """``{test file: [class names]}``: the classes the suite runs in each file of :data:`TEST_FILES`."""
    classes = {}
    for name in TEST_FILES:
        found = re.findall(r"^class (\w+)\(", (root / name).read_text(), flags=re.MULTILINE)
        classes[name] = [c for c in found if c.endswith("CorrectnessTest") or c in EXTRA_CLASSES]
    return classes


class KerasTestFinder(importlib.abc.MetaPathFinder):
    """Finds ``keras.src.<...>.<name>_test`` modules among the unpacked tests under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def find_spec(self, fullname, path=None, target=None):
        if not (fullname.startswith("keras.src.") and fullname.endswith("_test")):
            return None
        location = self.root.joinpath(*fullname.split(".")).with_suffix(".py")
        if not location.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, location)

    @classmethod
    def install(cls, root: Path) -> None:
        if not any(isinstance(f, cls) for f in sys.meta_path):
            sys.meta_path.insert(0, cls(root))
