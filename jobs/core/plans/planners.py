"""The plan generators of the join-optimization paper (Kolchinsky & Schuster, sections 3-5
and 7.1), one class each, behind one interface: ``plan(pattern, statistics, cost)``.

Order-based generators (TRIVIAL, EFREQ, GREEDY, II-RANDOM, II-GREEDY, DP-LD) choose an
order of the variables and minimize Cost_ord; the order becomes a left-deep tree. Tree-based
generators (ZSTREAM, ZSTREAM-ORD, DP-B) minimize Cost_tree over bushy trees. Both cost
models add α times their latency cost (section 6.1) when α > 0; the dynamic programs are
exact for α = 0 (the latency term is not decomposable over sub-plans), and with α > 0
their result is the plan that is optimal for throughput, reported with its combined cost.

The subset dynamic programs grow as 2^n (DP-LD) and 3^n (DP-B); above ``DP_LD_MAX`` and
``DP_B_MAX`` variables they fall back to GREEDY and ZSTREAM-ORD, and say so in ``note``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Protocol

from jobs.core.language.pattern import PLAN_ALIASES, Pattern
from jobs.core.plans.costs import (
    CostModel,
    PlanStatistics,
    cost_ord,
    latency_ord,
    set_pm,
    subset_pm,
)
from jobs.core.plans.trees import Join, Leaf, TreePlan, leaf_order, left_deep

DP_LD_MAX = 16
DP_B_MAX = 12
II_RESTARTS = 4  # random starting orders of II-RANDOM
II_FULL_NEIGHBOURHOOD = 14  # larger patterns: cycles of adjacent triples only


@dataclass(frozen=True)
class Planned:
    """A generator's result: the tree, and why it deviates from the generator's own
    rule (a fallback), if it does."""

    tree: TreePlan
    note: str = ""


def _leaves(pattern: Pattern) -> list[Leaf]:
    return [Leaf(v.index, str(v)) for v in pattern.variables]


class Generator:
    """The interface every generator implements: ``planned`` gives the tree with a note,
    ``plan`` the tree alone."""

    name = ""
    kind = "tree"

    def planned(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = CostModel()
                ) -> Planned:
        raise NotImplementedError

    def plan(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = CostModel()
             ) -> TreePlan:
        return self.planned(pattern, st, cost).tree


class _OrderPlanner(Generator):
    """An order-based generator: ``order`` picks the order; the plan is its left-deep
    tree."""

    kind = "order"

    def order(self, pattern: Pattern, st: PlanStatistics, cost: CostModel) -> list[int]:
        raise NotImplementedError

    def planned(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = CostModel()
                ) -> Planned:
        leaves = _leaves(pattern)
        return Planned(left_deep([leaves[i] for i in self.order(pattern, st, cost)]))


class Trivial(_OrderPlanner):
    """TRIVIAL: the variables in the pattern's order."""

    name = "trivial"

    def order(self, pattern, st, cost):
        return [v.index for v in pattern.variables]


class EventFrequency(_OrderPlanner):
    """EFREQ: ascending arrival frequency (W·r_v), as PB-CED and the lazy NFA do."""

    name = "efreq"

    def order(self, pattern, st, cost):
        return sorted((v.index for v in pattern.variables), key=lambda i: (st.leaf_pm[i], i))


def greedy_order(pattern: Pattern, st: PlanStatistics, cost: CostModel) -> list[int]:
    """GREEDY (Swami): at each step the variable whose addition gives the cheapest
    prefix under the cost model."""
    remaining = [v.index for v in pattern.variables]
    last = cost.last_of(pattern)
    order: list[int] = []
    def step(i: int) -> tuple[float, int]:
        """The prefix's throughput cost, and the latency it commits to: once a variable of
        the last set is placed, every variable still unplaced will wait after it."""
        prefix = order + [i]
        value = cost_ord(prefix, st)
        if cost.alpha:
            value += cost.alpha * latency_ord(prefix + [r for r in remaining if r != i], st, last)
        return value, i

    while remaining:
        best = min(remaining, key=step)
        order.append(best)
        remaining.remove(best)
    return order


class Greedy(_OrderPlanner):
    name = "greedy"

    def order(self, pattern, st, cost):
        return greedy_order(pattern, st, cost)


