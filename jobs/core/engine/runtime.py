"""The matching engine: Algorithm 1 of the match-window paper on columns.

``execute`` takes a compiled pattern and a group of events as columns and yields the
matches in batches of columns (``MatchBatch``), in the order of their first event:

1. ē for every event at once (Theorem 1); events with ē = 0 are dropped (filter);
2. the events are grouped by the values of the partition attributes X (Def. 6), each
   partition kept in processing order (partitioning);
3. ``kernels.scan_windows`` walks every partition's windows with the summary statistics
   and keeps the candidate windows (Theorem 2, conditions 4-7; Theorem 3);
4. the matcher (``matchers.MATCHER_CLASSES``: one class per algorithm, prepared once from
   the compiled pattern and the options) is called on the candidate windows in batches;
   its result is a ``WindowResult``: match columns, the peak and the total of its work
   items (``batches``).

``compile_pattern`` is the one compile step. Memory is bounded by one batch of matches
(``batch_size``) plus the group's columns.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import lru_cache
from typing import Iterator

import numpy as np

from jobs.core.engine.aggregates import AggregateFilter
from jobs.core.engine.batches import (
    GroupData,
    MatchBatch,
    MatchColumns,
    MatchStats,
    Windows,
    batch_take,
    concat_batches,
)
from jobs.core.engine.columns import EventColumns
from jobs.core.engine.compiled import CompiledDisjunction, CompiledPattern
from jobs.core.engine.episodes import kept_episodes
from jobs.core.engine.matchers import (
    NegationFilter,
    budget_error,
    extras,
    loaded_kernels,
    megabytes,
    prepare,
)
from jobs.core.engine.next_steps import NextFilter
from jobs.core.engine.optional import CompiledOptional, maximal
from jobs.core.engine.options import (
    MatchOptions,
)
from jobs.core.language.pattern import Disjunction, Pattern

DEFAULT_BATCH = 1 << 16
STRATEGIES = ("lazy", "eager")



@lru_cache(maxsize=64)
def compile_pattern(pattern: Pattern | Disjunction, attributes: tuple[str, ...] | None = None
                    ) -> CompiledPattern | CompiledDisjunction:
    """The one compile step: a pattern file's model -> what ``execute`` runs (on columns
    of ``attributes`` in that order when given, else of the pattern's own)."""
    if isinstance(pattern, Disjunction):
        return CompiledDisjunction(pattern, _compile_one)
    return _compile_one(pattern, attributes)


def _compile_one(pattern: Pattern, attributes: tuple[str, ...] | None = None):
    if pattern.optional_units:
        return CompiledOptional(pattern, attributes)
    return CompiledPattern(pattern, attributes)


# --------------------------------------------------------------------------------------
# Algorithm 1 on columns
# --------------------------------------------------------------------------------------
def group_events(c: CompiledPattern, cols: EventColumns, options: MatchOptions,
                 partitioned: bool, positions: np.ndarray | None = None) -> GroupData:
    """Filter (Theorem 1) and partition (Def. 6) the events, keeping processing order
    inside each partition. Kept in ``cols.memo`` for the next pattern that filters and
    partitions the same columns alike (patterns that differ in their window only); each
    caller gets its own ``GroupData`` (its cache holds the matcher's own state)."""
    key = ("group_events", c.filter_key, options.filter, partitioned)
    if positions is None and key in cols.memo:
        return replace(cols.memo[key], cache={})
    group = _group_events(c, cols, options, partitioned, positions)
    if positions is None:
        cols.memo[key] = group
    return replace(group, cache={})


def _group_events(c: CompiledPattern, cols: EventColumns, options: MatchOptions,
                  partitioned: bool, positions: np.ndarray | None) -> GroupData:
    masks = c.masks(cols)
    keep = masks != 0 if options.filter else np.ones(cols.n, np.bool_)
    rows = np.flatnonzero(keep)
    if partitioned and len(rows):
        code, present = c.partition_codes(cols, rows)
        rows, code = rows[present], code[present]  # a missing value equals nothing
    if partitioned and len(rows):
        order = np.argsort(code, kind="stable")
        rows = rows[order]
        code = code[order]
        bounds = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        seg_start = bounds.astype(np.int64)
        seg_end = np.r_[bounds[1:], len(rows)].astype(np.int64)
    else:
        seg_start = np.array([0] if len(rows) else [], np.int64)
        seg_end = np.array([len(rows)] if len(rows) else [], np.int64)
    return GroupData(cols.take(rows), masks[rows], rows, seg_start, seg_end,
                     None if positions is None else positions[rows])


def scan(c: CompiledPattern, group: GroupData, options: MatchOptions, diagnose: bool = False):
    """The windows of every partition and the candidates among them (kernels.scan_windows)."""
    return loaded_kernels().scan_windows(group.cols.ts, group.masks, group.seg_start, group.seg_end,
                                c.tau, c.m, c.first_set, c.prev_mask, c.later_mask,
                                options.conditions, diagnose, c.vmin, c.min_events)


