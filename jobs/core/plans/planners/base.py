"""What every plan generator shares: the ``Planner`` interface (``plan``), the
``Generator`` base class, its result ``Planned`` (the tree and why it deviates from the
generator's own rule), and ``OrderPlanner``: an order-based generator's left-deep tree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from jobs.core.language.pattern import Pattern
from jobs.core.plans.costs import CostModel, PlanStatistics
from jobs.core.plans.trees import Leaf, TreePlan, left_deep


@dataclass(frozen=True)
class Planned:
    """A generator's result: the tree, and why it deviates from the generator's own
    rule (a fallback), if it does."""

    tree: TreePlan
    note: str = ""


def leaves_of(pattern: Pattern) -> list[Leaf]:
    return [Leaf(v.index, str(v)) for v in pattern.variables]


class Generator:
    """The interface every generator implements: ``planned`` gives the tree with a note,
    ``plan`` the tree alone."""

    name = ""
    kind = "tree"
    # whether the tree depends on the statistics: a matcher samples them only then
    uses_statistics = True

    def planned(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = CostModel()
                ) -> Planned:
        raise NotImplementedError

    def plan(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = CostModel()
             ) -> TreePlan:
        return self.planned(pattern, st, cost).tree


class OrderPlanner(Generator):
    """An order-based generator: ``order`` picks the order; the plan is its left-deep
    tree."""

    kind = "order"

    def order(self, pattern: Pattern, st: PlanStatistics, cost: CostModel) -> list[int]:
        raise NotImplementedError

    def planned(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = CostModel()
                ) -> Planned:
        leaves = leaves_of(pattern)
        return Planned(left_deep([leaves[i] for i in self.order(pattern, st, cost)]))


class Planner(Protocol):
    """A plan generator (``planners``): ``plan`` gives the tree for a pattern."""

    name: str
    kind: str  # "order" or "tree"
    uses_statistics: bool

    def plan(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = ...) -> TreePlan: ...
