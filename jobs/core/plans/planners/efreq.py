"""EFREQ: the variables by ascending arrival frequency."""

from __future__ import annotations

from jobs.core.plans.planners.base import OrderPlanner


class EventFrequency(OrderPlanner):
    """EFREQ: ascending arrival frequency (W·r_v), as PB-CED and the lazy NFA do."""

    name = "efreq"

    def order(self, pattern, st, cost):
        return sorted((v.index for v in pattern.variables), key=lambda i: (st.leaf_pm[i], i))
