"""``multigpu bench``: this toolkit against native code on the same model, parameters, batches and devices.

For each device count ``n``, a fresh process with ``n`` logical devices (MirroredStrategy cannot be rebuilt with
another device count in one process, and JAX's device count is fixed at start) runs these candidates:

- ``toolkit``: :class:`~toolkit.DataParallel` on ``n`` devices, per backend, plus any other backend options a
  backend declares in its ``native.TOOLKIT_OPTIONS`` (Aesara's C linker, which has one device, at ``n = 1``);
- the natives from ``backends/<name>/native.py``: TensorFlow's MirroredStrategy custom training loop and Keras
  ``fit`` under MirroredStrategy on the same ``n`` devices; a plain ``aesara.function`` step with ``updates`` on one
  device, JAX and C linkers.

All start from the same parameters and train with SGD on the same cycle of ``steps`` batches. After a warm-up cycle
(tracing and compilation), the candidates take turns, one cycle each per round, for ``rounds`` rounds, the order
rotating every round; a candidate's step time is the median over rounds of its mean step time in a round. Then every
native's parameters are compared with the toolkit's of the same backend: having done the same steps, they must agree
to rounding, which shows the comparison is like for like.

Results (``bench.json``), schema ``multigpu-toolkit/bench`` version :data:`SCHEMA_VERSION`: ``config``, ``machine``,
``runs`` (``devices``: the process's device count, ``devices_used``: how many the candidate trains on, ``backend``,
``candidate``, ``label``, ``median_ms``, ``min_ms``, ``max_ms`` over rounds,
``warmup_s``, ``param_diff``: max |parameter - toolkit's| / max |toolkit parameter|, null for the toolkit itself) and
``ratios`` (``backend``, ``devices``, ``candidate``, ``baseline``, ``baseline_devices``, ``ratio``, ``target``: the
bound or null, ``met``: null without a target).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from toolkit.errors import ComputeError

SCHEMA = "multigpu-toolkit/bench"
SCHEMA_VERSION = 1

#: The issue's speed targets: a candidate's step time over a baseline's, at the given device counts (None: all).
#: Aesara has no native multi-device training, so its baseline is one device.
TARGETS: tuple[tuple[str, str, str, tuple[int, ...] | None, float], ...] = (
    ("tensorflow", "toolkit", "mirrored-ctl", None, 1.05),
    ("aesara", "toolkit", "function-jax", (1,), 1.05),
    ("aesara", "toolkit-c", "function-c", (1,), 1.05),
)
#: Scaling: the toolkit's step time on SCALING_DEVICES devices over one device at the same global batch.
SCALING_DEVICES, SCALING_BOUND = 4, 1.3

LABELS = {
    "toolkit": "toolkit DataParallel",
    "toolkit-c": "toolkit DataParallel, C linker",
    "mirrored-ctl": "MirroredStrategy custom loop",
    "keras-fit": "Keras fit, MirroredStrategy",
    "function-jax": "aesara.function + updates, JAX",
    "function-c": "aesara.function + updates, C",
}


class Runner(Protocol):
    def run(self, steps: int) -> float:
        """Train ``steps`` steps on the next batches of the cycle; the last step's loss."""

    def params(self) -> dict[str, np.ndarray]:
        """The parameters now, as NumPy arrays."""

    # Optional attribute ``devices_used``: how many devices it trains on, if not all of the process's.


@dataclass(frozen=True)
class Batches:
    """A cycle of equal-size batches, in training order: batch ``i`` is rows ``i*size .. (i+1)*size`` of x and y."""

    x: np.ndarray
    y: np.ndarray
    size: int

    def __len__(self) -> int:
        return len(self.y) // self.size

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[i * self.size:(i + 1) * self.size], self.y[i * self.size:(i + 1) * self.size]


def make_batches(x: np.ndarray, y: np.ndarray, size: int, count: int, seed: int, dtype: str) -> Batches:
    """``count`` batches of ``size`` rows drawn without replacement within each batch; floats cast to ``dtype``,
    integer labels to the toolkit's label dtype."""
    from toolkit.command.workloads import draw_batches
    from toolkit.training.trainer import LABEL_DTYPE

    if isinstance(x, dict):
        raise ValueError("bench supports models with one input array, not a dict of inputs")
    index = np.concatenate(draw_batches(len(y), size, count, seed))
    y = np.asarray(y)[index]
    return Batches(np.asarray(x)[index].astype(dtype), y.astype(LABEL_DTYPE) if y.dtype.kind in "iub" else
                   y.astype(dtype), size)


class _ToolkitRunner:
    def __init__(self, trainer, batches: Batches) -> None:
        self._trainer, self._batches, self._next = trainer, batches, 0

    def run(self, steps: int) -> float:
        for _ in range(steps):
            loss = self._trainer.step(*self._batches[self._next])
            self._next = (self._next + 1) % len(self._batches)
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return self._trainer.params()


def _relative_diff(params: dict, reference: dict) -> float:
    from toolkit.command.compare import _max_abs_diff

    scale = max(float(np.max(np.abs(v))) for v in reference.values()) or 1.0
    return _max_abs_diff(reference, {k: np.asarray(v) for k, v in params.items()}) / scale


def measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    """One device count's measurements (run in its own process by :func:`run_bench`)."""
    import toolkit
    from toolkit.command.workloads import load_workload
    from toolkit.registry import REGISTRY
    from toolkit.training.optim import SGD

    n, dtype, lr, steps, seed = config["devices"], config["dtype"], config["lr"], config["steps"], config["seed"]
    toolkit.use_logical_devices(n)
    workload = load_workload(config["model"])
    x_train, y_train, _, _ = workload.data(seed)
    batches = make_batches(x_train, y_train, config["batch"], steps, seed, dtype)
    runners: dict[tuple[str, str], Runner] = {}
    for name in config["backends"]:
        native = importlib.import_module(f"{REGISTRY[name].package}.native")
        backend = toolkit.get_backend(name)
        for candidate, options in native.TOOLKIT_OPTIONS.items():
            variant = toolkit.get_backend(name, **options)
            if len(variant.select_devices("all")) >= n:
                trainer = toolkit.DataParallel(workload.model, variant, n, SGD(lr), dtype=dtype, seed=seed)
                runners[(name, candidate)] = _ToolkitRunner(trainer, batches)
        initial = runners[(name, "toolkit")].params()
        for candidate, runner in native.runners(workload.model, initial, batches, backend.select_devices(n), backend,
                                                dtype, lr).items():
            runners[(name, candidate)] = runner
    warmup, times = {}, {key: [] for key in runners}
    for key, runner in runners.items():
        began = time.perf_counter()
        runner.run(steps)
        warmup[key] = time.perf_counter() - began
    keys = list(runners)
    for round_ in range(config["rounds"]):
        turn = round_ % len(keys)
        for key in keys[turn:] + keys[:turn]:
            began = time.perf_counter()
            runners[key].run(steps)
            times[key].append((time.perf_counter() - began) / steps * 1e3)
    results = []
    for (name, candidate), runner in runners.items():
        reference = runners[(name, "toolkit")].params()
        results.append({
            "devices": n, "devices_used": getattr(runner, "devices_used", n), "backend": name,
            "candidate": candidate, "label": LABELS.get(candidate, candidate),
            "median_ms": statistics.median(times[(name, candidate)]), "min_ms": min(times[(name, candidate)]),
            "max_ms": max(times[(name, candidate)]), "warmup_s": warmup[(name, candidate)],
            "param_diff": None if candidate == "toolkit" else _relative_diff(runner.params(), reference),
        })
    return results


def ratios(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every toolkit candidate over every native of its backend in the same process, and each candidate that uses
    all the process's devices over its own one-device run (scaling); with the targets of :data:`TARGETS` and
    :data:`SCALING_BOUND` where they apply."""
    found = {(r["backend"], r["candidate"], r["devices"]): r["median_ms"] for r in runs}
    out = []

    def add(backend, devices, candidate, baseline, baseline_devices, target):
        value = found[(backend, candidate, devices)] / found[(backend, baseline, baseline_devices)]
        out.append({"backend": backend, "devices": devices, "candidate": candidate, "baseline": baseline,
                    "baseline_devices": baseline_devices, "ratio": value, "target": target,
                    "met": None if target is None else value <= target})

    for backend, candidate, devices in found:
        if not candidate.startswith("toolkit"):
            continue
        for other, baseline, other_devices in found:
            if other == backend and other_devices == devices and not baseline.startswith("toolkit"):
                target = next((bound for b, c, base, counts, bound in TARGETS if (b, c, base) == (backend, candidate,
                               baseline) and (counts is None or devices in counts)), None)
                add(backend, devices, candidate, baseline, devices, target)
    used = {(r["backend"], r["candidate"], r["devices"]): r.get("devices_used", r["devices"]) for r in runs}
    for backend, candidate, devices in found:
        if devices > 1 and (backend, candidate, 1) in found and used[(backend, candidate, devices)] == devices:
            target = SCALING_BOUND if candidate == "toolkit" and devices == SCALING_DEVICES else None
            add(backend, devices, candidate, candidate, 1, target)
    return out


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    versions = {}
    for package in ("tensorflow", "keras", "aesara", "jax", "jaxlib", "numpy"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "versions": versions}


def run_bench(config: dict[str, Any], timeout: float, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every device count of ``config["devices"]``, each in a fresh process; the results dict."""
    root = str(Path(__file__).resolve().parents[2])  # the folder holding toolkit/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.getcwd(), os.environ.get("PYTHONPATH"))
                                                       if p)}
    runs = []
    for n in config["devices"]:
        if progress:
            progress(f"{n} device(s)")
        worker = {**config, "devices": n}
        command = [sys.executable, "-m", "toolkit.command.bench", json.dumps(worker)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as error:
            raise ComputeError(f"the {n}-device measurement took longer than --timeout {timeout:g} s") from error
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise ComputeError(f"the {n}-device measurement failed (exit {done.returncode}): {tail[0]}")
        runs.extend(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "config": config, "machine": machine(), "runs": runs,
            "ratios": ratios(runs)}


if __name__ == "__main__":  # a worker of run_bench: one device count, JSON in argv, JSON out on stdout's last line
    print(json.dumps(measure(json.loads(sys.argv[1]))))
