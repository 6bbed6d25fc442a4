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

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from jobs.config import Profile, load_sources
from jobs.core.engine import funnel as engine_funnel
from jobs.core.engine.columns import from_events
from jobs.core.engine.options import MatchOptions
from jobs.core.engine.runtime import compile_pattern, group_events, scan
from jobs.core.errors import InputError
from jobs.core.language.events import Event, events_from_arrow, format_ts, parse_ts
from jobs.core.language.funnel_steps import AFTER_MATCH, WITHIN, funnel_steps, shown
from jobs.core.language.history import mark
from jobs.core.language.measures import measure_types
from jobs.core.language.pattern import reads_marks
from jobs.core.reference.funnel import negation_witnesses
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.match.planning import choose_plan, driver_planned, explain_text
from jobs.pipeline.match.steps import planned_range
from jobs.project.patterns import load_catalog
from jobs.spark.diagnostics import unsatisfiable, variable_counts
from jobs.spark.tables import read_spark


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
    witnesses: list[str] | None = None  # a negated set's witnesses, window by window
    # of the windows that cannot start: the one condition that keeps their first event
    # from a variable of the first set (a history condition, first ever, ...) -> windows
    not_first: dict[str, int] | None = None
    filtered: dict[str, int] | None = None  # the same of the events the filter removed

    def lines(self) -> list[str]:
        head = f"alternative {self.alternative}: " if self.alternative else ""
        out = [f"{head}filter: {self.kept:,} of {self.events:,} event(s) fit some variable "
               "(negated ones too)"]
        for label, n in sorted((self.filtered or {}).items(), key=lambda kv: -kv[1]):
            out.append(f"{head}  {n:,} of the others fit {label}")
        if not self.kept:
            return out + [f"{head}-> the filter removed every event: no event of this range "
                          "fits any variable (see the counts above)"]
        out.append(f"{head}windows: {self.windows:,} start in the range; {self.no_start:,} "
                   f"cannot start a match (the first event fits no variable of the first "
                   f"set, or the window has fewer than {self.min_events} event(s))")
        for label, n in sorted((self.not_first or {}).items(), key=lambda kv: -kv[1]):
            out.append(f"{head}  {n:,} of them: the first event fits {label}")
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
                if cond == AFTER_MATCH:
                    out.append(f"{head}  {n:,} window(s) with a match {AFTER_MATCH} (an "
                               "earlier kept match of the partition overlaps it)")
                    continue
                what = "negated set" if cond.startswith("not ") else "condition"
                out.append(f"{head}  {what} failed in {n:,} window(s): {cond}")
        for line in self.witnesses or ():
            out.append(f"{head}    {line}")
        if self.unexplained:
            out.append(f"{head}  {self.unexplained:,} window(s) match with no single condition "
                       "left out: the set order or the window length (within) stops them")
        return out


def why_not(pattern, events: list[Event], low: int | None = None, high: int | None = None
            ) -> list[StepReport]:
    """The lazy strategy's steps for the windows whose first event lies in [low, high]
    (every window when None), on ``events`` (processing order: one partition, or the
    time around ``low..high``), one report per alternative. A candidate window without a
    match is told by the funnel (docs/semantics.md, "Funnels"): the step it reached and
    what stopped it at the next, a negated set with the event that witnessed it."""
    if pattern.kind == "window":
        raise InputError(f"{pattern.name} is a window pattern: explain --partition/--at "
                         "replays the steps of sequence patterns only; use `match` on the "
                         "events and read docs/windows.md")
    if pattern.marks_needed:  # first_ever, history: the events given
        events, pattern = mark(pattern, events), pattern.marked()  # are the whole history
    reports = []
    for k, alt in enumerate(pattern.alternatives, start=1):
        rep = StepReport(k if len(pattern.alternatives) > 1 else None, alt.min_events,
                         events=len(events), zero_counters={}, failed={}, witnesses=[],
                         not_first={}, filtered={})
        reports.append(rep)
        c = compile_pattern(alt)
        cols = from_events(events, c.attributes)
        if hasattr(c, "expansions"):  # optional steps: the scan of the fewest variables
            c = min((e for e, _ in c.expansions), key=lambda e: e.m)
        fit = np.logical_or.reduce([c.fits(v.name, cols) for v in alt.variables + alt.negated])
        rep.kept = int(np.count_nonzero(fit))
        for r in np.flatnonzero(~fit)[:100_000]:  # the filter's: the one condition, if one
            label = _all_but_one(alt, events[int(r)], alt.variables + alt.negated)
            if label:
                rep.filtered[label] = rep.filtered.get(label, 0) + 1
        options = MatchOptions()
        group = group_events(c, cols, options, bool(c.partition_attributes))
        if not len(group.rows):
            continue
        _, _, _, d_end, d_cnt, d_c45, d_pos = scan(c, group, options, diagnose=True)
        names = [v.name for v in c.variables]
        candidates = []
        for i in range(len(group.rows)):
            r = int(group.rows[i])
            e = events[r]
            if (low is not None and e.ts < low) or (high is not None and e.ts > high):
                continue
            rep.windows += 1
            if not d_c45[i]:
                rep.no_start += 1
                label = _all_but_one(alt, e)
                if label:
                    rep.not_first[label] = rep.not_first.get(label, 0) + 1
                continue
            if not d_pos[i]:
                for v, name in enumerate(names):
                    if d_cnt[i, v] < c.vmin[v]:
                        rep.zero_counters[name] = rep.zero_counters.get(name, 0) + 1
                continue
            candidates.append(r)
        rep.candidates = len(candidates)
        steps = funnel_steps(alt)
        last = len(alt.sets)
        for o in engine_funnel.window_outcomes(alt, from_events(events, sorted(alt.attributes)),
                                               candidates=candidates):
            if o.start not in candidates:
                continue
            if o.reached == last and o.stopped is None:
                rep.matched += 1
                continue
            if o.stopped == WITHIN:
                rep.unexplained += 1
                continue
            rep.failed[o.stopped] = rep.failed.get(o.stopped, 0) + 1
            if o.stopped == AFTER_MATCH:
                continue
            step = steps[o.reached]  # the step it did not reach
            if o.stopped in step.negations and len(rep.witnesses) < MAX_WITNESSES:
                rep.witnesses.append(_witness_line(step, o.stopped, events, o.start,
                                                   alt.partition_attributes))
    return reports


