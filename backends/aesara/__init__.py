"""The Aesara backend: Aesara graphs and symbolic gradients, run on devices through Aesara's JAX linker
(``jax.device_put`` placement), or on the host through Aesara's C linker.

Its modules are the Theano family's (``backends/theano``), bound to Aesara by ``engine.py`` beside this file."""

from toolkit.backends.theano import engine_path

__path__ = engine_path(__path__)
