"""The kinds of input ``fit``, ``evaluate`` and ``predict`` take besides arrays, read as Keras 3's data adapters read
them (``keras/src/trainers/data_adapters``): a batched ``tf.data.Dataset``, a ``keras.utils.PyDataset``, a Python
generator or iterator, and any other iterable of batches (a torch ``DataLoader``, a Grain dataset... anything that
is not itself array data: a list or a tuple is array data, as in Keras, so a list of batches is given as
``iter(batches)``).

Each element is one batch: ``x``, ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)`` (a list is taken as a tuple),
``x`` and ``y`` arrays or dicts of arrays by input and output name. A source gives *passes* over its batches: a
dataset, a PyDataset and a re-iterable iterable start a new pass each time (Keras' ``iter(dataset)``); a generator or
iterator has one pass only. Nothing here imports a framework: a ``tf.data`` dataset is recognised only where
TensorFlow is already imported (the user made the dataset), so on Aesara and PyTensor it is a reader alone.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import optree

from toolkit.data.files import NpyBatches
from toolkit.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from toolkit.processes.distributed import process_slice
from toolkit.training.batches import rows

#: The structures an element (a batch) may have, for messages.
ELEMENTS = "x, (x,), (x, y) or (x, y, sample_weight)"

#: How many batches wait, read, for the step by default (the reading thread holds one more as it reads the next):
#: one hides the reading behind a step where reading a batch takes less than a step, a second absorbs a batch that
#: reads slowly; more would only hold memory. A PyDataset's ``max_queue_size`` sets it for that dataset.
PREFETCH_BATCHES = 2


def _tf_dataset_type() -> type | None:
    tf = sys.modules.get("tensorflow")
    data = getattr(tf, "data", None)
    return getattr(data, "Dataset", None)


def _is_py_dataset(x: Any) -> bool:
    """Whether ``x`` is a ``keras.utils.PyDataset`` (or the ``keras.utils.Sequence`` it replaced), without importing
    Keras: by its class's bases."""
    return any(cls.__name__ in ("PyDataset", "Sequence") and cls.__module__.startswith("keras")
               for cls in type(x).__mro__)


def is_source(x: Any) -> bool:
    """Whether ``x`` is a source of batches rather than array data: iterable, and not an array (NumPy's, or anything
    with a shape that converts to one: a ``tf.Tensor``, a JAX array), a dict, a list or a tuple.

    Args:
        x: what ``fit``, ``evaluate`` or ``predict`` was given.
    """
    if isinstance(x, (np.ndarray, Mapping, list, tuple, str, bytes)) or hasattr(x, "__array__"):
        return False
    dataset = _tf_dataset_type()
    return (dataset is not None and isinstance(x, dataset)) or _is_py_dataset(x) \
        or isinstance(x, (NpyBatches, ProcessPart)) or hasattr(x, "__iter__")


def unpack(element: Any, where: str) -> tuple[Any, Any, Any]:
    """``(x, y, sample_weight)`` of one element, ``y`` and ``sample_weight`` None where it has none, as Keras'
    ``unpack_x_y_sample_weight`` reads it; every leaf converted to a NumPy array.

    Raises:
        ShapeError: a tuple of another length, or a leaf that is not an array; DTypeError: an array not of numbers
            (``where`` says which batch).
    """
    if isinstance(element, list):
        element = tuple(element)
    if isinstance(element, tuple):
        if not 1 <= len(element) <= 3:
            raise ShapeError(f"{where} is a tuple of {len(element)} entries; each batch must be {ELEMENTS}")
        element = (*element, None, None)[:3]
    else:
        element = (element, None, None)

    def leaf(value: Any) -> np.ndarray:
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as error:  # a ragged nest of lists, say
            raise ShapeError(f"{where} holds a {type(value).__name__} that is not an array of numbers: "
                             f"{error}") from error
        if array.dtype.kind not in "biuf":
            raise DTypeError(f"{where} holds an array of dtype {array.dtype}; batches must hold numbers")
        return array

    x, y, sample_weight = (None if part is None else optree.tree_map(leaf, part) for part in element)
    return x, y, sample_weight