MAX_WITNESSES = 5  # windows stopped by a negated set whose witnesses explain names


def _all_but_one(alt, e: Event, variables=None) -> str | None:
    """``v but for c``: a variable (of ``variables``, default the first set) whose
    conditions on one event ``e`` satisfies all but ``c``, a condition on the whole history
    (a history condition, first ever, a partition fact, as the file writes it), or None."""
    for v in alt.sets[0] if variables is None else variables:
        failed = [p for p in alt.properties[v.name] if not p.holds(e.values)]
        # only a condition on the whole history: the others are the event's own kind
        if len(failed) == 1 and reads_marks(failed[0]):
            return f"{v.name} but for {shown(failed[0], alt)}"
    return None


def _witness_line(step, label: str, events: list[Event], row: int, attrs) -> str:
    start = events[row]
    key = tuple(start.values.get(a) for a in attrs)
    part = [e for e in events if tuple(e.values.get(a) for a in attrs) == key]
    found = negation_witnesses(step, label, start, part)
    head = f"window of {start.id} ({format_ts(start.ts)[:19]})"
    if not found or not found[1]:
        return f"{head}: {label} (no single witness: several bindings, each with one)"
    m, seen = found
    bound = ", ".join(f"{v} = {', '.join(e.id for e in es)}" for v, es in m.bindings)
    name = label.split()[-1].split("{")[0]
    shown = "; ".join(f"{name} = {e.id} at {format_ts(e.ts)[:19]}" for e in seen[:3])
    more = f" and {len(seen) - 3} more" if len(seen) > 3 else ""
    return f"{head}: the binding {bound} is stopped by {label}: {shown}{more}"


def whole_match_lines(pattern, columns: dict[str, str]) -> list[str]:
    """What ``explain`` says of a sequence pattern's aggregate conditions (tested on each
    whole match, after matching) and its measures with their types (``columns``: the
    source's schema)."""
    lines = []
    aggregates = [f"  {c}" for alt in pattern.alternatives for c in alt.aggregate_conditions]
    if aggregates:
        lines += ["conditions on each whole match (aggregates), tested after matching:",
                  *aggregates]
    if pattern.measure_names:
        types = measure_types(pattern, columns)
        lines.append("measures (columns of the match table):")
        for alt in pattern.alternatives:
            for m in alt.measures:
                where = f" (alternative {alt.alternative})" if alt.alternative else ""
                lines.append(f"  {m.name} {types[m.name]} = {m.expr}{where}")
    return lines


def describe_range(low: int | None, high: int | None) -> str:
    if low is None and high is None:
        return "every window"
    return f"windows starting {format_ts(low)[:19]} .. {format_ts(high)[:19]}"


