"""``multigpu bench``: this toolkit against native code on the same models, parameters, batches and devices.

Models: by default the dispatch-bound digits MLP and the compute-bound ResNet and Transformer at the sizes of
:data:`toolkit.command.workloads.BENCH_MODELS` (each with its own batch and steps per round). For each model and
device count ``n``, a fresh process with ``n`` logical devices (MirroredStrategy cannot be rebuilt with another
device count in one process, and JAX's device count is fixed at start) runs these candidates:

- ``toolkit``: :class:`~toolkit.DataParallel` on ``n`` devices, per backend, plus any other backend options a
  backend declares in its ``native.TOOLKIT_OPTIONS`` (Aesara's C linker, which has one device, at ``n = 1``);
- the natives from ``backends/<name>/native.py``: TensorFlow's MirroredStrategy custom training loop and Keras
  ``fit`` under MirroredStrategy on the same ``n`` devices, and at ``n = 1`` a plain ``tf.function`` step without
  and with ``jit_compile=True``; a plain ``aesara.function`` step with ``updates`` (JAX and C linkers) and the
  model in plain JAX under ``jax.jit``, on one device and in the one-device process only. Natives carry the model
  state (batch normalization's moving statistics) as the framework's own variables; a model that draws noise
  (dropout) is refused, since they do not draw the toolkit's per-example keys.

All start from the same parameters and state and train with SGD on the same cycle of ``steps`` batches. The first
step is timed alone (``compile_s``: tracing and compilation), then the rest of a warm-up cycle; then the candidates
take turns, one cycle each per round, for ``rounds`` rounds, the order rotating every round; a candidate's step time
is the median over rounds of its mean step time in a round. Then every native's parameters and state are compared
with the toolkit's of the same backend: having done the same steps, they must agree to rounding, which shows the
comparison is like for like.

Memory (Linux): the process's peak resident memory is reset before each candidate's warm-up cycle and before each of
its rounds (``/proc/self/clear_refs``); ``first_peak_mb`` is the peak during the warm-up cycle above the resident
memory just before it (compilation and first buffers), ``step_peak_mb`` the largest such excess over its rounds
(the step's working memory: activations, gradients, temporaries). Null where the kernel does not offer it.

A ratio is reported with its spread: a bootstrap interval over the rounds (:func:`ratio_interval`), and a verdict
against its target: "met" when the whole interval is at or below the target, "not met" when the whole interval is
above it, and "within noise" when the interval straddles it (the machine's noise decides, not the code).

How well the machine is used: before the models, a process of its own measures the machine's peak, the best
FLOP/s of a large square matmul in the bench's dtype through NumPy's BLAS and each backend's library (TensorFlow;
JAX for Aesara); each worker counts the model's FLOPs per step from the shapes of its matmuls and convolutions
(:mod:`toolkit.command.flops`, which says how), and each candidate's achieved FLOP/s is that count over its median
step time, also given as a fraction of the best peak; on compute-bound models the faster backend's toolkit step at
one device is held to :data:`PEAK_FRACTION_TARGET` of it (``fractions``). What stands between a step and the peak
is split in two by timing, in the one-device process of a compute-bound model, the step's matmuls and convolutions
alone with each backend's library (:func:`toolkit.command.flops.products_alone`): their own share of the peak (what
their shapes allow) and the step's speed over theirs (what the rest of the step costs).

TensorFlow runs with oneDNN's kernels on (its default on x86; the toolkit itself turns them off for quiet logs
unless ``TF_ENABLE_ONEDNN_OPTS`` is set): the bench measures each framework at its best.

Results (``bench.json``), schema ``multigpu-toolkit/bench`` version :data:`SCHEMA_VERSION`: ``config`` (``models``,
``batch`` and ``steps``: overrides or null), ``machine``, ``peak`` (``size``, ``dtype``, ``gflops``: library ->
GFLOP/s), ``runs`` (``model``, ``batch``, ``steps``, ``devices``: the process's device count, ``devices_used``: how many
the candidate trains on, ``backend``, ``candidate``, ``label``, ``median_ms``, ``min_ms``, ``max_ms`` over rounds,
``round_ms``: each round's mean step time, ``compile_s``: the first step, ``warmup_s``: the warm-up cycle,
``first_peak_mb``, ``step_peak_mb``, ``host_ms``: for the toolkit's candidates, the median over rounds of a step's time
outside the backend's compiled step (its batch checks, keys and split), else null, ``param_diff``: max |value -
toolkit's| / max |toolkit value| over parameters and state, null for the toolkit itself, ``gflop_per_step``, ``gflops``:
achieved, ``peak_fraction``: of the best peak, ``compute_bound``, ``products_alone_ms``: the step's matmuls and
convolutions alone with this backend's library, on compute-bound models at one device, else null,
``products_alone_gflops``), ``ratios`` (``model``, ``backend``, ``devices``, ``candidate``, ``baseline``,
``baseline_devices``, ``ratio``, ``low`` and ``high``: the bootstrap interval, ``target``: the bound or null,
``verdict``: "met", "not met", "within noise", or null without a target) and ``fractions`` (``model``, ``backend``,
``candidate``, ``fraction``, ``low``, ``high``, ``target``, ``verdict``, ``products_alone_fraction``: the products'
share of the best peak, ``of_products_alone``: the step's GFLOP/s over theirs).
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
SCHEMA_VERSION = 6

#: The bootstrap behind each ratio's interval: resamples of the rounds, the interval's percentiles (a 90% interval),
#: and a fixed seed so the same measurements always give the same interval.
BOOTSTRAP_RESAMPLES, INTERVAL_PERCENTILES, BOOTSTRAP_SEED = 2000, (5.0, 95.0), 0

@dataclass(frozen=True)
class Target:
    """A speed target: ``candidate``'s step time over ``baseline``'s of the same backend and process is at most
    ``bound``, at ``devices`` (None: every count), on every model or only the compute-bound ones."""

    backend: str
    candidate: str
    baseline: str
    devices: tuple[int, ...] | None
    bound: float
    compute_bound_only: bool = False


#: The issue's speed targets. The Theano family (Aesara, PyTensor) has no native multi-device training, so its
#: baselines have one device; the hand-written ``jax.jit`` step is the ceiling of the JAX linker, whose graph
#: translation may cost up to 15%.
TARGETS = (
    Target("tensorflow", "toolkit", "mirrored-ctl", None, 1.05),
    Target("tensorflow", "toolkit", "function", (1,), 1.05),
    Target("tensorflow", "toolkit", "function-xla", (1,), 1.05),
    *(target for engine in ("aesara", "pytensor") for target in (
        Target(engine, "toolkit", "function-jax", (1,), 1.05),
        Target(engine, "toolkit-c", "function-c", (1,), 1.05),
        Target(engine, "toolkit", "jax-jit", (1,), 1.15, compute_bound_only=True),
    )),
)
#: Scaling: the toolkit's step time on SCALING_DEVICES devices over one device at the same global batch, on the
#: compute-bound models (the devices share the machine's cores, so this is the splitting and reduction overhead) and,
#: looser, on the dispatch-bound ones (where each device's part is a fixed cost of its own).
SCALING_DEVICES, SCALING_BOUND, DISPATCH_SCALING_BOUND = 4, 1.15, 1.3
#: The share of the machine's measured matmul peak that the faster backend's toolkit step reaches on one device on
#: the compute-bound models.
PEAK_FRACTION_TARGET = 0.6

LABELS = {
    "toolkit": "toolkit DataParallel",
    "toolkit-c": "toolkit DataParallel, C linker",
    "mirrored-ctl": "MirroredStrategy custom loop",
    "keras-fit": "Keras fit, MirroredStrategy",
    "function": "tf.function step",
    "function-xla": "tf.function step, jit_compile",
    "function-checked": "tf.function step, all-or-nothing",
    "function-jax": "function + updates, JAX linker",
    "function-c": "function + updates, C linker",
    "function-jax-checked": "function + updates, all-or-nothing, JAX linker",
    "function-c-checked": "function + updates, all-or-nothing, C linker",
    "jax-jit": "plain JAX, jax.jit",
}


class Runner(Protocol):
    def run(self, steps: int) -> float:
        """Train ``steps`` steps on the next batches of the cycle; the last step's loss."""

    def params(self) -> dict[str, np.ndarray]:
        """The parameters and model state now, by name, as NumPy arrays."""

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


