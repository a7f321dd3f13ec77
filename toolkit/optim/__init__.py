"""Optimizers with Keras' names and update formulas, written once and compiled by each backend
(``from toolkit.optim import Adam``); learning-rate schedules in :mod:`toolkit.optim.schedules`.

The public names of :mod:`toolkit.training.optim`, where the formulas are documented.
"""

from toolkit.optim import schedules
from toolkit.training.optim import SGD, Adam, AdamW, Optimizer, OptimizerState, RefusedOptimizer, RMSprop, Schedule

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "OptimizerState", "RMSprop", "RefusedOptimizer", "Schedule",
           "schedules"]
