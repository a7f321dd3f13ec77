"""Batches read from ``.npy`` files as they are needed, for data larger than memory.

``np.load(path, mmap_mode="r")`` is the usual way to slice a file too large to load, but every page a slice touches
stays mapped into the process and counts in its resident memory until the kernel reclaims it: one pass over a mapped
file grows the peak RSS by the whole file (measured: 135 MB for a 128 MiB file). :class:`NpyBatches` reads each batch
with a plain file read into a batch-sized array instead, so a pass grows the process by the batches read ahead (the
kernel's page cache holds the file, outside the process), and its batches can be read in any order.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError, ShapeError


class _Npy:
    """One ``.npy`` file's array layout: its shape, dtype and where its data starts."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        with open(self.path, "rb") as file:
            version = np.lib.format.read_magic(file)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ShapeError(f"{self.path!r} is a .npy file of format version {version}; versions 1.0 and 2.0 "
                                 "are read")
            self.shape, fortran_order, self.dtype = read_header(file)
            self.offset = file.tell()
        if fortran_order or not self.shape or self.dtype.hasobject:
            layout = "Fortran order" if fortran_order else self.dtype
            raise ShapeError(f"{self.path!r} holds an array of shape {self.shape} ({layout}): NpyBatches reads rows "
                             "of a C-ordered array of numbers with a batch axis")
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop``, read from the file into a new array."""
        out = np.empty((stop - start, *self.shape[1:]), self.dtype)
        view = memoryview(out.reshape(-1).view(np.uint8))
        with open(self.path, "rb", buffering=0) as file:
            file.seek(self.offset + start * self.row_bytes)
            done = 0
            while done < len(view):
                got = file.readinto(view[done:])
                if not got:
                    raise ShapeError(f"{self.path!r} ends before row {stop} of its {self.shape[0]}: truncated")
                done += got
        return out


class NpyBatches:
    """Batches ``(x, y)`` (or ``x``) of rows of ``.npy`` files, read from disk as each is needed: a source of batches
    for ``fit``, ``evaluate`` and ``predict`` (:mod:`toolkit.data`) of data that does not fit in memory. Batch ``i``
    is rows ``i * batch_size`` to ``(i + 1) * batch_size`` (the last one smaller where the size does not divide); with
    ``fit(shuffle=True)`` the order of the batches is drawn from the trainer's RNG each epoch, as a PyDataset's is
    (the rows of a batch stay together: write the file in a shuffled order once).

    Args:
        x: the path of the inputs' ``.npy`` file (rows: examples).
        y: the path of the targets' ``.npy`` file, of as many rows, or None (inputs only, for ``predict``).
        batch_size: rows per batch.

    Raises:
        ArgumentError: a bad batch_size; ShapeError: a file that is not a C-ordered array of numbers, or files of
            different row counts.
    """

    def __init__(self, x: str | os.PathLike, y: str | os.PathLike | None = None, batch_size: int = 32) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ArgumentError(f"NpyBatches batch_size must be an int >= 1, got {batch_size!r}")
        self.x, self.y = _Npy(x), None if y is None else _Npy(y)
        if self.y is not None and self.y.shape[0] != self.x.shape[0]:
            raise ShapeError(f"{self.x.path!r} has {self.x.shape[0]} rows and {self.y.path!r} {self.y.shape[0]}: "
                             "x and y need one row per example")
        self.batch_size, self.count = int(batch_size), self.x.shape[0]

    def __len__(self) -> int:
        return -(-self.count // self.batch_size)

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        start, stop = index * self.batch_size, min((index + 1) * self.batch_size, self.count)
        x = self.x.rows(start, stop)
        return x if self.y is None else (x, self.y.rows(start, stop))

    def __repr__(self) -> str:
        return (f"NpyBatches({self.x.path!r}, {None if self.y is None else self.y.path!r}, "
                f"batch_size={self.batch_size})")


__all__ = ["NpyBatches"]
