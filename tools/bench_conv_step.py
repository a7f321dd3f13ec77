"""A whole training step of a convolutional model through the toolkit on a Theano-family backend, with each
convolution computed as ``backends/theano/kernels/conv_lowering.py``'s rule says and as other rules say, interleaved in
one process (the machine is shared: ratios within a round cancel its load): the check that a lowering which wins per
convolution (``tools/bench_conv.py``) also wins in the step, where the convolutions share the cores and the memory
with everything else.

Run it in an environment with the backend (and TensorFlow for ``--tensorflow``), e.g.::

    .nox/parity/bin/python tools/bench_conv_step.py --backend aesara --dtype float64 --rules rule,xla --tensorflow

It prints each candidate's first step (tracing and compiling), its median step over rounds, and its ratio over the
first rule's step with a 90% bootstrap interval (paired rounds), and the load average before and after.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for toolkit

import numpy as np  # noqa: E402

import toolkit  # noqa: E402
from toolkit.command.bench.measure import make_batches  # noqa: E402
from toolkit.command.bench.statistics import ratio_interval  # noqa: E402
from toolkit.command.workloads import load_workload  # noqa: E402
from toolkit.training.optim import SGD  # noqa: E402


def rules():
    """The rules a candidate may trace its convolutions with, by name: ``rule`` (the lowering's), ``xla`` (XLA's
    convolution in every pass), ``float32`` (the lowering's choice for a float32 convolution of the same shapes),
    ``no-onednn`` (the lowering's choice where oneDNN is not installed)."""
    from toolkit.backends.theano.kernels import conv_lowering

    def xla(platform, dtype, *shapes):
        return dict.fromkeys(conv_lowering.PASSES, "xla")

    def as_float32(platform, dtype, *shapes):
        return conv_lowering.lowering(platform, "float32", *shapes)

    def no_onednn(*arguments):
        found = conv_lowering._onednn_primitives
        conv_lowering._onednn_primitives = lambda *shapes: None
        try:
            return conv_lowering.lowering(*arguments)
        finally:
            conv_lowering._onednn_primitives = found

    return {"rule": conv_lowering.lowering, "xla": xla, "float32": as_float32, "no-onednn": no_onednn}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet-bench")
    parser.add_argument("--backend", default="aesara")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch", type=int, default=None, help="the workload's bench batch unless given")
    parser.add_argument("--rules", default="rule,xla",
                        help="of rule, xla, float32, no-onednn; the first is the baseline")
    parser.add_argument("--linker", default="jax", choices=["jax", "c"],
                        help="the Theano family's linker (the rules apply to the JAX linker's traced convolutions; "
                             "MULTIGPU_ONEDNN=off runs the C linker without oneDNN)")
    parser.add_argument("--tensorflow", action="store_true", help="also the toolkit's step on TensorFlow")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3, help="steps timed in each round")
    args = parser.parse_args(argv)
    workload = load_workload(args.model)
    x, y, _, _ = workload.data(0)
    batches = make_batches(x, y, args.batch or workload.bench_batch, args.steps, 0, args.dtype)
    backend = toolkit.get_backend(args.backend, **({"linker": "c"} if args.linker == "c" else {}))
    # The family's modules load as the engine's package's (backends/theano/__init__.py says why).
    # The rules are the family's own module's (rules()), so patching the engine's copy does not reach them.
    engine_lowering = importlib.import_module(f"toolkit.backends.{args.backend}.kernels.conv_lowering")

    traced = engine_lowering.lowering
    trainers, first = {}, {}
    names = list(dict.fromkeys(args.rules.split(",")))
    for name in names:
        # A model of its own per candidate, so that no trainer's state is another's.
        trainers[name] = toolkit.DataParallel(load_workload(args.model).model, backend, 1, SGD(0.01),
                                              dtype=args.dtype, seed=0)
        engine_lowering.lowering = rules()[name]
        try:  # the first step traces the model: its convolutions take this rule
            began = time.perf_counter()
            trainers[name].step(*batches[0])
            first[name] = time.perf_counter() - began
        finally:
            engine_lowering.lowering = traced
    if args.tensorflow:
        names.append("tensorflow")
        trainers["tensorflow"] = toolkit.DataParallel(load_workload(args.model).model,
                                                      toolkit.get_backend("tensorflow"), 1, SGD(0.01),
                                                      dtype=args.dtype, seed=0)
        began = time.perf_counter()
        trainers["tensorflow"].step(*batches[0])
        first["tensorflow"] = time.perf_counter() - began
    for trainer in trainers.values():  # the rest of a warm-up cycle
        for i in range(1, args.steps):
            trainer.step(*batches[i])
    load = os.getloadavg()[0]
    times = {name: [] for name in names}
    for round_ in range(args.rounds):
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            began = time.perf_counter()
            for i in range(args.steps):
                trainers[name].step(*batches[i])
            times[name].append((time.perf_counter() - began) / args.steps * 1e3)
    params = {name: trainers[name].params() for name in names}
    print(f"{args.model} on {args.backend}, {args.dtype}, batch {batches.size}, {args.rounds} rounds of "
          f"{args.steps} steps; load average {load:.1f} before the rounds, {os.getloadavg()[0]:.1f} after")
    base = names[0]
    for name in names:
        median = statistics.median(times[name])
        cell = f"{name:10s} first step {first[name]:6.2f} s, step {median:8.1f} ms"
        if name != base:
            low, high = ratio_interval(times[name], times[base], paired=True)
            # Over the largest parameter, not each its own: a bias before a batch normalization has a gradient
            # of rounding size, and its relative difference says nothing.
            difference = (max(float(np.max(np.abs(params[name][k] - params[base][k]))) for k in params[base]) /
                          max(float(np.max(np.abs(params[base][k]))) for k in params[base]))
            cell += (f", x{median / statistics.median(times[base]):.2f} ({low:.2f}-{high:.2f}) over {base}; "
                     f"parameters' largest difference {difference:.1e} of the largest parameter")
        print(cell, flush=True)


if __name__ == "__main__":
    main()
