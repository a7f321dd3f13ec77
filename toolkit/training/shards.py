"""The shard plan of a data-parallel step: where each example of the global batch goes, and when and how shards of
unequal size are padded to one.

A step's global batch is every process's part together; each process splits its part over its devices
(:func:`toolkit.split_sizes`, with the trainer's weights). Shards are uneven where the batch does not divide or the
weights differ. A backend whose fused step maps one program over equal shards (:attr:`toolkit.Backend.
equal_shards`: the Theano family's mesh) then gets every device's shard padded to the largest, over every process,
by repeating the shard's last row (a device without a shard repeats the batch's first), with row weights (``rows``:
1 for each example, 0 for each padding row) that leave the padding out of the losses and metrics
(:mod:`toolkit.training.rules`) and of ``ops.moments`` (:attr:`toolkit.nn.context.RunContext.row_weights`). That is
exact for a model that treats each row on its own or mixes rows only through ``ops.moments``
(:attr:`toolkit.Model.rows_independent`) or sums over replicas: for any other model the step is refused as it is
traced (:class:`toolkit.training.rules.PaddingRefused`) and the trainer composes it per device instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    """This process's place in a step.

    Attributes:
        first_row: the index of this process's first example in the global batch (its examples' keys follow it).
        total: the global batch's example count, every process's: what the replicas' shares divide.
        pad_to: the size every device's shard is padded to, or None: the shards as they are.
    """

    first_row: int
    total: int
    pad_to: int | None = None


def layout(sizes: Sequence[Sequence[int]], process_id: int, equal_shards: bool) -> Layout:
    """The layout from every process's shard sizes (``sizes[process][device]``, one row for a process on its own),
    for a step that needs equal shards (``equal_shards``) or not. Every process computes the same from the same
    table, so all pad alike."""
    every = [int(n) for row in sizes for n in row]
    first = sum(int(n) for row in sizes[:process_id] for n in row)
    uneven = equal_shards and len(every) > 1 and len(set(every)) > 1
    return Layout(first, sum(every), max(every) if uneven else None)


def padded_rows(lo: int, hi: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch rows that make a shard of rows ``lo:hi`` ``size`` rows long (its last row repeated; an empty shard
    repeats the batch's first), and its row weights: 1 for its examples, 0 for the padding."""
    count = hi - lo
    taken = lo + np.minimum(np.arange(size), count - 1) if count else np.zeros(size, dtype=np.int64)
    return taken, (np.arange(size) < count)
