"""How a failure on a device is reported: a :class:`~toolkit.ComputeError` naming the model, the device, the shapes
and, where the model's own code failed while it was traced, the user's line."""

from __future__ import annotations

import os
import traceback
from typing import Any

from toolkit.errors import ComputeError


def compute_error(model: str, where: Any, shapes: str, error: BaseException) -> ComputeError:
    """The ComputeError of ``model``'s run failing on ``where`` (a device, or several) with inputs ``shapes``, for
    ``error`` (which the caller gives as its cause)."""
    message = str(error).strip().splitlines()[0][:500] if str(error).strip() else ""
    line = _user_line(error)
    return ComputeError(f"{model} failed on {where} ({shapes}): {type(error).__name__}: {message}"
                        f"{f' (at {line})' if line else ''}; the trainer is unchanged")


def _is_user_code(filename: str) -> bool:
    """Whether a traceback frame is the user's: not the toolkit's (its backends included), not an installed
    package's, not Python's, not the module Aesara writes for a compiled JAX function (a ``tmp...`` file)."""
    import toolkit.backends

    ours = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(toolkit.backends.__file__))
    base = os.path.basename(filename)
    return not (filename.startswith(ours) or f"{os.sep}site-packages{os.sep}" in filename
                or filename.startswith("<frozen ") or (base.startswith("tmp") and "." not in base))


def _user_line(error: BaseException) -> str | None:
    """``file:line in function: code`` of the innermost frame of user code in ``error``'s traceback: the model's
    line that failed while it was traced. None when there is none (an error raised while a compiled function ran
    carries only the framework's frames; its message names the op)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _is_user_code(f.filename)]
    if not frames:
        return None
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"
