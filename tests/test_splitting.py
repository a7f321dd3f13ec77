"""Batch splitting policy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from toolkit import split_sizes
from toolkit.placement.splitting import shard_bounds, shard_weights


@pytest.mark.parametrize("batch, n", list(itertools.product([0, 1, 2, 3, 7, 10, 64, 257], [1, 2, 3, 4, 7])))
def test_equal_split_sums_and_differs_by_at_most_one(batch, n):
    sizes = split_sizes(batch, n)
    assert len(sizes) == n and sum(sizes) == batch
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the remainder goes to the first devices


def test_small_batches_leave_empty_shards():
    assert split_sizes(2, 4) == [1, 1, 0, 0]
    assert split_sizes(7, 3) == [3, 2, 2]
    assert split_sizes(0, 2) == [0, 0]


@pytest.mark.parametrize("batch", [0, 1, 5, 10, 100, 1001])
@pytest.mark.parametrize("weights", [[1, 1], [3, 1], [1, 2, 1], [0.5, 0.25, 0.25], [1e-3, 1, 1e3], [2, 2, 2, 1]])
def test_weighted_split_is_proportional_and_exact(batch, weights):
    sizes = split_sizes(batch, len(weights), weights)
    assert sum(sizes) == batch
    exact = np.asarray(weights) / np.sum(weights) * batch
    assert np.all(np.abs(np.asarray(sizes) - exact) < 1)


def test_weighted_examples():
    assert split_sizes(8, 2, [3, 1]) == [6, 2]
    assert split_sizes(10, 3, [1, 1, 1]) == [4, 3, 3]
    assert split_sizes(5, 2, [1, 1]) == split_sizes(5, 2)


@pytest.mark.parametrize("args, words", [
    ((-1, 2), "batch must be an int >= 0"),
    ((2.0, 2), "batch must be an int >= 0"),
    ((4, 0), "n (number of devices) must be an int >= 1"),
    ((4, 2, [1]), "one entry per device (2)"),
    ((4, 2, [1, 0]), "finite numbers > 0"),
    ((4, 2, [1, -1]), "finite numbers > 0"),
    ((4, 2, [1, float("nan")]), "finite numbers > 0"),
    ((4, 2, [1, float("inf")]), "finite numbers > 0"),
])
def test_split_errors(args, words):
    with pytest.raises(ValueError) as info:
        split_sizes(*args)
    assert words in str(info.value)


def test_bounds_and_weights():
    assert shard_bounds([3, 0, 2]) == [(0, 3), (3, 3), (3, 5)]
    assert shard_weights([3, 1]) == [0.75, 0.25]
    with pytest.raises(ValueError):
        shard_weights([0, 0])
