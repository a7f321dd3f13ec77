"""Linear algebra (:class:`toolkit.nn.ops_linalg.LinalgOps`) as Theano-family graphs: the decompositions are
``jax.numpy.linalg`` functions in one :class:`_Linalg` op each (Aesara 2.9 has no batched decompositions, no JAX
conversion or gradient for several of them, and PyTensor's differ from Aesara's), their gradients ``jax.vjp`` of
the same function; the products are composites of the neutral layer."""

from __future__ import annotations

from toolkit.errors import ShapeError

from .graphs import Apply, DisconnectedType, JaxOp, as_outputs, jax, tt


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


class _Linalg(JaxOp):
    """A ``jax.numpy.linalg`` function of :func:`_functions` as an op: the JAX linker calls it in its compiled step,
    the C linker on the host. Output shapes come from ``jax.eval_shape`` (inputs of static shape). Its gradient is
    :class:`_LinalgGradient`."""

    __props__ = ("name", "options")

    def __init__(self, name: str, *options) -> None:
        self.name, self.options = name, tuple(options)
        self._functions: dict = {}

    def function(self):
        if "forward" not in self._functions:
            fn, options = _functions()[self.name], self.options
            self._functions["forward"] = lambda *xs: as_outputs(fn(*xs, *options))
        return self._functions["forward"]

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(x) for x in inputs]
        if any(None in x.type.shape for x in inputs):
            raise ShapeError(f"ops.{self.name} needs inputs of static shape, got {[x.type.shape for x in inputs]}")
        specs = [jax.ShapeDtypeStruct(x.type.shape, x.dtype) for x in inputs]
        fn, options = _functions()[self.name], self.options
        outputs = jax.eval_shape(lambda *xs: fn(*xs, *options), *specs)
        return Apply(self, inputs, [tt.tensor(dtype=str(o.dtype), shape=o.shape) for o in outputs])

    def infer_shape(self, fgraph, node, shapes):
        return [tuple(o.type.shape) for o in node.outputs]

    def L_op(self, inputs, outputs, output_grads):
        cotangents = [tt.zeros_like(o) if isinstance(g.type, DisconnectedType) else g
                      for o, g in zip(outputs, output_grads)]
        grads = _LinalgGradient(self, len(inputs))(*inputs, *cotangents)
        return list(grads) if isinstance(grads, (list, tuple)) else [grads]

    pullback = L_op  # PyTensor 3's name for L_op


class _LinalgGradient(JaxOp):
    """The vector-Jacobian product of a :class:`_Linalg` for its inputs (``jax.vjp`` of the same function). Not
    differentiable again."""

    __props__ = ("op", "count")

    def __init__(self, op: _Linalg, count: int) -> None:
        self.op, self.count = op, count  # the forward op and how many inputs it has
        self._functions: dict = {}

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(x) for x in inputs]
        return Apply(self, inputs, [x.type() for x in inputs[:self.count]])

    def function(self):
        if "vjp" not in self._functions:
            fn, options, count = _functions()[self.op.name], self.op.options, self.count

            def vjp(*values):
                primals, cotangents = values[:count], values[count:]
                _, pullback = jax.vjp(lambda *xs: fn(*xs, *options), *primals)
                return as_outputs(tuple(pullback(tuple(cotangents))))

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return shapes[:len(node.outputs)]


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
