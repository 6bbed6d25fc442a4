"""The pattern-based window matcher over event columns (numpy), lazy like the SES path.

1. Filter (``relevance``): drop the events that can affect no window.
2. Partition by the derived partition attributes (``WindowPattern.partition_attributes``).
3. Per partition, per event satisfying START: test the later events of its τ range in
   processing order. Without prev()/num() in the conditions, every tested event's
   outcome depends only on the event, the first event and its position, so a whole range
   is tested at once (in chunks that grow until the window closes or is dropped); with
   them, event by event.

Every condition is evaluated in SQL's three-valued logic on the encoded columns
(``columns.py``: values, kinds, the sorted string dictionary) by the properties'
column evaluator (``programs.vector_truth3``), reading the window's roles; the oracle
(``window.oracle_windows``) is the reference it is tested against.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator

import numpy as np

from jobs.core.engine.batches import MatchBatch, MatchStats, batch_take
from jobs.core.engine.columns import MISSING, NUMBER, STRING, EventColumns, dense_ranks, from_events
from jobs.core.engine.options import MatchOptions
from jobs.core.engine.output import bindings_of
from jobs.core.engine.programs import FALSE, TRUE, UNKNOWN, vector_truth3, vector_value
from jobs.core.language.conditions.expressions import OPERATORS, Cmp, Expr, In, Lit, Neg, Not, Truth
from jobs.core.language.events import format_ts
from jobs.core.language.window import (
    BINDINGS,
    Window,
    WindowPattern,
    can_drop,
    current_attributes,
    relevance,
)
from jobs.core.language.window_conditions import TS, Counter, Seq

FIRST, BUFFER, LAST = range(3)  # the indices of window.BINDINGS in a batch
FIRST_CHUNK = 16


class Evaluator:
    """Vectorized evaluation of window expressions over ``cols``: ``env`` maps a role
    (cur, first, prev, last) to row indices and ``#`` to {'iter': ..., 'num': ...}."""

    def __init__(self, cols: EventColumns):
        self.cols = cols
        self.seconds = cols.ts / 1e9
        self._literals: dict = {}
        self._scalar: dict = {}
        self._lists: dict = {}

    def literal(self, value) -> tuple[float, int]:
        key = (type(value), value)
        if key not in self._literals:
            self._literals[key] = self.cols.encode_literal(value)
        return self._literals[key]

    def _reader(self, env: dict, n: int):
        """``programs.vector_value``'s attribute reader for the roles of ``env``."""
        def read(a):
            if isinstance(a, Counter):
                return env["#"][a.attr].astype(np.float64), np.full(n, NUMBER, np.int8)
            rows = env[a.var]
            if a.attr == TS:
                return self.seconds[rows], np.full(n, NUMBER, np.int8)
            r = self.cols.row(a.attr)
            return self.cols.values[r, rows], self.cols.kinds[r, rows]
        return read

    def value(self, e: Expr, env: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
        return vector_value(e, n, self._reader(env, n), self.literal)

    def truth(self, e: Expr, env: dict, n: int) -> np.ndarray:
        """FALSE, TRUE or UNKNOWN (``programs``' codes) for each of the ``n`` events."""
        return vector_truth3(e, n, self._reader(env, n), self.literal)

    def holds(self, e: Expr, env: dict, n: int) -> np.ndarray:
        return self.truth(e, env, n) == TRUE

    @cached_property
    def words(self) -> list[str]:
        """The string dictionary as a list."""
        return self.cols.dictionary.to_pylist()

    @cached_property
    def seconds_list(self) -> list[float]:
        return self.seconds.tolist()

    # -- one event at a time (prev(), num()): closures over Python lists -------------
    def scalar_holds(self, e: Expr):
        """``env -> bool`` for one event; ``env`` maps roles to row numbers and ``#`` to
        {'iter': n, 'num': n}. The same three-valued rules as ``truth``."""
        if e not in self._scalar:
            t = self._truth1(e)
            self._scalar[e] = lambda env: t(env) is True
        return self._scalar[e]

    def _column1(self, attr: str):
        if attr not in self._lists:
            r = self.cols.row(attr)
            self._lists[attr] = (self.cols.values[r].tolist(), self.cols.kinds[r].tolist())
        return self._lists[attr]

    def _value1(self, e: Expr):
        if isinstance(e, Lit):
            pair = self.literal(e.value)
            return lambda env: pair
        if isinstance(e, Counter):
            name = e.attr
            return lambda env: (float(env["#"][name]), NUMBER)
        if isinstance(e, Seq):
            role = e.var
            if e.attr == TS:
                secs = self.seconds_list
                return lambda env: (secs[env[role]], NUMBER)
            vals, kinds = self._column1(e.attr)
            return lambda env: (vals[env[role]], kinds[env[role]])
        if isinstance(e, Neg):
            f = self._value1(e.item)

            def neg(env):
                v, k = f(env)
                return (-v, NUMBER) if k == NUMBER else (np.nan, MISSING)
            return neg
        lf, rf, op = self._value1(e.left), self._value1(e.right), e.op

        def arith(env):
            (lv, lk), (rv, rk) = lf(env), rf(env)
            if lk != NUMBER or rk != NUMBER or (op == "/" and rv == 0):
                return np.nan, MISSING
            out = lv + rv if op == "+" else lv - rv if op == "-" else lv * rv if op == "*" \
                else lv / rv
            return (out, NUMBER) if np.isfinite(out) else (np.nan, MISSING)
        return arith

    def _truth1(self, e: Expr):
        if isinstance(e, Truth):
            value = e.value
            return lambda env: value
        if isinstance(e, Cmp):
            lf, rf, op = self._value1(e.left), self._value1(e.right), OPERATORS[e.op]
            eq = e.op in ("=", "!=")
            mixed = e.op == "!="

            def cmp(env):
                (lv, lk), (rv, rk) = lf(env), rf(env)
                if lk == MISSING or rk == MISSING:
                    return None
                if lk != rk:
                    return mixed if eq else None
                return op(lv, rv)
            return cmp
        if isinstance(e, In):
            f = self._value1(e.item)
            lits = [self.literal(v.value) for v in e.values]
            negated = e.negated

            def isin(env):
                v, k = f(env)
                if k == MISSING:
                    return None
                found = any(lk == k and lv == v for lv, lk in lits)
                return (not found) if negated else found
            return isin
        if isinstance(e, Not):
            f = self._truth1(e.item)

            def not_(env):
                r = f(env)
                return None if r is None else not r
            return not_
        parts = [self._truth1(x) for x in e.items]
        # and: False decides, True is the neutral value; or: the other way round
        decides = e.op == "or"

        def bool_op(env):
            out = not decides
            for p in parts:
                r = p(env)
                if r is decides:
                    return decides
                if r is None:
                    out = None
            return out
        return bool_op


def _analysis(ev: Evaluator):
    """The numpy builders of ``window.possible`` over every row of ``ev``."""
    n = ev.cols.n
    env = {"cur": np.arange(n)}

    def leaf(e):
        code = ev.truth(e, env, n)
        return code == TRUE, code == FALSE, code == UNKNOWN

    def const(v):
        return np.full(n, v)

    def present(e):
        return np.logical_and.reduce([np.full(n, True)] + [
            ev.cols.kinds[ev.cols.row(a)] != MISSING for a in current_attributes(e)])

    return leaf, const, np.logical_and.reduce, np.logical_or.reduce, present


def relevant_rows(pattern: WindowPattern, ev: Evaluator) -> np.ndarray:
    """The Theorem-1-like filter: rows that can affect some window (``window.relevance``)."""
    return relevance(pattern, *_analysis(ev))


def dropping_rows(pattern: WindowPattern, ev: Evaluator) -> np.ndarray:
    """Rows that can fail ITERATION (``window.can_drop``)."""
    return can_drop(pattern, *_analysis(ev))


@dataclass
class WindowBatch(MatchBatch):
    """Output windows as a match batch (variables 0 first, 1 buffer, 2 last) with the
    ``select`` values, one list per select key."""

    values: list = field(default_factory=list)


def partition_groups(pattern: WindowPattern, ev: Evaluator, rows: np.ndarray,
                     partition: bool) -> list[np.ndarray]:
    """The kept rows by the values of the partition attributes, each in processing order.
    Rows without a partition value cannot close or extend a window; those that may fail
    ITERATION (and drop windows of any partition) join every group (exact: in a group
    they can only do what they do to its windows)."""
    cols = ev.cols
    keys = pattern.partition_attributes if partition else ()
    if not keys or not len(rows):
        return [rows] if len(rows) else []
    idx = [cols.row(k) for k in keys]
    present = np.logical_and.reduce([cols.kinds[r, rows] != MISSING for r in idx])
    extra = np.zeros(0, np.int64)
    if not present.all():
        if pattern.missing_keys_matter:  # these may drop the windows of every partition
            missing = rows[~present]
            extra = missing[dropping_rows(pattern, ev)[missing]]
        rows = rows[present]
        if not len(rows):
            return []
    inverse = dense_ranks(*[c for r in idx for c in (cols.kinds[r, rows], cols.values[r, rows])])
    order = np.lexsort((rows, inverse))
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    groups = np.split(rows[order], bounds)
    if len(extra):  # in processing order (rows are numbered in it) within each group
        groups = [np.union1d(g, extra) for g in groups]
    return groups


def execute_windows(pattern: WindowPattern, cols: EventColumns,
                    options: MatchOptions = MatchOptions(), st: MatchStats | None = None
                    ) -> Iterator[WindowBatch]:
    """The output windows of ``pattern`` over ``cols`` (processing order), one batch per
    partition, in order of first event within it."""
    st = st if st is not None else MatchStats()
    started = time.perf_counter()
    st.matcher, st.work_item = "window", "tested events"
    st.events += cols.n
    ev = Evaluator(cols)
    rows = np.arange(cols.n)
    if options.filter and cols.n:
        rows = rows[relevant_rows(pattern, ev)]
    st.events_after_filter += len(rows)
    groups = partition_groups(pattern, ev, rows, options.partition)
    st.partitions += len(groups)
    for g in groups:
        batch = _group_windows(pattern, ev, g, st)
        if len(batch):
            st.matches += len(batch)
            yield batch
    st.seconds += time.perf_counter() - started


def _group_windows(pattern: WindowPattern, ev: Evaluator, g: np.ndarray,
                   st: MatchStats) -> WindowBatch:
    n = len(g)
    opens = ev.holds(pattern.start, {"cur": g}, n)
    for k in pattern.partition_attributes:  # a first event without A never closes
        opens &= ev.cols.kinds[ev.cols.row(k), g] != MISSING
    starts = np.flatnonzero(opens)
    st.windows += len(starts)
    st.candidate_windows += len(starts)
    st.matcher_calls += len(starts)
    ts = ev.cols.ts[g]
    found = []  # (first row, buffer rows, last row, tested)
    ends = np.searchsorted(ts, ts[starts] + pattern.tau, side="right")
    test = _one_by_one if pattern.sequential else _by_ranges
    for i, end in zip(starts.tolist(), ends.tolist()):
        cand = g[i + 1:end]
        st.max_window = max(st.max_window, len(cand) + 1)
        out, tested = test(pattern, ev, g[i], cand)
        st.work += tested
        if out is not None:
            found.append((g[i], out[0], out[1], tested))
    return _batch(pattern, ev, found)


def _by_ranges(pattern, ev, first, cand):
    """Without prev()/num(): test ``cand`` in growing chunks; returns ((buffer, last) or
    None, events tested)."""
    size, pos = FIRST_CHUNK, 0
    while pos < len(cand):
        chunk = cand[pos:pos + size]
        m = len(chunk)
        env = {"cur": chunk, "first": np.full(m, first),
               "#": {"iter": np.arange(pos + 1, pos + m + 1)}}
        term = ev.holds(pattern.termination, env, m)
        stop = term | ~ev.holds(pattern.iteration, env, m)
        hits = np.flatnonzero(stop)
        if len(hits):
            k = pos + int(hits[0])
            if not term[hits[0]]:
                return None, k + 1  # ITERATION failed: dropped
            before = cand[:k]
            if len(before):
                env = {"cur": before, "first": np.full(k, first),
                       "#": {"iter": np.arange(1, k + 1)}}
                before = before[ev.holds(pattern.filter, env, k)]
            return (before, int(cand[k])), k + 1
        pos += m
        size *= 4
    return None, len(cand)


def _one_by_one(pattern, ev, first, cand):
    """With prev()/num(): every event sees the buffer as it is when it is tested."""
    term = ev.scalar_holds(pattern.termination)
    iteration = ev.scalar_holds(pattern.iteration)
    keep = ev.scalar_holds(pattern.filter)
    buffer: list[int] = []
    counters = {"iter": 0, "num": 1}
    env = {"first": first, "prev": first, "#": counters}
    for j, row in enumerate(cand.tolist()):
        env["cur"] = row
        counters["iter"] = j + 1
        if term(env):
            return (np.array(buffer, np.int64), row), j + 1
        if not iteration(env):
            return None, j + 1
        if keep(env):
            buffer.append(row)
            env["prev"] = row
            counters["num"] = 1 + len(buffer)
    return None, len(cand)


def _batch(pattern: WindowPattern, ev: Evaluator, found: list) -> WindowBatch:
    cols = ev.cols
    k = len(found)
    firsts = np.array([f[0] for f in found], np.int64)
    lasts = np.array([f[2] for f in found], np.int64)
    sizes = np.array([len(f[1]) for f in found], np.int64)
    tested = np.array([f[3] for f in found], np.int64)
    if k and pattern.where is not None:
        env = {"first": firsts, "last": lasts, "#": {"iter": tested, "num": sizes + 2}}
        keep = ev.holds(pattern.where, env, k)
        found = [f for f, ok in zip(found, keep) if ok]
        firsts, lasts, sizes, tested = firsts[keep], lasts[keep], sizes[keep], tested[keep]
        k = len(found)
    offsets = np.zeros(k + 1, np.int64)
    np.cumsum(sizes + 2, out=offsets[1:])
    rows = np.concatenate([np.concatenate([[f[0]], f[1], [f[2]]]) for f in found]
                          ).astype(np.int64) if k else np.zeros(0, np.int64)
    variables = np.concatenate([np.r_[FIRST, np.full(len(f[1]), BUFFER), LAST] for f in found]
                               ).astype(np.int64) if k else np.zeros(0, np.int64)
    values = select_values(pattern, ev, firsts, lasts, sizes, tested)
    return WindowBatch(first=firsts, start_ts=cols.ts[firsts], end_ts=cols.ts[lasts],
                       offsets=offsets, rows=rows, variables=variables, values=values)


def select_values(pattern, ev, firsts, lasts, sizes, tested) -> list[list]:
    """Per select key, the value of every window: numbers as floats (counters as ints),
    strings as text, first(ts)/last(ts) as ISO timestamps, missing as None."""
    k = len(firsts)
    env = {"first": firsts, "last": lasts, "#": {"iter": tested, "num": sizes + 2}}
    words = None
    out = []
    for _, e in pattern.select:
        if isinstance(e, Seq) and e.attr == TS:
            out.append([format_ts(int(t)) for t in ev.cols.ts[env[e.var]]])
            continue
        if isinstance(e, Lit):
            out.append([e.value] * k)
            continue
        v, kinds = ev.value(e, env, k)
        if isinstance(e, Counter):
            out.append([int(x) for x in v])
            continue
        if words is None and (kinds == STRING).any():
            words = ev.words
        out.append([float(x) if kd == NUMBER else words[int(x)] if kd == STRING else None
                    for x, kd in zip(v.tolist(), kinds.tolist())])
    return out


def windows_of(pattern: WindowPattern, events: list, options: MatchOptions = MatchOptions()
               ) -> tuple[list, dict]:
    """The engine's windows over ``Event`` objects (processing order) as ``Window``
    objects, sorted like the oracle's, and the run's counters."""

    cols = from_events(events, sorted(pattern.attributes))
    st = MatchStats()
    found = []
    for b in execute_windows(pattern, cols, options, st):
        for k in range(len(b)):
            bound = b.rows[b.offsets[k]:b.offsets[k + 1]].tolist()
            found.append(Window(events[bound[0]], tuple(events[r] for r in bound[1:-1]),
                                events[bound[-1]], tuple(v[k] for v in b.values)))
    found.sort(key=lambda w: (w.first.seq, w.last.seq))
    return found, st.as_dict()


def sorted_batches(batches: list[WindowBatch]) -> WindowBatch:
    """One batch of all windows in order of first event, then last event (rows are in
    processing order)."""

    if not batches:
        return empty_batch()
    merged = WindowBatch(
        first=np.concatenate([b.first for b in batches]),
        start_ts=np.concatenate([b.start_ts for b in batches]),
        end_ts=np.concatenate([b.end_ts for b in batches]),
        offsets=np.concatenate([[0], np.cumsum(np.concatenate(
            [np.diff(b.offsets) for b in batches]))]).astype(np.int64),
        rows=np.concatenate([b.rows for b in batches]),
        variables=np.concatenate([b.variables for b in batches]),
        values=[sum((b.values[j] for b in batches), []) for j in range(len(batches[0].values))])
    last = merged.rows[merged.offsets[1:] - 1]
    order = np.lexsort((last, merged.first))
    out = batch_take(merged, order)
    return WindowBatch(**{f: getattr(out, f) for f in ("first", "start_ts", "end_ts", "offsets",
                                                       "rows", "variables")},
                       values=[[v[i] for i in order.tolist()] for v in merged.values])


def empty_batch() -> WindowBatch:
    z = np.zeros(0, np.int64)
    return WindowBatch(first=z, start_ts=z, end_ts=z, offsets=np.zeros(1, np.int64), rows=z,
                       variables=z)


def json_rows(pattern: WindowPattern, batch: WindowBatch, cols: EventColumns) -> bytes:
    """The ``match`` command's lines: pattern, start, end, bindings {first, buffer, last}
    and, with ``select``, the values."""
    import json


    bindings = bindings_of(batch, cols, list(BINDINGS)).per_match()
    names = [k for k, _ in pattern.select]
    out = []
    for k, bound in enumerate(bindings):
        row = {"pattern": pattern.name, "start": format_ts(int(batch.start_ts[k])),
               "end": format_ts(int(batch.end_ts[k])), "bindings": bound}
        if names:
            row["values"] = {n: batch.values[j][k] for j, n in enumerate(names)}
        out.append(json.dumps(row) + "\n")
    return "".join(out).encode()
