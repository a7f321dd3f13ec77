"""Callbacks for ``trainer.fit`` with Keras' names and meanings (``from toolkit.callbacks import EarlyStopping``).

The public names of :mod:`toolkit.training.callbacks`, where they are written and documented.
"""

from toolkit.training.callbacks import (
    BackupAndRestore,
    Callback,
    CSVLogger,
    EarlyStopping,
    JSONLinesLogger,
    ModelCheckpoint,
    TerminateOnNaN,
)

__all__ = ["BackupAndRestore", "CSVLogger", "Callback", "EarlyStopping", "JSONLinesLogger", "ModelCheckpoint",
           "TerminateOnNaN"]
