"""ZStream: all matches (Definition 2) by evaluating a tree of joins (Mei & Madden).

Leaves buffer the events of one variable; a group variable's leaf yields every valid
non-empty sequence of its events (consecutive pairs satisfying ``prev``, span ≤ τ). An
inner node joins the partial matches of its two sides under every condition between them:
relationships (for every pair of events), set order (all events of B_i strictly before all
of B_j for i < j, implied by Def. 2 through the sets in between), the τ span and distinct
events. Equality relationships become hash joins. The root's partial matches are the
matches (conditions 1-3).

A(P, W) for the match-window strategy returns the matches whose first event is W[0].
A cap on partial matches per window stops an exponential blow-up with a clear error.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .conditions import FLIPPED, compare
from .events import Event, format_ts
from .filtering import PropertyMasks
from .matches import Match
from .pattern import Pattern
from .plans import PLANNERS, Leaf, PlanStatistics, TreePlan, cost_tree, estimate_statistics

DEFAULT_MAX_MATCHES = 100_000


class MatchCapExceeded(RuntimeError):
    """Too many partial matches in one window: the message says which and how to raise it."""


# A partial match: (bindings, first_ts, last_ts, used) with bindings a tuple per variable
# (None where unbound), used the frozenset of event seqs bound so far.
Partial = tuple


@dataclass(frozen=True)
class _JoinSpec:
    hash_left: tuple[tuple[int, str], ...]  # (variable, attribute) whose common value keys the join
    hash_right: tuple[tuple[int, str], ...]
    checks: tuple[tuple[int, str, str, int, str], ...]  # (lvar, lattr, op, rvar, rattr)
    before: tuple[tuple[int, int], ...]  # (x, y): every event of x strictly before every of y


class ZStreamEvaluator:
    """A compiled tree plan for one pattern."""

    def __init__(self, pattern: Pattern, plan: TreePlan, partitioned: bool = False,
                 max_matches: int = DEFAULT_MAX_MATCHES):
        self.pattern = pattern
        self.plan = plan
        self.tau = pattern.tau
        self.max_matches = max_matches
        self.m = len(pattern.variables)
        self.names = tuple(v.name for v in pattern.variables)
        self.event_mask = PropertyMasks(pattern)
        index = {v.name: v.index for v in pattern.variables}
        dropped = set(pattern.partition_attributes) if partitioned else set()
        self.rels = []  # (i, attr, op, j, attr2) with i != j
        self.self_eq = defaultdict(list)  # group variable -> attributes all its events share
        for r in dict.fromkeys(pattern.relationships + pattern.equality_closure):
            if r.is_equality_on_one_attribute() and r.left.attr in dropped:
                continue
            i, j = index[r.left.var], index[r.right.var]
            if i == j:
                self.self_eq[i].append(r.left.attr)
            else:
                self.rels.append((i, r.left.attr, r.op, j, r.right.attr))
        self.prevs = [tuple((p.attr, p.op, p.other_attr) for p in pattern.prev_relationships[v.name])
                      for v in pattern.variables]
        self.set_of = [v.set_index for v in pattern.variables]
        self.group = [v.group for v in pattern.variables]
        self.specs: dict[int, _JoinSpec] = {}
        self.work = 0  # partial matches produced by all nodes, over all evaluations
        self._compile(plan)

    # -- compilation ---------------------------------------------------------------------
    def _compile(self, node: TreePlan) -> None:
        if isinstance(node, Leaf):
            return
        self._compile(node.left)
        self._compile(node.right)
        lv, rv = node.left.variables, node.right.variables
        hl, hr, checks = [], [], []
        for i, a, op, j, b in self.rels:
            if i in lv and j in rv:
                lhs = (i, a, op, j, b)
            elif j in lv and i in rv:
                lhs = (j, b, FLIPPED[op], i, a)
            else:
                continue
            if lhs[2] == "=":
                hl.append((lhs[0], lhs[1]))
                hr.append((lhs[3], lhs[4]))
            else:
                checks.append(lhs)
        before = [(x, y) for x in lv | rv for y in lv | rv
                  if self.set_of[x] < self.set_of[y] and ((x in lv) != (y in lv))]
        self.specs[id(node)] = _JoinSpec(tuple(hl), tuple(hr), tuple(checks), tuple(before))

    def describe(self, st: PlanStatistics | None = None) -> str:
        text = str(self.plan)
        if st is not None:
            text += f"  (estimated Cost_tree = {cost_tree(self.plan, st):,.1f})"
        return text

    # -- pairwise check (also used to estimate selectivities) ----------------------------
    def pair_ok(self, i: int, a: Event, j: int, b: Event) -> bool:
        if a is b:
            return False
        if abs(a.ts - b.ts) > self.tau:
            return False
        if self.set_of[i] < self.set_of[j] and not a.ts < b.ts:
            return False
        if self.set_of[j] < self.set_of[i] and not b.ts < a.ts:
            return False
        for x, xa, op, y, ya in self.rels:
            if (x, y) == (i, j) and not compare(op, a.attrs.get(xa), b.attrs.get(ya)):
                return False
            if (x, y) == (j, i) and not compare(op, b.attrs.get(xa), a.attrs.get(ya)):
                return False
        return True

    # -- evaluation ----------------------------------------------------------------------
    def evaluate(self, events: list[Event], masks: list[int], first: Event | None = None):
        """All matches among ``events`` (or only those starting at ``first``) and the
        largest number of partial matches held by a node."""
        self._peak = 0
        self._first = first
        root = self._eval(self.plan, events, masks)
        out = []
        for bindings, _, _, used in root:
            if first is not None and first.seq not in used:
                continue
            out.append(Match(self.pattern.name, tuple(zip(self.names, bindings))))
        return out, self._peak

    def _cap(self, count: int) -> None:
        if count > self._peak:
            self._peak = count
        if count > self.max_matches:
            where = (f"the window starting at event {self._first.id} "
                     f"({format_ts(self._first.ts)})" if self._first is not None else "the input")
            raise MatchCapExceeded(
                f"pattern {self.pattern.name!r}: more than {self.max_matches:,} partial matches "
                f"in {where}; raise the cap with --max-matches-per-window N (or shorten "
                "'within', or add conditions)")

    def _eval(self, node: TreePlan, events, masks) -> list[Partial]:
        out = self._eval_node(node, events, masks)
        self.work += len(out)  # partial matches produced: the realized Cost_tree
        return out

    def _eval_node(self, node: TreePlan, events, masks) -> list[Partial]:
        if isinstance(node, Leaf):
            return self._leaf(node.var, events, masks)
        left = self._eval(node.left, events, masks)
        if not left:
            return []
        right = self._eval(node.right, events, masks)
        if not right:
            return []
        spec = self.specs[id(node)]
        buckets: dict | None = None
        if spec.hash_right:
            buckets = defaultdict(list)
            for r in right:
                key = _key(r[0], spec.hash_right)
                if key is not None:
                    buckets[key].append(r)
        out = []
        tau = self.tau
        for lp in left:
            if buckets is not None:
                key = _key(lp[0], spec.hash_left)
                if key is None:
                    continue
                candidates = buckets.get(key, ())
            else:
                candidates = right
            lb, lfirst, llast, lused = lp
            for rp in candidates:
                rb, rfirst, rlast, rused = rp
                first_ts = lfirst if lfirst < rfirst else rfirst
                last_ts = llast if llast > rlast else rlast
                if last_ts - first_ts > tau or not lused.isdisjoint(rused):
                    continue
                ok = True
                for x, y in spec.before:
                    xb = lb[x] if lb[x] is not None else rb[x]
                    yb = lb[y] if lb[y] is not None else rb[y]
                    if not xb[-1].ts < yb[0].ts:
                        ok = False
                        break
                if ok:
                    for x, xa, op, y, ya in spec.checks:
                        for ea in lb[x]:
                            va = ea.attrs.get(xa)
                            for eb in rb[y]:
                                if not compare(op, va, eb.attrs.get(ya)):
                                    ok = False
                                    break
                            if not ok:
                                break
                        if not ok:
                            break
                if ok:
                    merged = tuple(a if a is not None else b for a, b in zip(lb, rb))
                    out.append((merged, first_ts, last_ts, lused | rused))
            self._cap(len(out))
        return out

    def _leaf(self, var: int, events, masks) -> list[Partial]:
        cands = [e for e, mask in zip(events, masks) if mask >> var & 1]
        empty = (None,) * self.m
        out: list[Partial] = []
        if not self.group[var]:
            for e in cands:
                b = empty[:var] + ((e,),) + empty[var + 1:]
                out.append((b, e.ts, e.ts, frozenset((e.seq,))))
            self._cap(len(out))
            return out
        prevs, same, tau = self.prevs[var], self.self_eq.get(var, ()), self.tau

        def extend(seq: tuple, start: int):
            b = empty[:var] + (seq,) + empty[var + 1:]
            out.append((b, seq[0].ts, seq[-1].ts, frozenset(e.seq for e in seq)))
            self._cap(len(out))
            last = seq[-1].attrs
            for k in range(start, len(cands)):
                e = cands[k]
                if e.ts - seq[0].ts > tau:
                    break
                if all(compare(op, last.get(a), e.attrs.get(b)) for a, op, b in prevs) and \
                        all(compare("=", seq[0].attrs.get(a), e.attrs.get(a)) for a in same):
                    extend(seq + (e,), k + 1)

        for k, e in enumerate(cands):
            if all(compare("=", e.attrs.get(a), e.attrs.get(a)) for a in same):
                extend((e,), k + 1)
        return out


def _key(bindings, spec) -> tuple | None:
    """The common value of each (variable, attribute) over its bound events, or None."""
    key = []
    for var, attr in spec:
        events = bindings[var]
        value = events[0].attrs.get(attr)
        if value is None or value != value:  # missing or NaN: equal to nothing
            return None
        for e in events[1:]:
            if e.attrs.get(attr) != value:
                return None
        key.append(value)
    return tuple(key)


def build(pattern: Pattern, events: list[Event], planner: str = "zstream",
          partitioned: bool = False, max_matches: int = DEFAULT_MAX_MATCHES):
    """Choose a plan for ``pattern`` from statistics estimated on ``events`` and compile it;
    returns (evaluator, statistics, the events' property masks)."""
    if planner not in PLANNERS:
        raise ValueError(f"unknown plan {planner!r}: use one of {', '.join(PLANNERS)}")
    probe = ZStreamEvaluator(pattern, Leaf(0, pattern.variables[0].name), partitioned, max_matches)
    masks = probe.event_mask.batch(events)
    keys = pattern.partition_attributes if partitioned else ()
    st = estimate_statistics(pattern, events, masks, probe.pair_ok,
                             partition_key=(lambda e: tuple(e.attrs.get(k) for k in keys))
                             if keys else None)
    plan = PLANNERS[planner].plan(pattern, st)
    return ZStreamEvaluator(pattern, plan, partitioned, max_matches), st, masks