#: Why a model cannot be benched: the natives run it as plain framework code, without the toolkit's per-example
#: keys, so they would not draw the same noise.
_NO_NATIVES = ("{model} draws noise (dropout), which the native baselines cannot draw like the toolkit (its "
               "per-example keys), so they would not train the same steps; bench it without dropout (as "
               "transformer-bench) or measure it with multigpu compare")


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
    """The toolkit's trainer on the cycle of batches. ``compiled_s`` adds up the time spent inside the backend's
    compiled step (:meth:`toolkit.backend.Backend.compile_fused_step`; None where the trainer composes its steps):
    the rest of a step is the toolkit's own host work (the batch checks, the examples' keys, the split), reported
    beside the step time."""

    def __init__(self, trainer, batches: Batches) -> None:
        self._trainer, self._batches, self._next = trainer, batches, 0
        self.compiled_s = None
        fused = (trainer._fused_steps or {}).get(())
        if fused is not None:
            self.compiled_s = 0.0

            def timed(*args):
                began = time.perf_counter()
                try:
                    return fused(*args)
                finally:
                    self.compiled_s += time.perf_counter() - began

            trainer._fused_steps[()] = timed

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
    """One model's measurements at one device count (run in its own process by :func:`run_bench`)."""
    if config.get("peak"):
        return measure_peak(config)
    try:
        return _measure(config)
    except ModelStateError as error:  # raised by a native, which runs the model without per-example keys
        raise ValueError(_NO_NATIVES.format(model=config["model"])) from error


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


