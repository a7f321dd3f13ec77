"""Aesara as the Theano family's engine: what differs from PyTensor, in one place. Imports nothing of Aesara."""

NAME = "aesara"
TITLE = "Aesara"
#: The environment variable Aesara reads its configuration flags from, once, at import.
FLAGS = "AESARA_FLAGS"
#: The logger of Aesara's BLAS probe (warnings when it falls back to NumPy's dot).
BLAS_LOGGER = "aesara.tensor.blas"
#: The backend's linkers and Aesara's mode for each (``FAST_RUN`` is the C linker with every rewrite).
MODES = {"jax": "JAX", "c": "FAST_RUN"}
#: Symbols that are not where the family code looks (it names Aesara's paths and names): none.
MOVED: dict[str, str] = {}
#: The JAX conversions Aesara 2.9 lacks or gets wrong, added by ``environment.import_framework`` (see its
#: ``JAX_FIXES``), and its C ``BatchedDot`` that needs a BLAS library.
FIXES = ("reductions", "split", "argmax", "specify_shape", "batched_dot_without_blas")