class Source:
    """One input that gives batches, as Keras' data adapter for its kind reads it.

    Attributes:
        kind: what it is, for messages ("a tf.data.Dataset", "a generator", ...).
        num_batches: the batches of one pass where known; None: unknown (a generator) or infinite.
        infinite: whether a pass never ends (``dataset.repeat()``, a PyDataset of no ``num_batches``).
        reiterable: whether it can start a new pass (a generator cannot).
        workers, queue_size: the threads that read a PyDataset's batches and how many are read ahead.
        shuffles: whether ``shuffle=True`` draws the order of its batches (a finite PyDataset's, as Keras).
        threaded: whether a thread of the toolkit's reads ahead (not for a pipeline that reads ahead itself).
    """

    kind = "an iterable"
    shuffles = False
    threaded = True
    workers, queue_size = 1, PREFETCH_BATCHES

    def __init__(self, data: Any) -> None:
        self.data = data
        self.reiterable = not hasattr(data, "__next__")  # an iterator (a generator) is its own one pass
        self.num_batches = None
        if self.reiterable and hasattr(data, "__len__"):
            try:
                self.num_batches = len(data)
            except TypeError:  # a length it does not have (a torch IterableDataset's __len__ raises)
                pass
        self.infinite = False
        if not self.reiterable:
            self.kind = "a generator" if type(data).__name__ == "generator" else "an iterator"

    def new_pass(self, rng: np.random.Generator | None) -> Iterator[Any]:
        """The elements of a new pass, in order (``rng``: the trainer's, to draw the order where the source
        :attr:`shuffles`; None: in order)."""
        return iter(self.data)

    def on_epoch_begin(self) -> None:
        """Called as an epoch begins (a PyDataset's own hook)."""

    def on_epoch_end(self) -> None:
        """Called as an epoch ends (a PyDataset's own hook)."""


class TFDatasetSource(Source):
    """A ``tf.data.Dataset`` of batches: its cardinality gives :attr:`num_batches` (infinite after ``.repeat()``,
    unknown after a ``filter``); read with ``as_numpy_iterator`` on the caller's thread, ``PREFETCH_BATCHES`` read
    ahead by the dataset's own ``prefetch``."""

    kind = "a tf.data.Dataset"
    threaded = False  # its own prefetch reads ahead, on TensorFlow's threads

    def __init__(self, data: Any) -> None:
        self.data, self.reiterable = data, True
        cardinality = int(data.cardinality())
        self.infinite = cardinality == -1  # tf.data.INFINITE_CARDINALITY; -2 is UNKNOWN_CARDINALITY
        self.num_batches = cardinality if cardinality >= 0 else None
        scalars = [spec for spec in optree.tree_leaves(data.element_spec) if getattr(spec, "shape", None) is not None
                   and spec.shape.rank == 0]
        if scalars:
            raise ShapeError(f"the tf.data.Dataset's elements hold scalars ({data.element_spec}): they look like "
                             "single examples; batch them (dataset.batch(batch_size)) so that each element is a "
                             f"batch of {ELEMENTS}")

    def new_pass(self, rng: np.random.Generator | None) -> Iterator[Any]:
        return self.data.prefetch(PREFETCH_BATCHES).as_numpy_iterator()


class IndexedSource(Source):
    """A ``keras.utils.PyDataset`` (or a :class:`toolkit.data.NpyBatches`): batch ``i`` is ``data[i]`` for
    ``i < num_batches`` (None: infinite), in an order drawn from the trainer's RNG each pass where ``shuffle`` (as
    Keras' adapter shuffles its indices), read ahead by ``workers`` threads up to ``max_queue_size`` batches; a
    PyDataset's ``on_epoch_begin``/``on_epoch_end`` are called.

    Raises:
        ArgumentError: ``use_multiprocessing=True`` (not supported: threads read the batches), or a bad ``workers`` or
            ``max_queue_size``.
    """

    kind = "a keras.utils.PyDataset"

    def __init__(self, data: Any) -> None:
        self.data, self.reiterable = data, True
        if not _is_py_dataset(data):  # NpyBatches
            self.kind, self.num_batches = "toolkit.data.NpyBatches", len(data)
            self.infinite, self.shuffles = False, True
            return
        if getattr(data, "use_multiprocessing", False):
            raise ArgumentError("a PyDataset with use_multiprocessing=True is not supported: its batches are read by "
                                "threads; pass use_multiprocessing=False (workers=N threads read ahead)")
        self.workers = _positive(getattr(data, "workers", 1), "the PyDataset's workers")
        self.queue_size = _positive(getattr(data, "max_queue_size", 10), "the PyDataset's max_queue_size")
        self.num_batches = data.num_batches
        if self.num_batches is not None:
            self.num_batches = _positive(self.num_batches, "the PyDataset's num_batches", low=0)
        self.infinite = self.num_batches is None
        self.shuffles = not self.infinite

    def new_pass(self, rng: np.random.Generator | None) -> Iterator[Any]:
        if self.infinite:
            indices: Any = itertools.count()
        else:
            indices = rng.permutation(self.num_batches) if rng is not None else range(self.num_batches)
        if self.workers == 1:
            return (self.data[int(i)] for i in indices)
        return _read_ahead(self.data, iter(indices), self.workers, self.queue_size)

    def on_epoch_begin(self) -> None:
        if _is_py_dataset(self.data):
            self.data.on_epoch_begin()

    def on_epoch_end(self) -> None:
        if _is_py_dataset(self.data):
            self.data.on_epoch_end()


