"""The floor plain JAX sets for a dispatch-bound data-parallel step on logical CPU devices, for the scaling notes of
docs/guides/benchmarks.md: the bench MLP (64-128-10, global batch 256, SGD 0.05, float32) written directly in JAX, one
``jax.jit`` on one device against one ``jax.jit`` of a ``shard_map`` (gradients and loss psummed) on 2 and 4 devices,
the parameters donated and replicated. Each multi-device step is timed twice: with the batch put on the devices each
step (what training from host data does, and what the toolkit's step does) and with a batch placed once (the program's
own dispatch and collectives). Median over rounds of ms a step, and each over the one-device step.

Run it in either Theano-family environment (jax 0.4.30 under Aesara, jax 0.10 under PyTensor):

    python docs/jax_mesh_floor.py [--steps 400] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import time

#: Logical devices the run needs; XLA reads the flag once, when JAX starts.
DEVICES = (2, 4)
WIDTHS, BATCH, LR = (64, 128, 10), 256, 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="steps a round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={max(DEVICES)}"

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if hasattr(jax, "shard_map"):  # jax >= 0.7
        def shard_map(fn, mesh, in_specs, out_specs):
            return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    else:
        from jax.experimental.shard_map import shard_map as old

        def shard_map(fn, mesh, in_specs, out_specs):
            return old(fn, mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)

    rng = np.random.default_rng(0)
    (i, h, o) = WIDTHS
    params = {"w1": (rng.normal(size=(i, h)) * 0.1).astype("float32"), "b1": np.zeros(h, "float32"),
              "w2": (rng.normal(size=(h, o)) * 0.1).astype("float32"), "b2": np.zeros(o, "float32")}
    x_all = rng.normal(size=(BATCH, i)).astype("float32")
    y_all = rng.integers(0, o, BATCH)

    def loss(p, x, y):  # this part's sum over the global batch size: the psum of the parts is the batch mean
        z = jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        return -jnp.sum(jnp.take_along_axis(jax.nn.log_softmax(z), y[:, None], 1)) / BATCH

    def sgd(p, g):
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)

    def timed(step) -> float:
        for _ in range(20):
            step()
        rounds = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            rounds.append((time.perf_counter() - start) / args.steps * 1e3)
        return float(np.median(rounds))

    one = jax.jit(lambda p, x, y: (lambda v, g: (v, sgd(p, g)))(*jax.value_and_grad(loss)(p, x, y)),
                  donate_argnums=0)
    held = {"p": jax.device_put(params)}

    def one_step():
        value, held["p"] = one(held["p"], x_all, y_all)
        np.asarray(value)  # training reads the loss (and the toolkit its finiteness flag) every step

    base = timed(one_step)
    print(f"jax {jax.__version__}, {WIDTHS} MLP, batch {BATCH}: 1 device, jax.jit: {base:.3f} ms a step")
    for n in DEVICES:
        mesh = Mesh(np.asarray(jax.devices()[:n]), ("devices",))
        whole, split = PartitionSpec(), PartitionSpec("devices")

        def replica(p, x, y):
            value, grads = jax.lax.psum(jax.value_and_grad(loss)(p, x[0], y[0]), "devices")
            return value, sgd(p, grads)

        step = jax.jit(shard_map(replica, mesh, (whole, split, split), whole), donate_argnums=0)
        held["p"] = jax.device_put(params, NamedSharding(mesh, whole))
        rows = (x_all.reshape(n, BATCH // n, i), y_all.reshape(n, BATCH // n))
        on_split = NamedSharding(mesh, split)
        placed = jax.device_put(rows, on_split)

        def put_each_step(step=step, rows=rows, on_split=on_split):
            value, held["p"] = step(held["p"], *jax.device_put(rows, on_split))
            np.asarray(value)

        def already_placed(step=step, placed=placed):
            value, held["p"] = step(held["p"], *placed)
            np.asarray(value)

        put, kept = timed(put_each_step), timed(already_placed)
        print(f"{n} devices, jit of shard_map: batch put each step {put:.3f} ms ({put / base:.2f}x), "
              f"batch placed once {kept:.3f} ms ({kept / base:.2f}x)")


if __name__ == "__main__":
    main()
