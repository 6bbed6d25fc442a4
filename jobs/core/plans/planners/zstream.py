"""ZSTREAM and ZSTREAM-ORD (Mei & Madden): the cheapest tree shape for a leaf order."""

from __future__ import annotations

from jobs.core.plans.costs import CostModel, PlanStatistics, set_pm
from jobs.core.plans.planners.base import Generator, Planned, leaves_of
from jobs.core.plans.planners.greedy import greedy_order
from jobs.core.plans.trees import Join, Leaf, TreePlan


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
        return Planned(zstream_tree(leaves_of(pattern), st))


class ZStreamOrdered(ZStream):
    """ZSTREAM-ORD: GREEDY orders the leaves, then ZStream's program picks the shape."""

    name = "zstream-ord"

    def planned(self, pattern, st, cost=CostModel()):
        leaves = {leaf.var: leaf for leaf in leaves_of(pattern)}
        return Planned(zstream_tree([leaves[i] for i in greedy_order(pattern, st, cost)], st))
