"""Checkpoints: one ``.npz`` file, arrays plus JSON metadata, no pickle, written atomically, verified on load.

Layout of the file (a NumPy ``.npz`` archive, read with ``allow_pickle=False``):

- ``params/<i>``: the parameters, numbered; their names (any string) are in the metadata's ``params`` list;
- ``state/<slot>/<i>``: the optimizer state, numbered like the parameters;
- ``model_state/<i>``: the model state (batch-norm statistics), numbered; names in the metadata's ``model_state``;
- ``__metadata__``: UTF-8 JSON as a ``uint8`` array (format version, parameter names, step, RNG state, dtype, model,
  optimizer, backend, toolkit version);
- ``__checksum__``: the SHA-256, as hex in a ``uint8`` array, of every other entry (name, dtype, shape, bytes).

Writing goes to a temporary file in the same folder, is flushed and fsynced, then renamed over the target, so a
crash during ``save`` leaves the previous checkpoint intact.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import CheckpointError

#: Bumped when the layout changes; a reader refuses newer formats. 2 added the model state.
FORMAT_VERSION = 2
_METADATA, _CHECKSUM = "__metadata__", "__checksum__"


@dataclass
class Checkpoint:
    """What a checkpoint holds.

    Attributes:
        params: ``{name: array}``.
        state: optimizer state, ``{slot: {name: array}}``.
        metadata: ``step``, ``skipped_steps``, ``rng_state``, ``seed``, ``dtype``, ``model``, ``optimizer``,
            ``backend``, ``devices``, ``toolkit_version``, ``format_version``.
        model_state: the model state (``trainer.state()``), ``{name: array}``; empty for a model without state.
    """

    params: dict[str, np.ndarray]
    state: dict[str, dict[str, np.ndarray]]
    metadata: dict[str, Any] = field(default_factory=dict)
    model_state: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def step(self) -> int:
        return int(self.metadata["step"])


def _checksum(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _text_array(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def save_checkpoint(path: str | os.PathLike, checkpoint: Checkpoint) -> Path:
    """Write ``checkpoint`` to ``path`` atomically. Returns the path.

    Raises:
        CheckpointError: a name that cannot be stored (containing ``/``), or a non-numeric array.
    """
    path = Path(path)
    names = list(checkpoint.params)
    arrays: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        arrays[f"params/{i}"] = np.asarray(checkpoint.params[name])
    for slot, values in checkpoint.state.items():
        if set(values) != set(names) or "/" in slot:
            raise CheckpointError(f"optimizer state slot {slot!r} must name a value for each parameter, and no '/'")
        for i, name in enumerate(names):
            arrays[f"state/{slot}/{i}"] = np.asarray(values[name])
    state_names = list(checkpoint.model_state)
    for i, name in enumerate(state_names):
        arrays[f"model_state/{i}"] = np.asarray(checkpoint.model_state[name])
    for key, array in arrays.items():
        if array.dtype.kind not in "biuf":
            raise CheckpointError(f"cannot store {key!r} of dtype {array.dtype}: values must be numeric arrays")
    metadata = {**checkpoint.metadata, "format_version": FORMAT_VERSION, "params": names, "model_state": state_names}
    arrays[_METADATA] = _text_array(json.dumps(metadata, sort_keys=True))
    arrays[_CHECKSUM] = _text_array(_checksum(arrays))

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable; not every filesystem allows opening a folder
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    return path


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read and verify a checkpoint written by :func:`save_checkpoint` (or ``trainer.save``).

    Raises:
        CheckpointError: the file is missing, truncated, corrupted (checksum or archive CRC), uses pickled objects,
            or is of a newer format.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as error:
        raise CheckpointError(f"checkpoint {str(path)!r} is truncated or corrupted: {error}") from error
    if _METADATA not in arrays or _CHECKSUM not in arrays:
        raise CheckpointError(f"{str(path)!r} is not a toolkit checkpoint (no {_METADATA}/{_CHECKSUM} entries)")
    stored = arrays.pop(_CHECKSUM).tobytes().decode("utf-8", errors="replace")
    if _checksum(arrays) != stored:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupted: its checksum does not match its contents")
    metadata = json.loads(arrays.pop(_METADATA).tobytes().decode("utf-8"))
    if metadata.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {str(path)!r} has format {metadata['format_version']}; this toolkit "
                              f"reads up to {FORMAT_VERSION}: upgrade multigpu-toolkit")
    names = metadata.get("params")
    try:
        params = {name: arrays.pop(f"params/{i}") for i, name in enumerate(names)}
        model_state = {name: arrays.pop(f"model_state/{i}") for i, name in enumerate(metadata.get("model_state", []))}
        state: dict[str, dict[str, np.ndarray]] = {}
        for key in sorted(arrays):
            _, slot, index = key.split("/")
            state.setdefault(slot, {})[names[int(index)]] = arrays[key]
    except (TypeError, KeyError, ValueError, IndexError) as error:
        raise CheckpointError(f"checkpoint {str(path)!r} has an unexpected layout: {error}") from error
    return Checkpoint(params, state, metadata, model_state)
