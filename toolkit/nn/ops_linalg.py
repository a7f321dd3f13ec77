"""Products and linear algebra: ``einsum``, ``tensordot``, ``dot``, ``vdot``, ``inner``, ``outer``, ``kron``, ``cross``,
``correlate``, ``trapezoid`` (``keras.ops.numpy``), ``cdist``, ``logdet`` (``keras.ops.math``), ``slogdet`` and
``keras.ops.linalg``'s ``norm``, ``det``, ``inv``, ``solve``, ``solve_triangular``, ``cholesky``, ``qr``, ``svd``,
``eigh``, ``lstsq``.

Part of :class:`~toolkit.nn.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.

The products are one contraction written once (:meth:`LinalgOps._contract`: transposes, reshapes and one
``matmul``, or a broadcast product where nothing is summed), so every backend sums the same terms and differentiates
them with its own matmul. The decompositions are the frameworks' (``tf.linalg``; ``jax.numpy.linalg`` in the Theano
family), behind one argument check written here.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from toolkit.errors import DTypeError, ShapeError

#: How each primitive's array arguments are converted (the letters of :data:`toolkit.nn.ops.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {
    **dict.fromkeys(("_det", "_inv", "_cholesky", "_slogdet", "_svd", "_qr", "_eigh"), "f"),
    "_solve": "ff", "_solve_triangular": "ff",
}

#: Integer dtypes a product is computed in (TensorFlow's matmul has no int8, int16 or bool kernels): the result is
#: cast back, which wraps modulo 2**bits as NumPy's own integer products do.
_PRODUCT_DTYPES = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "int32", "uint16": "int32",
                   "uint32": "int64", "uint64": "int64"}
_ELLIPSIS = "..."


class LinalgOps(ABC):
    """Products and linear algebra; mixed into :class:`~toolkit.nn.ops.Ops`."""

    # --- products --------------------------------------------------------------------------------------------------
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
        first = _axes_in_range(first, na, "tensordot", "x1")
        second = _axes_in_range(second, nb, "tensordot", "x2")
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
        axis = _axes_in_range([axis], rank, "trapezoid", "y")[0]
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

    # --- norms -----------------------------------------------------------------------------------------------------
    def norm(self, x, ord=None, axis=None, keepdims: bool = False):
        """Vector or matrix norms (``keras.ops.linalg.norm``, NumPy's). ``axis`` an int (or ``x`` 1-D): vector
        norms, ``ord`` None or 2 (Euclidean), ``inf``/``-inf`` (max/min of ``|x|``), 0 (count of non-zeros), any
        other number ``p`` (``sum(|x|**p)**(1/p)``). ``axis`` a pair (or ``x`` 2-D): matrix norms, ``ord`` None or
        "fro" (Frobenius), "nuc" (sum of singular values), ``inf``/``-inf`` (max/min row sum of ``|x|``), 1/-1
        (column sums), 2/-2 (largest/smallest singular value). ``axis=None`` with ``ord=None`` is the Euclidean norm
        of all entries. Floating results; the gradient at 0 of the Euclidean norm is NaN, as Keras' (JAX's) is.

        Raises:
            ValueError: an ``ord`` not defined for vectors (a string) or matrices (0, 3, ...), or ``axis=None``
                with an ``ord`` for ``x`` of rank other than 1 or 2.
            ShapeError: ``axis`` naming the same axis twice, more than two axes, or axes out of range.
        """
        x = self.wrap(self._native(x, self._result_dtype([x], floating=True)))
        rank = len(x.shape)
        if axis is None:
            if ord is None or (ord in ("f", "fro") and rank == 2) or (ord == 2 and rank == 1):
                result = self.sqrt(self.sum(x * x))
                return self.reshape(result, (1,) * rank) if keepdims else result
            if rank not in (1, 2):
                raise ValueError(f"ops.norm: ord={ord!r} with axis=None needs x of rank 1 or 2, got {rank}")
            axis = tuple(range(rank))
        axes = _axes_in_range([axis] if isinstance(axis, (int, np.integer)) else list(axis), rank, "norm", "x")
        if len(axes) == 1:
            result = self._vector_norm(x, ord, axes[0])
        elif len(axes) == 2:
            result = self._matrix_norm(x, ord, axes)
        else:
            raise ShapeError(f"ops.norm: axis must be an int or a pair of axes, got {axis!r}")
        if keepdims:
            result = self.reshape(result, tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
        return result

    def _vector_norm(self, x, ord, axis: int):
        if isinstance(ord, str):
            raise ValueError(f"ops.norm: ord={ord!r} is not a vector norm (axis={axis}); use a number or None")
        if ord is None or ord == 2:
            return self.sqrt(self.sum(x * x, axis=axis))
        if ord == float("inf"):
            return self.max(self.abs(x), axis=axis)
        if ord == float("-inf"):
            return self.min(self.abs(x), axis=axis)
        if ord == 0:
            return self.sum(self.cast(self.not_equal(x, 0), self.dtype_of(x)), axis=axis)
        if ord == 1:
            return self.sum(self.abs(x), axis=axis)
        return self.sum(self.abs(x) ** float(ord), axis=axis) ** (1.0 / float(ord))

    def _matrix_norm(self, x, ord, axes: list[int]):
        rows, cols = axes
        if rows == cols:
            raise ShapeError(f"ops.norm: axis names the same axis twice: {axes}")
        if ord in (2, -2, "nuc"):
            others = [i for i in range(len(x.shape)) if i not in axes]
            values = self.svd(self.transpose(x, others + [rows, cols]), compute_uv=False)
            reduce = {2: self.max, -2: self.min, "nuc": self.sum}[ord]
            return reduce(values, axis=-1)
        if ord in (None, "fro", "f"):
            return self.sqrt(self.sum(x * x, axis=tuple(axes)))
        if ord in (1, -1, float("inf"), float("-inf")):
            summed, then = (rows, cols) if ord in (1, -1) else (cols, rows)
            sums = self.sum(self.abs(x), axis=summed)
            reduce = self.max if ord in (1, float("inf")) else self.min
            return reduce(sums, axis=then - 1 if then > summed else then)
        raise ValueError(f"ops.norm: ord={ord!r} is not a matrix norm (axis={tuple(axes)}); use None, 'fro', "
                         "'nuc', inf, -inf, 1, -1, 2 or -2")

    # --- linear algebra (``keras.ops.linalg``) ---------------------------------------------------------------------
    def det(self, x):
        """Determinants of the square matrices in the last two axes (``keras.ops.linalg.det``), by LU.

        Raises:
            ShapeError: ``x`` not ``(..., n, n)``.
        """
        return self._det(self._square(x, "det"))

    def inv(self, x):
        """Inverses of the square matrices in the last two axes (``keras.ops.linalg.inv``). A singular matrix is
        not checked: TensorFlow fails at run time, the Theano family gives inf/NaN entries.

        Raises:
            ShapeError: ``x`` not ``(..., n, n)``.
        """
        return self._inv(self._square(x, "inv"))

    def slogdet(self, x):
        """``(sign, log|det|)`` of the square matrices in the last two axes (``keras.ops.slogdet``), computed from
        the LU factors without forming the determinant (no overflow). A singular matrix gives ``(0, -inf)``.

        Raises:
            ShapeError: ``x`` not ``(..., n, n)``.
        """
        return self._slogdet(self._square(x, "slogdet"))

    def logdet(self, x):
        """``log|det(x)|`` (``keras.ops.logdet``: the second part of :meth:`slogdet`, as Keras computes it)."""
        return self.slogdet(x)[1]

    def solve(self, a, b):
        """``x`` with ``a @ x == b`` (``keras.ops.linalg.solve``): ``a`` ``(..., n, n)``; ``b`` ``(..., n)`` (one
        rank less than ``a``: vectors) or ``(..., n, k)``; batch axes broadcast.

        Raises:
            ShapeError: ``a`` not square, or ``b`` whose rows do not match ``a``.
        """
        return self._solved(a, b, "solve", self._solve)

    def solve_triangular(self, a, b, lower: bool = False):
        """``solve`` for triangular ``a``, reading only its ``lower`` (else upper) triangle
        (``keras.ops.linalg.solve_triangular``).

        Raises:
            ShapeError: as :meth:`solve`.
        """
        return self._solved(a, b, "solve_triangular", lambda x, y: self._solve_triangular(x, y, bool(lower)))

    def cholesky(self, x, upper: bool = False):
        """The Cholesky factor of symmetric positive-definite matrices (``keras.ops.linalg.cholesky``): lower
        triangular ``L`` with ``L @ L.T == x`` (its transpose when ``upper``). Only the lower triangle is read. A
        matrix that is not positive definite gives NaN entries on every backend (Keras raises in eager mode).

        Raises:
            ShapeError: ``x`` not ``(..., n, n)``.
        """
        factor = self._cholesky(self._lower_symmetric(self._square(x, "cholesky")))
        return self._swap_last(factor) if upper else factor

    def qr(self, x, mode: str = "reduced"):
        """``(q, r)`` with ``q @ r == x`` (``keras.ops.linalg.qr``): orthonormal columns ``q`` ``(..., m, k)`` and
        upper-triangular ``r`` ``(..., k, n)``, ``k = min(m, n)`` ("reduced") or ``k = m`` ("complete"). Signs may
        differ between backends (Householder conventions); ``q @ r`` does not.

        Raises:
            ValueError: a mode other than "reduced" or "complete".
            ShapeError: ``x`` of rank < 2.
        """
        if mode not in ("reduced", "complete"):
            raise ValueError(f"ops.qr: mode must be 'reduced' or 'complete', got {mode!r}")
        return self._qr(self._matrices(x, "qr"), mode == "complete")

    def svd(self, x, full_matrices: bool = True, compute_uv: bool = True):
        """Singular value decomposition (``keras.ops.linalg.svd``): ``(u, s, vh)`` with ``u * s @ vh == x`` and the
        singular values ``s`` in descending order; ``s`` alone when not ``compute_uv``. Singular vectors are unique
        only up to sign (backends may differ there); ``s`` and products of ``u``, ``s``, ``vh`` do not.

        Raises:
            ShapeError: ``x`` of rank < 2.
        """
        return self._svd(self._matrices(x, "svd"), bool(full_matrices), bool(compute_uv))

    def eigh(self, x):
        """``(w, v)``: eigenvalues in ascending order and eigenvectors (columns of ``v``) of symmetric matrices
        (``keras.ops.linalg.eigh``), reading the lower triangle. Eigenvectors are unique only up to sign.

        Raises:
            ShapeError: ``x`` not ``(..., n, n)``.
        """
        return self._eigh(self._lower_symmetric(self._square(x, "eigh")))

    def lstsq(self, a, b, rcond=None):
        """The least-squares solution ``x`` of ``a @ x ~ b`` (``keras.ops.linalg.lstsq``, NumPy's): ``a`` ``(m,
        n)``, ``b`` ``(m,)`` or ``(m, k)``; from the SVD of ``a``, singular values below ``rcond`` times the largest
        (default ``eps * max(m, n)``) taken as zero (the minimum-norm solution).

        Raises:
            ShapeError: ``a`` not 2-D, ``b`` not 1-D or 2-D, or their first axes differ.
        """
        dtype = self._result_dtype([a, b], floating=True)
        a, b = (self.wrap(self._native(v, dtype)) for v in (a, b))
        if len(a.shape) != 2 or len(b.shape) not in (1, 2) or a.shape[0] != b.shape[0]:
            raise ShapeError(f"ops.lstsq needs a (m, n) and b (m,) or (m, k), got shapes {a.shape} and {b.shape}")
        vector = len(b.shape) == 1
        if vector:
            b = self.expand_dims(b, -1)
        m, n = a.shape
        if rcond is None:
            rcond = float(np.finfo(dtype).eps) * max(m, n)
        u, s, vh = self.svd(a, full_matrices=False)
        kept = s >= rcond * s[:1]
        inverse = self.where(kept, 1.0 / self.where(kept, s, 1.0), 0.0)
        x = self.matmul(self._swap_last(vh), self.expand_dims(inverse, -1) * self.matmul(self._swap_last(u), b))
        return x[:, 0] if vector else x

    # --- primitives (natives in, natives out; arguments already checked here) -------------------------------------
    @abstractmethod
    def _det(self, x):
        """Determinants of ``(..., n, n)``."""

    @abstractmethod
    def _inv(self, x):
        """Inverses of ``(..., n, n)``."""

    @abstractmethod
    def _slogdet(self, x):
        """``(sign, log|det|)`` of ``(..., n, n)``."""

    @abstractmethod
    def _solve(self, a, b):
        """``a^-1 b`` for ``a`` ``(..., n, n)`` and ``b`` ``(..., n, k)`` of the same batch shape."""

    @abstractmethod
    def _solve_triangular(self, a, b, lower: bool):
        """:meth:`_solve` reading one triangle of ``a``."""

    @abstractmethod
    def _cholesky(self, x):
        """Lower Cholesky factors of ``(..., n, n)`` (NaN where not positive definite)."""

    @abstractmethod
    def _qr(self, x, complete: bool):
        """``(q, r)`` of ``(..., m, n)``."""

    @abstractmethod
    def _svd(self, x, full_matrices: bool, compute_uv: bool):
        """``(u, s, vh)`` (``s`` alone when not ``compute_uv``) of ``(..., m, n)``, ``s`` descending."""

    @abstractmethod
    def _eigh(self, x):
        """``(w, v)`` of symmetric ``(..., n, n)``, ``w`` ascending."""

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

    def _square(self, x, name: str):
        x = self._matrices(x, name)
        if x.shape[-1] != x.shape[-2]:
            raise ShapeError(f"ops.{name} needs square matrices (..., n, n), got shape {x.shape}")
        return x

    def _matrices(self, x, name: str):
        x = self.wrap(self._native(x, self._result_dtype([x], floating=True)))
        if len(x.shape) < 2:
            raise ShapeError(f"ops.{name} needs matrices (..., m, n) of rank >= 2, got shape {x.shape}")
        return x

    def _solved(self, a, b, name: str, solve):
        """:meth:`solve` and :meth:`solve_triangular`: ``b`` as matrices of ``a``'s batch shape, and back."""
        dtype = self._result_dtype([a, b], floating=True)
        a = self._square(self.wrap(self._native(a, dtype)), name)
        b = self.wrap(self._native(b, dtype))
        vector = len(b.shape) == len(a.shape) - 1
        if vector:
            b = self.expand_dims(b, -1)
        if len(b.shape) < 2 or b.shape[-2] != a.shape[-1]:
            raise ShapeError(f"ops.{name}: b must be (..., n) or (..., n, k) with n = {a.shape[-1]} rows of a "
                             f"{a.shape}; got b {self.shape(b)}")
        batch = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
        if tuple(a.shape[:-2]) != batch:
            a = self.broadcast_to(a, batch + tuple(a.shape[-2:]))
        if tuple(b.shape[:-2]) != batch:
            b = self.broadcast_to(b, batch + tuple(b.shape[-2:]))
        x = solve(a, b)
        return x[..., 0] if vector else x

    def _lower_symmetric(self, x):
        """The symmetric matrices that ``x``'s lower triangles define (what NumPy's ``cholesky`` and ``eigh`` read;
        TensorFlow reads the lower triangle, JAX the mean of ``x`` and its transpose: given this, both compute the
        same function and its gradient). Entries are selected, not added to: exact."""
        n = x.shape[-1]
        lower = np.tril(np.ones((n, n), bool))
        return self.where(lower, x, self._swap_last(x))

    def _swap_last(self, x):
        rank = len(self.shape(x))
        return self.transpose(x, list(range(rank - 2)) + [rank - 1, rank - 2])

    def _moved_to_end(self, x, axis: int, name: str):
        rank = len(x.shape)
        axis = _axes_in_range([axis], rank, "cross", name)[0]
        return x if axis == rank - 1 else self.transpose(x, [i for i in range(rank) if i != axis] + [axis])

    def _moved_from_end(self, x, axis: int, name: str):
        rank = len(x.shape)
        axis = _axes_in_range([axis], rank, "cross", name)[0]
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


def _axes_in_range(axes: Sequence[int], rank: int, name: str, argument: str) -> list[int]:
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
