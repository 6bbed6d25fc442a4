"""Join trees in their JSON form: the driver chooses a plan (``pipeline.planning``) and
ships it to the executors as text, where ``plans_from_json`` turns it back into a
generator that hands out exactly those trees."""

from __future__ import annotations

import json
from dataclasses import dataclass

from jobs.core.language.pattern import Disjunction, Pattern
from jobs.core.plans.planners import Generator, Planned
from jobs.core.plans.trees import Join, Leaf, TreePlan


@dataclass(frozen=True)
class DriverPlan(Generator):
    """The trees chosen on the driver, one per alternative, shipped to the executors."""

    trees: tuple[TreePlan, ...]
    name: str = "driver"
    kind: str = "tree"
    uses_statistics = False

    def planned(self, pattern, st, cost=None):
        return Planned(self.trees[(pattern.alternative or 1) - 1])


def tree_to_json(tree: TreePlan):
    return tree.var if isinstance(tree, Leaf) else [tree_to_json(tree.left),
                                                     tree_to_json(tree.right)]


def tree_from_json(obj, pattern: Pattern) -> TreePlan:
    labels = {v.index: str(v) for v in pattern.variables}
    if isinstance(obj, int):
        return Leaf(obj, labels[obj])
    return Join(tree_from_json(obj[0], pattern), tree_from_json(obj[1], pattern))


def plans_from_json(text: str, pattern: Pattern | Disjunction) -> DriverPlan:
    return DriverPlan(tuple(tree_from_json(obj, alt)
                            for obj, alt in zip(json.loads(text), pattern.alternatives)))
