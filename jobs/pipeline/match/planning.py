"""One plan per pattern per run, chosen on the driver (docs/engine.md, plans).

For a ZStream pattern the driver builds the plan's statistics once per run:

* W·r_v (``leaf_pm``) from ``stats/<source>`` (``jobs.lake.stats``): the events of the
  run's dates that fit v's properties — exact counts for ``=`` / ``in`` on text, the
  quantiles for ranges on numbers, independence between properties (System R's rule,
  and 1/3 for a property no statistic describes) — per partition X and window: events_v
  / P · min(1, τ / D), with P the distinct X values (HLL sketches merged over the dates)
  and D the mean active days of a partition (Σ daily distinct X / P); without X,
  events_v · τ / span;
* each pair's selectivity from sampled pairs inside τ on a sample of the run's events
  (a hash sample of the partitions, ``SAMPLE_EVENTS`` events at most).

The pattern's generator (``plan:``, else ``planners.DEFAULT``) picks the tree; phase 2
evaluates that tree in every group. The runs log records the plan, its estimated partial
matches per window and the actual ones (``work / matcher_calls``). When the last run of
the same version was off by more than ``REPLAN_FACTOR`` either way, this run plans with
the observed sizes instead (leaf sizes measured in the sample's windows).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from jobs.core.engine.columns import from_arrow, processing_order
from jobs.core.engine.matchers import estimate_statistics
from jobs.core.engine.options import MatchOptions
from jobs.core.engine.runtime import compile_pattern, group_events
from jobs.core.language.conditions.expressions import (
    Attr,
    BoolOp,
    Cmp,
    In,
    Lit,
    Not,
    stored,
)
from jobs.core.language.events import format_ts, to_datetime
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.core.plans.costs import PlanStatistics
from jobs.core.plans.json_form import tree_to_json
from jobs.core.plans.planners import DEFAULT, PLANNERS, plan_cost, planner
from jobs.core.plans.trees import TreePlan
from jobs.lake import store as lk
from jobs.lake.snapshots import scan, snapshot_dataset
from jobs.lake.stats import distinct_estimate
from jobs.spark.predicates import any_of, col, filter_column, has_tag, read_range, tag_column
from jobs.status import SUCCESS

SAMPLE_EVENTS = 50_000
REPLAN_FACTOR = 10.0
UNKNOWN_SELECTIVITY = 1 / 3
DAY = 86400 * 10**9


@dataclass
class PlanChoice:
    """What ``explain`` prints and the runs log keeps, per alternative."""

    generator: str
    trees: list[TreePlan] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    statistics: list[PlanStatistics] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # where each leaf estimate came from
    replanned: str = ""

    @property
    def text(self) -> str:
        return " | ".join(map(str, self.trees))

    @property
    def estimated(self) -> float:
        return float(sum(self.costs))

    def to_json(self) -> str:
        return json.dumps([tree_to_json(t) for t in self.trees])


# -- selectivity of a property from the stats table ------------------------------------------
@dataclass
class DateStats:
    """The stats rows of the run's dates, summed."""

    total: int
    values: dict[tuple[str, str], int]  # (attribute, value) -> events
    numeric: dict[str, tuple[int, list[float]]]  # attribute -> (values, mean quantiles)
    span_ns: int


def _stats_of_dates(lake: lk.Lake, source: str, low: int | None, high: int | None, tau: int,
                    columns: list[str], only=None, small: SmallSources | None = None
                    ) -> pa.Table | None:
    """The rows of ``stats/<source>`` for the run's dates (events with ts in [low - τ,
    high + τ]) that pass ``only``: from the night's copy of the table (``small``), else
    read from the lake."""
    import pyarrow.compute as pc

    first, last = _date_bounds(low, high, tau)
    dates = pc.scalar(True)
    if first is not None:
        dates &= pc.field("event_date") >= first
    if last is not None:
        dates &= pc.field("event_date") <= last
    if only is not None:
        dates &= only
    if small is not None:
        rows = small.stats(source, first, last)
        return None if rows is None else rows.filter(dates).select(columns)
    path = lake.stats(source)
    if not lake.exists(path):
        return None
    return lake.read_arrow(path, columns=columns, filter=dates)


def _date_bounds(low: int | None, high: int | None, tau: int) -> tuple[str | None, str | None]:
    """The first and last ``event_date`` of a run's events (ts in [low - τ, high + τ])."""
    return (None if low is None else format_ts(low - tau)[:10],
            None if high is None else format_ts(high + tau)[:10])


