"""How the Theano family's JAX linker sums many entries on a CPU under a JAX whose XLA makes slow reduce-windows of
them: in levels of :data:`LEVEL` entries, each a reshape and a plain sum. Imports JAX only.

Why: before jax 0.10, XLA's CPU compiler rewrites a sum of more than 32 entries into a reduce-window of 32 and a
sum of the rest (its tree-reduction pass, for accuracy), and its CPU reduce-window is plain loops: the bench
ResNet's batch-normalization sums (131,072 entries per channel, forward and gradient) were a large part of its
step. The same levels written as reshapes and sums of 32 entries, which the pass leaves alone, are many times
faster and as accurate as the tree (relative error 1.3e-7 against float64, the plain tree's 1.0e-6 and a sequential
sum's 8.4e-6). From jax 0.10 XLA's own sum of that size is as fast and as accurate as the levels: it is left as it
is. The measurements are on docs/guides/benchmarks.md."""

from __future__ import annotations

import math

import jax
import numpy as np

#: Entries summed per level: the window of XLA's tree-reduction pass, whose sums of this size it leaves alone.
LEVEL = 32
#: The platforms whose sums are written in levels (XLA's GPU reductions are trees of their own, in parallel).
LEVELLED_PLATFORMS = frozenset({"cpu"})
#: The first JAX whose XLA sums on a CPU without reduce-windows (measured on 0.10.2; the versions between 0.4.30
#: and 0.10 were not measured and are taken as 0.4.30).
PLAIN_SUMS_FROM = (0, 10)


#: The dtypes whose sums are written in levels: those the levels sum in their own dtype as accurately as XLA's sum.
#: Not float16 or bfloat16, which ``jnp.sum`` accumulates in float32.
LEVELLED_DTYPES = frozenset({"float32", "float64"})


def levelled(platform: str, dtype, version: tuple = tuple(jax.__version_info__)) -> bool:
    """Whether a sum of ``dtype`` on ``platform`` under JAX ``version`` is written in levels (:func:`levelled_sum`).

    Args:
        platform: the JAX platform (``"cpu"``, ``"gpu"``, ...).
        dtype: the sum's dtype.
        version: the JAX version.

    Returns:
        True on a platform of :data:`LEVELLED_PLATFORMS`, for :data:`LEVELLED_DTYPES`, before
        :data:`PLAIN_SUMS_FROM`.
    """
    return (platform in LEVELLED_PLATFORMS and tuple(version) < PLAIN_SUMS_FROM
            and np.dtype(dtype).name in LEVELLED_DTYPES)


def levelled_sum(x, axes):
    """The sum of ``x`` over ``axes`` in levels of :data:`LEVEL` entries, where the axes are adjacent (the
    reduced block reshaped to one axis; its length padded with zeros to a multiple of the level where it is not);
    ``jnp.sum`` where they are not, or where there are at most :data:`LEVEL` entries to sum.

    Args:
        x: a JAX array.
        axes: the axes to sum over (None: all).

    Returns:
        The sum, with the summed axes removed.
    """
    axes = sorted(a % x.ndim for a in (range(x.ndim) if axes is None else axes))
    entries = math.prod(x.shape[a] for a in axes)
    if entries <= LEVEL or 0 in x.shape or axes != list(range(axes[0], axes[-1] + 1)):
        return jax.numpy.sum(x, axis=tuple(axes))
    before, after = x.shape[:axes[0]], x.shape[axes[-1] + 1:]
    x = x.reshape(math.prod(before), entries, math.prod(after))
    zero = np.array(0.0, x.dtype)
    while x.shape[1] > LEVEL:
        extra = -x.shape[1] % LEVEL
        if extra:
            x = jax.lax.pad(x, zero, [(0, 0, 0), (0, extra, 0), (0, 0, 0)])
        x = jax.lax.reduce(x.reshape(x.shape[0], x.shape[1] // LEVEL, LEVEL, x.shape[2]), zero, jax.lax.add, (2,))
    return jax.lax.reduce(x, zero, jax.lax.add, (1,)).reshape(*before, *after)
