"""The matchers: one class per algorithm of a pattern file's ``matcher:`` (the SES
automaton, ZStream's join trees), prepared once from the compiled pattern and the options
(``prepare``) and called on batches of candidate windows; the plan statistics ZStream
samples (Kolchinsky & Schuster, section 4.2); the witness search of negated variables."""

from __future__ import annotations

import random
from functools import lru_cache
from typing import ClassVar

import numpy as np

from jobs.core.engine import aot
from jobs.core.engine.batches import (
    GroupData,
    MatchBatch,
    MatchBudgetExceeded,
    MatchCapExceeded,
    MatchColumns,
    WindowResult,
    Windows,
    batch_take,
)
from jobs.core.engine.columns import EventColumns
from jobs.core.engine.compiled import OPS, CompiledPattern
from jobs.core.engine.kernel_codes import compare
from jobs.core.engine.next_steps import consecutive_ranks
from jobs.core.engine.options import (
    MatchOptions,
)
from jobs.core.engine.programs import relation_rows
from jobs.core.language.conditions.expressions import FLIPPED
from jobs.core.language.events import format_ts
from jobs.core.language.pattern import MATCHER_NAMES
from jobs.core.plans.costs import CostModel, PlanStatistics
from jobs.core.plans.planners import DEFAULT as DEFAULT_PLAN
from jobs.core.plans.planners import Planner, plan_cost, planner
from jobs.core.plans.trees import Leaf, nodes


def loaded_kernels():
    """The compiled kernels, loaded on first use (``aot.load``: ahead of time compiled, or
    Numba's just-in-time ones; the loader and the CLI's ``validate`` need neither)."""
    return aot.load()


# --------------------------------------------------------------------------------------
# Matchers
# --------------------------------------------------------------------------------------
class Matcher:
    """Prepared once from a compiled pattern and options; ``match`` runs A(P, W) on a
    batch of candidate windows of a group."""

    name: ClassVar[str]
    work_item: ClassVar[str]

    def __init__(self, compiled: CompiledPattern, options: MatchOptions, partitioned: bool):
        self.compiled = compiled
        self.options = options
        self.partitioned = partitioned
        self.cap = options.max_matches_per_window
        self.budget = options.memory_budget
        rel = compiled.relationship_table(partitioned)
        prev = compiled.prev_table
        self.rel = (rel.ptr, rel.attr, rel.op, rel.other, rel.other_attr)
        self.prev = (prev.ptr, prev.attr, prev.op, prev.other_attr)
        self.program_rows = compiled.program_rows(compiled.m)

    def extras(self, group: GroupData) -> tuple:
        """The kernels' ``ex`` tuple for a group (see ``kernels``): bounds, contiguity
        positions, and the programs with the group's encoded literals; built once per
        group and matcher."""
        key = ("extras", self.name)
        if key not in group.cache:
            group.cache[key] = extras(self.compiled, group.cols, group.positions,
                                      self.program_rows, group.masks)
        return group.cache[key]

    def describe_plan(self, group: GroupData) -> tuple[str, float]:
        return "", 0.0

    def match(self, group: GroupData, windows: Windows, start: int, capacity: int
              ) -> WindowResult:
        raise NotImplementedError

    def eager(self, group: GroupData) -> WindowResult | None:
        """The matcher's own eager algorithm over the whole group, or None: then the eager
        strategy runs every window without pruning."""
        return None

    @staticmethod
    def buffer_bytes(capacity: int) -> int:
        return capacity * 16 + (capacity * 4 + 64) * 16

    def _buffers(self, capacity: int):
        return (np.empty(capacity, np.int64), np.zeros(capacity + 1, np.int64),
                np.empty(capacity * 4 + 64, np.int64), np.empty(capacity * 4 + 64, np.int64))

    def _run(self, kernel_call, group, windows, start, capacity) -> WindowResult:
        k = loaded_kernels()
        while True:
            out_win, out_off, out_ev, out_var = self._buffers(capacity)
            stats = np.zeros(4, np.int64)
            status, resume, n_out, n_ev = kernel_call(out_win, out_off, out_ev, out_var, stats)
            if status in (k.CAP, k.BUDGET):
                self._cap_error(group, windows, resume, status == k.BUDGET)
            if status == k.FULL and resume == start and n_out == 0:
                capacity *= 4  # one window alone needs more room
                if self.buffer_bytes(capacity) > self.budget:
                    self._cap_error(group, windows, resume, True, "its matches")
                continue
            return WindowResult(MatchColumns(windows.first[out_win[:n_out]], out_off[:n_out + 1],
                                             out_ev[:n_ev], out_var[:n_ev]),
                                int(stats[1]), int(stats[0]), int(resume))

    def _cap_error(self, group: GroupData, windows: Windows, w: int, budget: bool,
                   what: str = ""):
        i = int(windows.first[w])
        raise budget_error(self.compiled.name, self.options, group, i, budget,
                           what or self.work_item, self.cap)