def _per_dates(small: SmallSources | None, key: tuple, low, high, tau, compute):
    """``compute()``, once per night (``small``) for the same source and dates: the
    variations of a pattern over one source read the same stats rows."""
    if small is None:
        return compute()
    key = (*key, _date_bounds(low, high, tau))
    if key not in small.per_dates:
        small.per_dates[key] = compute()
    return small.per_dates[key]


def read_date_stats(lake: lk.Lake, source: str, low: int | None, high: int | None,
                    tau: int, small: SmallSources | None = None) -> DateStats | None:
    return _per_dates(small, ("stats", source), low, high, tau,
                      lambda: _read_date_stats(lake, source, low, high, tau, small))


def _read_date_stats(lake: lk.Lake, source: str, low: int | None, high: int | None,
                     tau: int, small: SmallSources | None) -> DateStats | None:
    table = _stats_of_dates(lake, source, low, high, tau,
                            ["event_date", "attribute", "value", "events", "quantiles",
                             "first_ts", "last_ts"], small=small)
    if table is None:
        return None
    rows = table.to_pylist()
    totals = [r for r in rows if r["attribute"] == "*"]
    if not totals:
        return None
    values: dict[tuple[str, str], int] = {}
    numeric: dict[str, list] = {}
    for r in rows:
        a = r["attribute"]
        if a in ("*",) or a.startswith("@"):
            continue
        if r["quantiles"] is not None:
            numeric.setdefault(a, []).append((r["events"], r["quantiles"]))
        else:
            values[(a, r["value"])] = values.get((a, r["value"]), 0) + r["events"]
    merged = {}
    for a, parts in numeric.items():
        n = sum(c for c, _ in parts)
        q = np.average(np.array([qs for _, qs in parts]), axis=0,
                       weights=[max(c, 1) for c, _ in parts])
        merged[a] = (n, list(q))
    first = min(r["first_ts"] for r in totals)
    last = max(r["last_ts"] for r in totals)
    span = int((last - first).total_seconds() * 1e9) or DAY
    return DateStats(sum(r["events"] for r in totals), values, merged, span)


def property_fraction(expr, ds: DateStats, kinds: dict[str, str]) -> float:
    """The fraction of the source's events that satisfy a property (three-valued logic:
    a missing value satisfies nothing)."""
    total = max(ds.total, 1)
    if isinstance(expr, BoolOp):
        parts = [property_fraction(x, ds, kinds) for x in expr.items]
        if expr.op == "and":
            return math.prod(parts)
        return 1 - math.prod(1 - p for p in parts)
    if isinstance(expr, Not):
        return max(0.0, 1 - property_fraction(expr.item, ds, kinds))
    if isinstance(expr, In) and isinstance(expr.item, Attr) and \
            all(isinstance(v, Lit) for v in expr.values):
        hit = sum(ds.values.get((expr.item.attr, str(v.value)), 0) for v in expr.values) / total
        present = sum(c for (a, _), c in ds.values.items() if a == expr.item.attr) / total
        return present - hit if expr.negated else hit
    if isinstance(expr, Cmp):
        attr, lit, op = expr.left, expr.right, expr.op
        if isinstance(attr, Lit) and isinstance(lit, Attr):
            attr, lit, op = lit, attr, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        if isinstance(attr, Attr) and isinstance(lit, Lit):
            a = attr.attr
            if a in ds.numeric and not isinstance(lit.value, str):
                n, q = ds.numeric[a]
                below = float(np.interp(float(lit.value), q, np.linspace(0, 1, len(q)),
                                        left=0.0, right=1.0))
                frac = {"<": below, "<=": below, ">": 1 - below, ">=": 1 - below,
                        "=": 1 / 20, "!=": 19 / 20}[op]
                return frac * n / total
            if (a, str(lit.value)) in ds.values or any(k[0] == a for k in ds.values):
                hit = ds.values.get((a, str(lit.value)), 0) / total
                present = sum(c for (x, _), c in ds.values.items() if x == a) / total
                if op == "=":
                    return hit
                if op == "!=":
                    return present - hit
    return UNKNOWN_SELECTIVITY


