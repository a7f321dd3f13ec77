"""TensorBoard event files of a comparison (``multigpu compare --tensorboard DIR``), written without TensorFlow: the
command's process imports no framework it does not run, and TensorFlow alone takes 4-5 s and 600 MB to import.

An event file is a sequence of TFRecords (``uint64`` length, its masked CRC-32C, the bytes, their masked CRC-32C),
each an ``Event`` protocol buffer (``tensorflow/core/util/event.proto``): ``wall_time`` (field 1, double), ``step``
(field 2, int64), ``file_version`` (field 3, string, the first event's) or ``summary`` (field 5), a ``Summary`` of
``Value`` entries (field 1), each a ``tag`` (field 1, string) and a ``simple_value`` (field 2, float). Those few
fields are encoded here by hand; ``tests/test_report.py`` reads the files back with TensorFlow's
``summary_iterator``.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: The first event's ``file_version``: what TensorBoard's readers expect.
FILE_VERSION = "brain.Event:2"
#: TFRecord's CRC mask constant (``tensorflow/core/lib/hash/crc32c.h``).
CRC_MASK_DELTA = 0xA282EAD8
_CASTAGNOLI = 0x82F63B78  # CRC-32C's polynomial, reversed


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CASTAGNOLI if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``: ``crc32c(b"123456789") == 0xE3069283``.

    Args:
        data: the bytes.

    Returns:
        The checksum.
    """
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> bytes:
    crc = crc32c(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + CRC_MASK_DELTA) & 0xFFFFFFFF)


def tf_record(data: bytes) -> bytes:
    """One TFRecord: the length, its masked CRC, the data, its masked CRC.

    Args:
        data: the record's bytes.

    Returns:
        The framed record.
    """
    length = struct.pack("<Q", len(data))
    return length + _masked(length) + data + _masked(data)


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # int64 as protobuf encodes negatives: two's complement, 10 bytes
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def event(wall_time: float, step: int = 0, scalars: Mapping[str, float] | None = None,
          file_version: str | None = None) -> bytes:
    """An ``Event`` message: a file version, or scalars as a ``Summary`` of simple values.

    Args:
        wall_time: seconds since the epoch.
        step: the training step.
        scalars: ``{tag: value}``, each a float32 ``simple_value``.
        file_version: the first event's version string, or None.

    Returns:
        The serialized message.
    """
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3 | 0) + _varint(int(step))
    if file_version is not None:
        out += _field(3, file_version.encode())
    if scalars:
        values = b"".join(_field(1, _field(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value))
                          for tag, value in scalars.items())
        out += _field(5, values)
    return out


def write_events(folder: Path, steps: Iterable[tuple[int, Mapping[str, float]]]) -> Path:
    """One event file in ``folder`` (made if missing): the version, then one event per step.

    Args:
        folder: the run's folder, as TensorBoard lists it.
        steps: ``(step, {tag: value})`` pairs.

    Returns:
        The file written, named as TensorFlow names them (``events.out.tfevents.<time>.<host>``).
    """
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    path = folder / f"events.out.tfevents.{int(now)}.{socket.gethostname()}"
    with path.open("wb") as handle:
        handle.write(tf_record(event(now, 0, file_version=FILE_VERSION)))
        for step, scalars in steps:
            handle.write(tf_record(event(now, step, scalars)))
    return path


def write_tensorboard(results: dict[str, Any], folder: Path) -> list[Path]:
    """Each run of a comparison as a TensorBoard run ``<backend>-x<devices>-seed<S>`` under ``folder``: per step,
    ``loss`` and ``step_time_ms``, and ``max_rel_param_diff/<other run>`` for every pair of runs it is the first of
    (how far the two have parted, :mod:`toolkit.command.divergence`).

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`).
        folder: the TensorBoard log folder (``tensorboard --logdir folder``).

    Returns:
        The event files written, one per run.
    """
    def name(run: Mapping[str, Any]) -> str:
        return f"{run['backend']}-x{run['devices']}"

    written = []
    for run in results["runs"]:
        seed = run.get("seed", 0)
        pairs = [pair for pair in results.get("pairs", []) if pair.get("seed", 0) == seed
                 and (pair["runs"][0]["backend"], pair["runs"][0]["devices"]) == (run["backend"], run["devices"])]
        per_step = []
        for i, (loss, time_ms) in enumerate(zip(run["losses"], run["step_times_ms"])):
            scalars = {"loss": loss, "step_time_ms": time_ms}
            scalars.update({f"max_rel_param_diff/{name(pair['runs'][1])}": pair["max_rel_param_diff"][i]
                            for pair in pairs if i < len(pair["max_rel_param_diff"])})
            per_step.append((i + 1, scalars))
        written.append(write_events(Path(folder) / f"{name(run)}-seed{seed}", per_step))
    return written
