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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import CheckpointError, ToolkitError
from toolkit.training.state import Counts
from toolkit.version import __version__

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
        """The number of training steps taken when the checkpoint was written (``metadata["step"]``)."""
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
    """Write ``checkpoint`` to ``path`` atomically: a temporary file in the same folder, synced, then renamed over
    ``path``, so a crash leaves the old file or the new one, never a part.

    Args:
        path: the ``.npz`` file to write; its folder is made if missing.
        checkpoint: what to write.

    Returns:
        ``path`` as a :class:`pathlib.Path`.

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


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every entry of the archive at ``path``. Whatever the bytes are, this returns arrays or raises
    CheckpointError: the file comes from outside (a disk, a network copy), so any error NumPy's or zipfile's
    parsers raise on it (a malformed ``.npy`` header can raise tokenize's TokenError, an unknown zip method
    NotImplementedError, a flipped zip flag "is encrypted" RuntimeError, a lone ``.npy`` file loads as one array)
    means the same thing: not a readable checkpoint."""
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise CheckpointError(f"{str(path)!r} holds a single NumPy array, not a toolkit checkpoint (an .npz "
                                  "archive written by trainer.save)")
        with loaded as archive:
            return {key: archive[key] for key in archive.files}
    except CheckpointError:
        raise
    except Exception as error:  # any parser error on outside bytes (see the docstring)
        raise CheckpointError(f"checkpoint {str(path)!r} is truncated or corrupted: {type(error).__name__}: "
                              f"{error}") from error


def _metadata(path: Path, raw: np.ndarray) -> dict[str, Any]:
    try:
        metadata = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise CheckpointError(f"checkpoint {str(path)!r} has unreadable metadata: {error}") from error
    if not isinstance(metadata, dict):
        raise CheckpointError(f"checkpoint {str(path)!r} has metadata of type {type(metadata).__name__}, not a dict")
    version = metadata.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointError(f"checkpoint {str(path)!r} has format_version {version!r}, not an int")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {str(path)!r} has format {version}; this toolkit reads up to "
                              f"{FORMAT_VERSION}: upgrade multigpu-toolkit")
    for key in ("params", "model_state"):
        names = metadata.get(key, [])
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise CheckpointError(f"checkpoint {str(path)!r} metadata {key!r} must be a list of names, got {names!r}")
    return metadata


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read and verify a checkpoint written by :func:`save_checkpoint` (or ``trainer.save``). Whatever the file
    holds, the result is its contents or a CheckpointError.

    Args:
        path: the checkpoint file.

    Returns:
        The :class:`Checkpoint` it holds.

    Raises:
        CheckpointError: the file is missing, truncated, corrupted (checksum or archive CRC), not a toolkit
            checkpoint, uses pickled objects, or is of a newer format.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    arrays = _read_arrays(path)
    if _METADATA not in arrays or _CHECKSUM not in arrays:
        raise CheckpointError(f"{str(path)!r} is not a toolkit checkpoint (no {_METADATA}/{_CHECKSUM} entries)")
    stored = arrays.pop(_CHECKSUM).tobytes().decode("utf-8", errors="replace")
    if _checksum(arrays) != stored:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupted: its checksum does not match its contents")
    metadata = _metadata(path, arrays.pop(_METADATA))
    names = metadata.get("params", [])
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


def _count(meta: dict[str, Any], key: str, default: int | None) -> int:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CheckpointError(f"checkpoint metadata {key!r} must be an int >= 0, got {value!r}"
                              + (" (missing)" if key not in meta else ""))
    return value


