"""Feeding data to ``fit``, ``evaluate`` and ``predict``: besides arrays, a batched ``tf.data.Dataset``, a
``keras.utils.PyDataset``, a Python generator or iterator, or any iterable of batches ``x``, ``(x, y)`` or
``(x, y, sample_weight)``, read as Keras reads them (:mod:`toolkit.data.sources`) and ahead of the step on a thread
(:mod:`toolkit.data.feed`). :class:`NpyBatches` reads batches of ``.npy`` files larger than memory;
:class:`ProcessPart` gives each process of a job its rows of a source's global batches. The guide:
docs/guides/data.md."""

from toolkit.data.feed import RAN_OUT, Feed
from toolkit.data.files import NpyBatches
from toolkit.data.sources import ELEMENTS, PREFETCH_BATCHES, ProcessPart, is_source

__all__ = ["ELEMENTS", "PREFETCH_BATCHES", "RAN_OUT", "Feed", "NpyBatches", "ProcessPart", "is_source"]
