"""``multigpu bench``'s processes: the machine's peak and each model at each device count measured in a fresh worker
process (``python -m toolkit.command.bench``, :mod:`toolkit.command.bench.measure`), then the results gathered with
their ratios and fractions of peak."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.command.bench.schema import SCHEMA, SCHEMA_VERSION
from toolkit.command.bench.statistics import cross_backend, fractions, inputs, ratios
from toolkit.errors import ComputeError


def machine() -> dict[str, Any]:
    """What the numbers were measured on.

    Returns:
        ``{"cpu", "cores", "platform", "python", "versions": {package: version}}`` for the installed frameworks and
        NumPy.
    """
    versions = {}
    for package in ("tensorflow", "keras", "aesara", "pytensor", "jax", "jaxlib", "numpy"):
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
    """Measure the machine's matmul peak, then every model of ``config["models"]`` at every device count of
    ``config["devices"]``, each in a fresh process.

    Args:
        config: the command's options (``models``, ``backends``, ``devices``, ``dtype``, ``lr``, ``batch``, ``steps``,
            ``rounds``, ``seed``, ``peak_size``, ``inputs``: whether to measure the input candidates), also written
            to the results.
        timeout: seconds allowed for each process.
        progress: called after each process with what it measured, in words (1 + models x device counts calls).

    Returns:
        The results (:mod:`toolkit.command.bench.schema`), each run with its achieved GFLOP/s and their fraction of
        the best peak, the ratios, the cross-backend ratios and the fractions of peak.

    Raises:
        ComputeError: a process failed or took longer than ``timeout``.
    """
    from toolkit.command.workloads import load_workload

    root = str(Path(__file__).resolve().parents[3])  # the folder holding toolkit/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.getcwd(), os.environ.get("PYTHONPATH"))
                                                       if p),
           "TF_ENABLE_ONEDNN_OPTS": "1"}  # TensorFlow at its best on x86 (see the module's docstring)

    def worker(request: dict[str, Any], what: str) -> Any:
        command = [sys.executable, "-m", "toolkit.command.bench", json.dumps(request)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as error:
            raise ComputeError(f"the {what} took longer than --timeout {timeout:g} s") from error
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise ComputeError(f"the {what} failed (exit {done.returncode}): {tail[0]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    peak = worker({**config, "devices": 1, "peak": True}, "matmul peak measurement")
    if progress:
        progress("measured the machine's matmul peak")
    best = max(peak["gflops"].values())
    runs = []
    for model in config["models"]:
        workload = load_workload(model)
        sizes = {"batch": config.get("batch") or workload.bench_batch,
                 "steps": config.get("steps") or workload.bench_steps}
        for n in config["devices"]:
            runs.extend(worker({**config, **sizes, "model": model, "devices": n}, f"{model} {n}-device measurement"))
            if progress:
                progress(f"measured {model} on {n} device(s)")
    for run in runs:
        run["gflops"] = run["gflop_per_step"] / (run["median_ms"] / 1e3)
        run["peak_fraction"] = run["gflops"] / best
        alone = run.get("products_alone_ms")
        run["products_alone_gflops"] = None if alone is None else run["gflop_per_step"] / (alone / 1e3)
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "config": config, "machine": machine(), "peak": peak,
            "runs": runs, "ratios": ratios(runs), "cross_backend": cross_backend(runs),
            "fractions": fractions(runs, best), "inputs": inputs(runs)}
