"""``multigpu bench``: this toolkit against native code on the same model, parameters, batches and devices.

For each device count ``n``, a fresh process with ``n`` logical devices (MirroredStrategy cannot be rebuilt with
another device count in one process, and JAX's device count is fixed at start) runs these candidates:

- ``toolkit``: :class:`~toolkit.DataParallel` on ``n`` devices, per backend, plus any other backend options a
  backend declares in its ``native.TOOLKIT_OPTIONS`` (Aesara's C linker, which has one device, at ``n = 1``);
- the natives from ``backends/<name>/native.py``: TensorFlow's MirroredStrategy custom training loop and Keras
  ``fit`` under MirroredStrategy on the same ``n`` devices, and at ``n = 1`` a plain ``tf.function`` step without
  and with ``jit_compile=True``; a plain ``aesara.function`` step with ``updates`` on one
  device, JAX and C linkers.

All start from the same parameters and train with SGD on the same cycle of ``steps`` batches. After a warm-up cycle
(tracing and compilation), the candidates take turns, one cycle each per round, for ``rounds`` rounds, the order
rotating every round; a candidate's step time is the median over rounds of its mean step time in a round. Then every
native's parameters are compared with the toolkit's of the same backend: having done the same steps, they must agree
to rounding, which shows the comparison is like for like.

A ratio is reported with its spread: a bootstrap interval over the rounds (:func:`ratio_interval`), and a verdict
against its target: "met" when the whole interval is at or below the target, "not met" when the whole interval is
above it, and "within noise" when the interval straddles it (the machine's noise decides, not the code).

How well the machine is used: before the device counts, a process of its own measures the machine's peak, the best
FLOP/s of a large square matmul in the bench's dtype through NumPy's BLAS and each backend's library (TensorFlow;
JAX for Aesara); each worker counts the model's FLOPs per step from the shapes of its matmuls and convolutions
(:mod:`toolkit.command.flops`, which says how), and each candidate's achieved FLOP/s is that count over its median
step time, also given as a fraction of the best peak.

Results (``bench.json``), schema ``multigpu-toolkit/bench`` version :data:`SCHEMA_VERSION`: ``config``, ``machine``,
``peak`` (``size``, ``dtype``, ``gflops``: library -> GFLOP/s), ``runs`` (``devices``: the process's device count,
``devices_used``: how many the candidate trains on, ``backend``, ``candidate``, ``label``, ``median_ms``,
``min_ms``, ``max_ms`` over rounds, ``round_ms``: each round's mean step time, ``warmup_s``, ``param_diff``: max
|parameter - toolkit's| / max |toolkit parameter|, null for the toolkit itself, ``gflop_per_step``, ``gflops``:
achieved, ``peak_fraction``: of the best peak) and ``ratios`` (``backend``, ``devices``, ``candidate``,
``baseline``, ``baseline_devices``, ``ratio``, ``low`` and ``high``: the bootstrap interval, ``target``: the bound
or null, ``verdict``: "met", "not met", "within noise", or null without a target).
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

from toolkit.command.flops import PEAK_REPEATS
from toolkit.errors import ComputeError, ModelStateError

SCHEMA = "multigpu-toolkit/bench"
SCHEMA_VERSION = 3

#: The bootstrap behind each ratio's interval: resamples of the rounds, the interval's percentiles (a 90% interval),
#: and a fixed seed so the same measurements always give the same interval.
BOOTSTRAP_RESAMPLES, INTERVAL_PERCENTILES, BOOTSTRAP_SEED = 2000, (5.0, 95.0), 0

#: The issue's speed targets: a candidate's step time over a baseline's, at the given device counts (None: all).
#: Aesara has no native multi-device training, so its baseline is one device.
TARGETS: tuple[tuple[str, str, str, tuple[int, ...] | None, float], ...] = (
    ("tensorflow", "toolkit", "mirrored-ctl", None, 1.05),
    ("tensorflow", "toolkit", "function", (1,), 1.05),
    ("tensorflow", "toolkit", "function-xla", (1,), 1.05),
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
    "function": "tf.function step",
    "function-xla": "tf.function step, jit_compile",
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


#: Why a model cannot be benched yet: the natives run it as plain framework code, without the toolkit's model state
#: and per-example keys, so they would not do the same steps.
_NO_NATIVES = ("{model} {what}, which the native baselines do not carry yet, so they would not train the same steps; "
               "bench the models without it (digits-mlp, digits-conv, polynomial, lstm-text) and measure this one "
               "with multigpu compare")


def make_batches(x: np.ndarray, y: np.ndarray, size: int, count: int, seed: int, dtype: str) -> Batches:
    """``count`` batches of ``size`` rows drawn without replacement within each batch; floats cast to ``dtype``,
    integers (labels, token ids) to the toolkit's label dtype, as the trainers cast them."""
    from toolkit.command.workloads import draw_batches
    from toolkit.training.trainer import LABEL_DTYPE

    if isinstance(x, dict):
        raise ValueError("bench supports models with one input array, not a dict of inputs")
    index = np.concatenate(draw_batches(len(y), size, count, seed))
    x, y = np.asarray(x)[index], np.asarray(y)[index]
    x, y = (a.astype(LABEL_DTYPE) if a.dtype.kind in "iub" else a.astype(dtype) for a in (x, y))
    return Batches(x, y, size)


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
    if config.get("peak"):
        return measure_peak(config)
    try:
        return _measure(config)
    except ModelStateError as error:  # raised by a native, which runs the model without per-example keys
        raise ValueError(_NO_NATIVES.format(model=config["model"], what="draws noise (dropout)")) from error


