"""The Aesara backend: Aesara graphs and symbolic gradients, run on devices through Aesara's JAX linker
(``jax.device_put`` placement), or on the host through Aesara's C linker."""
