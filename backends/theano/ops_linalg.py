"""Linear algebra (:class:`toolkit.ops.linalg.LinalgOps`) as Theano-family graphs: the decompositions are
``jax.numpy.linalg`` functions in one :class:`_Linalg` op each (Aesara 2.9 has no batched decompositions, no JAX
conversion or gradient for several of them, and PyTensor's differ from Aesara's), their gradients ``jax.vjp`` of
the same function; the products are composites of the neutral layer."""

from __future__ import annotations

from .graphs import JaxFunction, jax


def _functions() -> dict:
    """Each decomposition as a JAX function of arrays and static options, returning a tuple of arrays."""
    jnp, jsp = jax.numpy, jax.scipy.linalg
    return {
        "det": lambda x: (jnp.linalg.det(x),),
        "inv": lambda x: (jnp.linalg.inv(x),),
        "slogdet": lambda x: tuple(jnp.linalg.slogdet(x)),
        "solve": lambda a, b: (jnp.linalg.solve(a, b),),
        "solve_triangular": lambda a, b, lower: (jsp.solve_triangular(a, b, lower=lower),),
        # The input is already symmetric (the neutral layer builds it from the lower triangle).
        "cholesky": lambda x: (jax.lax.linalg.cholesky(x, symmetrize_input=False),),
        "qr": lambda x, complete: tuple(jnp.linalg.qr(x, mode="complete" if complete else "reduced")),
        "svd": lambda x, full_matrices, compute_uv: (
            tuple(jnp.linalg.svd(x, full_matrices=full_matrices)) if compute_uv
            else (jnp.linalg.svd(x, compute_uv=False),)),
        "eigh": lambda x: tuple(jnp.linalg.eigh(x, symmetrize_input=False)),
    }


class _Linalg(JaxFunction):
    """A ``jax.numpy.linalg`` function of :func:`_functions` as an op (its gradient ``jax.vjp`` of the same
    function)."""

    functions = staticmethod(_functions)


class TheanoLinalgOps:
    def _det(self, x):
        return _Linalg("det")(x)

    def _inv(self, x):
        return _Linalg("inv")(x)

    def _slogdet(self, x):
        return tuple(_Linalg("slogdet")(x))

    def _solve(self, a, b):
        return _Linalg("solve")(a, b)

    def _solve_triangular(self, a, b, lower):
        return _Linalg("solve_triangular", lower)(a, b)

    def _cholesky(self, x):
        return _Linalg("cholesky")(x)

    def _qr(self, x, complete):
        return tuple(_Linalg("qr", complete)(x))

    def _svd(self, x, full_matrices, compute_uv):
        outputs = _Linalg("svd", full_matrices, compute_uv)(x)
        return tuple(outputs) if compute_uv else outputs

    def _eigh(self, x):
        return tuple(_Linalg("eigh")(x))
