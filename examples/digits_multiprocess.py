"""Data-parallel training of the digits MLP across processes: each process reads only its part of every global batch.

Run it as several processes on this machine:

    multigpu launch -n 2 -- python examples/digits_multiprocess.py --backend tensorflow
    multigpu launch -n 2 -- python examples/digits_multiprocess.py --backend aesara

or under a cluster's environment (TF_CONFIG, JAX_COORDINATOR_ADDRESS/JAX_NUM_PROCESSES/JAX_PROCESS_ID, or SLURM's
variables); alone, it is one process. Every process starts from the same parameters (same seed), draws the same
global batches (same seed) and keeps its rows of each (``toolkit.distributed.process_slice``); gradients are averaged
over all processes, so every process holds the same parameters after every step. Process 0 prints the progress.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import toolkit
from toolkit import distributed
from toolkit.datasets import digits
from toolkit.nn.models import accuracy, mlp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["tensorflow", "aesara", "pytensor"], default="tensorflow")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=128, help="global batch size, split across the processes")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="process 0 also prints the result as one JSON line")
    args = parser.parse_args()

    cluster = distributed.initialize(args.backend)  # before the framework starts; reads the launcher's environment
    model = mlp([64, 64, 10], name="digits-mlp-64-64-10")
    trainer = toolkit.DataParallel(model, args.backend, "all", toolkit.optim.Adam(0.01), dtype=args.dtype,
                                   seed=args.seed)
    x_train, y_train, x_test, y_test = digits(args.seed)
    order = np.random.default_rng(args.seed)  # the same on every process: the same global batches
    mine = distributed.process_slice(args.batch)
    losses = []
    for step in range(args.steps):
        batch = order.choice(len(x_train), size=args.batch, replace=False)[mine]
        losses.append(trainer.step(x_train[batch], y_train[batch]))
        if cluster.process_id == 0 and (step + 1) % 20 == 0:
            print(f"step {step + 1}: loss {losses[-1]:.4f}", flush=True)
    params = trainer.params()
    logits = trainer.backend.make_parallel(lambda ops, x: model.forward(ops, params, x), trainer.devices, x=x_test)
    score = accuracy(trainer.backend.to_numpy(logits), y_test)
    checksum = float(sum(np.sum(v.astype(np.float64)) for v in params.values()))
    print(f"process {cluster.process_id} of {cluster.num_processes} ({len(trainer.devices)} device(s), rows "
          f"{mine.start}-{mine.stop - 1} of each batch): test accuracy {score:.3f}, parameter checksum {checksum:.10f}")
    if args.json and cluster.process_id == 0:
        print(json.dumps({"backend": args.backend, "processes": cluster.num_processes, "losses": losses,
                          "accuracy": score, "checksum": checksum}))


if __name__ == "__main__":
    main()
