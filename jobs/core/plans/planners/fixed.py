"""A given tree: the tests', and the plan chosen on the driver and shipped to phase 2."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.plans.costs import CostModel
from jobs.core.plans.planners.base import Generator, Planned
from jobs.core.plans.trees import TreePlan


@dataclass(frozen=True)
class FixedPlan(Generator):
    """A given tree (tests, and the plan chosen on the driver and shipped to phase 2)."""

    tree: TreePlan
    name: str = "fixed"
    kind: str = "tree"
    uses_statistics = False

    def planned(self, pattern, st, cost=CostModel()):
        return Planned(self.tree)
