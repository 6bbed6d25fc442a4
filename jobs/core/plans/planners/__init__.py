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

from jobs.core.language.pattern import PLAN_ALIASES, Pattern
from jobs.core.plans.costs import CostModel, PlanStatistics
from jobs.core.plans.planners.base import Generator, OrderPlanner, Planned, Planner
from jobs.core.plans.planners.dp_b import DP_B_MAX, DynamicBushy
from jobs.core.plans.planners.dp_ld import DP_LD_MAX, DynamicLeftDeep
from jobs.core.plans.planners.efreq import EventFrequency
from jobs.core.plans.planners.fixed import FixedPlan
from jobs.core.plans.planners.greedy import Greedy, greedy_order
from jobs.core.plans.planners.iterative import IterativeImprovement
from jobs.core.plans.planners.trivial import Trivial
from jobs.core.plans.planners.zstream import ZStream, ZStreamOrdered, zstream_tree
from jobs.core.plans.trees import TreePlan, leaf_order

__all__ = ["ALIASES", "DEFAULT", "DP_B_MAX", "DP_LD_MAX", "DynamicBushy", "DynamicLeftDeep",
           "EventFrequency", "FixedPlan", "Generator", "Greedy", "IterativeImprovement",
           "OrderPlanner", "PLANNERS", "Planned", "Planner", "Trivial", "ZStream",
           "ZStreamOrdered", "greedy_order", "plan_cost", "planner", "zstream_tree"]

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