class IterativeImprovement(_OrderPlanner):
    """II (Swami): local search from a starting order with two moves, *swap* (exchange
    two variables) and *cycle* (rotate three), taking any improving move until none
    improves. II-RANDOM starts from random orders (the best of ``II_RESTARTS`` local
    minima; seeded, so a plan is reproducible), II-GREEDY from GREEDY's order."""

    def __init__(self, start: str, seed: int = 0):
        self.start = start
        self.name = f"ii-{start}"
        self.seed = seed

    def order(self, pattern, st, cost):
        last = cost.last_of(pattern)
        rng = random.Random(self.seed)
        if self.start == "greedy":
            starts = [greedy_order(pattern, st, cost)]
        else:
            base = [v.index for v in pattern.variables]
            starts = [rng.sample(base, len(base)) for _ in range(II_RESTARTS)]
        results = [self._descend(o, st, cost, last, rng) for o in starts]
        return min(results, key=lambda o: cost.order(o, st, last))

    @staticmethod
    def _moves(n: int):
        for i, j in itertools.combinations(range(n), 2):
            yield ("swap", i, j, None)
        triples = itertools.combinations(range(n), 3) if n <= II_FULL_NEIGHBOURHOOD else \
            ((i, i + 1, i + 2) for i in range(n - 2))
        for i, j, k in triples:
            yield ("cycle", i, j, k)
            yield ("cycle", k, j, i)

    def _descend(self, order, st, cost, last, rng):
        current = cost.order(order, st, last)
        improved = True
        while improved:
            improved = False
            moves = list(self._moves(len(order)))
            rng.shuffle(moves)
            for kind, i, j, k in moves:
                new = list(order)
                if kind == "swap":
                    new[i], new[j] = new[j], new[i]
                else:  # positions i, j, k take the variables of j, k, i
                    new[i], new[j], new[k] = order[j], order[k], order[i]
                c = cost.order(new, st, last)
                if c < current:
                    order, current, improved = new, c, True
                    break
        return order


class DynamicLeftDeep(_OrderPlanner):
    """DP-LD (Selinger): the order minimizing Cost_ord, by dynamic programming over the
    subsets of variables. Cost_ord(O) = Σ_k PM(first k of O), and PM of a set does not
    depend on its order, so best(S) = min over v in S of best(S - v) + PM(S)."""

    name = "dp-ld"

    def planned(self, pattern, st, cost=CostModel()):
        n = len(pattern.variables)
        if n > DP_LD_MAX:
            tree = Greedy().planned(pattern, st, cost).tree
            return Planned(tree, f"dp-ld: {n} variables > {DP_LD_MAX}, used greedy")
        return super().planned(pattern, st, cost)

    def order(self, pattern, st, cost):
        index = [v.index for v in pattern.variables]
        n = len(index)
        pm = subset_pm(index, st)
        best: dict[int, tuple[float, tuple[int, ...]]] = {0: (0.0, ())}
        for mask in range(1, 1 << n):
            last = (best[mask & ~(1 << b)] + (b,) for b in range(n) if mask >> b & 1)
            best[mask] = min((c + pm[mask], order + (index[b],)) for c, order, b in last)
        return list(best[(1 << n) - 1][1])


def zstream_tree(leaves: list[Leaf], st: PlanStatistics) -> TreePlan:
    """ZStream's dynamic program: the cheapest tree (Cost_tree) over every shape for a
    fixed leaf order, over contiguous ranges of leaves (Mei & Madden)."""
    index = [leaf.var for leaf in leaves]
    n = len(leaves)
    best: dict[tuple[int, int], tuple[float, TreePlan]] = {}
    for i, leaf in enumerate(leaves):
        best[(i, i)] = (st.leaf_pm[leaf.var], leaf)
    for length in range(2, n + 1):
        for i in range(0, n - length + 1):
            j = i + length - 1
            pm = set_pm(index[i:j + 1], st)
            cost, _, tree = min(((best[(i, k)][0] + best[(k + 1, j)][0] + pm, k,
                                  Join(best[(i, k)][1], best[(k + 1, j)][1]))
                                 for k in range(i, j)), key=lambda c: (c[0], c[1]))
            best[(i, j)] = (cost, tree)
    return best[(0, n - 1)][1]