def partition_shape(lake: lk.Lake, source: str, keys: tuple[str, ...],
                    low: int | None, high: int | None, tau: int,
                    small: SmallSources | None = None) -> tuple[float, float] | None:
    """(P, D): distinct partitions over the run's dates (the HLL sketches of the dates
    merged on the driver: the stats table has a few rows per date) and their mean active
    days."""
    if not keys:
        return None
    return _per_dates(small, ("shape", source, keys[0]), low, high, tau,
                      lambda: _partition_shape(lake, source, keys, low, high, tau, small))


def _partition_shape(lake: lk.Lake, source: str, keys: tuple[str, ...], low: int | None,
                     high: int | None, tau: int, small: SmallSources | None
                     ) -> tuple[float, float] | None:
    import pyarrow.compute as pc

    rows = _stats_of_dates(lake, source, low, high, tau, ["sketch", "distinct"],
                           pc.field("attribute") == "@" + keys[0], small)
    p = distinct_estimate(rows.column("sketch").to_pylist()) if rows is not None else None
    if not p:
        return None
    days = pc.sum(rows.column("distinct")).as_py()
    return float(p), float(days or p) / p


def leaf_estimates(pattern: Pattern, ds: DateStats, shape, kinds: dict[str, str]
                   ) -> list[float]:
    """W·r_v per variable from the stats (see the module's docstring)."""
    out = []
    for v in pattern.variables:
        frac = math.prod(property_fraction(p.expr, ds, kinds) for p in pattern.properties[v.name])
        events = max(ds.total * frac, 1e-3)
        if shape is not None and pattern.partition_attributes:
            partitions, days = shape
            per_window = events / max(partitions, 1.0) * min(1.0, pattern.tau / DAY / max(days, 1e-9))
        else:
            per_window = events * pattern.tau / max(ds.span_ns, 1)
        per_window = max(per_window, 1e-3)
        if v.group:
            per_window = min(2.0 ** min(per_window, 40) - 1, 1e12)
        out.append(float(per_window))
    return out


def _covers(held: tuple, asked: tuple) -> bool:
    """Whether the date range ``held`` contains ``asked`` (None: open at that end)."""
    return (held[0] is None or (asked[0] is not None and held[0] <= asked[0])) and \
        (held[1] is None or (asked[1] is not None and asked[1] <= held[1]))


def _union(a: tuple, b: tuple) -> tuple:
    """The smallest date range containing ``a`` and ``b``."""
    return (None if a[0] is None or b[0] is None else min(a[0], b[0]),
            None if a[1] is None or b[1] is None else max(a[1], b[1]))


class SmallSources:
    """The events of each source small enough to sample whole (at most ``SAMPLE_EVENTS``
    in all), read once per night on the driver (delta-rs): the plans of a night's ZStream
    patterns then need no Spark job to sample them. A larger source is None: sampled by
    Spark."""

    def __init__(self, lake: lk.Lake):
        self.lake, self.tables, self.stats_tables = lake, {}, {}
        self.samples: dict[tuple, pa.Table] = {}  # Spark samples taken together (sample_many)
        self.per_dates: dict[tuple, object] = {}  # stats read for a source's dates

    def stats(self, source: str, first: str | None = None, last: str | None = None
              ) -> pa.Table | None:
        """The rows of ``stats/<source>`` for the dates ``first``..``last`` (None: open),
        read once per night for all the night's patterns: the smallest range that covers
        every range asked so far (a read per pattern costs the night's plans 0.5 s each;
        the whole table grows by a file a day, where a night needs ~τ of them)."""
        held = self.stats_tables.get(source)
        if held is not None and _covers(held[0], (first, last)):
            return held[1]
        want = (first, last) if held is None else _union(held[0], (first, last))
        filters = [("event_date", op, d) for op, d in ((">=", want[0]), ("<=", want[1]))
                   if d is not None]
        table = self.lake.read_arrow(self.lake.stats(source), partition_filters=filters)
        self.stats_tables[source] = (want, table)
        return table

    def events(self, source: str) -> pa.Table | None:
        if source not in self.tables:
            path = self.lake.events(source)
            dt = self.lake.snapshot(path)
            small = dt is not None and self.lake.count_rows(path, table=dt) <= SAMPLE_EVENTS
            self.tables[source] = scan(snapshot_dataset(dt)) if small else None
        return self.tables[source]