def execute(c: CompiledPattern | CompiledDisjunction, cols: EventColumns,
            options: MatchOptions = MatchOptions(), stats: MatchStats | None = None,
            batch_size: int = DEFAULT_BATCH, positions=None, begin=None
            ) -> Iterator[MatchBatch]:
    """Match ``c`` over ``cols`` (processing order); yields batches of matches ordered by
    their first event, and fills ``stats``. ``positions``: the contiguity positions of
    the events when they were numbered elsewhere (Spark's phase 1; for a disjunction, one
    array or None per alternative); by default they are counted on ``cols``. Negation
    filters the matches of P⁺ against all of ``cols``. A disjunction runs its
    alternatives one after the other; each batch names its alternative. Aggregate
    conditions are tested on each match the other conditions give (docs/semantics.md);
    ``after_match`` takes episodes among all the call's matches (``engine.episodes``;
    ``begin``: per row, where its partition's walk starts)."""
    if c.pattern.after_match != "all":
        found = list(_execute_any(c, cols, options, stats, batch_size, positions))
        if found:
            batch = concat_batches(found)
            kept = kept_episodes(c, cols, batch, begin)
            if stats is not None:
                stats.matches -= len(batch) - len(kept)
            batch = batch_take(batch, np.sort(kept))
            if len(batch):
                yield batch_take(batch, np.lexsort((batch.end_ts, batch.first)))
        return
    yield from _execute_any(c, cols, options, stats, batch_size, positions)


def _execute_any(c, cols: EventColumns, options: MatchOptions, stats: MatchStats | None,
                 batch_size: int, positions) -> Iterator[MatchBatch]:
    if isinstance(c, CompiledDisjunction):
        yield from _execute_disjunction(c, cols, options, stats, batch_size, positions)
        return
    if isinstance(c, CompiledOptional):
        yield from _execute_optional(c, cols, options, stats, batch_size, positions)
        return
    negation = NegationFilter(c, cols) if any(not n.next for n in c.pattern.negations) \
        else None
    aggregates = c.pattern.aggregate_conditions
    totals = AggregateFilter(aggregates, cols, {v.name: k for k, v in enumerate(
        c.pattern.variables)}, cols.row) if aggregates else None
    if c.pattern.position_rule is not None and positions is None:
        positions = c.positions(cols)
    # the SES automaton checks [next b] and consecutive groups as it binds (``tr_new``,
    # ``ex[15]``); ZStream's bindings are filtered; [not next n] filters both
    automaton = (options.matcher or c.pattern.matcher) == "ses"
    steps = NextFilter(c, cols, positions, automaton) if c.pattern.next_negations or (
        not automaton and (c.pattern.next_sets or any(v.consecutive
                                                      for v in c.pattern.variables))) else None
    # running conditions: the SES automaton checks them when it binds; ZStream's matches
    # are filtered (every binding, so the filter is exact)
    running = extras(c, cols, None, c.program_rows(c.m)) if c.has_running and \
        (options.matcher or c.pattern.matcher) != "ses" else None
    for batch in _execute(c, cols, options, stats, batch_size, positions):
        before = len(batch)
        if negation is not None:
            batch = negation.filter(batch)
        if steps is not None and len(batch):
            keep = steps.keep(batch)
            if not keep.all():
                batch = batch_take(batch, np.flatnonzero(keep))
        if running is not None and len(batch):
            keep = loaded_kernels().running_keep(batch.offsets, batch.rows, batch.variables,
                                           cols.values, cols.kinds, running)
            if not keep.all():
                batch = batch_take(batch, np.flatnonzero(keep))
        if totals is not None and len(batch):
            keep = totals.keep(batch)
            if not keep.all():
                batch = batch_take(batch, np.flatnonzero(keep))
        if stats is not None:
            stats.matches -= before - len(batch)
        if not len(batch):
            continue
        yield batch


def _execute_optional(c: CompiledOptional, cols: EventColumns, options: MatchOptions,
                      stats: MatchStats | None, batch_size: int, positions
                      ) -> Iterator[MatchBatch]:
    """The union of the expansions' matches in the pattern's own variables; for SES only
    the maximal ones per first event (``engine.optional``). The stats add up the
    expansions' work."""
    st = stats if stats is not None else MatchStats()
    if c.pattern.position_rule is not None and positions is None:
        positions = c.positions(cols)
    parts, found = [], []
    for compiled, origin in c.expansions:
        part = MatchStats()
        parts.append(part)
        for batch in execute(compiled, cols, options, part, batch_size, positions):
            batch.variables = origin[batch.variables]
            found.append(batch)
    _add_up(st, parts, c, cols, options)
    if not found:
        return
    if (options.matcher or c.pattern.matcher) != "ses":
        yield from found
        return
    batch = concat_batches(found)
    keep = maximal(batch)
    st.matches -= int((~keep).sum())
    batch = batch_take(batch, np.flatnonzero(keep))
    yield batch_take(batch, np.lexsort((batch.end_ts, batch.first)))