def measure_peak(config: dict[str, Any]) -> dict[str, Any]:
    """The machine's matmul peak in the bench's dtype (:func:`toolkit.command.flops.matmul_peak`), through NumPy and
    each backend's library, on one device."""
    import toolkit
    from toolkit.command.flops import matmul_peak
    from toolkit.registry import REGISTRY

    toolkit.use_logical_devices(1)
    products = {}
    for name in config["backends"]:
        toolkit.get_backend(name)  # the framework starts configured (logical devices, quiet logs)
        native = importlib.import_module(f"{REGISTRY[name].package}.native")
        products[native.PEAK_LIBRARY] = native.matmul
    return {"size": config["peak_size"], "dtype": config["dtype"],
            "gflops": matmul_peak(products, config["dtype"], config["peak_size"])}


def _measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    import toolkit
    from toolkit.command.flops import forward_flops, step_flops
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
        if runners[(name, "toolkit")]._trainer.state():
            raise ValueError(_NO_NATIVES.format(model=config["model"], what="keeps model state (batch normalization)"))
        for candidate, runner in native.runners(workload.model, initial, batches, backend.select_devices(n),
                                                backend, dtype, lr).items():
            runners[(name, candidate)] = runner
    first = runners[(config["backends"][0], "toolkit")]._trainer
    gflop = step_flops(forward_flops(workload.model, first.backend, first.params(), first.state(), *batches[0], dtype,
                                     seed)) / 1e9
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
            "max_ms": max(times[(name, candidate)]), "round_ms": times[(name, candidate)],
            "warmup_s": warmup[(name, candidate)], "gflop_per_step": gflop,
            "param_diff": None if candidate == "toolkit" else _relative_diff(runner.params(), reference),
        })
    return results


def ratio_interval(candidate: Sequence[float], baseline: Sequence[float], paired: bool) -> tuple[float, float]:
    """The bootstrap interval of ``median(candidate) / median(baseline)`` over rounds (:data:`INTERVAL_PERCENTILES`).

    ``paired``: the two were measured in the same rounds of one process (taking turns), so a round is resampled as a
    pair and what slowed the whole machine during a round cancels; otherwise each side is resampled on its own.
    """
    a, b = np.asarray(candidate, np.float64), np.asarray(baseline, np.float64)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(a), size=(BOOTSTRAP_RESAMPLES, len(a)))
    other = picks if paired and len(a) == len(b) else rng.integers(0, len(b), size=(BOOTSTRAP_RESAMPLES, len(b)))
    samples = np.median(a[picks], axis=1) / np.median(b[other], axis=1)
    low, high = np.percentile(samples, INTERVAL_PERCENTILES)
    return float(low), float(high)


def verdict(low: float, high: float, target: float | None) -> str | None:
    """"met", "not met" or "within noise" for a ratio whose interval is ``[low, high]`` (None without a target)."""
    if target is None:
        return None
    return "met" if high <= target else "not met" if low > target else "within noise"


