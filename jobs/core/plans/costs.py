"""The cost model of ZStream plans.

Kolchinsky & Schuster, *Join Query Optimization Techniques for CEP*, section 4.2: the cost
of a tree is the expected number of partial matches summed over its nodes,

    Cost_tree(T) = Σ_N PM(N),  PM(leaf v) = W·r_v,  PM(L ⋈ R) = PM(L)·PM(R)·SEL_LR,

with r_v the arrival rate of events that fit v, W the window (τ) and SEL_LR the product of
the selectivities of the conditions between the two sides. A group variable's leaf yields
event sequences, so its PM is the expected number of non-empty subsequences of the events
that fit it, 2^(W·r_v) - 1 (capped).

For an order O = (p1, ..., pn) (section 4.1; the left-deep tree of O has the same cost),

    Cost_ord(O) = Σ_k PM({p1, ..., pk}),  PM(S) = Π_{v ∈ S} W·r_v · Π_{v, w ∈ S} SEL_vw,

and the latency costs of section 6.1: for an order, the events buffered for the variables
after the last-arriving one; for a tree, the partial matches buffered on the siblings of
the path from its leaf to the root. The last-arriving variable is one of the last set's;
the cost takes the worst of them (as the paper does for a disjunction's operands). The
combined cost is Cost_trpt + α·Cost_lat (``CostModel``).

The generators (``planners``) share these; the seeded evaluator (``engine.ZStreamMatcher``)
joins the variables depth-first in the order of a tree's leaves, after the window's first
event.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.language.pattern import Pattern
from jobs.core.plans.trees import Leaf, TreePlan, nodes

GROUP_PM_CAP = 1e12


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


def set_pm(variables, st: PlanStatistics) -> float:
    """PM(S) = Π W·r_v · Π SEL over the pairs of S."""
    variables = list(variables)
    out = 1.0
    for k, v in enumerate(variables):
        out *= st.leaf_pm[v]
        for w in variables[:k]:
            out *= st.sel(v, w)
    return out


def subset_pm(index: list[int], st: PlanStatistics) -> list[float]:
    """PM of every subset of ``index`` (bit b of the subscript = ``index[b]``), each from
    a smaller one: PM(S) = PM(S - v)·W·r_v·Π_{w ∈ S - v} SEL_vw."""
    n = len(index)
    pm = [1.0] * (1 << n)
    for mask in range(1, 1 << n):
        b = (mask & -mask).bit_length() - 1
        rest = mask & ~(1 << b)
        value = pm[rest] * st.leaf_pm[index[b]]
        r = rest
        while r:
            c = (r & -r).bit_length() - 1
            value *= st.sel(index[b], index[c])
            r &= r - 1
        pm[mask] = value
    return pm


def cost_ord(order: list[int], st: PlanStatistics) -> float:
    """Cost_ord(O) = Σ_k PM(first k variables of O) (section 4.1)."""
    total, pm = 0.0, 1.0
    for k, v in enumerate(order):
        pm *= st.leaf_pm[v]
        for w in order[:k]:
            pm *= st.sel(v, w)
        total += pm
    return total


def latency_ord(order: list[int], st: PlanStatistics, last: tuple[int, ...]) -> float:
    """Cost_ord^lat: the events buffered for the variables after the last-arriving one,
    Σ_{v ∈ Succ_O(T_n)} W·r_v, the worst over the candidates for T_n (``last``)."""
    out = 0.0
    for t in last:
        if t in order:
            out = max(out, sum(st.leaf_pm[v] for v in order[order.index(t) + 1:]))
    return out


def latency_tree(plan: TreePlan, st: PlanStatistics, last: tuple[int, ...]) -> float:
    """Cost_tree^lat: Σ PM(sibling(N)) over the nodes N on the path from T_n's leaf to
    the root (the root excluded), the worst over the candidates for T_n."""
    out = 0.0
    for t in last:
        path: list[TreePlan] = []
        if _path(plan, t, path):
            total = 0.0
            for parent, child in zip(path, path[1:]):
                sibling = parent.right if parent.left is child else parent.left
                total += partial_matches(sibling, st)
            out = max(out, total)
    return out


def _path(node: TreePlan, var: int, path: list) -> bool:
    path.append(node)
    if isinstance(node, Leaf):
        if node.var == var:
            return True
    elif _path(node.left, var, path) or _path(node.right, var, path):
        return True
    path.pop()
    return False


@dataclass(frozen=True)
class CostModel:
    """Cost = Cost_trpt + α·Cost_lat (section 6.1); α = 0 is the throughput cost alone."""

    alpha: float = 0.0

    @staticmethod
    def last_of(pattern: Pattern) -> tuple[int, ...]:
        """The candidates for the last-arriving variable: those of the last set."""
        return tuple(v.index for v in pattern.sets[-1]) if pattern.sets else ()

    def order(self, order: list[int], st: PlanStatistics, last: tuple[int, ...]) -> float:
        out = cost_ord(order, st)
        return out + self.alpha * latency_ord(order, st, last) if self.alpha else out

    def tree(self, plan: TreePlan, st: PlanStatistics, last: tuple[int, ...]) -> float:
        out = cost_tree(plan, st)
        return out + self.alpha * latency_tree(plan, st, last) if self.alpha else out
