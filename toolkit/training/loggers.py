"""The logs of a ``fit`` as files, with Keras' names: a CSV row per epoch (Keras' ``CSVLogger``), or a JSON
object per epoch and, if asked, per step."""

from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path

from toolkit.training.callback import Callback


class CSVLogger(Callback):
    """One CSV row per epoch: ``epoch`` (0-based, as Keras) and every logged value, written as each epoch ends.

    Args:
        filename: the CSV file.
        append: add rows to an existing file (its header kept) instead of replacing it.
    """

    def __init__(self, filename: str | os.PathLike, append: bool = False) -> None:
        self.filename, self.append = Path(filename), append
        self._file, self._writer = None, None

    def on_train_begin(self, logs=None):
        exists = self.append and self.filename.exists() and self.filename.stat().st_size > 0
        self._file = self.filename.open("a" if self.append else "w", newline="")
        self._writer, self._header = None, exists

    def on_epoch_end(self, epoch, logs):
        row = {"epoch": epoch, **{k: ("nan" if math.isnan(v) else repr(float(v))) for k, v in logs.items()}}
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(row))
            if not self._header:
                self._writer.writeheader()
        self._writer.writerow(row)
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None


class JSONLinesLogger(Callback):
    """One JSON object per line, written and flushed as each epoch ends: ``{"epoch": 0-based, "step":
    trainer.step_count, "seconds": since fit began, **logs}``; with ``steps=True`` also one per step, ``{"step",
    "seconds", "loss"}``. A non-finite value is written as null (JSON has no NaN). Each process writes the file it
    is given (the logs are the same in every process).

    Args:
        filename: the file written (its folder is made when needed).
        append: add lines to an existing file instead of replacing it.
        steps: also write a line after every step.
    """

    def __init__(self, filename: str | os.PathLike, append: bool = False, steps: bool = False) -> None:
        self.filename, self.append, self.steps = Path(filename), append, bool(steps)
        self._file, self._started = None, 0.0

    def _write(self, record: dict) -> None:
        record = {k: v if not isinstance(v, float) or math.isfinite(v) else None for k, v in record.items()}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def on_train_begin(self, logs=None):
        self.filename.parent.mkdir(parents=True, exist_ok=True)
        self._file, self._started = self.filename.open("a" if self.append else "w"), time.perf_counter()

    def on_step_end(self, step, logs):
        if self.steps:
            self._write({"step": step, "seconds": time.perf_counter() - self._started,
                         **{k: float(v) for k, v in logs.items()}})

    def on_epoch_end(self, epoch, logs):
        self._write({"epoch": epoch, "step": self.trainer.step_count, "seconds": time.perf_counter() - self._started,
                     **{k: float(v) for k, v in logs.items()}})

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None


__all__ = ["CSVLogger", "JSONLinesLogger"]
