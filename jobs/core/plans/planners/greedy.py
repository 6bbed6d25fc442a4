"""GREEDY (section 4.1): each next variable the one that adds least to the cost."""

from __future__ import annotations

from jobs.core.language.pattern import Pattern
from jobs.core.plans.costs import CostModel, PlanStatistics, cost_ord, latency_ord
from jobs.core.plans.planners.base import OrderPlanner


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


class Greedy(OrderPlanner):
    name = "greedy"

    def order(self, pattern, st, cost):
        return greedy_order(pattern, st, cost)
