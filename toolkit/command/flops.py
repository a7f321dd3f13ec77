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

Between the two sits what the model's own products reach (:func:`products_alone`): every matmul and convolution the
count found, at its shapes, with its two gradients and nothing else, in one compiled call of a library. A step can
at best reach that; the products' share of the peak says what their shapes allow (small channel counts, thin
matmuls), and the step's share of it what the uncounted work (normalization, softmax, elementwise ops, the update)
and the framework's overhead take.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The backward pass's FLOPs per forward FLOP (see the module docstring).
BACKWARD_PER_FORWARD = 2
#: The side of the square matmul that measures the machine's peak, and how many timed runs (after one warm-up) the
#: best of is taken: 2048 is 17 GFLOP, 60 to 160 ms on this project's 2-core machine, so a call's own overhead
#: (tens of microseconds) is far below the runs' spread.
PEAK_MATMUL_SIZE, PEAK_REPEATS = 2048, 5


@dataclass(frozen=True)
class Product:
    """One matmul or convolution of a traced forward pass.

    Attributes:
        kind: ``"matmul"`` or ``"conv"``.
        shapes: its two operands' shapes.
        options: the convolution's keyword options, as ``(name, value)`` pairs (empty for a matmul).
        flops: its FLOPs, counted as the module's docstring says.
    """

    kind: str
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    options: tuple[tuple[str, Any], ...]
    flops: int

    def apply(self, ops, a, b):
        """The product computed again on new operands.

        Args:
            ops: the ops to compute it with.
            a, b: operands of :attr:`shapes`.

        Returns:
            ``ops.matmul(a, b)``, or ``ops.conv(a, b, **options)``.
        """
        return ops.matmul(a, b) if self.kind == "matmul" else ops.conv(a, b, **dict(self.options))


