"""Typed exceptions of the toolkit.

Every error says what was given, what was expected and, where there is one, how to fix it. Each class also
derives from the builtin exception a caller would naturally catch (``ValueError``, ``LookupError``, ...), so
``except ValueError`` keeps working for code that does not know this module.
"""

from __future__ import annotations


class ToolkitError(Exception):
    """Base class of every error raised on purpose by the toolkit."""


class BackendUnavailableError(ToolkitError, ImportError):
    """A backend name is unknown, or its framework is not installed."""


class DeviceSpecError(ToolkitError, ValueError):
    """A device selection is malformed: wrong type, a count < 1, an empty list, or a device named twice."""


class DeviceParseError(DeviceSpecError):
    """A device string is in none of the accepted spellings."""


class DeviceNotFoundError(ToolkitError, LookupError):
    """A device was asked for that the backend does not see."""


class LogicalDevicesError(ToolkitError, RuntimeError):
    """Logical devices were asked for after a framework had already fixed its devices."""


class ShapeError(ToolkitError, ValueError):
    """An array has the wrong shape or rank."""


class DTypeError(ToolkitError, TypeError):
    """An array has the wrong dtype."""


class ParamsError(ToolkitError, ValueError):
    """A parameter dict has missing or extra keys, or values of the wrong shape."""


class NonFiniteError(ToolkitError, ValueError):
    """NaN or Inf where finite numbers are required: in inputs, parameters, the loss or the gradients."""


class ComputeError(ToolkitError, RuntimeError):
    """The framework failed while running the model on a device; the trainer was left unchanged."""


class CheckpointError(ToolkitError, ValueError):
    """A checkpoint is missing, truncated, corrupted, or does not fit the trainer it is restored into."""


class ModelStateError(ToolkitError, ValueError):
    """Model state or randomness used where a run does not provide it: an undeclared state name, a new value of the
    wrong shape, or a random draw in training without per-example keys."""


class OptimizerError(ToolkitError, AttributeError):
    """A hyperparameter of a built optimizer assigned: the trainers compile the values into their steps, so the
    change would be silently ignored."""


class KerasImportError(ToolkitError, TypeError):
    """A Keras model, layer, option or loss that ``from_keras``/``to_keras`` cannot translate, or weights that do not
    fit the Keras model; nothing is imported or written."""


class KerasCallbackError(ToolkitError, AttributeError):
    """A Keras callback in ``fit`` read or set an attribute of its ``self.model`` (the toolkit's view of the
    trainer, :class:`toolkit.keras.callbacks.TrainerView`) or of ``self.model.optimizer`` that the view does not
    have; the message names it and what the view has. An ``AttributeError`` too, so ``hasattr`` answers False."""


class ArgumentError(ToolkitError, ValueError):
    """An argument of a public function or op has a value it does not accept: malformed (``padding="full"``,
    ``strides=0``, a dropout rate of 1, a schedule's boundaries that do not increase) or a combination the toolkit
    refuses on every backend (``flash_attention=True``, strides and dilation above 1 together in ``conv``). The
    message names the argument, what was given and what is accepted."""


class ArgumentTypeError(ToolkitError, TypeError):
    """An argument of a public function is of a type it does not take (a model that is not a
    :class:`toolkit.Model`, a callback that is not a :class:`toolkit.callbacks.Callback`, a function that is not
    callable). The message names the argument, the type given and the type expected."""


class DataError(ToolkitError, RuntimeError):
    """A source of batches (a ``tf.data`` dataset, a generator, a ``keras.utils.PyDataset``, an iterable) failed
    while ``fit``, ``evaluate`` or ``predict`` read it: the message names the source and the batch it was reading, and
    the source's own exception is the cause. The steps taken before it are kept."""


class DistributedError(ToolkitError, ValueError):
    """A job of several processes that cannot work: a process id out of range, a malformed address, a conflicting
    setting, or a trainer on another backend than the one the process joined the job with."""


class PeerLostError(ToolkitError, RuntimeError):
    """Another process of the job died, hung or never joined; the message names it. This process cannot go on with
    the job."""
