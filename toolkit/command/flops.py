"""How much arithmetic a training step is, and how much the machine can do: the numbers behind ``multigpu bench``'s
achieved FLOP/s and fraction of peak.

A step's FLOPs are counted analytically from the shapes of the model's own ops, by tracing one training run with
ops that tally as they go (:func:`forward_flops`):

- ``matmul`` of ``[..., m, k] @ [..., k, n]``: ``2 * k`` per output element (a multiply and an add per term), the
  batch axes included (attention's scores and weighted values are matmuls);
- ``conv`` with a ``[kh, kw, c_in, c_out]`` kernel: ``2 * kh * kw * c_in`` per output element;
- a loop (``ops.scan``) counts its body once per iteration.

Elementwise ops, reductions, softmax, pooling and the optimizer's update are left out: on the models benched they are
a small share (they are what a matmul-bound step does between matmuls), so the achieved FLOP/s are a slight
underestimate. The backward pass is counted as twice the forward pass (:data:`BACKWARD_PER_FORWARD`: for every
matmul and convolution, the gradient for its input and the gradient for its weights are each one product of the
same size), so a step is three forward passes of the global batch.

The machine's limit is measured, not taken from a datasheet (:func:`matmul_peak`): the best FLOP/s of a large square
matmul through NumPy's BLAS, TensorFlow and JAX on this machine, in the bench's dtype, in a process of its own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

#: The backward pass's FLOPs per forward FLOP (see the module docstring).
BACKWARD_PER_FORWARD = 2
#: The side of the square matmul that measures the machine's peak, and how many timed runs (after one warm-up) the
#: best of is taken: 2048 is 17 GFLOP, 60 to 160 ms on this project's 2-core machine, so a call's own overhead
#: (tens of microseconds) is far below the runs' spread.
PEAK_MATMUL_SIZE, PEAK_REPEATS = 2048, 5


def _counting(ops_class: type) -> type:
    """``ops_class`` with ``matmul`` and ``conv`` tallying their FLOPs in ``self.flops``, and loops unrolled so
    each iteration's ops are counted (a backend's loop traces its body once)."""
    from toolkit.nn.ops import Ops

    class Counting(ops_class):
        flops = 0

        def matmul(self, x1, x2):
            out = super().matmul(x1, x2)
            self.flops += 2 * _size(self, out, "matmul") * _size(self, x1, "matmul", axis=-1)
            return out

        def conv(self, inputs, kernel, strides=1, padding="valid", dilation_rate=1):
            out = super().conv(inputs, kernel, strides, padding, dilation_rate)
            self.flops += 2 * _size(self, out, "conv") * _size(self, kernel, "conv", axis=slice(0, 3))
            return out

        def _scan(self, step, init, xs, length, reverse, unroll):
            return Ops._scan(self, step, init, xs, length, reverse, unroll)

    Counting.__name__ = f"Counting{ops_class.__name__}"
    return Counting


def _size(ops, x, op: str, axis: int | slice = slice(None)) -> int:
    """The number of elements of ``x`` (or of its axes ``axis``), from its static shape."""
    shape = ops.shape(x)
    sizes = [shape[axis]] if isinstance(axis, int) else shape[axis]
    if None in sizes:
        raise ValueError(f"cannot count the FLOPs of a {op} with an operand of unknown static shape {shape}")
    return math.prod(sizes)


def forward_flops(model, backend, params: dict[str, np.ndarray], state: dict[str, np.ndarray], x: Any,
                  y: np.ndarray, dtype: str, seed: int = 0) -> int:
    """The matmul and convolution FLOPs of one training-mode forward pass of ``model`` (and its loss) on the batch
    ``x, y``, counted from the shapes as ``backend`` traces it (dropout keys from ``seed``'s first step; model state
    as given)."""
    from toolkit.nn.context import example_keys, single_replica
    from toolkit.nn.model import batch

    ops = _counting(type(backend.ops(dtype)))(dtype)
    device = backend.list_devices()[0]
    place = lambda tree: {k: backend.place(v, device) for k, v in tree.items()}  # noqa: E731
    keys = backend.place(example_keys(seed, 1, np.arange(len(y))), device)
    model.train_losses(ops, place(params), batch(x, keys, place(state)), y, replica_sum=single_replica)
    return int(ops.flops)


def step_flops(forward: int) -> int:
    """A training step's FLOPs from its forward pass's: forward plus backward (:data:`BACKWARD_PER_FORWARD`)."""
    return forward * (1 + BACKWARD_PER_FORWARD)


def matmul_peak(products: dict[str, Callable[[np.ndarray, np.ndarray], Callable[[], Any]]], dtype: str,
                size: int = PEAK_MATMUL_SIZE, repeats: int = PEAK_REPEATS) -> dict[str, float]:
    """The best GFLOP/s of a ``size x size`` matmul (``2 * size**3`` FLOPs) in ``dtype`` through NumPy's BLAS and
    each of ``products`` (a library's name -> ``make(a, b)``, a call that computes ``a @ b`` with it and waits for the
    result: each backend's ``native.matmul``), each timed ``repeats`` times after a warm-up run."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
    runs = {"numpy": lambda: a @ b, **{library: make(a, b) for library, make in products.items()}}
    peaks = {}
    for library, run in runs.items():
        run()
        best = math.inf
        for _ in range(repeats):
            began = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - began)
        peaks[library] = 2 * size ** 3 / best / 1e9
    return peaks