def _whole_range(events: pa.Table, low: int | None, high: int | None, tau: int) -> pa.Table:
    """``read_range``'s events of a table on the driver: ts in [low, high + tau]."""
    import pyarrow.compute as pc

    ts = events.column("ts").cast(pa.timestamp("ns", "UTC")).cast(pa.int64())
    keep = [pc.greater_equal(ts, low)] if low is not None else []
    if high is not None:
        keep.append(pc.less_equal(ts, high + tau))
    return events.filter(functools.reduce(pc.and_, keep)) if keep else events


def sample_statistics(spark, lake: lk.Lake, pattern: Pattern | Disjunction,
                      low: int | None, high: int | None, small: SmallSources | None = None
                      ) -> list[PlanStatistics]:
    """Per alternative, the statistics measured on a sample of the run's events (whole
    partitions chosen by a hash of X), with the engine's window sampler. ``small``: a
    source it holds is sampled whole on the driver, without the pattern's filter: the
    engine's own filter (Theorem 1) drops the same events, and at most ``SAMPLE_EVENTS``
    events are never sampled down, so the statistics are the same as Spark's."""
    compiled = compile_pattern(pattern)
    keys = list(pattern.partition_attributes)
    cols_needed = _sample_columns(pattern)
    whole = small.events(pattern.source) if small is not None else None
    taken = small.samples.get(_sample_key(pattern, low, high)) if small is not None else None
    if whole is not None and set(cols_needed) <= set(whole.column_names):
        table = _whole_range(whole.select(cols_needed),
                             None if low is None else low - pattern.tau, high, pattern.tau)
    elif taken is not None:
        table = taken
    else:
        table = _spark_sample(spark, lake, pattern, low, high, keys, cols_needed)
    table = table.take(processing_order(table))
    cols = from_arrow(table, compiled.attributes, ordered=True)
    out = []
    for alt in compiled.alternatives:
        alt = getattr(alt, "full", alt)  # optional steps: the expansion with every step
        partitioned = bool(alt.partition_attributes)
        group = group_events(alt, cols, MatchOptions(), partitioned)
        per_var = [np.flatnonzero((group.masks >> v.index) & 1) for v in alt.variables]
        out.append(estimate_statistics(alt, group, per_var, partitioned))
    return out


def _spark_sample(spark, lake: lk.Lake, pattern, low, high, keys: list[str],
                  cols_needed: list[str]) -> pa.Table:
    """The run's events that pass the pattern's filter, sampled by Spark (a hash of X) down
    to about ``SAMPLE_EVENTS``."""
    from pyspark.sql import functions as F

    df = read_range(spark, lake, lake.events(pattern.source),
                    None if low is None else low - pattern.tau, high, pattern.tau)
    keep = filter_column(pattern)
    if keep is not None:
        df = df.where(keep)
    total = df.count()
    if total > SAMPLE_EVENTS and keys:
        buckets = max(2, math.ceil(total / SAMPLE_EVENTS))
        df = df.where(F.pmod(F.hash(*[col(k) for k in keys]), F.lit(buckets)) == 0)
    elif total > SAMPLE_EVENTS:
        df = df.orderBy("ts").limit(SAMPLE_EVENTS)
    return df.select(*[col(c) for c in cols_needed]).toArrow()


def _sample_key(pattern: Pattern | Disjunction, low: int | None, high: int | None) -> tuple:
    return pattern.name, pattern.version, low, high


def _sample_columns(pattern: Pattern | Disjunction) -> list[str]:
    keys = set(pattern.partition_attributes)
    return list(dict.fromkeys(["event_id", "ts", *sorted(
        {stored(a) for a in compile_pattern(pattern).attributes} | keys)]))


MAX_SAMPLED = 62  # patterns sampled by one Spark job: one bit each of a long


def driver_planned(pattern: Pattern | Disjunction) -> bool:
    """Whether the driver chooses the run's join plan: a ZStream pattern without optional
    steps (each expansion of optional steps has its own variables: the engine plans each
    one on its group's events, ``engine.runtime.ZStreamMatcher``)."""
    return pattern.matcher == "zstream" and not any(
        a.optional_units for a in pattern.alternatives)


def needs_spark_sample(pattern: Pattern | Disjunction, low: int | None, high: int | None,
                       small: SmallSources) -> bool:
    """Whether the plan of this run samples the source with Spark (a ZStream pattern with
    X over a source too large for the driver, not sampled yet tonight)."""
    return (driver_planned(pattern) and bool(pattern.partition_attributes)
            and small.events(pattern.source) is None
            and _sample_key(pattern, low, high) not in small.samples)


