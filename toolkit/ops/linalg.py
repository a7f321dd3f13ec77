"""Linear algebra: ``keras.ops.linalg``'s ``norm``, ``det``, ``inv``, ``solve``, ``solve_triangular``, ``cholesky``,
``qr``, ``svd``, ``eigh``, ``lstsq``, and ``slogdet``, ``logdet`` (``keras.ops.math``); the products are in
:mod:`toolkit.ops.products`.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.
The decompositions are the frameworks' (``tf.linalg``; ``jax.numpy.linalg`` in the Theano family), behind one
argument check written here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import ShapeError
from toolkit.ops.products import axes_in_range

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {
    **dict.fromkeys(("_det", "_inv", "_cholesky", "_slogdet", "_svd", "_qr", "_eigh"), "f"),
    "_solve": "ff", "_solve_triangular": "ff",
}


class LinalgOps(ABC):
    """Linear algebra; mixed into :class:`~toolkit.ops.Ops`."""

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
        axes = axes_in_range([axis] if isinstance(axis, (int, np.integer)) else list(axis), rank, "norm", "x")
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
