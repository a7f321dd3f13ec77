"""Products: ``einsum``, ``tensordot``, ``dot``, ``vdot``, ``inner``, ``outer``, ``kron``, ``cross``, ``correlate``,
``trapezoid`` (``keras.ops.numpy``) and ``cdist`` (``keras.ops.math``).

Part of :class:`~toolkit.ops.Ops`, composites only, written once here: the products are one contraction
(:meth:`ProductOps._contract`: transposes, reshapes and one ``matmul``, or a broadcast product where nothing is
summed), so every backend sums the same terms and differentiates them with its own matmul.
"""

from __future__ import annotations

import math
from abc import ABC
from collections.abc import Sequence

import numpy as np

from toolkit.errors import DTypeError, ShapeError

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): none
#: here.
ARGUMENTS: dict[str, str] = {}
#: Integer dtypes a product is computed in (TensorFlow's matmul has no int8, int16 or bool kernels): the result is
#: cast back, which wraps modulo 2**bits as NumPy's own integer products do.
_PRODUCT_DTYPES = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "int32", "uint16": "int32",
                   "uint32": "int64", "uint64": "int64"}
_ELLIPSIS = "..."


class ProductOps(ABC):  # noqa: B024 (composites only: nothing for a backend to implement)
    """Products; mixed into :class:`~toolkit.ops.Ops`."""

    def einsum(self, subscripts: str, *operands, **kwargs):
        """Einstein summation (``keras.ops.einsum``, NumPy's notation): ``"ij,jk->ik"``, an implicit output (the
        labels that appear once, sorted), ``...`` for broadcast leading axes, a label repeated in one operand for a
        diagonal (``"ii->i"``, ``"ii"`` the trace). Operands are promoted together (booleans give booleans; only
        int8 operands give int32, as Keras); a Python number is a scalar operand.

        Raises:
            ShapeError: subscripts that do not fit the operands (count, rank, a label with two sizes).
            TypeError: a keyword argument (NumPy's ``optimize``, ``dtype``, ...): not implemented.
        """
        if kwargs:
            raise TypeError(f"ops.einsum takes no keyword arguments; got {sorted(kwargs)}")
        inputs, output = _parse_einsum(subscripts, [len(self.shape(x)) for x in operands])
        values, dtype = self._product_operands(list(operands), "einsum")
        if all(self.dtype_of(x) == "int8" for x in operands if not isinstance(x, (int, float))):
            dtype = "int32"
        sizes: dict = {}
        for labels, x in zip(inputs, values):
            for label, size in zip(labels, x.shape):
                known = sizes.setdefault(label, size)
                if known != size:
                    if 1 not in (known, size):  # size-1 axes broadcast, as in NumPy
                        raise ShapeError(f"ops.einsum({subscripts!r}): label {_label_name(label)} has sizes {known} "
                                         f"and {size} in operands of shapes {[tuple(v.shape) for v in values]}")
                    sizes[label] = max(known, size)
        terms = []
        for labels, x in zip(inputs, values):
            x, labels = self._diagonals(x, labels)
            wanted = tuple(sizes[label] for label in labels)
            if tuple(x.shape) != wanted:  # a broadcast axis of size 1 (``...``) meets a longer one
                x = self.broadcast_to(x, wanted)
            terms.append((x, labels))
        result, labels = terms[0]
        for i, (x, x_labels) in enumerate(terms[1:], start=1):
            keep = set(output).union(*(set(t[1]) for t in terms[i + 1:]))
            result, labels = self._contract(result, labels, x, x_labels, keep)
        result, labels = self._sum_labels(result, labels, [label for label in labels if label not in output])
        result = self._permuted(result, labels, list(output))
        return self._product_result(result, dtype)

    def tensordot(self, x1, x2, axes=2):
        """Sums of products over ``axes`` (``keras.ops.tensordot``, NumPy's): an int ``n`` pairs the last ``n`` axes
        of ``x1`` with the first ``n`` of ``x2``; a pair ``(axes1, axes2)`` (ints or sequences) names them. The
        result has ``x1``'s other axes, then ``x2``'s.

        Raises:
            ShapeError: paired axes of different sizes, an axis named twice or out of range.
        """
        (a, b), dtype = self._product_operands([x1, x2], "tensordot")
        na, nb = len(a.shape), len(b.shape)
        if isinstance(axes, (int, np.integer)):
            if not 0 <= axes <= min(na, nb):
                raise ShapeError(f"ops.tensordot: axes={axes} for operands of ranks {na} and {nb}")
            first, second = list(range(na - axes, na)), list(range(axes))
        else:
            if len(axes) != 2:
                raise ShapeError(f"ops.tensordot: axes must be an int or a pair (axes1, axes2), got {axes!r}")
            first, second = ([int(v)] if np.ndim(v) == 0 else [int(i) for i in v] for v in axes)
        first = axes_in_range(first, na, "tensordot", "x1")
        second = axes_in_range(second, nb, "tensordot", "x2")
        if len(first) != len(second) or any(a.shape[i] != b.shape[j] for i, j in zip(first, second)):
            raise ShapeError(f"ops.tensordot: axes {first} of x1 {tuple(a.shape)} and {second} of x2 "
                             f"{tuple(b.shape)} must pair axes of equal sizes")
        a_labels = [("x1", i) for i in range(na)]
        b_labels = [("x2", j) for j in range(nb)]
        for i, j in zip(first, second):
            b_labels[j] = a_labels[i]
        keep = {label for label in a_labels + b_labels if label[0] == "x1" and label not in b_labels
                or label[0] == "x2"}
        result, _ = self._contract(a, a_labels, b, b_labels, keep)
        return self._product_result(result, dtype)

    def dot(self, x1, x2):
        """NumPy's ``dot`` (``keras.ops.dot``): a scalar operand multiplies; ``x2`` 1-D sums over the last axes;
        otherwise the last axis of ``x1`` meets the second-to-last of ``x2`` (2-D: the matrix product).

        Raises:
            ShapeError: the summed axes have different sizes.
        """
        na, nb = len(self.shape(x1)), len(self.shape(x2))
        if na == 0 or nb == 0:
            (a, b), dtype = self._product_operands([x1, x2], "dot")
            return self._product_result(self._broadcast_product(a, b), dtype)
        return self.tensordot(x1, x2, axes=([-1], [0 if nb == 1 else -2]))

    def vdot(self, x1, x2):
        """The dot product of the flattened operands (``keras.ops.vdot``; real numbers: no conjugate).

        Raises:
            ShapeError: operands of different sizes.
        """
        return self.dot(self.reshape(self.wrap(self._native(x1)), (-1,)),
                        self.reshape(self.wrap(self._native(x2)), (-1,)))

    def inner(self, x1, x2):
        """Sums of products over the last axes (``keras.ops.inner``): shape ``x1.shape[:-1] + x2.shape[:-1]``; a
        scalar operand multiplies.

        Raises:
            ShapeError: last axes of different sizes.
        """
        if len(self.shape(x1)) == 0 or len(self.shape(x2)) == 0:
            return self.dot(x1, x2)
        return self.tensordot(x1, x2, axes=([-1], [-1]))

    def outer(self, x1, x2):
        """``x1`` and ``x2`` flattened, every product of one entry of each: shape ``(x1.size, x2.size)``
        (``keras.ops.outer``)."""
        (a, b), dtype = self._product_operands([x1, x2], "outer")
        return self._product_result(self._broadcast_product(self.reshape(a, (-1, 1)), self.reshape(b, (1, -1))),
                                    dtype)

    def kron(self, x1, x2):
        """The Kronecker product (``keras.ops.kron``, NumPy's): blocks ``x1[i, j] * x2``; the operand of lower
        rank gets leading axes of size 1."""
        (a, b), dtype = self._product_operands([x1, x2], "kron")
        rank = max(len(a.shape), len(b.shape))
        sa = (1,) * (rank - len(a.shape)) + tuple(a.shape)
        sb = (1,) * (rank - len(b.shape)) + tuple(b.shape)
        pa = self.reshape(a, tuple(v for s in sa for v in (s, 1)))
        pb = self.reshape(b, tuple(v for s in sb for v in (1, s)))
        return self._product_result(self.reshape(pa * pb, tuple(i * j for i, j in zip(sa, sb))), dtype)

    def cross(self, x1, x2, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None):
        """Cross products of the vectors along ``axisa`` of ``x1`` and ``axisb`` of ``x2`` (``keras.ops.cross``,
        NumPy's): 3-vectors give 3-vectors along ``axisc``; a 2-vector counts with z = 0, and two 2-vectors give
        the z component alone. ``axis`` sets all three. The other axes broadcast.

        Raises:
            ShapeError: vectors of a size other than 2 or 3, or other axes that do not broadcast.
            DTypeError: boolean operands (NumPy refuses them too).
        """
        if axis is not None:
            axisa = axisb = axisc = axis
        dtype = self._result_dtype([x1, x2])
        if dtype == "bool":
            raise DTypeError("ops.cross of booleans: NumPy refuses boolean subtraction; cast x1 and x2 first")
        a, b = (self.wrap(self._native(v, dtype)) for v in (x1, x2))
        a, b = self._moved_to_end(a, axisa, "axisa"), self._moved_to_end(b, axisb, "axisb")
        if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
            raise ShapeError(f"ops.cross: the vectors must have 2 or 3 entries; got x1 {a.shape[-1]} (axisa="
                             f"{axisa}) and x2 {b.shape[-1]} (axisb={axisb})")
        try:
            np.broadcast_shapes(tuple(a.shape[:-1]), tuple(b.shape[:-1]))
        except ValueError:
            raise ShapeError(f"ops.cross: the other axes of x1 {tuple(a.shape[:-1])} and x2 {tuple(b.shape[:-1])} "
                             "(the vectors' axes left out) do not broadcast") from None
        a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
        z = a0 * b1 - a1 * b0
        if a.shape[-1] == 2 and b.shape[-1] == 2:
            return z
        # NumPy's formulas for each case: an absent z component is never multiplied (0 * inf would be NaN).
        if a.shape[-1] == 2:
            b2 = b[..., 2]
            parts = [a1 * b2, -(a0 * b2), z]
        elif b.shape[-1] == 2:
            a2 = a[..., 2]
            parts = [-(a2 * b1), a2 * b0, z]
        else:
            a2, b2 = a[..., 2], b[..., 2]
            parts = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z]
        result = self.stack(parts, axis=-1)
        return self._moved_from_end(result, axisc, "axisc")

    def correlate(self, x1, x2, mode: str = "valid"):
        """Cross-correlation of two 1-D arrays (``keras.ops.correlate``, NumPy's): ``full[k] = sum_j x1[k - (m-1)
        + j] * x2[j]`` with ``m = len(x2)`` and zeros outside ``x1``; ``"same"`` keeps ``max(n, m)`` entries of it
        around the centre and ``"valid"`` the ``|n - m| + 1`` where the shorter array lies inside the longer one.
        Floating results (integers give the computation dtype).

        Raises:
            ShapeError: operands that are not 1-D or are empty.
            ValueError: a mode other than "valid", "same", "full".
        """
        if mode not in ("valid", "same", "full"):
            raise ValueError(f"ops.correlate: mode must be 'valid', 'same' or 'full', got {mode!r}")
        dtype = self._result_dtype([x1, x2], floating=True)
        a, v = (self.wrap(self._native(x, dtype)) for x in (x1, x2))
        if len(a.shape) != 1 or len(v.shape) != 1 or not a.shape[0] or not v.shape[0]:
            raise ShapeError(f"ops.correlate needs two non-empty 1-D arrays, got shapes {a.shape} and {v.shape}")
        n, m = a.shape[0], v.shape[0]
        length = n + m - 1
        # The longer array, zero-padded by the shorter's length - 1, is sliced once per entry of the shorter one:
        # the rows of windows, weighted by the shorter array and summed, are the full correlation (m slices). The
        # products with the padding are left out, not summed as zeros: NumPy's sum has no term there (a NaN or an
        # infinity times a padding zero would be NaN).
        if n >= m:
            windows, weights, offsets, pad, size = self._zero_padded(a, m - 1), v, range(m), m - 1, n
        else:  # x1 shorter: full[k] = sum_i x1[i] * reversed(x2)[k - i]
            windows, weights, offsets, pad, size = self._zero_padded(v[::-1], n - 1), a, range(n - 1, -1, -1), n - 1, m
        rows = self.stack([windows[o:o + length] for o in offsets], axis=0)
        index = np.add.outer(np.asarray(offsets), np.arange(length)) - pad
        inside = (index >= 0) & (index < size)
        full = self.sum(self.where(inside, self.expand_dims(weights, -1) * rows, 0.0), axis=0)
        if mode == "full":
            return full
        if mode == "same":
            start, size = ((m - 1) // 2 if n >= m else n // 2), max(n, m)
        else:
            start, size = min(n, m) - 1, abs(n - m) + 1
        return full[start:start + size]

    def trapezoid(self, y, x=None, dx=1.0, axis: int = -1):
        """The integral of ``y`` along ``axis`` by the trapezoidal rule (``keras.ops.trapezoid``, NumPy's):
        ``sum(d * (y[1:] + y[:-1]) / 2)`` with ``d`` the steps of the sample points ``x`` (1-D along ``axis``, or
        shaped like ``y``), or the constant spacing ``dx``.

        Raises:
            ShapeError: ``x`` whose length or shape does not fit ``y``.
        """
        dtype = self._result_dtype([y] + ([] if x is None else [x]), floating=True)
        y = self.wrap(self._native(y, dtype))
        rank = len(y.shape)
        axis = axes_in_range([axis], rank, "trapezoid", "y")[0]
        if x is None:
            d = dx
        else:
            x = self.wrap(self._native(x, dtype))
            if len(x.shape) == 1:
                if x.shape[0] != y.shape[axis]:
                    raise ShapeError(f"ops.trapezoid: x has {x.shape[0]} points, y {y.shape[axis]} along axis {axis}")
                d = self.reshape(x[1:] - x[:-1], tuple(-1 if i == axis else 1 for i in range(rank)))
            else:
                d = _along(x, axis, slice(1, None)) - _along(x, axis, slice(None, -1))
        middle = (_along(y, axis, slice(1, None)) + _along(y, axis, slice(None, -1))) / 2.0
        return self.sum(d * middle if x is not None else dx * middle, axis=axis)

    def cdist(self, x, y):
        """Euclidean distances between the rows of ``x`` ``(..., m, d)`` and of ``y`` ``(..., n, d)``:
        ``(..., m, n)`` (``keras.ops.cdist``). The gradient at a zero distance is NaN, as Keras' (JAX's) is.

        Raises:
            ShapeError: inputs of rank < 2, or with different last axes.
        """
        dtype = self._result_dtype([x, y], floating=True)
        x, y = (self.wrap(self._native(v, dtype)) for v in (x, y))
        if len(x.shape) < 2 or len(y.shape) < 2 or x.shape[-1] != y.shape[-1]:
            raise ShapeError(f"ops.cdist needs inputs (..., m, d) and (..., n, d) of rank >= 2 with one last axis, "
                             f"got shapes {x.shape} and {y.shape}")
        diff = self.expand_dims(x, -2) - self.expand_dims(y, -3)
        return self.sqrt(self.sum(diff * diff, axis=-1))

    # --- helpers ---------------------------------------------------------------------------------------------------
    def _product_operands(self, operands: list, name: str):
        """The operands of a product as Tensors of the dtype it is computed in, and the result's dtype."""
        dtype = self._result_dtype(operands)
        work = _PRODUCT_DTYPES.get(dtype, dtype)
        return [self.wrap(self._native(x, work)) for x in operands], dtype

    def _product_result(self, result, dtype: str):
        """A product computed in a wider dtype, in the result's: booleans are "any product true"."""
        if dtype == "bool":
            return self.not_equal(result, 0)
        return result if self.dtype_of(result) == dtype else self.cast(result, dtype)

    def _broadcast_product(self, a, b):
        return a * b

    def _permuted(self, x, labels: list, order: list):
        """``x`` (axes named ``labels``) with its axes in ``order``."""
        perm = [labels.index(label) for label in order]
        return x if perm == list(range(len(perm))) else self.transpose(x, perm)

    def _sum_labels(self, x, labels: list, summed: list):
        """``x`` summed over the axes named ``summed``, and the remaining labels."""
        if not summed:
            return x, labels
        axes = tuple(labels.index(label) for label in summed)
        return self.sum(x, axis=axes), [label for label in labels if label not in summed]

    def _diagonals(self, x, labels: list):
        """``x`` with each label repeated in it reduced to its diagonal (``"ii->i"``): the repeated axes moved last,
        flattened, and every ``(n + 1)``-th entry sliced out (no gather, no mask)."""
        while len(set(labels)) < len(labels):
            label = next(lb for lb in labels if labels.count(lb) > 1)
            where = [i for i, lb in enumerate(labels) if lb == label]
            others = [i for i in range(len(labels)) if i not in where[:2]]
            x = self.transpose(x, others + where[:2])
            n = x.shape[-1]
            x = self.reshape(x, tuple(x.shape[:-2]) + (n * n,))[..., ::n + 1]
            labels = [labels[i] for i in others] + [label]
        return x, labels

    def _contract(self, a, a_labels: list, b, b_labels: list, keep: set):
        """The product of ``a`` and ``b`` (axes named by labels, each label once per operand) summed over the
        labels they share that are not in ``keep``; labels of one operand that are neither kept nor in the other
        are summed first. Returns the result, its axes named: shared kept labels, then ``a``'s, then ``b``'s.
        At most one label may have an unknown size."""
        a, a_labels = self._sum_labels(a, a_labels, [lb for lb in a_labels if lb not in keep and lb not in b_labels])
        b, b_labels = self._sum_labels(b, b_labels, [lb for lb in b_labels if lb not in keep and lb not in a_labels])
        batch = [lb for lb in a_labels if lb in b_labels and lb in keep]
        summed = [lb for lb in a_labels if lb in b_labels and lb not in keep]
        a_only = [lb for lb in a_labels if lb not in b_labels]
        b_only = [lb for lb in b_labels if lb not in a_labels]
        size = {**dict(zip(a_labels, a.shape)), **dict(zip(b_labels, b.shape))}
        if sum(size[lb] is None for lb in size) > 1:
            raise ShapeError(f"a product of operands of shapes {tuple(a.shape)} and {tuple(b.shape)}: at most one "
                             "axis may have an unknown size")
        labels = batch + a_only + b_only
        if not summed:  # nothing to add up: one broadcast product
            a = self._permuted(a, a_labels, batch + a_only)
            b = self._permuted(b, b_labels, batch + b_only)
            a = self.reshape(a, _sizes(size, batch + a_only) + (1,) * len(b_only)) if b_only else a
            b = self.reshape(b, _sizes(size, batch) + (1,) * len(a_only) + _sizes(size, b_only)) if a_only else b
            return self._broadcast_product(a, b), labels
        a = self.reshape(self._permuted(a, a_labels, batch + a_only + summed),
                         _group(size, [batch, a_only, summed] if batch else [a_only, summed]))
        b = self.reshape(self._permuted(b, b_labels, batch + summed + b_only),
                         _group(size, [batch, summed, b_only] if batch else [summed, b_only]))
        return self.reshape(self.matmul(a, b), _sizes(size, labels)), labels

    def _moved_to_end(self, x, axis: int, name: str):
        rank = len(x.shape)
        axis = axes_in_range([axis], rank, "cross", name)[0]
        return x if axis == rank - 1 else self.transpose(x, [i for i in range(rank) if i != axis] + [axis])

    def _moved_from_end(self, x, axis: int, name: str):
        rank = len(x.shape)
        axis = axes_in_range([axis], rank, "cross", name)[0]
        perm = list(range(rank - 1))
        perm.insert(axis, rank - 1)
        return x if axis == rank - 1 else self.transpose(x, perm)

    def _zero_padded(self, x, count: int):
        """A 1-D ``x`` with ``count`` zeros before and after it."""
        if not count:
            return x
        zeros = self.zeros_like(x[:1])
        zeros = self.broadcast_to(zeros, (count,))
        return self.concatenate([zeros, x, zeros], axis=0)


def _parse_einsum(subscripts: str, ranks: list[int]) -> tuple[list[list], list]:
    """Each operand's axis labels and the output's, from NumPy's einsum notation; the axes of ``...`` get labels
    ``("...", k)``, ``k`` counted from the last, so that they broadcast right-aligned."""
    if not isinstance(subscripts, str):
        raise TypeError(f"ops.einsum needs the subscripts as a string, got {type(subscripts).__name__}")
    spec = subscripts.replace(" ", "")
    inputs_spec, arrow, output_spec = spec.partition("->")
    terms = inputs_spec.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"ops.einsum({subscripts!r}) names {len(terms)} operands, got {len(ranks)}")
    inputs, ellipsis_rank = [], 0
    for term, rank in zip(terms, ranks):
        head, dots, tail = term.partition(_ELLIPSIS)
        letters = head + tail
        if not all(c.isalpha() for c in letters) or _ELLIPSIS in tail or "." in letters:
            raise ShapeError(f"ops.einsum({subscripts!r}): term {term!r} must be letters with at most one '...'")
        extra = rank - len(letters)
        if extra < 0 or (extra and not dots):
            raise ShapeError(f"ops.einsum({subscripts!r}): term {term!r} does not fit an operand of rank {rank}")
        ellipsis_rank = max(ellipsis_rank, extra)
        inputs.append(list(head) + [(_ELLIPSIS, k) for k in range(extra, 0, -1)] + list(tail))
    broadcast = [(_ELLIPSIS, k) for k in range(ellipsis_rank, 0, -1)]
    letters = [label for labels in inputs for label in labels if isinstance(label, str)]
    if not arrow:
        output = broadcast + sorted(c for c in set(letters) if letters.count(c) == 1)
    else:
        head, dots, tail = output_spec.partition(_ELLIPSIS)
        if not all(c.isalpha() for c in head + tail) or "." in tail:
            raise ShapeError(f"ops.einsum({subscripts!r}): output {output_spec!r} must be letters and one '...'")
        if broadcast and not dots:
            raise ShapeError(f"ops.einsum({subscripts!r}): the operands' '...' axes need a '...' in the output")
        output = list(head) + (broadcast if dots else []) + list(tail)
        named = [label for label in output if isinstance(label, str)]
        if len(set(named)) < len(named) or any(c not in letters for c in named):
            raise ShapeError(f"ops.einsum({subscripts!r}): each output label must appear once, and in an operand")
    return inputs, output


def _label_name(label) -> str:
    return f"'...'[-{label[1]}]" if isinstance(label, tuple) else repr(label)


def axes_in_range(axes: Sequence[int], rank: int, name: str, argument: str) -> list[int]:
    """Axes made non-negative; a ShapeError names the argument when one is out of range or repeated."""
    found = []
    for axis in axes:
        if not -rank <= int(axis) < rank:
            raise ShapeError(f"ops.{name}: axis {axis} is out of range for {argument} of rank {rank}")
        found.append(int(axis) % rank)
    if len(set(found)) < len(found):
        raise ShapeError(f"ops.{name}: {argument}'s axes {list(axes)} name an axis twice")
    return found


def _along(x, axis: int, part: slice):
    """``x`` sliced by ``part`` along ``axis``."""
    return x[(slice(None),) * axis + (part,)]


def _sizes(size: dict, labels: list) -> tuple:
    return tuple(-1 if size[label] is None else size[label] for label in labels)


def _group(size: dict, groups: list[list]) -> tuple:
    """One axis per group of labels, of the product of their sizes (-1 for the group with an unknown size)."""
    sizes = [[size[label] for label in group] for group in groups]
    return tuple(-1 if None in group else math.prod(group) for group in sizes)