def trainer_checkpoint(trainer: Any, **extra: Any) -> Checkpoint:
    """What ``trainer.save`` writes, in memory: parameters, optimizer and model state, step, skipped step and epoch
    counts, RNG state and seed, and what the trainer is (dtype, model, optimizer, backend, devices, version);
    ``extra`` entries are added to the metadata (``fit``: a fit's progress, written by BackupAndRestore).

    Args:
        trainer: a :class:`~toolkit.DataParallel` or :class:`~toolkit.ModelParallel`.
        **extra: metadata entries to add (JSON values).

    Returns:
        The :class:`Checkpoint`; nothing is written to disk.
    """

    metadata = {
        "step": trainer.step_count, "skipped_steps": trainer.skipped_steps, "epoch": trainer.epoch_count,
        "rng_state": trainer.rng.bit_generator.state, "seed": trainer.seed, "dtype": trainer.dtype,
        "model": trainer.model.name, "optimizer": type(trainer.optimizer).__name__,
        "optimizer_config": trainer.optimizer.config(), "backend": trainer.backend.name,
        "trainer": type(trainer).__name__,
        "devices": {name: str(d) for name, d in trainer.param_devices().items()}, "toolkit_version": __version__,
        **extra,
    }
    return Checkpoint(trainer.params(), trainer.optimizer_state(), metadata, trainer.state())


def restore_trainer(trainer: Any, checkpoint: Checkpoint) -> None:
    """Put ``checkpoint`` into ``trainer`` (see ``Trainer.restore``): everything is checked first, then written, so
    a refused checkpoint changes nothing.

    Args:
        trainer: a :class:`~toolkit.DataParallel` or :class:`~toolkit.ModelParallel`.
        checkpoint: what to put into it (:func:`load_checkpoint`).

    Raises:
        CheckpointError: the checkpoint does not fit the trainer, or its metadata lacks or garbles a count or the
            RNG state.
    """
    meta = checkpoint.metadata
    if meta.get("dtype") != trainer.dtype:
        raise CheckpointError(f"checkpoint dtype {meta.get('dtype')} differs from this trainer's {trainer.dtype}")
    if meta.get("optimizer") != type(trainer.optimizer).__name__:
        raise CheckpointError(f"checkpoint was written with {meta.get('optimizer')}, this trainer uses "
                              f"{type(trainer.optimizer).__name__}")
    step, skipped = _count(meta, "step", None), _count(meta, "skipped_steps", 0)
    epoch = _count(meta, "epoch", 0)  # checkpoints written before epochs were counted start at 0
    seed = meta.get("seed", trainer.seed)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise CheckpointError(f"checkpoint metadata 'seed' must be an int, got {seed!r}")
    owner = trainer.training_state
    try:
        params = owner.checked(owner.params, checkpoint.params, "checkpoint", trainer.dtype)
        model_state = owner.checked(owner.model_state, checkpoint.model_state, "checkpoint model state", trainer.dtype)
    except ToolkitError as error:
        raise CheckpointError(str(error)) from error
    expected = {slot: {name: p.shape for name, p in params.items()} for slot in trainer.optimizer.state_slots()}
    found = {slot: {name: np.shape(v) for name, v in values.items()} for slot, values in checkpoint.state.items()}
    if found != expected:
        raise CheckpointError(f"checkpoint optimizer state {found} does not fit this trainer's {expected}")
    state = {slot: {name: np.asarray(value) for name, value in values.items()}
             for slot, values in checkpoint.state.items()}
    if any(np.asarray(v).dtype.kind not in "biuf" for values in state.values() for v in values.values()):
        raise CheckpointError("checkpoint optimizer state holds non-numeric arrays")
    state = {slot: {name: value.astype(trainer.dtype) for name, value in values.items()}
             for slot, values in state.items()}
    if any(_non_finite(v) for values in state.values() for v in values.values()):
        raise CheckpointError("checkpoint optimizer state holds NaN or Inf")
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = meta["rng_state"]
    except Exception as error:  # NumPy raises KeyError, TypeError or ValueError, by field
        raise CheckpointError(f"checkpoint RNG state is unusable: {type(error).__name__}: {error}") from error
    owner.restore(params, state, model_state, Counts(step, skipped, epoch), rng, seed)


def _non_finite(array: np.ndarray) -> bool:
    return array.dtype.kind == "f" and not np.isfinite(array).all()
