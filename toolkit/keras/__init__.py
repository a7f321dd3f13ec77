"""The Keras importer: :func:`~toolkit.keras.importer.from_keras` (a Keras model as a :class:`toolkit.Model`) and
:func:`~toolkit.keras.importer.to_keras` (the weights written back), with the translators they dispatch to.

- ``importer.py``: ``from_keras`` and ``to_keras``; ``graph.py``: the walk over a Keras functional graph (custom
  layers opened up); ``op_calls.py``: the graph's steps that are not layers (``keras.ops`` calls, their outputs,
  ``arange`` constants, a custom layer's own weights); ``outputs.py``: several inputs and outputs;
- ``translation.py``: what every translator shares (how a layer call reaches its translator, activations, the
  settings a translator requires); ``activations.py``; ``layers.py`` and ``layers_*.py``: one module per layer kind;
- ``losses.py``: a compiled model's losses and metrics, translated to the formulas of :mod:`toolkit.nn.losses`.
- ``callbacks.py``: Keras' callbacks in the toolkit's ``fit`` (a view of the trainer as their ``self.model``, the
  ones refused by name).

Nothing here imports Keras until a model is imported.
"""
