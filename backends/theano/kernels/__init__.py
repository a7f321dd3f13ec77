"""The Theano family's speed kernels: what makes its steps fast on a CPU, apart from the translation.

- ``c_kernels.py``: C-linker ops (bit selects, vectorized row loops, leading-axis sums);
- ``conv_lowering.py``: per pass, platform and shape, oneDNN's or XLA's convolution or a patches product;
- ``onednn.py``: oneDNN's convolutions through ctypes;
- ``xla_calls.py``: a host function on XLA's buffers as a custom call;
- ``reductions.py``: sums in levels on a CPU.

Like the rest of ``backends/theano``, these modules are loaded as modules of an engine's package
(``toolkit.backends.aesara.kernels.onednn``), through the engine's ``__path__``.
"""
