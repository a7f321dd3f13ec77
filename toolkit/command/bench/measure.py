"""What one ``multigpu bench`` worker measures: one model at one device count, in a process of its own with that many
logical devices (or the machine's matmul peak). Every candidate (the toolkit's trainers and the natives) starts from
the same parameters and state and trains with SGD on the same cycle of batches: its first step and warm-up cycle,
then the candidates take turns for the rounds; then their parameters are compared with the toolkit's."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from toolkit.command.bench.natives import natives
from toolkit.command.bench.schema import INPUT_CANDIDATES, LABELS
from toolkit.errors import ModelStateError


class Runner(Protocol):
    """A candidate: a training loop on the cycle of batches, from the toolkit's initial parameters and state."""

    def run(self, steps: int) -> float:
        """Train on the next batches of the cycle, going round it.

        Args:
            steps: the number of steps.

        Returns:
            The last step's loss.
        """

    def params(self) -> dict[str, np.ndarray]:
        """The parameters and model state now, by name, as NumPy arrays (the toolkit's runner: the parameters)."""

    # Optional attribute ``devices_used``: how many devices it trains on, if not all of the process's.


@dataclass(frozen=True)
class Batches:
    """A cycle of equal-size batches, in training order: batch ``i`` is rows ``i*size .. (i+1)*size`` of x and y.

    Attributes:
        x: the batches' inputs, one after another.
        y: their targets.
        size: the batch size.
    """

    x: np.ndarray
    y: np.ndarray
    size: int

    def __len__(self) -> int:
        return len(self.y) // self.size

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[i * self.size:(i + 1) * self.size], self.y[i * self.size:(i + 1) * self.size]


#: Why a model cannot be benched: the natives run it as plain framework code, without the toolkit's per-example
#: keys, so they would not draw the same noise.
NO_NATIVES = ("{model} draws noise (dropout), which the native baselines cannot draw like the toolkit (its "
              "per-example keys), so they would not train the same steps; bench it without dropout (as "
              "transformer-bench) or measure it with multigpu compare")


