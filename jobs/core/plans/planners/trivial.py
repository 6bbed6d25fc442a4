"""TRIVIAL: the variables in the pattern's order."""

from __future__ import annotations

from jobs.core.plans.planners.base import OrderPlanner


class Trivial(OrderPlanner):
    """TRIVIAL: the variables in the pattern's order."""

    name = "trivial"
    uses_statistics = False

    def order(self, pattern, st, cost):
        return [v.index for v in pattern.variables]
