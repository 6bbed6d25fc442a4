"""``explain``: why a pattern matches what it matches, and why not.

Two questions, both on the lake's events:

* **Can each variable bind anything?** Per variable, how many events satisfy all its
  properties (Θp_v, match-window paper Def. 1), and each property alone; a property no
  event satisfies gets the nearest values the data does have (``event_type =
  'Admission ICU'`` -> known: ``'Admission IC'``). ``validate --data`` and ``run`` warn
  with the same counts.
* **Why did this partition (or time) not match?** The lazy strategy's steps, replayed on
  that partition's events: the filter (Theorem 1: events that fit no variable), the
  windows whose first event cannot start a match (conditions 4-5), the necessary
  conditions (Theorem 3: which variable's counter stayed at zero), and the matcher, where
  each candidate window without a match is tried again with one condition left out, to
  name the condition that failed.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from functools import reduce

from .core.conditions import Attr, Cmp, In, Lit, Property, comparisons_of
from .core.events import Event, format_ts

NEAREST = 3  # known values shown for a literal no event has


@dataclass(frozen=True)
class VariableCount:
    alternative: int | None  # 1, 2, ... for a disjunction's alternatives
    variable: str
    negated: bool
    events: int  # events that satisfy every property of the variable
    properties: tuple[tuple[str, int], ...]  # (property, events satisfying it alone)
    hints: tuple[str, ...] = ()  # for properties no event satisfies

    @property
    def label(self) -> str:
        alt = f"alternative {self.alternative}: " if self.alternative else ""
        return f"{alt}{'not ' if self.negated else ''}{self.variable}"

    def describe(self) -> str:
        if not self.properties:
            return f"{self.label}: any event (no property)"
        props = " and ".join(p for p, _ in self.properties)
        line = f"{self.label}: {self.events:,} event(s) with {props}"
        if self.events == 0 and len(self.properties) > 1:
            line += " (" + "; ".join(f"{p}: {n:,}" for p, n in self.properties) + ")"
        return line + "".join(f"; {h}" for h in self.hints)


def _variables(pattern):
    """(alternative number or None, the alternative, variable, negated) of a sequence
    pattern."""
    alts = pattern.alternatives
    for k, alt in enumerate(alts, start=1):
        for v in alt.variables:
            yield (k if len(alts) > 1 else None), alt, v, False
        for v in alt.negated:
            yield (k if len(alts) > 1 else None), alt, v, True


def variable_counts(events_df, pattern) -> list[VariableCount]:
    """Per variable of a sequence pattern, the events of ``events_df`` (Spark) that satisfy
    its properties, in one pass; hints for the properties no event satisfies."""
    from pyspark.sql import functions as F

    from .match_job import property_column

    if pattern.kind == "window":
        raise ValueError(f"{pattern.name} is a window pattern: per-variable counts are for "
                         "sequence patterns (a window pattern has no variables)")
    columns, index = [], {}
    for k, alt, v, _ in _variables(pattern):
        for p in alt.properties[v.name]:
            key = str(p)
            if key not in index:
                index[key] = len(columns)
                columns.append(F.sum(F.when(property_column(p), 1).otherwise(0)))
        props = alt.properties[v.name]
        if props:
            index[(k, v.name)] = len(columns)
            every = reduce(lambda a, b: a & b, map(property_column, props))
            columns.append(F.sum(F.when(every, 1).otherwise(0)))
    row = events_df.agg(*columns).collect()[0] if columns else []
    total = None
    out = []
    for k, alt, v, negated in _variables(pattern):
        props = alt.properties[v.name]
        counts = tuple((str(p), int(row[index[str(p)]] or 0)) for p in props)
        if props:
            n = int(row[index[(k, v.name)]] or 0)
        else:
            total = events_df.count() if total is None else total
            n = total
        hints = tuple(h for p, (_, c) in zip(props, counts) if c == 0
                      for h in [nearest_values(events_df, p)] if h)
        out.append(VariableCount(k, v.name, negated, n, counts, hints))
    return out


def _literals(p: Property):
    """(attribute, op, literal values) of the comparisons of ``p`` with literals."""
    for c in comparisons_of(p.expr):
        if isinstance(c, Cmp) and isinstance(c.left, Attr) and isinstance(c.right, Lit):
            yield c.left.attr, c.op, (c.right.value,)
        elif isinstance(c, In) and isinstance(c.item, Attr):
            yield c.item.attr, "in", tuple(v.value for v in c.values)


def nearest_values(events_df, p: Property) -> str | None:
    """For a property no event satisfies: the known values of the attribute it compares
    with a literal, nearest first (text), or the attribute's range (numbers)."""
    from pyspark.sql import functions as F

    hints = []
    for attr, _op, values in _literals(p):
        if attr not in events_df.columns:
            hints.append(f"no event has attribute {attr!r} (columns: "
                         f"{', '.join(c for c in events_df.columns if c not in ('event_date',))})")
            continue
        if all(isinstance(v, str) for v in values):
            known = [r[0] for r in events_df.where(F.col(attr).isNotNull())
                     .groupBy(attr).count().orderBy(F.desc("count")).limit(1000).collect()]
            near = []
            for v in values:
                near += [k for k in difflib.get_close_matches(v, [str(k) for k in known],
                                                               n=NEAREST, cutoff=0.5)
                         if k not in near]
            shown = near or [str(k) for k in known[:NEAREST]]
            label = "known" if near else "most frequent"
            if shown:
                hints.append(f"{attr} {label}: " + ", ".join(repr(s) for s in shown))
            else:
                hints.append(f"{attr} is missing on every event")
        else:
            lo, hi = events_df.agg(F.min(attr), F.max(attr)).collect()[0]
            hints.append(f"{attr} ranges from {lo} to {hi}" if lo is not None
                         else f"{attr} is missing on every event")
    return "; ".join(dict.fromkeys(hints)) or None