class ArraySource(Source):
    """Arrays in memory as a source of batches of ``batch_size``: a pass is the examples in an order drawn from the
    trainer's RNG (``shuffle``) or in order, the last batch smaller where the size does not divide (trained on, not
    dropped), as Keras' array adapter; each element ``(x, y, sample_weight)`` of the checked arrays' rows."""

    kind = "the arrays"

    def __init__(self, x: Any, y: Any, weights: np.ndarray | None, count: int, batch_size: int,
                 shuffle: bool) -> None:
        self.x, self.y, self.weights, self.count, self.batch_size = x, y, weights, count, batch_size
        self.reiterable, self.infinite, self.shuffles = True, False, shuffle
        self.num_batches = -(-count // batch_size)

    def new_pass(self, rng: np.random.Generator | None) -> Iterator[Any]:
        order = rng.permutation(self.count) if rng is not None else np.arange(self.count)  # drawn now, not lazily
        return ((rows(self.x, taken), rows(self.y, taken),
                 None if self.weights is None else self.weights[taken])
                for taken in (order[start:start + self.batch_size] for start in range(0, self.count, self.batch_size)))


def _read_ahead(data: Any, indices: Iterator[Any], workers: int, depth: int) -> Iterator[Any]:
    """``data[i]`` for each of ``indices``, in order, ``workers`` threads reading up to ``depth`` ahead."""
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="pydataset") as pool:
        pending: deque = deque()
        try:
            for index in itertools.islice(indices, depth):
                pending.append(pool.submit(data.__getitem__, int(index)))
            while pending:
                batch = pending.popleft().result()
                for index in itertools.islice(indices, 1):
                    pending.append(pool.submit(data.__getitem__, int(index)))
                yield batch
        finally:
            for future in pending:
                future.cancel()


class ProcessPart:
    """This process's rows of each global batch of ``data`` (a source of global batches), cut as
    :func:`toolkit.distributed.process_slice` cuts an array batch (contiguous, uneven where the batch does not
    divide): every process reads the same global batches and trains on its part, so a fit across processes from it
    equals one process's fit on the global batches. Each process reads every batch whole and keeps its rows: where
    reading is the cost, give each process its own files (or ``dataset.shard`` them) instead.

    Args:
        data: the source of global batches (any kind :func:`source` reads).
        cluster: the job; default: the one this process joined.

    Raises:
        ArgumentTypeError, ShapeError, ArgumentError: what :func:`source` raises for ``data``.
    """

    def __init__(self, data: Any, cluster: Any = None) -> None:
        self.inner, self.cluster = source(data), cluster

    def __repr__(self) -> str:
        return f"ProcessPart({self.inner.kind})"


class _PartSource(Source):
    """A :class:`ProcessPart`: its source's passes, each element cut to this process's rows."""

    def __init__(self, part: ProcessPart) -> None:
        self.part, inner = part, part.inner
        self.kind = f"this process's part of {inner.kind}"
        self.num_batches, self.infinite, self.reiterable = inner.num_batches, inner.infinite, inner.reiterable
        self.shuffles, self.threaded, self.workers, self.queue_size = (inner.shuffles, inner.threaded, inner.workers,
                                                                       inner.queue_size)

    def new_pass(self, rng: np.random.Generator | None) -> Iterator[Any]:
        def cut(element: Any) -> Any:
            rows = process_slice(len(optree.tree_leaves(element)[0]), self.part.cluster)
            return optree.tree_map(lambda a: np.asarray(a)[rows], element)

        return (cut(element) for element in self.part.inner.new_pass(rng))

    def on_epoch_begin(self) -> None:
        self.part.inner.on_epoch_begin()

    def on_epoch_end(self) -> None:
        self.part.inner.on_epoch_end()


def _positive(value: Any, what: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ArgumentError(f"{what} must be an int >= {low}, got {value!r}")
    return int(value)


def source(data: Any) -> Source:
    """The :class:`Source` that reads ``data`` (see :func:`is_source`).

    Raises:
        ArgumentTypeError: ``data`` is not iterable; ShapeError: a ``tf.data`` dataset of unbatched elements;
            ArgumentError: a PyDataset's settings the toolkit does not take.
    """
    dataset = _tf_dataset_type()
    if isinstance(data, ProcessPart):
        return _PartSource(data)
    if dataset is not None and isinstance(data, dataset):
        return TFDatasetSource(data)
    if _is_py_dataset(data) or isinstance(data, NpyBatches):
        return IndexedSource(data)
    if not hasattr(data, "__iter__"):
        raise ArgumentTypeError(f"x must be arrays, a dict of arrays, or a source of batches (a tf.data.Dataset, a "
                                f"keras.utils.PyDataset, a generator or an iterable); got {type(data).__name__}")
    return Source(data)


__all__ = ["ELEMENTS", "PREFETCH_BATCHES", "ArraySource", "IndexedSource", "ProcessPart", "Source", "TFDatasetSource",
           "is_source", "source", "unpack"]
