"""DP-LD (Selinger): the order of least Cost_ord, by dynamic programming over subsets."""

from __future__ import annotations

from jobs.core.plans.costs import CostModel, subset_pm
from jobs.core.plans.planners.base import OrderPlanner, Planned
from jobs.core.plans.planners.greedy import Greedy

DP_LD_MAX = 16


class DynamicLeftDeep(OrderPlanner):
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
