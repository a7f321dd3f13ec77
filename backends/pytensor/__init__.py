"""The PyTensor backend (PyMC's maintained successor of Theano and Aesara, on NumPy 2 and current JAX): PyTensor graphs
and symbolic gradients, run on devices through PyTensor's JAX linker (``jax.device_put`` placement), or on the host
through its C linker (CVM).

Its modules are the Theano family's (``backends/theano``), bound to PyTensor by ``engine.py`` beside this file."""

from toolkit.backends.theano import engine_path

__path__ = engine_path(__path__)
