"""DP-B: the tree of least Cost_tree over all bushy trees, by dynamic programming over
subsets."""

from __future__ import annotations

from jobs.core.plans.costs import CostModel, subset_pm
from jobs.core.plans.planners.base import Planned, leaves_of
from jobs.core.plans.planners.zstream import ZStream, ZStreamOrdered
from jobs.core.plans.trees import Join, TreePlan

DP_B_MAX = 12


class DynamicBushy(ZStream):
    """DP-B: the tree minimizing Cost_tree over all bushy trees, by dynamic programming
    over subsets: best(S) = min over splits S = L ∪ R of best(L) + best(R) + PM(S)."""

    name = "dp-b"

    def planned(self, pattern, st, cost=CostModel()):
        leaves = leaves_of(pattern)
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
