"""Data-parallel training of an MLP on scikit-learn's handwritten digits, on every installed backend.

The same model (``toolkit.nn.models.mlp``), the same initial parameters and the same batches go to each backend; the
script prints the loss per epoch, step times, test accuracy and the parameter difference between backends.

    python examples/digits_data_parallel.py --devices 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import toolkit


def parse_args() -> argparse.Namespace:
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
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    toolkit.use_logical_devices(args.devices)  # before any framework starts

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from toolkit.datasets import digits
    from toolkit.nn.models import accuracy, mlp
    from toolkit.tolerances import FLOAT64_ATOL

    console = Console()
    x_train, y_train, x_test, y_test = digits(seed=args.seed)
    model = mlp([64, args.hidden, 10], name=f"digits-mlp-64-{args.hidden}-10")
    names = [name.strip() for name in args.backends.split(",") if name.strip()]
    trainers = {name: toolkit.DataParallel(model, name, args.devices, toolkit.optim.Adam(args.lr), dtype=args.dtype,
                                           seed=args.seed) for name in names}
    devices = escape("[" + ", ".join(str(d) for d in next(iter(trainers.values())).devices) + "]")
    console.print(f"[bold]{model.name}[/], Adam({args.lr}), global batch {args.batch} split over {devices}, "
                  f"{args.dtype}, {len(x_train)} training and {len(x_test)} test digits")

    losses = {name: [] for name in names}
    times = {name: [] for name in names}
    rng = np.random.default_rng(args.seed)
    with console.status("training...") as status:
        for epoch in range(args.epochs):
            order = rng.permutation(len(x_train))
            epoch_losses = {name: [] for name in names}
            for start in range(0, len(order), args.batch):
                index = order[start:start + args.batch]
                for name, trainer in trainers.items():
                    began = time.perf_counter()
                    epoch_losses[name].append(trainer.step(x_train[index], y_train[index]))
                    times[name].append(time.perf_counter() - began)
            for name in names:
                losses[name].append(float(np.mean(epoch_losses[name])))
            status.update(f"epoch {epoch + 1}/{args.epochs}")

    table = Table(title="mean training loss per epoch")
    table.add_column("epoch", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for epoch in range(args.epochs):
        table.add_row(str(epoch + 1), *(f"{losses[name][epoch]:.6f}" for name in names))
    console.print(table)

    table = Table(title=f"step time on {args.devices} device(s) and test accuracy")
    for column in ("backend", "first step", "median step", "p10-p90", "test accuracy"):
        table.add_column(column, justify="right")
    for name, trainer in trainers.items():
        steady = times[name][1:] or times[name]
        deciles = statistics.quantiles(steady, n=10) if len(steady) > 1 else [steady[0]] * 9
        params = trainer.params()
        backend = trainer.backend
        logits = backend.make_parallel(lambda ops, x, p=params: model.forward(ops, p, x), trainer.devices, x=x_test)
        table.add_row(name, f"{times[name][0] * 1e3:.1f} ms", f"{statistics.median(steady) * 1e3:.2f} ms",
                      f"{deciles[0] * 1e3:.2f}-{deciles[-1] * 1e3:.2f} ms",
                      f"{accuracy(backend.to_numpy(logits), y_test):.3f}")
    console.print(table)
    console.print("first step: includes tracing (TensorFlow) or graph compilation (Aesara, JAX linker)")

    if len(names) >= 2:
        first, second = (trainers[name].params() for name in names[:2])
        difference = max(float(np.max(np.abs(first[k] - second[k]))) for k in first)
        scale = max(float(np.max(np.abs(v))) for v in first.values())
        loss_gap = max(abs(a - b) for a, b in zip(losses[names[0]], losses[names[1]]))
        tolerance = f"float64 tolerance {FLOAT64_ATOL:g}" if args.dtype == "float64" else "float32"
        console.print(f"parity {names[0]} vs {names[1]} after {trainers[names[0]].step_count} steps: "
                      f"max |param difference| = {difference:.3g} ({difference / scale:.3g} of the parameter scale, "
                      f"{tolerance}); max epoch-loss difference = {loss_gap:.3g}")
        if args.dtype == "float64" and difference > FLOAT64_ATOL:
            raise SystemExit(f"parity FAILED: {difference:.3g} > {FLOAT64_ATOL:g}")


if __name__ == "__main__":
    main()