class _PeakMemory:
    """The process's peak resident memory above its level at :meth:`start` (Linux: ``clear_refs`` resets the peak;
    elsewhere every reading is None)."""

    def __init__(self) -> None:
        self._base: float | None = None

    @staticmethod
    def _status(field: str) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) / 1024.0  # kB -> MiB
        raise OSError(f"no {field} in /proc/self/status")

    def start(self) -> None:
        try:
            Path("/proc/self/clear_refs").write_text("5")  # 5: reset the peak resident set size to the current
            self._base = self._status("VmRSS")
        except OSError:
            self._base = None

    def excess(self) -> float | None:
        return None if self._base is None else max(0.0, self._status("VmHWM") - self._base)


def _measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    import toolkit
    from toolkit.command.flops import forward_products, products_alone, step_flops
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
        first = runners[(name, "toolkit")]._trainer
        for candidate, runner in native.runners(workload.model, first.params(), first.state(), batches,
                                                backend.select_devices(n), backend, dtype, lr).items():
            runners[(name, candidate)] = runner
    first = runners[(config["backends"][0], "toolkit")]._trainer
    found = forward_products(workload.model, first.backend, first.params(), first.state(), *batches[0], dtype, seed)
    gflop = step_flops(sum(p.flops for p in found)) / 1e9
    memory = _PeakMemory()
    compile_s, warmup, first_peak, step_peak = {}, {}, {}, {key: None for key in runners}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in runners}
    host: dict[tuple[str, str], list[float]] = {key: [] for key in runners}  # each round's host work a step
    for key, runner in runners.items():
        memory.start()
        began = time.perf_counter()
        runner.run(1)
        compile_s[key] = time.perf_counter() - began
        if steps > 1:
            runner.run(steps - 1)
        warmup[key], first_peak[key] = time.perf_counter() - began, memory.excess()
    keys = list(runners)
    for round_ in range(config["rounds"]):
        turn = round_ % len(keys)
        for key in keys[turn:] + keys[:turn]:
            memory.start()
            compiled = getattr(runners[key], "compiled_s", None)
            began = time.perf_counter()
            runners[key].run(steps)
            times[key].append((time.perf_counter() - began) / steps * 1e3)
            if compiled is not None:
                host[key].append(times[key][-1] - (runners[key].compiled_s - compiled) / steps * 1e3)
            used = memory.excess()
            if used is not None:
                step_peak[key] = max(used, step_peak[key] or 0.0)
    # The step's products alone, with each backend's library, after the rounds (flops.products_alone).
    alone = {}
    if n == 1 and workload.compute_bound:
        for name in config["backends"]:
            native = importlib.import_module(f"{REGISTRY[name].package}.native")
            alone[name] = products_alone(found, native.products, dtype, seed=seed) * 1e3
    results = []
    for (name, candidate), runner in runners.items():
        toolkit_runner = runners[(name, "toolkit")]
        reference = {**toolkit_runner.params(), **toolkit_runner._trainer.state()}
        results.append({
            "model": config["model"], "batch": config["batch"], "steps": steps, "devices": n,
            "devices_used": getattr(runner, "devices_used", n), "backend": name, "candidate": candidate,
            "label": LABELS.get(candidate, candidate), "median_ms": statistics.median(times[(name, candidate)]),
            "min_ms": min(times[(name, candidate)]), "max_ms": max(times[(name, candidate)]),
            "round_ms": times[(name, candidate)], "compile_s": compile_s[(name, candidate)],
            "warmup_s": warmup[(name, candidate)], "first_peak_mb": first_peak[(name, candidate)],
            "step_peak_mb": step_peak[(name, candidate)], "gflop_per_step": gflop,
            "host_ms": statistics.median(host[(name, candidate)]) if host[(name, candidate)] else None,
            "compute_bound": workload.compute_bound, "products_alone_ms": alone.get(name),
            "param_diff": None if candidate == "toolkit" else _relative_diff(_values(runner), reference),
        })
    return results