def unsatisfiable(counts: list[VariableCount]) -> list[str]:
    """Warnings for the positive variables no event can bind: the pattern cannot match
    (for a disjunction, that alternative cannot)."""
    return [f"variable {c.label} can never bind: " + c.describe().split(": ", 1)[1]
            for c in counts if not c.negated and c.properties and c.events == 0]


# ---------------------------------------------------------------------------------------
# why not: the lazy strategy's steps on one partition or time
# ---------------------------------------------------------------------------------------
@dataclass
class StepReport:
    alternative: int | None
    min_events: int = 1
    events: int = 0
    kept: int = 0  # by the filter
    windows: int = 0  # windows whose first event is in the asked range
    no_start: int = 0  # conditions 4-5: cannot start a match
    zero_counters: dict[str, int] | None = None  # variable -> windows it emptied
    candidates: int = 0
    matched: int = 0
    failed: dict[str, int] | None = None  # condition -> candidate windows it failed
    unexplained: int = 0

    def lines(self) -> list[str]:
        head = f"alternative {self.alternative}: " if self.alternative else ""
        out = [f"{head}filter: {self.kept:,} of {self.events:,} event(s) fit some variable"]
        if not self.kept:
            return out + [f"{head}-> the filter removed every event: no event of this range "
                          "fits any variable (see the counts above)"]
        out.append(f"{head}windows: {self.windows:,} start in the range; {self.no_start:,} "
                   f"cannot start a match (the first event fits no variable of the first "
                   f"set, or the window has fewer than {self.min_events} event(s))")
        if self.zero_counters:
            worst = ", ".join(f"{v} in {n:,}" for v, n in
                              sorted(self.zero_counters.items(), key=lambda kv: -kv[1]))
            out.append(f"{head}necessary conditions: {sum(self.zero_counters.values()):,} "
                       f"window(s) removed because a variable's counter stayed at zero "
                       f"({worst})")
        out.append(f"{head}matcher: {self.candidates:,} candidate window(s), {self.matched:,} "
                   "with a match")
        if self.failed:
            for cond, n in sorted(self.failed.items(), key=lambda kv: -kv[1]):
                out.append(f"{head}  condition failed in {n:,} window(s): {cond}")
        if self.unexplained:
            out.append(f"{head}  {self.unexplained:,} window(s) match with no single condition "
                       "left out: the set order or the window length (within) stops them")
        return out


def _first_ids(pattern, events: list[Event]) -> set[str]:
    from .core.runner import run

    return {m.start.id for m in run(pattern, events)[0]}


def why_not(pattern, events: list[Event], low: int | None = None, high: int | None = None
            ) -> list[StepReport]:
    """The lazy strategy's steps for the windows whose first event lies in [low, high]
    (every window when None), on ``events`` (processing order: one partition, or the
    time around ``low..high``), one report per alternative."""
    from bisect import bisect_right

    from .core.columns import from_events
    from .core.engine import MatchOptions, compile_pattern, group_events, scan

    if pattern.kind == "window":
        raise ValueError(f"{pattern.name} is a window pattern: explain --partition/--at "
                         "replays the steps of sequence patterns only; use `match` on the "
                         "events and read docs/windows.md")
    reports = []
    for k, alt in enumerate(pattern.alternatives, start=1):
        rep = StepReport(k if len(pattern.alternatives) > 1 else None, alt.min_events,
                         events=len(events), zero_counters={}, failed={})
        reports.append(rep)
        c = compile_pattern(alt)
        cols = from_events(events, c.attributes)
        options = MatchOptions()
        group = group_events(c, cols, options, bool(c.partition_attributes))
        rep.kept = len(group.rows)
        if not rep.kept:
            continue
        _, _, _, d_end, d_cnt, d_c45, d_pos = scan(c, group, options, diagnose=True)
        names = [v.name for v in c.variables]
        times = [x.ts for x in events]
        for i in range(len(group.rows)):
            r = int(group.rows[i])
            e = events[r]
            if (low is not None and e.ts < low) or (high is not None and e.ts > high):
                continue
            rep.windows += 1
            if not d_c45[i]:
                rep.no_start += 1
                continue
            if not d_pos[i]:
                for v, name in enumerate(names):
                    if d_cnt[i, v] < c.vmin[v]:
                        rep.zero_counters[name] = rep.zero_counters.get(name, 0) + 1
                continue
            rep.candidates += 1
            span = events[r:bisect_right(times, e.ts + alt.tau)]  # the window, unfiltered
            if e.id in _first_ids(alt, span):
                rep.matched += 1
                continue
            blamed = False
            for cond in dict.fromkeys(alt.conditions):
                rest = tuple(x for x in alt.conditions if x != cond)
                try:
                    relaxed = replace(alt, conditions=rest, condition_lines=())
                except (TypeError, ValueError):
                    continue
                if e.id in _first_ids(relaxed, span):
                    rep.failed[str(cond)] = rep.failed.get(str(cond), 0) + 1
                    blamed = True
            if not blamed:
                rep.unexplained += 1
    return reports


def describe_range(low: int | None, high: int | None) -> str:
    if low is None and high is None:
        return "every window"
    return f"windows starting {format_ts(low)[:19]} .. {format_ts(high)[:19]}"