def _add_up(st: MatchStats, parts: list[MatchStats], c, cols: EventColumns,
            options: MatchOptions) -> None:
    """The stats of several runs on the same columns (a disjunction's alternatives, an
    optional pattern's expansions): their work adds up, the finest one's partitions and
    peaks, and ``events_after_filter`` counts the events some of them kept, once."""
    st.events = cols.n
    for f in ("windows", "candidate_windows", "matcher_calls", "matches", "work", "seconds"):
        setattr(st, f, getattr(st, f) + sum(getattr(p, f) for p in parts))
    for f in MatchStats.MAXIMA + ("partitions",):
        setattr(st, f, max([getattr(st, f)] + [getattr(p, f) for p in parts]))
    st.events_after_filter = int(np.count_nonzero(c.masks(cols))) if options.filter \
        and options.strategy == "lazy" else cols.n
    st.matcher, st.work_item = parts[0].matcher, parts[0].work_item
    plans = [p.plan for p in parts if p.plan]
    if plans:
        st.plan = " | ".join(plans)
        st.plan_cost = sum(p.plan_cost for p in parts)



def _execute_disjunction(c: CompiledDisjunction, cols: EventColumns, options: MatchOptions,
                         stats: MatchStats | None, batch_size: int, positions
                         ) -> Iterator[MatchBatch]:
    """The union of the alternatives' matches. The stats add up the alternatives' work;
    ``events_after_filter`` counts the events some alternative kept, once."""
    st = stats if stats is not None else MatchStats()
    parts = []
    for k, alt in enumerate(c.alternatives):
        part = MatchStats()
        parts.append(part)
        own = None if positions is None else positions[k]
        for batch in execute(alt, cols, options, part, batch_size, own):
            batch.alternative = k
            yield batch
    _add_up(st, parts, c, cols, options)


def _execute(c: CompiledPattern, cols: EventColumns, options: MatchOptions,
             stats: MatchStats | None, batch_size: int, positions: np.ndarray | None
             ) -> Iterator[MatchBatch]:
    if options.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {options.strategy!r}: use lazy or eager")
    started = time.perf_counter()
    st = stats if stats is not None else MatchStats()
    st.events = cols.n
    eager = options.strategy == "eager"
    if eager:  # the whole stream: no filter, no partitions, no windows skipped
        options = replace(options, strategy="lazy", filter=False, partition=False,
                          conditions=False)
    partitioned = options.partition and bool(c.partition_attributes)
    matcher = prepare(c, options, partitioned)
    st.matcher, st.work_item = matcher.name, matcher.work_item
    group = group_events(c, cols, options, partitioned, positions)
    held = group.cols.nbytes() + group.masks.nbytes + group.rows.nbytes
    if held > options.memory_budget:
        raise budget_error(c.name, options, None, None, True,
                           f"its {len(group.rows):,} events ({megabytes(held)})")
    st.events_after_filter = len(group.rows)
    st.partitions = len(group.seg_start)
    # (a caller without stats, say a funnel's step, or one that discards them, as phase 2
    # does, does not read the plan's description)
    plan, cost = matcher.describe_plan(group) if len(group.rows) and stats is not None \
        and options.describe_plan else ("", 0.0)
    st.plan, st.plan_cost = plan, cost
    result = matcher.eager(group) if eager else None
    if result is not None:
        st.matcher_calls = st.events_after_filter
        st.peak, st.work = result.peak, result.work
        yield from _batches(group, result.matches, cols, st, sort=True)
        st.seconds += time.perf_counter() - started
        return
    first, end, max_window, *_ = scan(c, group, options)
    st.windows += st.events_after_filter
    st.max_window = max(st.max_window, int(max_window))
    order = np.argsort(group.rows[first], kind="stable")  # processing order of first events
    windows = Windows(first[order], end[order])
    st.candidate_windows += len(first)
    st.matcher_calls += len(first)
    w = 0
    while w < len(windows.first):
        result = matcher.match(group, windows, w, batch_size)
        st.peak = max(st.peak, result.peak)
        st.work += result.work
        w = result.resume
        st.seconds += time.perf_counter() - started
        yield from _batches(group, result.matches, cols, st, sort=False)
        started = time.perf_counter()
    st.seconds += time.perf_counter() - started



def _batches(group: GroupData, mc: MatchColumns, cols: EventColumns, st: MatchStats,
             sort: bool) -> Iterator[MatchBatch]:
    if not len(mc):
        return
    rows = group.rows[mc.events]
    ts = cols.ts[rows]
    start_ts = np.minimum.reduceat(ts, mc.offsets[:-1])
    end_ts = np.maximum.reduceat(ts, mc.offsets[:-1])
    first = np.minimum.reduceat(rows, mc.offsets[:-1])
    st.matches += len(mc)
    batch = MatchBatch(first, start_ts, end_ts, mc.offsets, rows, mc.variables)
    if sort:
        batch = batch_take(batch, np.lexsort((batch.end_ts, batch.first)))
    yield batch