# the kernels that neither step the automaton nor run running conditions take the first
# entries of ``ex`` only: the same argument types as before the fourth step of the language,
# so their compiled code (and its speed) is the same
BASIC_EXTRAS = 15


def extras(c: CompiledPattern, cols: EventColumns, positions: np.ndarray | None,
           rows, masks: np.ndarray | None = None) -> tuple:
    code, ptr = c.program_arrays
    cval, ckind = c.programs.constants(cols)
    prev = c.prev_program_rows
    pos = positions if positions is not None else np.zeros(0, np.int64)
    return (c.vmin, c.vmax, pos, int(c.contiguity != "none"), code, ptr, cval, ckind,
            np.empty(c.programs.depth + 1, np.float64), np.empty(c.programs.depth + 1, np.int8),
            rows.ptr, rows.other, rows.program, prev.ptr, prev.program,
            features(c, cols, masks))


def features(c: CompiledPattern, cols: EventColumns, masks: np.ndarray | None) -> np.ndarray:
    """``ex[15]``: the fourth step's tables in one int64 array (``kernels.F_*``): each
    variable's consecutive-rank row, the running conditions' ranges, programs and
    aggregates, and the ranks (``next_steps.consecutive_ranks``). Without ``masks`` (the
    negation filter and ZStream's running filter, which run programs only and never step
    the automaton) the ranks are left out rather than computed for nothing."""
    if masks is None:
        ranks, rank_of = np.zeros((0, 0), np.int64), np.full(c.m, -1, np.int64)
    else:
        ranks, rank_of = consecutive_ranks(c, cols, masks)
    rptr, rprog, raptr, raggs = c.running_arrays
    parts = [rank_of, rptr, rprog, raptr, raggs.ravel(), ranks.ravel()]
    header = np.zeros(7, np.int64)
    header[0] = ranks.shape[1] if ranks.size else 0
    at = 7
    for k, part in enumerate(parts, start=1):
        header[k] = at
        at += len(part)
    return np.concatenate([header, *[p.astype(np.int64) for p in parts]])


def megabytes(n: int) -> str:
    return f"{n / 1024**2:,.0f} MB" if n >= 1024**2 else f"{n:,} bytes"


def budget_error(pattern: str, options: MatchOptions, group: GroupData | None, i: int | None,
                 budget: bool, what: str, cap: int = 0) -> MatchCapExceeded:
    """The error for a window (event ``i`` of ``group``) or a partition over a limit."""
    where = "the whole stream"
    if group is not None and i is not None and group.cols.n:
        where = (f"the window starting at event {group.cols.ids[i].as_py()} "
                 f"({format_ts(int(group.cols.ts[i]))})")
    advice = (f"raise the {'budget' if budget else 'cap'} with {options.limits}, or "
              "shorten 'within', or add conditions")
    if budget:
        return MatchBudgetExceeded(
            f"pattern {pattern!r}: {where} needs more than the memory budget of "
            f"{megabytes(options.memory_budget)} for {what}; {advice}")
    return MatchCapExceeded(f"pattern {pattern!r}: more than {cap:,} {what} in {where}; "
                            f"{advice}")