def make_batches(x: np.ndarray, y: np.ndarray, size: int, count: int, seed: int, dtype: str) -> Batches:
    """``count`` batches of ``size`` rows drawn without replacement within each batch; floats cast to ``dtype``,
    integers (labels, token ids) to the toolkit's label dtype, as the trainers cast them.

    Args:
        x: the training inputs, one array.
        y: the training targets.
        size: the batch size.
        count: the number of batches in the cycle.
        seed: the seed of the draws (:func:`toolkit.command.workloads.draw_batches`).
        dtype: the computation dtype.

    Returns:
        The :class:`Batches`.

    Raises:
        ValueError: ``x`` is a dict of inputs, or ``size`` exceeds the examples there are.
    """
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
    compiled step (:meth:`toolkit.Backend.compile_fused_step`; None where the trainer composes its steps):
    the rest of a step is the toolkit's own host work (the batch checks, the examples' keys, the split), reported
    beside the step time."""

    def __init__(self, trainer, batches: Batches) -> None:
        self.trainer, self._batches, self._next = trainer, batches, 0
        self.compiled_s = None

        def timed(fused):
            def call(*args):
                began = time.perf_counter()
                try:
                    return fused(*args)
                finally:
                    self.compiled_s += time.perf_counter() - began

            return call

        if trainer.wrap_fused_step(timed):
            self.compiled_s = 0.0

    def run(self, steps: int) -> float:
        for _ in range(steps):
            loss = self.trainer.step(*self._batches[self._next])
            self._next = (self._next + 1) % len(self._batches)
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return self.trainer.params()


class _FitRunner:
    """The toolkit's ``fit`` on the cycle of batches, one epoch a call, the batches read from ``kind`` (one of
    :data:`~toolkit.command.bench.schema.INPUT_CANDIDATES`): the arrays themselves (``batch_size``, no shuffle), a
    generator of the batches, or a batched ``tf.data`` dataset of the cycle (made once; a call takes its next
    batches by ``skip`` and ``take``). Each reads the same batches in the same order as the step runner, so the three
    train exactly as it does (``param_diff`` checks it) and differ only in how their batches come."""

    def __init__(self, trainer, batches: Batches, kind: str) -> None:
        self.trainer, self._batches, self._kind, self._next = trainer, batches, kind, 0
        self._dataset = None
        if kind == "fit-tfdata":
            import tensorflow as tf

            self._dataset = tf.data.Dataset.from_tensor_slices((batches.x, batches.y)).batch(batches.size).repeat()

    def run(self, steps: int) -> float:
        """Fit one epoch of the next ``steps`` batches of the cycle.

        Returns:
            The epoch's loss (the mean of its steps').
        """
        batches, start = self._batches, self._next
        self._next = (start + steps) % len(batches)
        if self._kind == "fit-arrays":
            rows = slice(start * batches.size, (start + steps) * batches.size)  # the cycle's own rows, no copy
            if start + steps > len(batches):  # round the end of the cycle
                rows = np.arange(rows.start, rows.stop) % len(batches.y)
            x, y = batches.x[rows], batches.y[rows]
            history = self.trainer.fit(x, y, batch_size=batches.size, shuffle=False, verbose=0)
        elif self._kind == "fit-generator":
            history = self.trainer.fit((batches[(start + i) % len(batches)] for i in range(steps)), shuffle=False,
                                       verbose=0)
        else:
            history = self.trainer.fit(self._dataset.skip(start).take(steps), shuffle=False, verbose=0)
        return history.history["loss"][-1]

    def params(self) -> dict[str, np.ndarray]:
        return self.trainer.params()


def input_kinds() -> tuple[str, ...]:
    """The input candidates this environment can run: every one of
    :data:`~toolkit.command.bench.schema.INPUT_CANDIDATES`, less ``fit-tfdata`` where TensorFlow is not installed."""
    import importlib.util

    tf = importlib.util.find_spec("tensorflow") is not None
    return tuple(kind for kind in INPUT_CANDIDATES if tf or kind != "fit-tfdata")


def _relative_diff(values: dict, reference: dict) -> float:
    """max |value - reference| over every array of ``reference``, over the largest |reference| entry."""
    scale = max(float(np.max(np.abs(v))) for v in reference.values()) or 1.0
    return max(float(np.max(np.abs(np.asarray(values[k], np.float64) - np.asarray(v, np.float64))))
               for k, v in reference.items()) / scale


def measure(config: dict[str, Any]) -> list[dict[str, Any]] | dict[str, Any]:
    """What one worker process measures (:func:`toolkit.command.bench.run.run_bench` starts it).

    Args:
        config: the bench's config with this process's ``model``, ``devices``, ``batch`` and ``steps``, or with
            ``peak`` true for the machine's matmul peak.

    Returns:
        One result per candidate (``runs`` of :mod:`toolkit.command.bench.schema`), or the peak.

    Raises:
        ValueError: the model draws noise, which the natives cannot draw like the toolkit.
    """
    if config.get("peak"):
        return measure_peak(config)
    try:
        return _measure(config)
    except ModelStateError as error:  # the model draws noise: _draws_no_noise runs it as the natives would
        raise ValueError(NO_NATIVES.format(model=config["model"])) from error


def measure_peak(config: dict[str, Any]) -> dict[str, Any]:
    """The machine's matmul peak in the bench's dtype (:func:`toolkit.command.flops.matmul_peak`), through NumPy and
    each backend's library, on one device.

    Args:
        config: the bench's config (``backends``, ``dtype``, ``peak_size``).

    Returns:
        ``{"size", "dtype", "gflops": {library: GFLOP/s}}``.
    """
    import toolkit
    from toolkit.command.flops import matmul_peak

    toolkit.use_logical_devices(1)
    products = {}
    for name in config["backends"]:
        native = natives(name)
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
    from toolkit.training.optim import SGD

    n, dtype, lr, steps, seed = config["devices"], config["dtype"], config["lr"], config["steps"], config["seed"]
    toolkit.use_logical_devices(n)
    workload = load_workload(config["model"])
    x_train, y_train, _, _ = workload.data(seed)
    batches = make_batches(x_train, y_train, config["batch"], steps, seed, dtype)
    runners: dict[tuple[str, str], Runner] = {}
    for name in config["backends"]:
        native = natives(name)
        backend = toolkit.get_backend(name)
        for candidate, options in native.TOOLKIT_OPTIONS.items():
            variant = toolkit.get_backend(name, **options)
            if len(variant.select_devices("all")) >= n:
                trainer = toolkit.DataParallel(workload.model, variant, n, SGD(lr), dtype=dtype, seed=seed)
                runners[(name, candidate)] = _ToolkitRunner(trainer, batches)
        first = runners[(name, "toolkit")].trainer
        for kind in input_kinds() if config.get("inputs", True) else ():
            trainer = toolkit.DataParallel(workload.model, backend, n, SGD(lr), dtype=dtype, seed=seed)
            runners[(name, kind)] = _FitRunner(trainer, batches, kind)
        for candidate, runner in native.runners(workload.model, first.params(), first.state(), batches,
                                                backend.select_devices(n), backend, dtype, lr).items():
            runners[(name, candidate)] = runner
    first = runners[(config["backends"][0], "toolkit")].trainer
    _draws_no_noise(workload.model, first, batches[0], dtype)
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
            alone[name] = products_alone(found, natives(name).products, dtype, seed=seed) * 1e3
    results = []
    for (name, candidate), runner in runners.items():
        toolkit_runner = runners[(name, "toolkit")]
        reference = {**toolkit_runner.params(), **toolkit_runner.trainer.state()}
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
            "library": natives(name).library(name, candidate),
        })
    return results


def _draws_no_noise(model, trainer, batch: tuple[np.ndarray, np.ndarray], dtype: str) -> None:
    """Runs ``model`` on the batch's first row as the natives do (a training run without per-example keys, the
    model state given), before anything is measured, so that a model that draws noise is refused at once.

    Raises:
        ModelStateError: the model draws noise.
    """
    from toolkit.nn.model import batch as model_batch

    backend, (x, y) = trainer.backend, batch
    device = backend.list_devices()[0]
    place = lambda tree: {k: backend.place(v, device) for k, v in tree.items()}  # noqa: E731
    model.train_losses(backend.ops(dtype), place(trainer.params()),
                       model_batch(backend.place(x[:1], device), None, place(trainer.state())),
                       backend.place(y[:1], device))


def _values(runner: Runner) -> dict[str, np.ndarray]:
    """A runner's parameters and model state (the toolkit's runner gives its parameters; natives give both)."""
    if isinstance(runner, (_ToolkitRunner, _FitRunner)):
        return {**runner.params(), **runner.trainer.state()}
    return runner.params()