def ratios(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every toolkit candidate over every native of its backend in the same process, and each candidate that uses
    all the process's devices over its own one-device run (scaling); with the targets of :data:`TARGETS` and
    :data:`SCALING_BOUND` where they apply, each with its bootstrap interval and verdict."""
    found = {(r["backend"], r["candidate"], r["devices"]): r for r in runs}
    out = []

    def add(backend, devices, candidate, baseline, baseline_devices, target):
        top, bottom = found[(backend, candidate, devices)], found[(backend, baseline, baseline_devices)]
        low, high = ratio_interval(top["round_ms"], bottom["round_ms"], paired=devices == baseline_devices)
        out.append({"backend": backend, "devices": devices, "candidate": candidate, "baseline": baseline,
                    "baseline_devices": baseline_devices, "ratio": top["median_ms"] / bottom["median_ms"],
                    "low": low, "high": high, "target": target, "verdict": verdict(low, high, target)})

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


def ratio_label(ratio: dict[str, Any]) -> str:
    """What a ratio divides by what, in words."""
    top, bottom = LABELS.get(ratio["candidate"], ratio["candidate"]), LABELS.get(ratio["baseline"], ratio["baseline"])
    if ratio["candidate"] == ratio["baseline"]:
        return f"{top}, n devices / 1 device"
    where = ", 1 device" if ratio["baseline_devices"] == 1 and ratio["devices"] > 1 else ""
    return f"{top} / {bottom}{where}"


def peak_sentence(results: dict[str, Any]) -> str:
    """The machine's measured peak and the model's FLOPs per step, in words."""
    peak, gflop = results["peak"], results["runs"][0]["gflop_per_step"]
    speeds = ", ".join(f"{library} {gflops:.1f}" for library, gflops in peak["gflops"].items())
    return (f"Machine peak, {peak['dtype']} {peak['size']}x{peak['size']} matmul, best of "
            f"{PEAK_REPEATS}: {speeds} GFLOP/s; the model's step is {gflop:.4g} GFLOP (matmuls and convolutions, "
            f"backward counted as twice the forward); a candidate's GFLOP/s are that over its median step time.")


def markdown(results: dict[str, Any]) -> str:
    """The README's tables of a bench run: the settings and machine, median step times, then every ratio with its
    interval and verdict."""
    config, where = results["config"], results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in where["versions"].items())
    intro = (f"{config['model']}, SGD({config['lr']}), {config['dtype']}, global batch {config['batch']}, "
             f"{config['rounds']} rounds of {config['steps']} steps; {where['cpu']}, {where['cores']} cores, "
             f"Python {where['python']}, {versions}.")
    counts = sorted({r["devices"] for r in results["runs"]})
    head = " | ".join(f"{n} device{'s' if n > 1 else ''}" for n in counts)
    lines = [intro, "", f"| step time (ms), median of {config['rounds']} rounds | {head} |",
             "|---" * (len(counts) + 1) + "|"]
    rows: dict[str, dict[int, str]] = {}
    for run in results["runs"]:
        rows.setdefault(f"{run['backend']}: {run['label']}", {})[run["devices"]] = f"{run['median_ms']:.2f}"
    lines += [f"| {label} | " + " | ".join(cells.get(n, "") for n in counts) + " |" for label, cells in rows.items()]
    lines += ["", peak_sentence(results), "", f"| achieved GFLOP/s (fraction of the best peak) | {head} |",
              "|---" * (len(counts) + 1) + "|"]
    achieved: dict[str, dict[int, str]] = {}
    for run in results["runs"]:
        achieved.setdefault(f"{run['backend']}: {run['label']}", {})[run["devices"]] = (
            f"{run['gflops']:.2f} ({run['peak_fraction']:.1%})")
    lines += [f"| {label} | " + " | ".join(cells.get(n, "") for n in counts) + " |"
              for label, cells in achieved.items()]
    lines += ["", f"| ratio (90% bootstrap interval) | {head} | target |", "|---" * (len(counts) + 2) + "|"]
    grouped: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in results["ratios"]:
        grouped.setdefault((r["backend"], ratio_label(r)), {})[r["devices"]] = r
    for (backend, label), by_count in grouped.items():
        cells = [f"{by_count[n]['ratio']:.2f} ({by_count[n]['low']:.2f}-{by_count[n]['high']:.2f})"
                 if n in by_count else "" for n in counts]
        judged = {n: r for n, r in by_count.items() if r["target"] is not None}
        target = ""
        if judged:
            bound = next(iter(judged.values()))["target"]
            target = f"<= {bound}: " + "; ".join(f"{r['verdict']} at {n}" for n, r in sorted(judged.items()))
        lines.append(f"| {backend}: {label} | " + " | ".join(cells) + f" | {target} |")
    return "\n".join(lines) + "\n"


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
    """Measure the machine's matmul peak, then every device count of ``config["devices"]``, each in a fresh
    process; the results dict, each run with its achieved GFLOP/s and their fraction of the best peak."""
    root = str(Path(__file__).resolve().parents[2])  # the folder holding toolkit/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.getcwd(), os.environ.get("PYTHONPATH"))
                                                       if p)}

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

    if progress:
        progress("the machine's matmul peak")
    peak = worker({**config, "devices": 1, "peak": True}, "matmul peak measurement")
    best = max(peak["gflops"].values())
    runs = []
    for n in config["devices"]:
        if progress:
            progress(f"{n} device(s)")
        runs.extend(worker({**config, "devices": n}, f"{n}-device measurement"))
    for run in runs:
        run["gflops"] = run["gflop_per_step"] / (run["median_ms"] / 1e3)
        run["peak_fraction"] = run["gflops"] / best
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "config": config, "machine": machine(), "peak": peak,
            "runs": runs, "ratios": ratios(runs)}


if __name__ == "__main__":  # a worker of run_bench: one device count, JSON in argv, JSON out on stdout's last line
    print(json.dumps(measure(json.loads(sys.argv[1]))))