def _values(runner: Runner) -> dict[str, np.ndarray]:
    """A runner's parameters and model state (the toolkit's runner gives its parameters; natives give both)."""
    if isinstance(runner, _ToolkitRunner):
        return {**runner.params(), **runner._trainer.state()}
    return runner.params()


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


def _target(backend: str, candidate: str, baseline: str, devices: int, compute_bound: bool) -> float | None:
    return next((t.bound for t in TARGETS if (t.backend, t.candidate, t.baseline) == (backend, candidate, baseline)
                 and (t.devices is None or devices in t.devices) and (compute_bound or not t.compute_bound_only)),
                None)


def ratios(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model: every toolkit candidate over every native of its backend in the same process, and each candidate
    that uses all the process's devices over its own one-device run (scaling); with the targets of :data:`TARGETS`
    and the scaling bounds where they apply, each with its bootstrap interval and verdict."""
    found = {(r.get("model", ""), r["backend"], r["candidate"], r["devices"]): r for r in runs}
    out = []

    def add(model, backend, devices, candidate, baseline, baseline_devices, target):
        top, bottom = found[(model, backend, candidate, devices)], found[(model, backend, baseline, baseline_devices)]
        low, high = ratio_interval(top["round_ms"], bottom["round_ms"], paired=devices == baseline_devices)
        out.append({"model": model, "backend": backend, "devices": devices, "candidate": candidate,
                    "baseline": baseline, "baseline_devices": baseline_devices,
                    "ratio": top["median_ms"] / bottom["median_ms"], "low": low, "high": high, "target": target,
                    "verdict": verdict(low, high, target)})

    for (model, backend, candidate, devices), run in found.items():
        if not candidate.startswith("toolkit"):
            continue
        for other_model, other, baseline, other_devices in found:
            if (other_model, other, other_devices) == (model, backend, devices) and not baseline.startswith("toolkit"):
                add(model, backend, devices, candidate, baseline, devices,
                    _target(backend, candidate, baseline, devices, run.get("compute_bound", False)))
    for (model, backend, candidate, devices), run in found.items():
        if devices > 1 and (model, backend, candidate, 1) in found and run.get("devices_used", devices) == devices:
            target = None
            if candidate == "toolkit" and devices == SCALING_DEVICES:
                target = SCALING_BOUND if run.get("compute_bound", False) else DISPATCH_SCALING_BOUND
            add(model, backend, devices, candidate, candidate, 1, target)
    return out


def fractions(runs: Sequence[dict[str, Any]], best_peak_gflops: float) -> list[dict[str, Any]]:
    """On each compute-bound model, every backend's one-device toolkit step as a fraction of the best matmul peak,
    with a bootstrap interval over its rounds; the faster backend's is judged against :data:`PEAK_FRACTION_TARGET`
    (the other is reported, with no target)."""
    candidates = [r for r in runs if r.get("compute_bound") and r["candidate"] == "toolkit" and r["devices"] == 1]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    out = []
    for run in candidates:
        rounds = np.asarray(run["round_ms"], np.float64)
        medians = np.median(rounds[rng.integers(0, len(rounds), size=(BOOTSTRAP_RESAMPLES, len(rounds)))], axis=1)
        share = run["gflop_per_step"] / (medians / 1e3) / best_peak_gflops
        low, high = np.percentile(share, INTERVAL_PERCENTILES)
        alone = run.get("products_alone_gflops")
        out.append({"model": run["model"], "backend": run["backend"], "candidate": run["candidate"],
                    "fraction": run["peak_fraction"], "low": float(low), "high": float(high), "target": None,
                    "verdict": None, "products_alone_fraction": None if alone is None else alone / best_peak_gflops,
                    "of_products_alone": None if alone is None else run["gflops"] / alone})
    for model in {f["model"] for f in out}:
        best = max((f for f in out if f["model"] == model), key=lambda f: f["fraction"])
        best["target"] = PEAK_FRACTION_TARGET
        # Higher is better here: "met" when the whole interval reaches the target.
        best["verdict"] = ("met" if best["low"] >= PEAK_FRACTION_TARGET else
                           "not met" if best["high"] < PEAK_FRACTION_TARGET else "within noise")
    return out


def ratio_label(ratio: dict[str, Any]) -> str:
    """What a ratio divides by what, in words."""
    top, bottom = LABELS.get(ratio["candidate"], ratio["candidate"]), LABELS.get(ratio["baseline"], ratio["baseline"])
    if ratio["candidate"] == ratio["baseline"]:
        return f"{top}, n devices / 1 device"
    where = ", 1 device" if ratio["baseline_devices"] == 1 and ratio["devices"] > 1 else ""
    return f"{top} / {bottom}{where}"


def peak_sentence(results: dict[str, Any]) -> str:
    """The machine's measured peak and how a step's FLOPs are counted, in words."""
    peak = results["peak"]
    speeds = ", ".join(f"{library} {gflops:.1f}" for library, gflops in peak["gflops"].items())
    return (f"Machine peak, {peak['dtype']} {peak['size']}x{peak['size']} matmul, best of {PEAK_REPEATS}: {speeds} "
            "GFLOP/s. A model's FLOPs per step count its matmuls and convolutions (backward counted as twice the "
            "forward); a candidate's GFLOP/s are that over its median step time.")


def _mb(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def _model_markdown(model: str, runs: list[dict[str, Any]], model_ratios: list[dict[str, Any]],
                    rounds: int) -> list[str]:
    first = runs[0]
    kind = "compute-bound" if first.get("compute_bound") else "dispatch-bound"
    counts = sorted({r["devices"] for r in runs})
    head = " | ".join(f"{n} device{'s' if n > 1 else ''}" for n in counts)
    lines = [f"**{model}**: global batch {first['batch']}, {first['steps']} steps a round, "
             f"{first['gflop_per_step']:.4g} GFLOP a step ({kind}).", "",
             f"| ms a step, median of {rounds} rounds (GFLOP/s, share of peak) | {head} | first step, 1 device | "
             "peak memory MiB, first cycle / step, 1 device |", "|---" * (len(counts) + 3) + "|"]
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    for run in runs:
        rows.setdefault(f"{run['backend']}: {run['label']}", {})[run["devices"]] = run
    for label, by_count in rows.items():
        cells = [f"{by_count[n]['median_ms']:.2f} ({by_count[n]['gflops']:.1f}, {by_count[n]['peak_fraction']:.0%})"
                 if n in by_count else "" for n in counts]
        one = by_count.get(1)
        extra = ["", ""] if one is None else [f"{one['compile_s']:.2f} s",
                                              f"{_mb(one['first_peak_mb'])} / {_mb(one['step_peak_mb'])}"]
        lines.append(f"| {label} | " + " | ".join(cells + extra) + " |")
    lines += ["", f"| ratio (90% bootstrap interval) | {head} | target |", "|---" * (len(counts) + 2) + "|"]
    grouped: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in model_ratios:
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
    hosted = [r for r in runs if r.get("host_ms") is not None]
    if hosted:
        parts = "; ".join(f"{r['backend']}: {r['label']}, {r['devices']} device{'s' if r['devices'] > 1 else ''}: "
                          f"{r['host_ms']:.3f} of {r['median_ms']:.3f} ms ({r['host_ms'] / r['median_ms']:.0%})"
                          for r in hosted)
        lines += ["", "The toolkit's host work a step (its step outside the backend's compiled call: the batch checks, "
                      f"the examples' keys, the split; median of rounds): {parts}."]
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The README's tables of a bench run: the settings and machine, the peak, then per model its step times
    (achieved GFLOP/s, share of peak, first step, memory) and every ratio with its interval and verdict, then the
    fractions of peak of the compute-bound models."""
    config, where = results["config"], results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in where["versions"].items())
    lines = [f"SGD({config['lr']}), {config['dtype']}, {config['rounds']} rounds; {where['cpu']}, {where['cores']} "
             f"cores, Python {where['python']}, {versions}.", "", peak_sentence(results)]
    models = list(dict.fromkeys(r.get("model", "") for r in results["runs"]))
    for model in models:
        lines += [""] + _model_markdown(model, [r for r in results["runs"] if r.get("model", "") == model],
                                        [r for r in results["ratios"] if r.get("model", "") == model],
                                        config["rounds"])
    if results.get("fractions"):
        lines += ["", "| compute-bound model: toolkit, 1 device | share of the best peak (90% interval) | target | "
                  "its matmuls and convolutions alone: share of the best peak | the step's speed / theirs |",
                  "|---|---|---|---|---|"]
        for f in results["fractions"]:
            target = "" if f["target"] is None else f">= {f['target']:.0%}: {f['verdict']}"
            alone, of = f.get("products_alone_fraction"), f.get("of_products_alone")
            lines.append(f"| {f['model']}: {f['backend']} | {f['fraction']:.1%} ({f['low']:.1%}-{f['high']:.1%}) | "
                         f"{target} | {'' if alone is None else f'{alone:.1%}'} | "
                         f"{'' if of is None else f'{of:.0%}'} |")
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
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
    ``config["devices"]``, each in a fresh process; the results dict, each run with its achieved GFLOP/s and their
    fraction of the best peak."""
    from toolkit.command.workloads import load_workload

    root = str(Path(__file__).resolve().parents[2])  # the folder holding toolkit/
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

    if progress:
        progress("the machine's matmul peak")
    peak = worker({**config, "devices": 1, "peak": True}, "matmul peak measurement")
    best = max(peak["gflops"].values())
    runs = []
    for model in config["models"]:
        workload = load_workload(model)
        sizes = {"batch": config.get("batch") or workload.bench_batch,
                 "steps": config.get("steps") or workload.bench_steps}
        for n in config["devices"]:
            if progress:
                progress(f"{model}, {n} device(s)")
            runs.extend(worker({**config, **sizes, "model": model, "devices": n}, f"{model} {n}-device measurement"))
    for run in runs:
        run["gflops"] = run["gflop_per_step"] / (run["median_ms"] / 1e3)
        run["peak_fraction"] = run["gflops"] / best
        alone = run.get("products_alone_ms")
        run["products_alone_gflops"] = None if alone is None else run["gflop_per_step"] / (alone / 1e3)
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "config": config, "machine": machine(), "peak": peak,
            "runs": runs, "ratios": ratios(runs), "fractions": fractions(runs, best)}


if __name__ == "__main__":  # a worker of run_bench: one device count, JSON in argv, JSON out on stdout's last line
    print(json.dumps(measure(json.loads(sys.argv[1]))))
