"""Tree plans for ZStream, their cost model, and the plan generators.

Kolchinsky & Schuster, *Join Query Optimization Techniques for CEP*, section 4.2: the cost
of a tree is the expected number of partial matches summed over its nodes,

    Cost_tree(T) = Σ_N PM(N),  PM(leaf v) = W·r_v,  PM(L ⋈ R) = PM(L)·PM(R)·SEL_LR,

with r_v the arrival rate of events that fit v, W the window (τ) and SEL_LR the product of
the selectivities of the conditions between the two sides. A group variable's leaf yields
event sequences, so its PM is the expected number of non-empty subsequences of the events
that fit it, 2^(W·r_v) - 1 (capped).

Generators share one interface (``Planner.plan(pattern, statistics)``); this module has
the left-deep default (TRIVIAL: leaves in pattern order) and ZStream's own (all tree
shapes over a fixed leaf order, by dynamic programming). Leaf reordering (EFREQ, GREEDY,
DP-B, ...) plugs in the same way. The seeded evaluator (``engine.ZStreamMatcher``) joins
the variables depth-first in the order of a tree's leaves, after the window's first event.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from .pattern import Pattern

GROUP_PM_CAP = 1e12


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


@dataclass(frozen=True)
class PlanStatistics:
    """Estimates for the cost model: PM of each leaf and the selectivity of each pair."""

    leaf_pm: tuple[float, ...]
    selectivity: dict[tuple[int, int], float]  # (i, j) with i < j

    def sel(self, i: int, j: int) -> float:
        return self.selectivity.get((min(i, j), max(i, j)), 1.0)


def partial_matches(plan: TreePlan, st: PlanStatistics) -> float:
    """PM(N) of section 4.2."""
    if isinstance(plan, Leaf):
        return st.leaf_pm[plan.var]
    sel = 1.0
    for i in plan.left.variables:
        for j in plan.right.variables:
            sel *= st.sel(i, j)
    return partial_matches(plan.left, st) * partial_matches(plan.right, st) * sel


def cost_tree(plan: TreePlan, st: PlanStatistics) -> float:
    """Cost_tree(T) = Σ over the nodes of PM(N)."""
    return sum(partial_matches(n, st) for n in nodes(plan))


class Planner(Protocol):
    name: str

    def plan(self, pattern: Pattern, st: PlanStatistics) -> TreePlan: ...


def _leaves(pattern: Pattern) -> list[Leaf]:
    return [Leaf(v.index, str(v)) for v in pattern.variables]


class LeftDeepPlanner:
    """TRIVIAL: ((v1 ⋈ v2) ⋈ v3) ... in the pattern's variable order."""

    name = "left-deep"

    def plan(self, pattern: Pattern, st: PlanStatistics) -> TreePlan:
        leaves = _leaves(pattern)
        tree: TreePlan = leaves[0]
        for leaf in leaves[1:]:
            tree = Join(tree, leaf)
        return tree


class ZStreamPlanner:
    """ZSTREAM: the cheapest tree (Cost_tree) over every shape for the given leaf order,
    by dynamic programming over contiguous leaf ranges (Mei & Madden)."""

    name = "zstream"

    def plan(self, pattern: Pattern, st: PlanStatistics) -> TreePlan:
        leaves = _leaves(pattern)
        n = len(leaves)
        best: dict[tuple[int, int], tuple[float, TreePlan]] = {}
        for i, leaf in enumerate(leaves):
            best[(i, i)] = (partial_matches(leaf, st), leaf)
        for length in range(2, n + 1):
            for i in range(0, n - length + 1):
                j = i + length - 1
                candidates = []
                for k in range(i, j):
                    (cl, pl), (cr, pr) = best[(i, k)], best[(k + 1, j)]
                    tree = Join(pl, pr)
                    candidates.append((cl + cr + partial_matches(tree, st), k, tree))
                cost, _, tree = min(candidates, key=lambda c: (c[0], c[1]))
                best[(i, j)] = (cost, tree)
        return best[(0, n - 1)][1]


@dataclass(frozen=True)
class FixedPlan:
    """A given tree (tests, and a plan chosen elsewhere, e.g. on the driver)."""

    tree: TreePlan
    name: str = "fixed"

    def plan(self, pattern: Pattern, st: PlanStatistics) -> TreePlan:
        return self.tree


PLANNERS: dict[str, Planner] = {"zstream": ZStreamPlanner(), "left-deep": LeftDeepPlanner()}


def planner(plan: str | Planner) -> Planner:
    """A generator by name (``PLANNERS``), or a planner object as it is."""
    if not isinstance(plan, str):
        return plan
    if plan not in PLANNERS:
        raise ValueError(f"unknown plan {plan!r}: use one of {', '.join(PLANNERS)}")
    return PLANNERS[plan]
