"""Check the parity check, for docs/guides/compare.md ("Parity that a one-backend defect cannot fool"): ``multigpu
parity``'s judgment (toolkit.command.parity.judge) of TensorFlow against Aesara on every built-in model, float32,
Adam (Keras' eps, 1e-7), 1 and 2 logical devices: the real backends over :data:`SEEDS` (they must pass), and each
model with a defect of a known size (``--perturb``): outputs 0.1% larger on Aesara's 2-device runs only (the
researcher's case of issue 51), and 0.01% larger on every Aesara run (they must fail). As ``multigpu parity`` does,
each backend's first step is also taken in float64 (``first_step_rounding``). Writes docs/parity.json;
docs/update_readme.py writes the page's table from it, a model at a time (a run of some models keeps the others'
records). ``nox -s docs`` runs it (about 45 minutes on the 2-core machine).

    python docs/parity.py [MODEL ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The built-in models judged and their steps: the larger ones fewer (a Transformer or ResNet step is 50-100 times
#: the MLP's on this machine).
MODELS = {"digits-mlp": 300, "digits-conv": 300, "mnist-convnet": 300, "polynomial": 300, "lstm-text": 100,
          "transformer": 20, "resnet": 20}
SEEDS = tuple(range(10))
#: The defects each model is run with (each is judged from step 1), for these steps, on the first three seeds; on the
#: two largest models the first seed.
DEFECTS, DEFECT_STEPS = ("aesara:1e-3:2", "aesara:1e-4"), 30
DEFECT_SEEDS = {model: (0,) if model in ("transformer", "resnet") else (0, 1, 2) for model in MODELS}
BACKENDS, DEVICES, DTYPE, OPTIMIZER, LR, BATCH = ("tensorflow", "aesara"), (1, 2), "float32", "adam", 0.01, 64


def main(models) -> int:
    import toolkit

    toolkit.use_logical_devices(max(DEVICES))
    from toolkit.command.compare import run_comparison
    from toolkit.command.parity import judge
    from toolkit.command.perturb import parse_perturbation
    from toolkit.command.workloads import load_workload

    path = ROOT / "docs" / "parity.json"
    for model in models:
        records = []
        workload = load_workload(model)
        cases = [("real", None, seed, MODELS[model]) for seed in SEEDS]
        cases += [(defect, parse_perturbation(defect, BACKENDS, DEVICES), seed, DEFECT_STEPS)
                  for defect in DEFECTS for seed in DEFECT_SEEDS[model]]
        for case, perturbation, seed, steps in cases:
            results = run_comparison(workload, BACKENDS, DEVICES, DTYPE, OPTIMIZER, LR, steps, BATCH, seed,
                                     perturbation=perturbation, first_step_rounding=True)
            for devices, found in judge(results, DTYPE).items():
                records.append({"model": model, "case": case, "seed": seed, "devices": devices, "steps": steps,
                                "passed": found.passed, "judged": max(found.params.judged.values(), default=0),
                                "split": found.params.split, "first_beyond": found.first_beyond})
            print(f"{model} {case} seed {seed}: " + ", ".join(
                f"x{r['devices']} {'ok' if r['passed'] else 'FAILED'}" for r in records[-len(DEVICES):]),
                file=sys.stderr, flush=True)
        kept = [r for r in json.loads(path.read_text()) if r["model"] != model] if path.exists() else []
        order = list(MODELS)
        found = sorted(kept + records, key=lambda r: order.index(r["model"]) if r["model"] in order else len(order))
        path.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(MODELS)))
