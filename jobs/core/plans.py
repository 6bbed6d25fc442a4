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
DP-B, ...) plugs in the same way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from .events import Event
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


PLANNERS: dict[str, Planner] = {"zstream": ZStreamPlanner(), "left-deep": LeftDeepPlanner()}


def estimate_statistics(pattern: Pattern, events: list[Event], masks: list[int],
                        pair_condition, partition_key=None, windows: int = 300,
                        pairs_per_window: int = 4, seed: int = 0) -> PlanStatistics:
    """Leaf sizes and selectivities estimated on a sample of the match windows the tree
    will actually be evaluated on (same partition, first event fitting the first set,
    τ long), so W·r_v is the mean number of events fitting v per window.

    ``pair_condition(i, a, j, b)`` tells whether events a (as variable i) and b (as j)
    satisfy every condition between the two variables; ``partition_key(e)`` gives the
    partition of an event (None: one partition).
    """
    m = len(pattern.variables)
    first_set = sum(1 << v.index for v in pattern.sets[0])
    groups: dict = {}
    for e, mask in zip(events, masks):
        if mask:
            groups.setdefault(partition_key(e) if partition_key else None, []).append((e, mask))
    starts = [(key, i) for key, evs in groups.items() for i, (_, mask) in enumerate(evs)
              if mask & first_set]
    rng = random.Random(seed)
    sample = rng.sample(starts, min(windows, len(starts)))
    sizes = [0.0] * m
    hits: dict[tuple[int, int], int] = {}
    tries: dict[tuple[int, int], int] = {}
    for key, i in sample:
        evs = groups[key]
        t0 = evs[i][0].ts
        per_var: list[list[Event]] = [[] for _ in range(m)]
        for e, mask in evs[i:]:
            if e.ts - t0 > pattern.tau:
                break
            for v in range(m):
                if mask >> v & 1:
                    per_var[v].append(e)
        for v in range(m):
            sizes[v] += len(per_var[v])
        for a in range(m):
            for b in range(a + 1, m):
                if per_var[a] and per_var[b]:
                    for _ in range(pairs_per_window):
                        x, y = rng.choice(per_var[a]), rng.choice(per_var[b])
                        tries[(a, b)] = tries.get((a, b), 0) + 1
                        hits[(a, b)] = hits.get((a, b), 0) + bool(pair_condition(a, x, b, y))
    n = max(len(sample), 1)
    leaf_pm = []
    for v in pattern.variables:
        per_window = max(sizes[v.index] / n, 1e-3)
        if v.group:
            per_window = min(2.0 ** min(per_window, 40) - 1, GROUP_PM_CAP)
        leaf_pm.append(per_window)
    selectivity = {k: max(hits[k] / t, 1.0 / (t + 1)) for k, t in tries.items()}
    return PlanStatistics(tuple(leaf_pm), selectivity)
