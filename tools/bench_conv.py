"""Which way the Theano family's JAX linker should compute a convolution, measured: XLA's convolution
(``lax.conv_general_dilated``) against the lowerings of ``backends/theano/kernels/conv_lowering.py``, on the convolution
shapes of ``multigpu bench``'s ResNet and of the parity convnet, forward and forward + both gradients (``jax.vjp``),
jitted, taking turns in rounds in one process (the machine is shared: ratios in the same round cancel its load).

Run it with the JAX of the environment to measure, e.g.::

    .nox/tests-aesara/bin/python tools/bench_conv.py --rounds 7
    .nox/tests-pytensor/bin/python tools/bench_conv.py --dtype float64

It prints, per shape and pass, each candidate's median milliseconds and its ratio over XLA's with a 90% bootstrap
interval (paired rounds), and what ``conv_lowering.lowering`` chooses there (``x``: XLA's, ``p``: patches, ``f``:
folded, for the forward, the input's gradient and the kernel's gradient). ``tools/bench_conv_step.py`` checks a
choice on a whole training step.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for toolkit

import jax  # noqa: E402
import numpy as np  # noqa: E402

from toolkit.backends.theano.kernels.conv_lowering import (  # noqa: E402
    PASSES,
    convolution,
    folded_conv,
    lowering,
    patches_conv,
    xla_conv,
)
from toolkit.command.bench.statistics import ratio_interval  # noqa: E402

#: (name, batch, spatial size, window, in channels, out channels, stride, padding): the ResNet of ``multigpu
#: bench`` (width 16, batch 128, 32x32x3 images) and the parity convnet (8x8 digits, filters 16 and 32).
SHAPES = (
    ("resnet stem", 128, 32, 3, 3, 16, 1, "same"),
    ("resnet s0 3x3", 128, 32, 3, 16, 16, 1, "same"),
    ("resnet s1 3x3/2", 128, 32, 3, 16, 32, 2, "same"),
    ("resnet s1 3x3", 128, 16, 3, 32, 32, 1, "same"),
    ("resnet s1 1x1/2", 128, 32, 1, 16, 32, 2, "valid"),
    ("resnet s2 3x3/2", 128, 16, 3, 32, 64, 2, "same"),
    ("resnet s2 3x3", 128, 8, 3, 64, 64, 1, "same"),
    ("resnet s2 1x1/2", 128, 16, 1, 32, 64, 2, "valid"),
    ("convnet 1", 256, 8, 3, 1, 16, 1, "same"),
    ("convnet 2", 256, 4, 3, 16, 32, 1, "same"),
)


def _same(size: int, window: int, stride: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def chosen(platform: str):
    """The convolution as ``conv_lowering.lowering`` chooses it on ``platform``, pass by pass."""
    def conv(inputs, kernel, strides, padding, dilation):
        passes = lowering(platform, inputs.dtype, inputs.shape, kernel.shape, strides, padding, dilation, 1, False)
        return convolution(passes, strides, padding, dilation)(inputs, kernel)

    return conv


def compiled(conv, strides, padding, dilation, grads: bool):
    def forward(x, w):
        return conv(x, w, strides, padding, dilation)

    if not grads:
        return jax.jit(forward)

    def both(x, w, cotangent):
        value, pullback = jax.vjp(forward, x, w)
        return value, *pullback(cotangent)

    return jax.jit(both)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5, help="calls timed in each round")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--candidates", default="xla,patches,folded,rule",
                        help="of xla, patches, folded, rule; the first is the baseline (folded is left out on "
                             "shapes strided along a leading spatial axis, where it does not apply)")
    parser.add_argument("--only", default="", help="shapes whose name contains this")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", args.dtype == "float64")
    names = args.candidates.split(",")
    platform = jax.default_backend()
    candidates = {"xla": xla_conv, "patches": patches_conv, "folded": folded_conv, "rule": chosen(platform)}
    rng = np.random.default_rng(0)
    print(f"jax {jax.__version__}, {platform}, {args.dtype}, {args.rounds} rounds of {args.calls} calls; "
          "ms a call, median; ratio over xla (90% interval)")
    for name, batch, size, window, cin, cout, stride, pad in SHAPES:
        if args.only not in name:
            continue
        padding = (_same(size, window, stride),) * 2 if pad == "same" else ((0, 0),) * 2
        x = rng.standard_normal((batch, size, size, cin)).astype(args.dtype)
        w = rng.standard_normal((window, window, cin, cout)).astype(args.dtype)
        out = math.ceil(size / stride) if pad == "same" else (size - window) // stride + 1
        cotangent = rng.standard_normal((batch, out, out, cout)).astype(args.dtype)
        passes = lowering(platform, x.dtype, x.shape, w.shape, (stride,) * 2, padding, (1, 1), 1, False)
        choice = "/".join(passes[p][0] for p in PASSES)  # x or p for forward, input gradient, kernel gradient
        gflop = 2 * batch * out * out * window * window * cin * cout / 1e9
        here = [c for c in names if c != "folded" or stride == 1]
        for grads in (False, True):
            calls = {c: compiled(candidates[c], (stride,) * 2, padding, (1, 1), grads) for c in here}
            operands = (x, w, cotangent) if grads else (x, w)
            reference = None
            for c, f in calls.items():  # compile, and check every candidate gives XLA's numbers
                found = jax.block_until_ready(f(*operands))
                found = found if isinstance(found, tuple) else (found,)
                if reference is None:
                    reference = found
                scale = max(float(np.max(np.abs(np.asarray(r)))) for r in reference)
                error = max(float(np.max(np.abs(np.asarray(a) - np.asarray(r)))) for a, r in zip(found, reference))
                assert error <= 1e-4 * scale, (name, c, error, scale)
            times = {c: [] for c in here}
            for round_ in range(args.rounds):
                turn = round_ % len(here)
                for c in here[turn:] + here[:turn]:
                    began = time.perf_counter()
                    for _ in range(args.calls):
                        jax.block_until_ready(calls[c](*operands))
                    times[c].append((time.perf_counter() - began) / args.calls * 1e3)
            cells = []
            for c in here:
                median = statistics.median(times[c])
                cell = f"{c} {median:7.2f} ms ({gflop * (3 if grads else 1) / median * 1e3:5.1f} GFLOP/s)"
                if c != here[0]:
                    low, high = ratio_interval(times[c], times[here[0]], paired=True)
                    cell += f" x{median / statistics.median(times[here[0]]):.2f} ({low:.2f}-{high:.2f})"
                cells.append(cell)
            print(f"{name:16s} {'fwd+grads' if grads else 'forward':9s} rule {choice} | " + " | ".join(cells),
                  flush=True)


if __name__ == "__main__":
    main()
