"""Data-parallel training of an MLP on scikit-learn's handwritten digits, on every installed backend.

The same model (``toolkit.models.mlp``), the same initial parameters and the same batches (a new permutation each
epoch, the last smaller batch of an epoch included) go to each backend, in lockstep. The script prints the loss per
epoch, the step times, test accuracy and the parameter difference between the backends; with ``--out`` it also writes
the run as ``multigpu compare`` does (its table, ``results.json``, plots): one run, one set of numbers.

    python examples/digits_data_parallel.py --devices 2 --out results
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import toolkit


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, help="logical CPU devices (or GPUs) to train on")
    parser.add_argument("--backends", default=",".join(toolkit.available_backends()),
                        help="comma-separated backends (default: every installed one)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=128, help="global batch size, split across the devices")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also write results.json and plots to this folder")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    toolkit.use_logical_devices(args.devices)  # before any framework starts

    from rich.console import Console

    from toolkit.command.compare import public, run_comparison
    from toolkit.command.main import print_table
    from toolkit.command.plots import write_plots
    from toolkit.command.workloads import Workload, epoch_batches
    from toolkit.tolerances import FLOAT64_ATOL

    console = Console()
    names = [name.strip() for name in args.backends.split(",") if name.strip()]
    workload = Workload(f"digits-mlp-64-{args.hidden}-10", toolkit.models.mlp([64, args.hidden, 10]),
                        toolkit.datasets.digits)
    x_train = workload.data(args.seed)[0]
    epochs = epoch_batches(len(x_train), args.batch, args.epochs, args.seed)
    print(f"{workload.name}, Adam({args.lr}), global batch {args.batch} split over {args.devices} device(s), "
          f"{args.dtype}, {len(x_train)} training digits, {args.epochs} epochs of {len(epochs[0])} steps")
    with console.status("training...") as status:
        results = run_comparison(workload, names, [args.devices], args.dtype, "adam", args.lr, 0, args.batch,
                                 args.seed, batches=[b for epoch in epochs for b in epoch],
                                 progress=lambda text: status.update(f"training: {text}"))
    results.update(toolkit_version=toolkit.__version__, config={
        "model": workload.name, "backends": names, "devices": [args.devices], "dtype": args.dtype,
        "optimizer": "adam", "lr": args.lr, "steps": sum(map(len, epochs)), "batch": args.batch, "seed": args.seed,
        "epochs": args.epochs})

    ends = np.cumsum([len(epoch) for epoch in epochs])
    per_epoch = {run["backend"]: [float(np.mean(run["losses"][end - len(e):end])) for e, end in zip(epochs, ends)]
                 for run in results["runs"]}
    width = max(map(len, names))
    for i, name in enumerate(names):
        label = "mean training loss per epoch:" if i == 0 else ""
        print(f"{label:<30}{name:<{width}} " + " ".join(f"{loss:.6f}" for loss in per_epoch[name]))
    print_table(results)
    summary = {"epoch_losses": per_epoch, "accuracy": {r["backend"]: r["accuracy"] for r in results["runs"]}}
    if len(names) >= 2:
        first, second = (next(r["params"] for r in results["runs"] if r["backend"] == b) for b in names[:2])
        difference = max(float(np.max(np.abs(first[k].astype(np.float64) - second[k]))) for k in first)
        scale = max(float(np.max(np.abs(v))) for v in first.values())
        summary["max_param_difference"] = difference
        print(f"parity {names[0]} vs {names[1]} after {results['config']['steps']} steps: max |param difference| = "
              f"{difference:.2g} ({difference / scale:.2g} of the scale)")
        if args.dtype == "float64" and difference > FLOAT64_ATOL:
            raise SystemExit(f"parity FAILED: {difference:.3g} > {FLOAT64_ATOL:g}")
    if args.out:
        from pathlib import Path

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(public(results), indent=2))
        written = [out / "results.json", *write_plots(results, out)]
        print("wrote " + " and ".join(map(str, written)))
    return summary


if __name__ == "__main__":
    main()
