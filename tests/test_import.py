"""``import toolkit`` imports no framework, and logical devices cannot be changed once a framework has started."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends, needs_backend

FRAMEWORKS = ("tensorflow", "aesara", "pytensor", "jax", "jaxlib")


def run_python(code: str, stdin: bool = False) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (``python -c``, or piped to ``python -`` with ``stdin``), without the
    logical-device and quiet settings this process made."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "AESARA_FLAGS", "PYTENSOR_FLAGS",
                                                             "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")}
    code = textwrap.dedent(code)
    argv = [sys.executable, "-"] if stdin else [sys.executable, "-c", code]
    return subprocess.run(argv, input=code if stdin else None, capture_output=True, text=True, timeout=300, env=env)


def test_import_toolkit_imports_no_framework():
    result = run_python(f"""
        import json, sys
        import toolkit, toolkit.nn.models, toolkit.datasets, toolkit.tolerances, toolkit.backends.tensorflow
        import toolkit.backends.aesara, toolkit.backends.tensorflow.environment, toolkit.backends.aesara.environment
        import toolkit.backends.pytensor.environment
        toolkit.available_backends()
        toolkit.use_logical_devices(2)
        print(json.dumps([m for m in {FRAMEWORKS!r} if m in sys.modules]))
    """)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def public_names(module) -> list[str]:
    """A module's public names: its ``__all__``, or else the functions and classes written in it."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__]


def test_public_submodules_are_modules_and_attributes_without_a_framework():
    result = run_python(f"""
        import importlib, json, sys
        import toolkit
        toolkit.models.mlp([4, 3]); toolkit.optim.schedules.CosineDecay(0.1, 10)  # attributes, loaded on first use
        assert set(toolkit.SUBMODULES) <= set(dir(toolkit))
        import toolkit.distributed
        from toolkit.layers import dense
        from toolkit.optim import Adam
        from toolkit import layers, models, optim, distributed
        imported = []
        for name in (*toolkit.SUBMODULES, "optim.schedules"):
            module = importlib.import_module(f"toolkit.{{name}}")
            assert module.__name__ == f"toolkit.{{name}}" and module.__file__, module
            for item in getattr(module, "__all__", None) or [  # else the functions and classes written there
                    n for n, v in vars(module).items()
                    if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]:
                scope = {{}}
                exec(f"from toolkit.{{name}} import {{item}}", scope)
                assert scope[item] is getattr(module, item)
                imported.append(f"{{name}}.{{item}}")
        try:
            toolkit.no_such_thing
        except AttributeError as error:
            print(error)
        print(json.dumps(imported))
        print(json.dumps([m for m in {FRAMEWORKS!r} if m in sys.modules]))
    """)
    assert result.returncode == 0, result.stderr
    error, imported, frameworks = result.stdout.strip().splitlines()
    assert error == "module 'toolkit' has no attribute 'no_such_thing'"
    assert {"distributed.initialize", "layers.dense", "optim.Adam", "optim.schedules.CosineDecay", "workloads.Workload",
            "checkpoint.load_checkpoint", "datasets.digits"} <= set(json.loads(imported))
    assert json.loads(frameworks) == []


#: Where each public submodule's names are written (``toolkit.datasets``, ``tolerances`` and ``registry`` are
#: written where they are published).
PRESENTS = {
    "callbacks": "toolkit.training.callbacks", "checkpoint": "toolkit.training.checkpoint",
    "distributed": "toolkit.processes.distributed", "layers": "toolkit.nn.layers", "models": "toolkit.nn.models",
    "metrics": "toolkit.training.metrics", "ops": "toolkit.ops.interface", "optim": "toolkit.training.optim",
    "optim.schedules": "toolkit.training.schedules", "workloads": "toolkit.command.workloads",
}
#: Public-looking names of those modules that users are not meant to call: the backends' runtime across processes,
#: and the batch orders the commands draw.
INTERNAL = {
    "distributed": {"beacon", "bounded", "lost", "unreachable", "watched"},
    "workloads": {"draw_batches", "epoch_batches"},
}


