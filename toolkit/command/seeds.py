"""Seeds as an axis of ``multigpu compare``: which seeds to run, and what each one seeds.

A run has three seeds, each its own stream of randomness:

- the **init** seed draws the initial parameters (``model.init(numpy.random.default_rng(init))``);
- the **data** seed shuffles the data set into its training and test parts (a workload's ``data(seed)``) and draws
  the batches (:func:`~toolkit.command.workloads.draw_batches`);
- the **noise** seed keys the per-example randomness of training (dropout masks, :mod:`toolkit.nn.context`): the
  trainer's ``seed``.

``--seed S`` sets all three to ``S``; ``--seeds 0-9`` runs every backend and device count once per seed, each
seed setting all three, except those fixed for every seed by ``--init-seed``, ``--data-seed`` or ``--noise-seed``
(e.g. ``--seeds 0-9 --init-seed 0``: the same initial parameters, ten data orders and noise streams).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError
from toolkit.nn.model import State

#: The seed of a run when no seed is given.
DEFAULT_SEED = 0


def parse_seeds(text: str) -> list[int]:
    """Seeds written as a comma-separated list of seeds and inclusive ranges: ``"0-9"``, ``"0,3,7-9"``.

    Args:
        text: the list, as ``--seeds`` takes it.

    Returns:
        The seeds, in the order written.

    Raises:
        ArgumentError: a part that is not a non-negative integer or a range ``a-b`` with ``a <= b``, no seed at all, or
            a seed given twice.
    """
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if not (low.isdigit() and (high.isdigit() if dash else not high)):
            raise ArgumentError(f"expected seeds like 0-9 or 0,3,7-9 (non-negative integers and ranges); got {text!r}")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ArgumentError(f"the range {part!r} in {text!r} runs backwards; expected a-b with a <= b")
        seeds.extend(range(first, last + 1))
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ArgumentError(f"seeds {repeated} are given more than once in {text!r}")
    return seeds


@dataclass(frozen=True)
class RunSeeds:
    """What one seed of the axis seeds (see the module's docstring).

    Attributes:
        init: the seed of the initial parameters.
        data: the seed of the data's split and the batches.
        noise: the seed of the per-example noise (the trainer's ``seed``).
    """

    init: int
    data: int
    noise: int

    def as_dict(self) -> dict[str, int]:
        """The three seeds as a JSON-ready dict: ``{"init", "data", "noise"}``."""
        return asdict(self)


def run_seeds(seeds: Sequence[int], init: int | None = None, data: int | None = None,
              noise: int | None = None) -> list[RunSeeds]:
    """Each seed's three seeds: the seed itself, except where ``init``, ``data`` or ``noise`` fixes one for all.

    Args:
        seeds: the seeds of the axis.
        init, data, noise: a seed fixed for every seed of the axis, or None for the seed's own.

    Returns:
        One :class:`RunSeeds` per seed, in order.

    Raises:
        ArgumentError: no seeds, a seed given twice, or a negative one.
    """
    if not seeds:
        raise ArgumentError("expected at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ArgumentError(f"seeds must be distinct, got {list(seeds)}")
    for name, value in (("seed", min(seeds)), ("init seed", init), ("data seed", data), ("noise seed", noise)):
        if value is not None and value < 0:
            raise ArgumentError(f"a {name} must be >= 0 (numpy's generators take no negative seed), got {value}")
    return [RunSeeds(s if init is None else init, s if data is None else data, s if noise is None else noise)
            for s in seeds]


def initial_values(model, init_seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parameters and the model state (:class:`~toolkit.nn.model.State` entries) ``model.init`` draws from
    ``init_seed``: what a trainer made with ``seed=init_seed`` starts from.

    Args:
        model: the :class:`~toolkit.Model`.
        init_seed: the seed of ``model.init``'s generator.

    Returns:
        ``(params, state)``, NumPy values by name.
    """
    made = model.init(np.random.default_rng(init_seed))
    params = {name: value for name, value in made.items() if not isinstance(value, State)}
    state = {name: value.value for name, value in made.items() if isinstance(value, State)}
    return params, state


def seed_trainer(trainer, model, seeds: RunSeeds) -> None:
    """Start ``trainer`` (made with ``seed=seeds.noise``, which keys its per-example noise) from the initial values
    of ``seeds.init``, where that differs.

    Args:
        trainer: a trainer made with ``seed=seeds.noise``.
        model: its model.
        seeds: the run's seeds.
    """
    if seeds.init != seeds.noise:
        params, state = initial_values(model, seeds.init)
        trainer.set_params(params)
        if state:
            trainer.set_state(state)