def sample_many(spark, lake: lk.Lake, small: SmallSources,
                runs: list[tuple[Pattern | Disjunction, int | None, int | None]]) -> int:
    """The Spark samples of a night's ZStream patterns (``_spark_sample``: each pattern's
    filtered range, hash-sampled by X down to about ``SAMPLE_EVENTS``), taken together for
    the patterns of one source and X (``sample_together``): two Spark jobs per source
    instead of two per pattern. Returns the patterns sampled."""
    groups: dict[tuple, list] = {}
    for pattern, low, high in runs:
        if needs_spark_sample(pattern, low, high, small):
            key = (pattern.source, tuple(pattern.partition_attributes))
            groups.setdefault(key, []).append((pattern, low, high))
    done = 0
    for (source, _), all_items in groups.items():
        for start in range(0, len(all_items), MAX_SAMPLED):
            items = all_items[start:start + MAX_SAMPLED]
            if len(items) < 2:  # one pattern: its own sample, as before
                continue
            lows, highs = _sample_bounds(items)
            df = read_range(spark, lake, lake.events(source),
                            None if None in lows else min(lows),
                            None if None in highs else max(highs), 0)
            done += sample_together(df, small, items, cache=True)
    return done


def sample_from(df, small: SmallSources,
                runs: list[tuple[Pattern | Disjunction, int | None, int | None]]) -> int:
    """``sample_together`` for any number of ``runs`` of one source and X whose events
    ``df`` holds (a source pass's cached events), ``MAX_SAMPLED`` at a time, without
    caching them again. Returns the patterns sampled."""
    return sum(sample_together(df, small, runs[start:start + MAX_SAMPLED], cache=False)
               for start in range(0, len(runs), MAX_SAMPLED))


def _sample_bounds(items) -> tuple[list, list]:
    """Each run's sampled range [low − τ, high + τ] (None: open), as lows and highs."""
    return ([None if low is None else low - p.tau for p, low, _ in items],
            [None if high is None else high + p.tau for p, _, high in items])


def sample_together(df, small: SmallSources,
                    items: list[tuple[Pattern | Disjunction, int | None, int | None]],
                    cache: bool) -> int:
    """The samples of ``items`` (patterns of one source and X, at most ``MAX_SAMPLED``)
    from ``df``, which holds every event and column they need (the source over the union
    of their ranges [low − τ, high + τ], or a source pass's cached events): one job counts
    every pattern's filtered range (``cache``: and caches those rows), one reads the union
    of the sampled rows, each tagged with the patterns it serves; each pattern's rows are
    then exactly its own ``_spark_sample`` (tested), kept in ``small.samples`` for
    ``sample_statistics``. Returns the patterns sampled."""
    from pyspark.sql import functions as F

    keys = list(items[0][0].partition_attributes)
    lows, highs = _sample_bounds(items)
    served = any_of([filter_column(p) for p, _, _ in items])  # each filter once
    if served is not None:
        df = df.where(served)
    df = df.withColumn("_serves", tag_column([
        _in_range(filter_column(p), lo, hi) for (p, _, _), lo, hi in zip(items, lows, highs)]))
    needed = {b: _sample_columns(p) for b, (p, _, _) in enumerate(items)}
    columns = list(dict.fromkeys(c for cs in needed.values() for c in cs))
    df = df.where(F.col("_serves") != 0).select(*[col(c) for c in columns], "_serves")
    if cache:  # the filtered rows, kept by the count for the sample's read (one scan)
        df = df.persist()
    try:
        counts = df.agg(*[F.sum(has_tag("_serves", b).cast("long")).alias(f"n{b}")
                          for b in range(len(items))]).collect()[0]
        hashed = F.hash(*[col(k) for k in keys])
        sampled = []
        for b in range(len(items)):
            mine = has_tag("_serves", b)
            total = counts[f"n{b}"] or 0
            if total > SAMPLE_EVENTS:  # as _spark_sample: a hash of X, to about that many
                mine &= F.pmod(hashed, F.lit(max(2, math.ceil(total / SAMPLE_EVENTS)))) == 0
            sampled.append(mine)
        table = df.withColumn("_sampled", tag_column(sampled)).where(
            F.col("_sampled") != 0).select(*[col(c) for c in columns], "_sampled").toArrow()
    finally:
        if cache:
            df.unpersist()
    tagged = table.column("_sampled").to_numpy()
    for b, (pattern, low, high) in enumerate(items):
        rows = table.filter(pa.array((tagged & (1 << b)) != 0))
        small.samples[_sample_key(pattern, low, high)] = rows.select(needed[b])
    return len(items)