def _counting(ops_class: type) -> type:
    """``ops_class`` with ``matmul`` and ``conv`` recording each product (:class:`Product`) in ``self.products``,
    and loops unrolled so each iteration's ops are counted (a backend's loop traces its body once)."""
    from toolkit.ops.interface import Ops

    class Counting(ops_class):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.products: list[Product] = []

        def matmul(self, x1, x2):
            out = super().matmul(x1, x2)
            self._record("matmul", x1, x2, (), 2 * _size(self, out, "matmul") * _size(self, x1, "matmul", axis=-1))
            return out

        def conv(self, inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
            out = super().conv(inputs, kernel, strides=strides, padding=padding, data_format=data_format,
                               dilation_rate=dilation_rate)
            options = (("strides", strides), ("padding", padding), ("dilation_rate", dilation_rate))
            options += (("data_format", data_format),) if data_format is not None else ()
            # Each output entry is a dot over the kernel's window and input channels (per group): all its axes but
            # the last.
            self._record("conv", inputs, kernel, options,
                         2 * _size(self, out, "conv") * _size(self, kernel, "conv", axis=slice(0, -1)))
            return out

        def _record(self, kind, a, b, options, flops) -> None:
            self.products.append(Product(kind, (tuple(self.shape(a)), tuple(self.shape(b))), options, flops))

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
    as given).

    Args:
        model: the toolkit :class:`~toolkit.Model`.
        backend: the backend that traces it (its ops, subclassed to count).
        params: the parameters, NumPy arrays by name.
        state: the model state, NumPy arrays by name.
        x: the batch's inputs.
        y: the batch's targets.
        dtype: the computation dtype.
        seed: the seed of the per-example keys (dropout).

    Returns:
        The FLOPs, an int.

    Raises:
        ValueError: an operand of a product whose static shape is unknown.
    """
    return sum(p.flops for p in forward_products(model, backend, params, state, x, y, dtype, seed))


def forward_products(model, backend, params: dict[str, np.ndarray], state: dict[str, np.ndarray], x: Any,
                     y: np.ndarray, dtype: str, seed: int = 0) -> list[Product]:
    """Every matmul and convolution of :func:`forward_flops`'s forward pass, in order.

    Args:
        model: the toolkit :class:`~toolkit.Model`.
        backend: the backend that traces it (its ops, subclassed to count).
        params: the parameters, NumPy arrays by name.
        state: the model state, NumPy arrays by name.
        x: the batch's inputs.
        y: the batch's targets.
        dtype: the computation dtype.
        seed: the seed of the per-example keys (dropout).

    Returns:
        The :class:`Product` s, in the order they ran.

    Raises:
        ValueError: an operand of a product whose static shape is unknown.
    """
    from toolkit.nn.context import example_keys, single_replica
    from toolkit.nn.model import batch

    ops = _counting(type(backend.ops(dtype)))(dtype)
    device = backend.list_devices()[0]
    place = lambda tree: {k: backend.place(v, device) for k, v in tree.items()}  # noqa: E731
    keys = backend.place(example_keys(seed, 1, np.arange(len(y))), device)
    model.train_losses(ops, place(params), batch(x, keys, place(state)), y, replica_sum=single_replica)
    return ops.products


def step_flops(forward: int) -> int:
    """A training step's FLOPs from its forward pass's: forward plus backward (:data:`BACKWARD_PER_FORWARD`).

    Args:
        forward: the forward pass's FLOPs.

    Returns:
        The step's FLOPs.
    """
    return forward * (1 + BACKWARD_PER_FORWARD)


def matmul_peak(products: dict[str, Callable[[np.ndarray, np.ndarray], Callable[[], Any]]], dtype: str,
                size: int = PEAK_MATMUL_SIZE, repeats: int = PEAK_REPEATS) -> dict[str, float]:
    """The best GFLOP/s of a ``size x size`` matmul (``2 * size**3`` FLOPs) through NumPy's BLAS and each library
    of ``products``, each timed ``repeats`` times after a warm-up run.

    Args:
        products: a library's name -> ``make(a, b)``, a call that computes ``a @ b`` with it and waits for the
            result (each natives module's ``matmul``, :mod:`toolkit.command.bench.natives`).
        dtype: the matrices' dtype.
        size: the matrices' side.
        repeats: the timed runs per library.

    Returns:
        ``{library: GFLOP/s}``, ``"numpy"`` first.
    """
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
    runs = {"numpy": lambda: a @ b, **{library: make(a, b) for library, make in products.items()}}
    return {library: 2 * size ** 3 / best_time(run, repeats) / 1e9 for library, run in runs.items()}


def best_time(run: Callable[[], Any], repeats: int = PEAK_REPEATS) -> float:
    """The best seconds of ``repeats`` calls of ``run`` after one warm-up call (compilation).

    Args:
        run: a call of no arguments that returns when its work is done.
        repeats: the timed calls.

    Returns:
        The shortest call, in seconds.
    """
    run()
    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best


def products_alone(products: Sequence[Product], make: Callable[..., Callable[[], Any]], dtype: str,
                   repeats: int = PEAK_REPEATS, seed: int = 0) -> float:
    """The best seconds of a step's ``products`` alone: each product and its gradients for both operands, from
    random operands and output gradients of its shapes, in one compiled call that ``make(products, operands,
    cotangents, dtype)`` builds with one library (each natives module's ``products``) and that waits for the
    result. Its FLOPs are the step's counted FLOPs (:func:`step_flops`), so ``step_flops / time`` is their rate.

    Args:
        products: the step's :class:`Product` s (:func:`forward_products`).
        make: builds the compiled call, as above.
        dtype: the operands' dtype.
        repeats: the timed calls.
        seed: the seed of the random operands.

    Returns:
        The shortest call, in seconds.

    Raises:
        ValueError: a convolution that is not channels-last.
    """
    rng = np.random.default_rng(seed)
    operands = [tuple(rng.standard_normal(shape).astype(dtype) for shape in p.shapes) for p in products]
    cotangents = [rng.standard_normal(_output_shape(p)).astype(dtype) for p in products]
    return best_time(make(list(products), operands, cotangents, dtype), repeats)


def _output_shape(product: Product) -> tuple[int, ...]:
    """The shape of a product's output (NumPy's broadcasting of a matmul's batch axes; a convolution's sizes)."""
    from toolkit.ops.window_shapes import check_conv, output_size

    a, b = product.shapes
    if product.kind == "matmul":  # a vector operand's axis is added, then removed (NumPy's rules)
        a2, b2 = (a if len(a) > 1 else (1, *a)), (b if len(b) > 1 else (*b, 1))
        return (*np.broadcast_shapes(a2[:-2], b2[:-2]), *a2[-2:-1] * (len(a) > 1), *b2[-1:] * (len(b) > 1))
    options = dict(product.options)
    if options.get("data_format") not in (None, "channels_last"):
        raise ValueError(f"the products alone are timed for channels-last convolutions, got {options['data_format']}")
    strides, dilation, padding = check_conv(len(a), len(b), options["strides"], options["dilation_rate"],
                                            options["padding"])
    return (a[0], *(output_size(a[1 + i], b[i], strides[i], dilation[i], padding) for i in range(2)), b[3])
