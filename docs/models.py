"""Measure the built-in real models for docs/guides/compare.md: ``multigpu compare`` of each (TensorFlow and Aesara, 1,
2 and 4 logical devices, float64, Adam, the same 5 batches) into docs/models.json, whose first steps are the compile
times the page shows; and the first step of ``lstm-text`` at several sequence lengths on each backend (one device,
float32, batch 32, ids padded with 0 in half the rows; on TensorFlow also with ``unroll=True``) into docs/lengths.json,
which shows whether compile time stays flat as sequences grow. ``nox -s docs`` runs it; then docs/update_readme.py
writes the tables.

    python docs/models.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The built-in models measured, by their ``multigpu --model`` names.
MODELS = ("mnist-convnet", "resnet", "transformer", "lstm-text")
DEVICES, STEPS, BATCH, DTYPE, LR = (1, 2, 4), 5, 32, "float64", 1e-3
#: The sequence lengths at which lstm-text's first step is timed.
LENGTHS = (10, 20, 40, 80)


def lengths() -> list[dict]:
    """lstm-text's first step (tracing and compiling) and median later step at each of :data:`LENGTHS`."""
    import time

    import numpy as np

    import toolkit

    records = []
    for backend in ("tensorflow", "aesara"):  # one-time start-up (runtime, JAX, caches) not counted in any length
        toolkit.DataParallel(toolkit.models.lstm_text(seq_len=2), backend, 1, toolkit.optim.Adam(LR),
                             dtype="float32").step(np.ones((BATCH, 2), int), np.zeros(BATCH, int))
    for length in LENGTHS:
        rng = np.random.default_rng(length)
        x = rng.integers(1, 32, size=(BATCH, length))
        x[: BATCH // 2, length // 2:] = 0  # padding, masked as Keras masks it
        y = rng.integers(0, 2, size=BATCH)
        for backend, unroll in (("tensorflow", False), ("tensorflow", True), ("aesara", False)):
            trainer = toolkit.DataParallel(toolkit.models.lstm_text(seq_len=length, unroll=unroll), backend, 1,
                                           toolkit.optim.Adam(LR), dtype="float32")
            start = time.perf_counter()
            trainer.step(x, y)
            first = time.perf_counter() - start
            times = []
            for _ in range(STEPS):
                start = time.perf_counter()
                trainer.step(x, y)
                times.append(time.perf_counter() - start)
            label = f"{backend} (unroll=True)" if unroll else backend
            records.append({"model": "lstm-text", "seq_len": length, "backend": label, "first_step_s": first,
                            "median_ms": 1e3 * float(np.median(times))})
            print(f"lstm-text at {length} steps on {label}: first step {first:.1f} s", file=sys.stderr)
    return records


def main() -> int:
    import toolkit

    toolkit.use_logical_devices(max(DEVICES))
    from toolkit.command.compare import public, run_comparison
    from toolkit.command.workloads import load_workload

    results = {}
    for name in MODELS:
        results[name] = public(run_comparison(load_workload(name), ("tensorflow", "aesara"), DEVICES, DTYPE, "adam",
                                              LR, STEPS, BATCH, seed=0))
        for run in results[name]["runs"]:
            run.pop("step_times_ms")
        print(f"{name}: measured", file=sys.stderr)
    (ROOT / "docs" / "models.json").write_text(json.dumps(results, indent=1) + "\n")
    (ROOT / "docs" / "lengths.json").write_text(json.dumps(lengths(), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
