"""Learning-rate schedules with Keras' names, arguments and formulas, taken wherever an optimizer takes a learning
rate (``from toolkit.optim.schedules import CosineDecay``).

The public names of :mod:`toolkit.training.schedules`, where they are written and documented.
"""

from toolkit.training.schedules import CosineDecay, ExponentialDecay, PiecewiseConstantDecay, Schedule

__all__ = ["CosineDecay", "ExponentialDecay", "PiecewiseConstantDecay", "Schedule"]
