"""Measure the built-in real models for the README: ``multigpu compare`` of each (TensorFlow and Aesara, 1, 2 and
4 logical devices, float64, Adam, the same 5 batches) into docs/models.json, whose first steps are the compile times
the README shows. ``nox -s docs`` runs it; then docs/update_readme.py writes the table.

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
