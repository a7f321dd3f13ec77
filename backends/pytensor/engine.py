"""PyTensor as the Theano family's engine: what differs from Aesara, in one place. Imports nothing of PyTensor."""

NAME = "pytensor"
TITLE = "PyTensor"
#: The environment variable PyTensor reads its configuration flags from, once, at import.
FLAGS = "PYTENSOR_FLAGS"
#: The logger of PyTensor's BLAS probe (it also warns through ``warnings`` when no BLAS links; an empty
#: ``blas__ldflags`` skips the probe, see ``environment.set_quiet_defaults``).
BLAS_LOGGER = "pytensor.tensor.blas"
#: The backend's linkers and PyTensor's mode for each: its default ``FAST_RUN`` is the Numba linker since 2.x; ``CVM``
#: is the C virtual machine with the same rewrites, what ``FAST_RUN`` was in Theano and Aesara.
MODES = {"jax": "JAX", "c": "CVM"}
#: Symbols PyTensor moved or renamed from where Aesara has them (the family code names Aesara's): old -> new path.
MOVED = {
    "compile.function.types.Supervisor": "compile.aliasing.Supervisor",
    "tensor.var.TensorVariable": "tensor.variable.TensorVariable",
    "graph.basic.io_toposort": "graph.traversal.io_toposort",
    "graph.basic.clone_replace": "graph.replace.clone_replace",
    "tensor.true_divide": "tensor.true_div",
    "tensor.floor_divide": "tensor.floor_div",
}
#: PyTensor's JAX dispatch has Split, Argmax and a shape check of the given sizes; its JAX reductions still come
#: back in the accumulator's dtype (float64 for a float32 sum), like Aesara 2.9's.
FIXES = ("reductions",)
