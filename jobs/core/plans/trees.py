"""The tree of a ZStream plan: leaves (one variable each) joined two at a time; an
order-based plan is the left-deep tree of its order. The cost of a tree is in ``costs``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Leaf:
    var: int
    label: str

    @cached_property
    def variables(self) -> frozenset[int]:
        return frozenset([self.var])

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class Join:
    left: Leaf | Join
    right: Leaf | Join

    @cached_property
    def variables(self) -> frozenset[int]:
        return self.left.variables | self.right.variables

    def __str__(self) -> str:
        return f"({self.left} ⋈ {self.right})"


TreePlan = Leaf | Join


def nodes(plan: TreePlan):
    if isinstance(plan, Join):
        yield from nodes(plan.left)
        yield from nodes(plan.right)
    yield plan


def left_deep(leaves: list[Leaf]) -> TreePlan:
    """((l1 ⋈ l2) ⋈ l3) ...: the tree of an order-based plan."""
    tree: TreePlan = leaves[0]
    for leaf in leaves[1:]:
        tree = Join(tree, leaf)
    return tree


def leaf_order(plan: TreePlan) -> list[int]:
    return [n.var for n in nodes(plan) if isinstance(n, Leaf)]


