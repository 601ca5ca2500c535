"""Recall's runner: a recipe's stage list, run one phase at a time.

Recall has phases that run where their data is (``strata.recall.stages``): a layer's
candidates (``strata.recall.candidates``), the episodes' ranking (``strata.recall.granularity``)
in the user's shard, fusion (``strata.recall.scoring``), and assembly
(``strata.recall.assembly``) where every layer's candidates meet. Each phase is a ``Phase``:
a table from a stage to the step that runs it, and a state its steps read and add to. ``run``
walks the recipe's ``stages`` in order and runs the step of each listed stage the phase has;
a stage the recipe leaves out is not run, and nothing else decides whether a step runs.

So a stage is added in one place per concern: its name in ``Stage``, its parameters in
``STAGES`` (the generated parameter table follows), and its step in its phase's table.
``steps_of`` says which phase runs a stage; ``tests/unit/test_ranking_parameters.py`` checks
that every stage has exactly one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from strata.recall.recipes import RecallRecipe
from strata.recall.stages import Stage

__all__ = ["Phase", "Step"]

S = TypeVar("S")
# a stage's step: reads the phase's state and adds to it
Step = Callable[[S], None]


@dataclass(frozen=True)
class Phase(Generic[S]):
    """The steps of one phase of recall, by the stage each runs."""

    name: str
    steps: Mapping[Stage, Step[S]]

    def run(self, recipe: RecallRecipe, state: S) -> S:
        """Each stage ``recipe`` lists that this phase has a step for, in the recipe's order;
        the state, as the steps left it."""
        for stage in recipe.stages:
            step = self.steps.get(stage)
            if step is not None:
                step(state)
        return state