class SESMatcher(Matcher):
    """The SES automaton (SES paper, section 4): earliest and maximal matches."""

    name = "ses"
    work_item = "live instances"

    def __init__(self, compiled, options, partitioned):
        super().__init__(compiled, options, partitioned)
        self._build_automaton()

    def _build_automaton(self) -> None:
        """States per subset of each set, loops for group variables, concatenation with
        the time constraint on the transitions leaving a set's start state (4.2.1-4.2.2);
        each transition's Θδ: the relationships of its variable with the bound ones."""
        c = self.compiled
        sets: list[list] = [[] for _ in range(c.n_sets)]
        for v in c.variables:
            sets[v.set_index].append(v)
        ids: dict[tuple[int, int], int] = {}
        for i, s in enumerate(sets):
            for sub in range(1 << len(s)):
                if i > 0 and sub == 0:
                    continue
                ids[(i, sub)] = len(ids)
        self.start = ids[(0, 0)]
        self.final = ids[(len(sets) - 1, (1 << len(sets[-1])) - 1)]
        pairs = c.relationship_pairs(self.partitioned)
        trans, checks, xchecks = [], [], []
        self.labels = [""] * len(ids)
        st_ptr = np.zeros(len(ids) + 1, np.int64)
        for (i, sub), sid in sorted(ids.items(), key=lambda kv: kv[1]):
            bound = {v.index for s in sets[:i] for v in s} | \
                {v.index for j, v in enumerate(sets[i]) if sub >> j & 1}
            self.labels[sid] = "{" + ", ".join(v.name for v in c.variables
                                               if v.index in bound) + "}"
            out = []
            for j, v in enumerate(sets[i]):
                if not sub >> j & 1:
                    out.append((v.index, ids[(i, sub | 1 << j)], False))
                elif v.is_group:
                    out.append((v.index, sid, False))
            if sub == (1 << len(sets[i])) - 1 and i + 1 < len(sets):
                new = 2 if i + 1 in c.pattern.next_sets else 1  # 2: must be the next event
                for j, v in enumerate(sets[i + 1]):
                    out.append((v.index, ids[(i + 1, 1 << j)], new))
            for var, target, new in out:
                rows = []
                for x, a, op, y, b in pairs:
                    if x == var and y in bound:
                        rows.append((c.row(a), op, y, c.row(b)))
                    elif y == var and x in bound:
                        rows.append((c.row(b), FLIPPED[op], x, c.row(a)))
                trans.append((var, target, new))
                checks.append(rows)
                xchecks.append([(w, p) for v, w, p in c.program_pairs(c.m)
                                if v == var and w in bound])
            st_ptr[sid + 1] = len(trans)
        self.transitions = trans
        self.st_ptr = st_ptr
        self.tr_var = np.array([t[0] for t in trans], np.int64)
        self.tr_target = np.array([t[1] for t in trans], np.int64)
        self.tr_new = np.array([t[2] for t in trans], np.int64)  # 0 loop/same set, 1 new, 2 next
        trc_ptr = np.zeros(len(trans) + 1, np.int64)
        flat = []
        for k, rows in enumerate(checks):
            flat.extend((a, OPS[op], y, b) for a, op, y, b in rows)
            trc_ptr[k + 1] = len(flat)
        arr = np.array(flat, np.int64).reshape(-1, 4)
        self.trc = (trc_ptr, arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(),
                    arr[:, 3].copy())
        self.program_rows = relation_rows(xchecks)  # per transition

    def describe(self) -> str:
        """The states and transitions, for people (and the docs)."""
        lines = []
        names = [v.name for v in self.compiled.variables]
        for sid in range(len(self.labels)):
            for t in range(self.st_ptr[sid], self.st_ptr[sid + 1]):
                var, target, new = self.transitions[t]
                kind = "loop" if target == sid else "new set" if new else ""
                lines.append(f"{self.labels[sid]} --{names[var]}--> {self.labels[target]} "
                             f"{kind}".rstrip())
        return "\n".join(lines)

    def _tables(self):
        return (self.st_ptr, self.tr_var, self.tr_target, self.tr_new, *self.trc, *self.prev,
                self.start, self.final, self.compiled.m)

    def match(self, group, windows, start, capacity):
        cols = group.cols

        def call(out_win, out_off, out_ev, out_var, stats):
            return loaded_kernels().ses_windows(cols.ts, cols.values, cols.kinds, group.masks,
                                       *self._tables(), windows.first, windows.end, start,
                                       self.cap, self.budget, out_win, out_off, out_ev,
                                       out_var, stats, self.extras(group))
        return self._run(call, group, windows, start, capacity)

    def eager(self, group):
        cols = group.cols
        stats = np.zeros(4, np.int64)
        status, first, off, ev, var = loaded_kernels().ses_eager(
            cols.ts, cols.values, cols.kinds, group.masks, *self._tables(), self.compiled.tau,
            self.budget, stats, self.extras(group))
        if status == loaded_kernels().BUDGET:
            raise budget_error(self.compiled.name, self.options, None, None, True,
                               "SESExec's instances and matches")
        return WindowResult(MatchColumns(first, off, ev, var), int(stats[1]), int(stats[0]),
                            len(first))