def why_not_events(events_df, pattern, partition: str | None, at: str | None):
    """The events ``explain --partition/--at`` replays: those of one partition (``VALUE``,
    or ``ATTR=VALUE,...`` for several partition attributes) and/or within τ of one time.
    Returns (events, low, high): the start range the replay keeps."""
    from pyspark.sql import functions as F

    where, low, high = [], None, None
    if partition:
        attrs = pattern.partition_attributes
        if not attrs:
            raise InputError(f"{pattern.name} has no partition attributes (its windows span "
                             "every event): use --at alone")
        values = dict(kv.split("=", 1) for kv in partition.split(",")) \
            if "=" in partition else {attrs[0]: partition}
        unknown = set(values) - set(attrs)
        if unknown or (len(attrs) > 1 and set(values) != set(attrs)):
            raise InputError(f"--partition: give {' and '.join(attrs)} as "
                             f"{','.join(a + '=VALUE' for a in attrs)}")
        for a, v in values.items():
            where.append(F.col(a).cast("string") == F.lit(v))
    if at:
        low, high = at_range(at, pattern.tau)
        where.append(F.col("ts").between(F.lit(format_ts(low)).cast("timestamp"),
                                         F.lit(format_ts(high + pattern.tau)).cast("timestamp")))
    df = events_df
    for w in where:
        df = df.where(w)
    return events_from_arrow(df.toArrow()), low, high


DAY_NS = 86_400 * 10**9


def at_range(at: str, tau: int) -> tuple[int, int]:
    """The first events of the windows that cover ``at``: a time (``2013-11-23T08:00``) is
    covered by the windows that start within τ before it; a day (``2013-11-23``) by those
    that start within τ before it begins or during it."""
    try:
        t = parse_ts(at)
    except ValueError as exc:
        raise InputError(f"--at {at!r}: {exc}") from None
    day = len(at.strip()) == 10
    return t - tau, (t + DAY_NS - 1 if day else t)


def explain_pattern(spark, profile: Profile, path: Path, partition: str | None = None,
                    at: str | None = None, logical_date: str | None = None,
                    generator: str | None = None) -> list[str]:
    """``ses explain``: what each variable of the pattern at ``path`` can bind on the lake's
    events, the plan a run would choose (ZStream), and with ``partition`` or ``at`` which
    step of the lazy strategy removed the windows there; the report's lines."""
    pattern = load_catalog([path]).get(path)
    lake = Lake.of_profile(profile)
    events = read_spark(spark, lake, lake.events(pattern.source))
    out = [f"{pattern.name} ({pattern.kind}, matcher {pattern.matcher}) on "
           f"events_{pattern.source}"]
    if pattern.kind == "window":
        if partition or at:
            raise InputError("explain --partition/--at replays the steps of sequence "
                             "patterns only; for a window pattern run `match` on its events")
        return out + [f"  a window pattern: partition attributes "
                      f"{', '.join(pattern.partition_attributes) or 'none'}; "
                      f"{'one event at a time' if pattern.sequential else 'whole ranges at once'}"]
    counts = variable_counts(events, pattern)
    out.append("variables (events of the whole table that satisfy the properties):")
    out += [f"  {c.describe()}" for c in counts]
    out += [f"warning: {w}" for w in unsatisfiable(counts)]
    source = load_sources().get(pattern.source)
    kinds = dict(source.columns) if source else {}
    out += whole_match_lines(pattern, kinds)
    if partition or at:
        return out + _why_not_lines(pattern, events, partition, at)
    if pattern.matcher != "zstream":
        return out + ["plan: the SES automaton follows the order of the sets (no plan to choose)"]
    if not driver_planned(pattern):
        return out + ["plan: optional steps: each expansion gets its own plan from its "
                      "group's events when it runs (docs/semantics.md)"]
    ctx = RunContext.start(profile, "explain", logical_date or date.today().isoformat())
    planned = planned_range(ctx.for_pattern(path, pattern))
    choice = choose_plan(spark, ctx.lake, pattern, planned.rng.low, planned.rng.high, kinds,
                         generator=generator)
    return out + [explain_text(pattern, choice)]


def _why_not_lines(pattern, events, partition: str | None, at: str | None) -> list[str]:
    rows, low, high = why_not_events(events, pattern, partition, at)
    label = ", ".join(filter(None, [partition and f"partition {partition}",
                                    at and f"around {at}"]))
    out = [f"why not ({label}: {len(rows):,} event(s); {describe_range(low, high)}):"]
    if not rows:
        return out + ["  no event of the table is in this partition and time: check the value "
                      f"(`query \"SELECT DISTINCT ... FROM events_{pattern.source}\"`)"]
    return out + [f"  {line}" for report in why_not(pattern, rows, low, high)
                  for line in report.lines()]
