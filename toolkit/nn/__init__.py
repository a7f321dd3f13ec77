"""Models written with :class:`toolkit.Ops`: :class:`~toolkit.nn.model.Model` and its run context (training or
inference, model state, per-example random keys: ``context.py``), Keras' weight constraints (``constraints.py``),
the layers (``layers/``), the built-in models (``models.py``) and the losses with Keras' formulas (``losses.py``)."""