class ZStreamMatcher(Matcher):
    """All matches (Def. 2), seeded: the window's first event is bound first and the
    other variables are joined to it depth-first in the order of the plan's leaves."""

    name = "zstream"
    work_item = "partial matches"

    def _prepare(self, group: GroupData):
        if "zstream" in group.cache:
            return group.cache["zstream"]
        c = self.compiled
        per_var = [np.flatnonzero((group.masks >> v.index) & 1) for v in c.variables]
        cand_ptr = np.zeros(c.m + 1, np.int64)
        cand_ptr[1:] = np.cumsum([len(x) for x in per_var])
        cand_idx = np.concatenate(per_var).astype(np.int64) if per_var else np.zeros(0, np.int64)
        cand_ts = group.cols.ts[cand_idx]
        plan = st = None
        if c.m > 2:  # with two variables every plan joins the other after the seed
            plan, st = self._plan(group, per_var)
            leaves = [n.var for n in nodes(plan) if isinstance(n, Leaf)]
        else:
            leaves = list(range(c.m))
        orders = np.array([[s] + [v for v in leaves if v != s] for s in range(c.m)], np.int64)
        prepared = (cand_ptr, cand_idx, cand_ts, orders, plan, st, per_var)
        group.cache["zstream"] = prepared
        return prepared

    def _plan(self, group: GroupData, per_var: list[np.ndarray]):
        """The group's plan from its sampled statistics (section 4.2), and the statistics:
        None when the generator does not read them (a given tree, the driver's), which
        phase 2 then samples in none of its groups."""
        planner = self.planner
        st = self._statistics(group, per_var) if planner.uses_statistics else None
        return planner.plan(self.compiled.pattern, st, CostModel(self.options.plan_alpha)), st

    def _statistics(self, group: GroupData, per_var: list[np.ndarray]) -> PlanStatistics:
        return estimate_statistics(self.compiled, group, per_var, self.partitioned)

    @property
    def planner(self) -> Planner:
        return planner(self.options.plan or self.compiled.pattern.plan or DEFAULT_PLAN)

    def describe_plan(self, group):
        *_, plan, st, per_var = self._prepare(group)
        if plan is None:  # not needed to match: planned for the asking
            plan, st = self._plan(group, per_var)
        if st is None:  # the cost of a tree given without statistics
            st = self._statistics(group, per_var)
        return str(plan), round(plan_cost(self.planner, self.compiled.pattern, plan, st,
                                          CostModel(self.options.plan_alpha)), 3)

    def match(self, group, windows, start, capacity):
        cand_ptr, cand_idx, cand_ts, orders, *_ = self._prepare(group)
        cols, c = group.cols, self.compiled

        def call(out_win, out_off, out_ev, out_var, stats):
            return loaded_kernels().zstream_windows(cols.ts, cols.values, cols.kinds, group.masks,
                                           cand_ptr, cand_idx, cand_ts, *self.rel, *self.prev,
                                           c.set_of, c.group, orders, windows.first,
                                           windows.end, start, self.cap, out_win, out_off,
                                           out_ev, out_var, stats,
                                           self.extras(group)[:BASIC_EXTRAS])
        return self._run(call, group, windows, start, capacity)


MATCHER_CLASSES: dict[str, type[Matcher]] = {m.name: m for m in (SESMatcher, ZStreamMatcher)}
assert tuple(MATCHER_CLASSES) == MATCHER_NAMES, "one matcher class per name a pattern may use"


@lru_cache(maxsize=64)
def prepare(compiled: CompiledPattern, options: MatchOptions, partitioned: bool) -> Matcher:
    """The matcher of ``options`` (default: the pattern's own), prepared once."""
    name = options.matcher or compiled.pattern.matcher
    if name not in MATCHER_CLASSES:
        raise ValueError(f"unknown matcher {name!r}: use one of {', '.join(MATCHER_CLASSES)}")
    return MATCHER_CLASSES[name](compiled, options, partitioned)


