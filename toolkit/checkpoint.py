"""Checkpoints: one ``.npz`` file of arrays and JSON metadata, written atomically and verified on load
(``from toolkit.checkpoint import load_checkpoint``).

The public names of :mod:`toolkit.training.checkpoint`, where the file's layout and guarantees are documented.
"""

from toolkit.training.checkpoint import (
    FORMAT_VERSION,
    Checkpoint,
    load_checkpoint,
    restore_trainer,
    save_checkpoint,
    trainer_checkpoint,
)

__all__ = ["FORMAT_VERSION", "Checkpoint", "load_checkpoint", "restore_trainer", "save_checkpoint",
           "trainer_checkpoint"]
