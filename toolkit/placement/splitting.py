"""How a global batch is split across devices. Pure policy: integers in, integers out."""

from __future__ import annotations

import math
from collections.abc import Sequence

from toolkit.errors import ArgumentError


def split_sizes(batch: int, n: int, weights: Sequence[float] | None = None) -> list[int]:
    """Shard sizes for ``batch`` examples on ``n`` devices.

    Args:
        batch: global batch size, an int >= 0.
        n: number of devices, an int >= 1.
        weights: optional relative speed of each device (a faster device takes more), ``n`` finite numbers > 0.

    Returns:
        ``n`` ints summing exactly to ``batch``. Without weights the sizes differ by at most 1 and the first shards
        take the remainder. With weights each size is within 1 of ``batch * w_i / sum(w)`` (largest-remainder
        rounding, ties to the earlier device). A batch smaller than ``n`` gives empty shards, which is valid.

    Raises:
        ArgumentError: a non-int or negative batch, ``n`` < 1, or weights of the wrong length or not finite and > 0.
    """
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 0:
        raise ArgumentError(f"batch must be an int >= 0, got {batch!r}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ArgumentError(f"n (number of devices) must be an int >= 1, got {n!r}")
    if weights is None:
        base, extra = divmod(batch, n)
        return [base + (i < extra) for i in range(n)]
    weights = list(weights)
    if len(weights) != n:
        raise ArgumentError(f"weights must have one entry per device ({n}), got {len(weights)}: {weights!r}")
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0 for w in weights):
        raise ArgumentError(f"weights must be finite numbers > 0, got {weights!r}")
    total = math.fsum(weights)
    exact = [batch * w / total for w in weights]
    sizes = [math.floor(e) for e in exact]
    short = batch - sum(sizes)
    # Hand the remaining examples to the largest fractional parts; sorted() is stable, so ties go to earlier devices.
    for i in sorted(range(n), key=lambda i: sizes[i] - exact[i])[:short]:
        sizes[i] += 1
    return sizes


def shard_bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Where consecutive shards of the given sizes start and stop in the batch.

    Args:
        sizes: the shards' sizes, in order (:func:`split_sizes`).

    Returns:
        ``[(start, stop), ...]``, one per shard: the first starts at 0, each next where the last stopped.
    """
    bounds, start = [], 0
    for size in sizes:
        bounds.append((start, start + size))
        start += size
    return bounds


def shard_weights(sizes: Sequence[int]) -> list[float]:
    """Weight of each shard in a mean over the whole batch: ``size / sum(sizes)``.

    With these weights the average of per-shard means is the full-batch mean, for any split.

    Args:
        sizes: the shards' sizes (empty shards get weight 0).

    Returns:
        One float per shard, summing to 1.

    Raises:
        ArgumentError: every shard is empty.
    """
    total = sum(sizes)
    if total <= 0:
        raise ArgumentError(f"cannot weight shards of sizes {list(sizes)}: the batch is empty")
    return [size / total for size in sizes]