# --------------------------------------------------------------------------------------
# Statistics for the plan (Kolchinsky & Schuster, section 4.2), from sampled windows
# --------------------------------------------------------------------------------------
def estimate_statistics(c: CompiledPattern, group: GroupData, per_var: list[np.ndarray],
                        partitioned: bool, windows: int = 300, pairs_per_window: int = 4,
                        seed: int = 0) -> PlanStatistics:
    """W·r_v as the mean number of events fitting v per sampled window (windows that
    start with an event fitting the first set), and each pair's selectivity from sampled
    pairs of such events (set order and the relationships between the two variables)."""
    ts, masks = group.cols.ts, group.masks
    starts = np.flatnonzero(masks & c.first_set)
    rng = random.Random(seed)
    sample = sorted(rng.sample(range(len(starts)), min(windows, len(starts))))
    pairs = c.relationship_pairs(partitioned)
    vals, kinds = group.cols.values, group.cols.kinds
    sizes = np.zeros(c.m)
    hits: dict[tuple[int, int], int] = {}
    tries: dict[tuple[int, int], int] = {}

    def ok(a: int, x: int, b: int, y: int) -> bool:
        if x == y:
            return False
        if c.set_of[a] < c.set_of[b] and not ts[x] < ts[y]:
            return False
        if c.set_of[b] < c.set_of[a] and not ts[y] < ts[x]:
            return False
        for i, ai, op, j, bj in pairs:
            if (i, j) == (a, b):
                e, f = x, y
            elif (i, j) == (b, a):
                e, f = y, x
            else:
                continue
            ra, rb = c.row(ai), c.row(bj)
            if not compare(OPS[op], vals[ra, e], kinds[ra, e], vals[rb, f], kinds[rb, f]):
                return False
        return True

    for k in sample:
        i = int(starts[k])
        seg_end = int(group.seg_end[np.searchsorted(group.seg_end, i, side="right")])
        end = i + int(np.searchsorted(ts[i:seg_end], ts[i] + c.tau, side="right"))
        in_window = []
        for v in range(c.m):
            lo, hi = np.searchsorted(per_var[v], [i, end])
            in_window.append(per_var[v][lo:hi])
            sizes[v] += hi - lo
        for a in range(c.m):
            for b in range(a + 1, c.m):
                if len(in_window[a]) and len(in_window[b]):
                    for _ in range(pairs_per_window):
                        x = int(rng.choice(in_window[a]))
                        y = int(rng.choice(in_window[b]))
                        tries[(a, b)] = tries.get((a, b), 0) + 1
                        hits[(a, b)] = hits.get((a, b), 0) + ok(a, x, b, y)
    n = max(len(sample), 1)
    leaf_pm = []
    for v in c.variables:
        per_window = max(sizes[v.index] / n, 1e-3)
        if v.is_group:
            per_window = min(2.0 ** min(per_window, 40) - 1, 1e12)
        leaf_pm.append(float(per_window))
    selectivity = {k: max(hits[k] / t, 1.0 / (t + 1)) for k, t in tries.items()}
    return PlanStatistics(tuple(leaf_pm), selectivity)


class NegationFilter:
    """The witness search of negated variables over all events of a call
    (docs/language.md, negation): each negated variable's candidates (its properties hold) sorted by
    partition code and processing order. A variable linked to the partition attributes
    X (``Pattern.linked_negations``) searches the match's partition only; the others
    search every event, so the result never depends on partitioning."""

    def __init__(self, c: CompiledPattern, cols: EventColumns):
        self.c, self.cols = c, cols
        code, present = c.partition_codes(cols)
        self.code = np.where(present, code, -1)
        linked = c.pattern.linked_negations
        negs = [n for n in c.pattern.negations if not n.next]  # [not next n]: NextFilter
        self.linked = np.array([n.var.name in linked and bool(c.partition_attributes)
                                for n in negs], np.bool_)
        idx, codes, ptr = [], [], [0]
        for j, n in enumerate([x.var for x in negs]):
            rows = np.flatnonzero(c.fits(n.name, cols))
            k = self.code[rows] if self.linked[j] else np.zeros(len(rows), np.int64)
            order = np.argsort(k, kind="stable")
            idx.append(rows[order])
            codes.append(k[order])
            ptr.append(ptr[-1] + len(rows))
        self.cand_idx = np.concatenate(idx).astype(np.int64)
        self.cand_code = np.concatenate(codes).astype(np.int64)
        self.cand_ptr = np.array(ptr, np.int64)
        self.neg_var = np.array([n.var.index for n in negs], np.int64)
        self.neg_min = np.array([n.var.min for n in negs], np.int64)  # not n{k,}: k
        self.before = np.array([-1 if n.before is None else n.before for n in negs], np.int64)
        self.after = np.array([-1 if n.after is None else n.after for n in negs], np.int64)
        table = c.negation_table()
        self.rel = (table.ptr, table.attr, table.op, table.other, table.other_attr)
        self.ex = extras(c, cols, None, c.program_rows(c.m + len(c.negated)))

    def filter(self, batch: MatchBatch) -> MatchBatch:
        if not len(batch):
            return batch
        c, cols = self.c, self.cols
        keep = loaded_kernels().negation_keep(
            cols.ts, cols.values, cols.kinds, batch.offsets, batch.rows, batch.variables,
            batch.start_ts, batch.end_ts, self.code[batch.first], c.set_of, c.n_sets, c.tau,
            self.neg_var, self.neg_min, self.linked, self.before, self.after, self.cand_ptr, self.cand_idx,
            self.cand_code, *self.rel, self.ex[:BASIC_EXTRAS])
        return batch if keep.all() else batch_take(batch, np.flatnonzero(keep))