@pytest.mark.parametrize("name", sorted(PRESENTS))
def test_a_public_submodule_gives_every_public_name_of_its_implementation(name):
    """A name added to the module where it is written (a layer, a callback, an optimizer) reaches the public module,
    as the very same object, or is declared internal above."""
    public, written = importlib.import_module(f"toolkit.{name}"), importlib.import_module(PRESENTS[name])
    missing = set(public_names(written)) - set(public.__all__) - INTERNAL.get(name, set())
    assert not missing, f"toolkit.{name} does not give {sorted(missing)} of {written.__name__}"
    assert set(toolkit.SUBMODULES) | {"optim.schedules"} >= set(PRESENTS)
    for item in public.__all__:
        if item == "schedules":  # toolkit.optim.schedules: a public module itself
            assert public.schedules is importlib.import_module("toolkit.optim.schedules")
        else:
            assert getattr(public, item) is getattr(written, item), item


def test_a_model_typed_into_stdin_trains_quietly(backend_name):
    # Functions typed into a REPL or piped through stdin have no source file; TensorFlow's AutoGraph warns about each
    # one it cannot read (8 to 16 lines per model), which the toolkit's tf.function(autograph=False) avoids.
    result = run_python(f"""
        import numpy as np
        import toolkit
        toolkit.use_logical_devices(2)
        model = toolkit.Model(lambda rng: {{"w": rng.normal(size=(4, 3))}},
                              lambda ops, p, x: ops.matmul(x, p["w"]),
                              lambda ops, out, y: -ops.sum(ops.one_hot(y, 3) * ops.log_softmax(out), axis=-1))
        trainer = toolkit.DataParallel(model, "{backend_name}", 2, toolkit.optim.SGD(0.1))
        x, y = np.random.default_rng(0).normal(size=(8, 4)), np.arange(8) % 3
        print(trainer.step(x, y) > trainer.step(x, y))
        print(trainer.backend.make_parallel(lambda ops, x: ops.relu(x), 2, x=x).shape)
    """, stdin=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "(8,", "4)"]
    assert result.stderr == ""


@needs_backend("tensorflow")
def test_logical_devices_after_tensorflow_started_is_refused_and_changes_nothing():
    result = run_python("""
        import tensorflow as tf
        tf.constant(1.0) + 1.0  # starts the runtime with one CPU device
        import toolkit
        try:
            toolkit.use_logical_devices(3)
        except RuntimeError as error:
            assert isinstance(error, toolkit.LogicalDevicesError)
            print("refused:", error)
        from toolkit.backend.logical_devices import logical_device_count
        assert logical_device_count() is None
        assert len(tf.config.list_logical_devices("CPU")) == 1
    """)
    assert result.returncode == 0, result.stderr
    assert "refused: use_logical_devices(3) came too late: TensorFlow has already started with 1" in result.stdout
    assert "at the top of the program" in result.stdout


@needs_backend(THEANO)
def test_logical_devices_after_jax_started_is_refused():
    result = run_python("""
        import jax
        jax.devices()
        import toolkit
        try:
            toolkit.use_logical_devices(3)
        except RuntimeError as error:
            print("refused:", error)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("JAX has already started with 1 CPU device(s)") == 1  # once, not once per engine


@needs_all_backends
@pytest.mark.parametrize("first", ["tensorflow", THEANO])
def test_logical_devices_reach_both_frameworks_and_stay_quiet(first):
    # Either import order: JAX, imported first, would lower TensorFlow's C++ log level for the whole process.
    result = run_python(f"""
        import toolkit
        toolkit.use_logical_devices(3)
        import numpy as np
        from toolkit.nn.models import mlp
        toolkit.get_backend("{first}")
        tf_backend, theano_backend = toolkit.get_backend("tensorflow"), toolkit.get_backend("{THEANO}")
        print([str(d) for d in tf_backend.list_devices()], [str(d) for d in theano_backend.list_devices()])
        model, rng = mlp([4, 8, 3]), np.random.default_rng(0)
        for name in ("tensorflow", "{THEANO}"):  # a sweep, as users run it: several trainers, uneven batches
            for n in (1, 3):  # 3 devices: the rows of 7 and 8 split unevenly (padding)
                trainer = toolkit.DataParallel(model, name, n, toolkit.optim.Adam(0.01))
                for size in (7, 8):
                    trainer.step(rng.normal(size=(size, 4)), rng.integers(0, 3, size))
        toolkit.get_backend("{THEANO}", linker="c")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['cpu:0', 'cpu:1', 'cpu:2'] ['cpu:0', 'cpu:1', 'cpu:2']"
    # No TensorFlow/oneDNN banners, no CUDA-stub lines, no Aesara BLAS warnings in normal use.
    assert result.stderr == ""
