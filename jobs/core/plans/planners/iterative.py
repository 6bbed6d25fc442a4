"""II-RANDOM and II-GREEDY (section 4.1): iterative improvement of an order by swaps
and cycles, from random orders or from GREEDY's."""

from __future__ import annotations

import itertools
import random

from jobs.core.plans.planners.base import OrderPlanner
from jobs.core.plans.planners.greedy import greedy_order

II_RESTARTS = 4  # random starting orders of II-RANDOM


II_FULL_NEIGHBOURHOOD = 14  # larger patterns: cycles of adjacent triples only


class IterativeImprovement(OrderPlanner):
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