class ZStream(Generator):
    """ZSTREAM: ZStream's tree for the pattern's own variable order."""

    name = "zstream"

    def planned(self, pattern, st, cost=CostModel()):
        return Planned(zstream_tree(_leaves(pattern), st))


class ZStreamOrdered(ZStream):
    """ZSTREAM-ORD: GREEDY orders the leaves, then ZStream's program picks the shape."""

    name = "zstream-ord"

    def planned(self, pattern, st, cost=CostModel()):
        leaves = {leaf.var: leaf for leaf in _leaves(pattern)}
        return Planned(zstream_tree([leaves[i] for i in greedy_order(pattern, st, cost)], st))


class DynamicBushy(ZStream):
    """DP-B: the tree minimizing Cost_tree over all bushy trees, by dynamic programming
    over subsets: best(S) = min over splits S = L ∪ R of best(L) + best(R) + PM(S)."""

    name = "dp-b"

    def planned(self, pattern, st, cost=CostModel()):
        leaves = _leaves(pattern)
        n = len(leaves)
        if n > DP_B_MAX:
            tree = ZStreamOrdered().planned(pattern, st, cost).tree
            return Planned(tree, f"dp-b: {n} variables > {DP_B_MAX}, used zstream-ord")
        pm = subset_pm([leaf.var for leaf in leaves], st)
        best: dict[int, tuple[float, TreePlan]] = {1 << b: (pm[1 << b], leaves[b])
                                                    for b in range(n)}
        for mask in sorted(range(1, 1 << n), key=lambda m: bin(m).count("1")):
            if mask in best:
                continue
            low = mask & -mask  # L holds the lowest member: each split once
            candidates = []
            sub = (mask - 1) & mask
            while sub:
                if sub & low and sub != mask:
                    rest = mask & ~sub
                    candidates.append((best[sub][0] + best[rest][0] + pm[mask], sub,
                                       Join(best[sub][1], best[rest][1])))
                sub = (sub - 1) & mask
            c, _, tree = min(candidates, key=lambda t: (t[0], -t[1]))
            best[mask] = (c, tree)
        return Planned(best[(1 << n) - 1][1])


@dataclass(frozen=True)
class FixedPlan(Generator):
    """A given tree (tests, and the plan chosen on the driver and shipped to phase 2)."""

    tree: TreePlan
    name: str = "fixed"
    kind: str = "tree"

    def planned(self, pattern, st, cost=CostModel()):
        return Planned(self.tree)


PLANNERS: dict[str, Planner] = {p.name: p for p in (Trivial(), EventFrequency(), Greedy(),
                                IterativeImprovement("random"), IterativeImprovement("greedy"),
                                DynamicLeftDeep(), ZStream(), ZStreamOrdered(), DynamicBushy())}
ALIASES = PLAN_ALIASES
DEFAULT = "dp-ld"  # the best generator in bench/plans.py (docs/benchmarks.md)


def planner(plan: str | Planner) -> Planner:
    """A generator by name (``PLANNERS``; ``left-deep`` is TRIVIAL's old name), or a
    planner object as it is."""
    if not isinstance(plan, str):
        return plan
    name = ALIASES.get(plan, plan)
    if name not in PLANNERS:
        raise ValueError(f"unknown plan generator {plan!r}: use one of {', '.join(PLANNERS)}")
    return PLANNERS[name]


def plan_cost(p: Planner, pattern: Pattern, tree: TreePlan, st: PlanStatistics,
              cost: CostModel = CostModel()) -> float:
    """The cost a generator minimizes: Cost_ord of the leaf order for an order-based
    one, Cost_tree for a tree-based one (each with α·latency)."""
    last = cost.last_of(pattern)
    if getattr(p, "kind", "tree") == "order":
        return cost.order(leaf_order(tree), st, last)
    return cost.tree(tree, st, last)


class Planner(Protocol):
    """A plan generator (``planners``): ``plan`` gives the tree for a pattern."""

    name: str
    kind: str  # "order" or "tree"

    def plan(self, pattern: Pattern, st: PlanStatistics, cost: CostModel = ...) -> TreePlan: ...