def _in_range(keep, low: int | None, high: int | None):
    """``keep`` (None: every event) and ts in [low, high] (None: open)."""
    from pyspark.sql import functions as F

    ts = F.col("ts")
    conditions = [c for c in (keep, None if low is None else ts >= F.lit(to_datetime(low)),
                              None if high is None else ts <= F.lit(to_datetime(high)))
                  if c is not None]
    return functools.reduce(lambda a, c: a & c, conditions) if conditions else None


def choose_plan(spark, lake: lk.Lake, pattern: Pattern | Disjunction, low: int | None,
                high: int | None, kinds: dict[str, str], generator: str | None = None,
                observed: bool = False, small: SmallSources | None = None) -> PlanChoice:
    """The run's plan: statistics from the lake (or, ``observed``, the sample's measured
    leaf sizes), then the generator. ``small``: the night's small sources (sampled on the
    driver)."""
    name = generator or pattern.plan or DEFAULT
    gen = planner(name)
    sampled = sample_statistics(spark, lake, pattern, low, high, small)
    ds = None if observed else read_date_stats(lake, pattern.source, low, high, pattern.tau,
                                               small)
    shape = None if ds is None else partition_shape(lake, pattern.source,
                                                    pattern.partition_attributes, low, high,
                                                    pattern.tau, small)
    choice = PlanChoice(name, replanned="observed" if observed else "")
    for alt, st_sample in zip(pattern.alternatives, sampled):
        if ds is not None:
            st = PlanStatistics(tuple(leaf_estimates(alt, ds, shape, kinds)),
                                st_sample.selectivity)
            choice.sources.append("stats table (leaves), sample (pairs)")
        else:
            st = st_sample
            choice.sources.append("sample (leaves and pairs)")
        tree = gen.planned(alt, st).tree
        choice.trees.append(tree)
        choice.costs.append(plan_cost(gen, alt, tree, st))
        choice.statistics.append(st)
    return choice


def needs_replan(previous: list[dict], version: str) -> bool:
    """The last successful run of this version estimated its partial matches per window
    more than ``REPLAN_FACTOR`` off the actual ones."""
    runs = [r for r in previous if r.get("pattern_version") == version
            and r.get("status") == SUCCESS and r.get("estimated_pm")]
    if not runs:
        return False
    last = max(runs, key=lambda r: r["started_at"])
    actual = last.get("actual_pm") or 0.0
    ratio = (actual + 1e-9) / (last["estimated_pm"] + 1e-9)
    return ratio > REPLAN_FACTOR or ratio < 1 / REPLAN_FACTOR


def explain_text(pattern: Pattern | Disjunction, choice: PlanChoice) -> str:
    """``explain``: the chosen plan and cost, the statistics it used, and what every
    generator makes of the same statistics."""
    lines = [f"pattern {pattern.name} (version {pattern.version}), generator "
             f"{choice.generator}" + (" (re-planned: observed sizes)" if choice.replanned else "")]
    for k, (alt, tree, cost, st, src) in enumerate(zip(pattern.alternatives, choice.trees,
                                                       choice.costs, choice.statistics,
                                                       choice.sources)):
        head = f"alternative {k + 1}: " if len(choice.trees) > 1 else ""
        lines.append(f"\n{head}plan {tree}  estimated partial matches per window = {cost:,.3f}")
        lines.append(f"statistics ({src}):")
        for v in alt.variables:
            lines.append(f"  W·r {str(v):12} {st.leaf_pm[v.index]:>14,.3f}")
        for (i, j), sel in sorted(st.selectivity.items()):
            pair = f"{alt.variables[i].name} ~ {alt.variables[j].name}"
            lines.append(f"  SEL {pair:12} {sel:>14.4f}")
        lines.append("every generator on these statistics (* = chosen):")
        for name, gen in PLANNERS.items():
            t = gen.planned(alt, st)
            mark = "*" if name == choice.generator else " "
            note = f"  ({t.note})" if t.note else ""
            lines.append(f" {mark} {name:12} {plan_cost(gen, alt, t.tree, st):>16,.3f}  "
                         f"{t.tree}{note}")
    return "\n".join(lines)
