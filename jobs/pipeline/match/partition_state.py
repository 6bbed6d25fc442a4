"""History conditions and partition facts across nights (docs/semantics.md, "History
conditions", "Partition facts"): a state that sums up each partition's whole history, so
that a night reads what its new events can change, not the history.

The table ``partition_state/<pattern>`` holds one row per item and key:

* ``facts`` per partition (values of X): its first and last time and its count;
* ``h<k>`` per partition of history condition k (values of its ``same``, S ⊇ X): the
  times and ids of the K earliest (``before``) or latest (``after``) events fitting its
  ``where``, K = max(at_least, at_most + 1). The count in a range around an anchor,
  capped at K, is the count of these K in that range, and the bound reads no more.

with the ``watermark`` (the newest ``ingested_at`` it has seen). A full run builds it on
Spark from the whole history; a night reads only the events ingested after the watermark
(their files' statistics pick them), merges them in, and gives each partition they touch
the earliest start it must match again (``HistoryPlan``, ``PartitionStarts``): τ before its earliest new
event, τ before the earliest anchor whose mark a changed threshold flips, or the whole
partition when a fact that a condition or measure reads changed its truth. Phase 1 marks
the night's events from the new state (``mark_columns``) and phase 2 runs the pattern's
``marked()`` form, as for an ordinary pattern. A commit of the events that is not an
append (a retraction, a rewrite) makes the night a full one. The state is written after
the publish; a run killed in between leaves the old one, whose watermark makes the next
night read the same events again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.engine.columns import from_arrow, processing_order
from jobs.core.engine.compiled import CompiledPattern
from jobs.core.engine.marks import where_fits
from jobs.core.language.conditions.expressions import (
    PARTITION_FACTS,
    Instant,
    attributes_of,
    is_fact,
    stored,
)
from jobs.core.language.pattern import Pattern, history_attribute
from jobs.lake import store as lk
from jobs.lake.extent import files_ingested_after
from jobs.pipeline.match.horizons import WHOLE, PartitionStarts, partition_key
from jobs.pipeline.match.staged import publish_table, stage_table
from jobs.pipeline.match.start_ranges import STATE_FACTS
from jobs.spark.predicates import col, property_column
from jobs.spark.tables import read_spark

TS = pa.timestamp("us", tz="UTC")
STAGED = "_partition_state.parquet"  # the night's new state, beside its staged matches
FACTS = "facts"


def stateful(pattern) -> bool:
    """Whether a pattern's nights keep a partition state: history conditions or partition
    facts, each history condition counting events of a partition of X or a finer one
    (without X, the whole source is one partition), and no ``first_ever`` or ``after_match`` (those nights take the
    partitions they touch whole)."""
    return isinstance(pattern, Pattern) and pattern.whole_history and not pattern.first_ever \
        and pattern.after_match == "all" and counts_within_partitions(pattern)


def counts_within_partitions(pattern) -> bool:
    """Whether each history condition counts events of the anchor's partition of X or a
    finer one (its ``same`` holds every attribute of X; a coarser one counts events of
    other partitions)."""
    keys = set(pattern.partition_attributes)
    return all(keys <= set(h.same or keys)
               for alt in pattern.alternatives for h in getattr(alt, "history", ()))


def depth(h) -> int:
    """K: how many of the earliest (latest) fitting events decide condition ``h``."""
    return max(h.at_least or 0, (h.at_most + 1) if h.at_most is not None else 0, 1)


def _same(pattern: Pattern, k: int) -> tuple[str, ...]:
    return tuple(pattern.history[k].same or pattern.partition_attributes)


def key_attributes(pattern: Pattern) -> list[str]:
    return list(dict.fromkeys([*pattern.partition_attributes,
                               *[a for k in range(len(pattern.history))
                                 for a in _same(pattern, k)]]))


def state_schema(pattern: Pattern, types: dict[str, pa.DataType]) -> pa.Schema:
    return pa.schema([("item", pa.string()), ("key", pa.string()), ("x", pa.string()),
                      *[(a, types[a]) for a in key_attributes(pattern)],
                      ("times", pa.list_(pa.int64())), ("ids", pa.list_(pa.string())),
                      ("first_ts", pa.int64()), ("last_ts", pa.int64()),
                      ("count", pa.int64()), ("pattern_version", pa.string()),
                      ("watermark", TS)])


@dataclass
class HistoryPlan(PartitionStarts):
    """A night's state (None: a full run builds it on Spark) and the partitions whose
    state changed, each with the earliest start to match again (``PartitionStarts``)."""

    state: pa.Table | None = None


def _state_row(pattern: Pattern, item: str, attributes, values: list, **fields) -> dict:
    """A row of the state: ``item`` of the partition with these values of ``attributes``
    (X for the facts, a condition's ``same`` for its times), the others null."""
    xs = pattern.partition_attributes
    row = dict.fromkeys(key_attributes(pattern))
    row.update(zip(attributes, values))
    return {**row, "item": item, "key": partition_key(values),
            "x": partition_key([values[list(attributes).index(a)] for a in xs]),
            "times": None, "ids": None, "first_ts": None, "last_ts": None, "count": None,
            "pattern_version": pattern.version, **fields}


def _needed(pattern: Pattern) -> list[str]:
    return list(dict.fromkeys(["event_id", "ts", "ingested_at", *sorted(
        {stored(a) for a in pattern.stored_attributes} | set(key_attributes(pattern)))]))


def plan_history_state(lake: lk.Lake, pattern: Pattern, full: bool) -> HistoryPlan:
    """The night's plan: the stored state brought up to date with the events ingested
    since its watermark, and the partitions to match again (module docstring); a full
    run, a new version or no state: build it on Spark (``state`` None)."""
    path = lake.partition_state(pattern.name)
    old = None if full or not lake.exists(path) else lake.read_arrow(path)
    if old is None or old.num_rows == 0 or set(
            old.column("pattern_version").to_pylist()) != {pattern.version}:
        return HistoryPlan()
    rows = {(r["item"], r["key"]): r for r in old.to_pylist()}
    watermark = max(r["watermark"] for r in rows.values())
    files = files_ingested_after(lake, pattern.source, watermark)
    arrived = lake.read_arrow(lake.events(pattern.source), columns=_needed(pattern),
                              filter=pc.field("ingested_at") > pa.scalar(watermark, TS),
                              only=files) if files or files is None else None
    plan = HistoryPlan()
    if arrived is not None and arrived.num_rows:
        watermark = max(watermark, pc.max(arrived.column("ingested_at")).as_py())
        _merge(pattern, rows, arrived, plan)
    for r in rows.values():
        r["watermark"] = watermark
    plan.state = pa.Table.from_pylist(list(rows.values()), old.schema)
    return plan


def _merge(pattern: Pattern, rows: dict, t: pa.Table, plan: HistoryPlan) -> None:
    """Merge the arrived events ``t`` into ``rows`` (the state by (item, key)) and lower
    the start of every partition whose matches they can change."""
    t = t.take(pa.array(processing_order(t)))
    xs = list(pattern.partition_attributes)
    values = {a: t.column(a).to_pylist() for a in key_attributes(pattern)}
    ts = (t.column("ts").cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64())
          .to_numpy(zero_copy_only=False))
    ids = t.column("event_id").cast(pa.string()).to_pylist()
    tau = pattern.tau

    def key(r, attrs):
        v = [values[a][r] for a in attrs]
        return None if any(x is None or x != x for x in v) else v

    # facts: each arrived event of a partition; its earliest event reopens τ before it
    old_facts, new_facts = {}, {}
    for r in range(t.num_rows):
        x = key(r, xs)
        if x is None:
            continue
        plan.lower(x, int(ts[r]) - tau)
        k = partition_key(x)
        row = rows.get((FACTS, k))
        if row is None:
            row = rows[(FACTS, k)] = _state_row(pattern, FACTS, xs, x, count=0)
        if k not in old_facts:
            old_facts[k] = (row["first_ts"], row["last_ts"], row["count"])
        row["first_ts"] = int(ts[r]) if row["first_ts"] is None else min(row["first_ts"], int(ts[r]))
        row["last_ts"] = int(ts[r]) if row["last_ts"] is None else max(row["last_ts"], int(ts[r]))
        row["count"] += 1
        new_facts[k] = (row["first_ts"], row["last_ts"], row["count"])
    # a partition seen for the first time has only new events, which it reads anyway
    fresh = {k for k, old in old_facts.items() if not old[2]}
    for k, old in old_facts.items():
        if k not in fresh and _facts_change(pattern, old, new_facts[k]):
            plan.lower(plan.values[k], WHOLE)
    if not pattern.history:
        return
    cols = from_arrow(t, sorted(pattern.stored_attributes), ordered=True)
    c = CompiledPattern(pattern, tuple(cols.names))
    for n, h in enumerate(pattern.history):
        fits = where_fits(h, cols, c)
        same, kk = _same(pattern, n), depth(h)
        item = f"h{n}"
        found: dict[str, list] = {}
        for r in np.flatnonzero(fits).tolist():
            s = key(r, same)
            if s is not None:
                found.setdefault(partition_key(s), [s, []])[1].append((int(ts[r]), ids[r]))
        for k, (s, events) in found.items():
            row = rows.get((item, k))
            if row is None:
                row = rows[(item, k)] = _state_row(pattern, item, same, s, times=[], ids=[])
            before = list(zip(row["times"] or [], row["ids"] or []))
            merged = sorted({*before, *events}, reverse=h.direction == "after")[:kk]
            row["times"], row["ids"] = [m[0] for m in merged], [m[1] for m in merged]
            changed = _change_point(h, [m[0] for m in before], row["times"], kk)
            if changed is not None and row["x"] not in fresh:
                x = [s[same.index(a)] for a in xs]
                plan.lower(x, max(changed - tau, WHOLE))


def _change_point(h, old: list[int], new: list[int], kk: int) -> int | None:
    """The earliest anchor time whose mark may differ between the old and the new K
    earliest (latest) fitting times (None: no mark changes). A list shorter than K is
    padded with "none": +∞ before an anchor, -∞ after it (so a count that reaches K
    after, for the first time, changes every earlier anchor)."""
    pad = float("inf") if h.direction == "before" else float("-inf")
    a = list(old) + [pad] * (kk - len(old))
    b = list(new) + [pad] * (kk - len(new))
    moved = [min(x, y) for x, y in zip(a, b) if x != y]
    if not moved:
        return None
    low = min(moved)
    if low == float("-inf"):
        return WHOLE
    return int(low + h.by) if h.direction == "before" else int(low - h.by)


def _facts_change(pattern: Pattern, old: tuple, new: tuple) -> bool:
    """Whether a partition's new facts can change a match that its old ones made: a
    measure reads a fact that changed, or a condition that reads one does not keep its
    truth (a condition on facts alone is compared; one with event attributes too is
    taken as changed)."""
    names = ("first_ts", "last_ts", "count")
    moved = {PARTITION_FACTS[n] for n, a, b in zip(names, old, new) if a != b}
    if not moved:
        return False
    for m in pattern.measures:
        if moved & {a.attr for a in attributes_of(m.expr)}:
            return True
    env_old, env_new = (_fact_env(v) for v in (old, new))
    for cond in pattern.conditions:
        expr = getattr(cond, "expr", None)
        read = {a.attr for a in attributes_of(expr)} if expr is not None else None
        if read is None:
            return True
        if not moved & read:
            continue
        if not all(is_fact(a) for a in read) or not hasattr(cond, "holds"):
            return True
        if cond.holds(env_old) != cond.holds(env_new):
            return True
    return False


def _fact_env(v: tuple) -> dict:
    first, last, count = v
    return {PARTITION_FACTS["first_ts"]: None if first is None else Instant(first),
            PARTITION_FACTS["last_ts"]: None if last is None else Instant(last),
            PARTITION_FACTS["count"]: count}


# ----------------------------------------------------------------------------------------
# Spark: the full build and the marks of the night's events
# ----------------------------------------------------------------------------------------
def build_state(spark, lake: lk.Lake, pattern: Pattern) -> pa.Table:
    """The state from the whole history (a full run), on Spark."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = read_spark(spark, lake, lake.events(pattern.source))
    xs = list(pattern.partition_attributes)
    newest = df.agg(F.max("ingested_at")).first()[0]
    ts_ns = F.unix_micros(F.col("ts")) * F.lit(1000)
    schema = df.select(*[col(a) for a in key_attributes(pattern)]).limit(0).toArrow().schema
    types = {a: schema.field(a).type for a in key_attributes(pattern)}
    rows = []
    have = reduce_and([col(a).isNotNull() for a in xs])
    facts = (df.where(have).groupBy(*[col(a) for a in xs])
             .agg(F.min(ts_ns).alias("first_ts"), F.max(ts_ns).alias("last_ts"),
                  F.count(F.lit(1)).alias("count")).toArrow())
    for r in facts.to_pylist():
        rows.append(_state_row(pattern, FACTS, xs, [r[a] for a in xs], first_ts=r["first_ts"],
                               last_ts=r["last_ts"], count=r["count"], watermark=newest))
    for n, h in enumerate(pattern.history):
        same = list(_same(pattern, n))
        fit = df.where(reduce_and([col(a).isNotNull() for a in same]))
        for p in h.where:
            fit = fit.where(property_column(p))
        order = [F.col("ts"), F.col("event_id")] if h.direction == "before" \
            else [F.col("ts").desc(), F.col("event_id").desc()]
        ranked = (fit.withColumn("__rank", F.row_number().over(
            Window.partitionBy(*[col(a) for a in same]).orderBy(*order)))
                  .where(F.col("__rank") <= depth(h))
                  .select(*[col(a) for a in same], ts_ns.alias("t"),
                          F.col("event_id").cast("string").alias("id"), "__rank").toArrow())
        grouped: dict[str, dict] = {}
        for r in sorted(ranked.to_pylist(), key=lambda r: r["__rank"]):
            s = [r[a] for a in same]
            k = partition_key(s)
            row = grouped.get(k)
            if row is None:
                row = grouped[k] = _state_row(pattern, f"h{n}", same, s, times=[], ids=[],
                                              watermark=newest)
            row["times"].append(r["t"])
            row["ids"].append(r["id"])
        rows.extend(grouped.values())
    return pa.Table.from_pylist(rows, state_schema(pattern, types))


def reduce_and(terms: list):
    from pyspark.sql import functions as F

    return reduce(lambda a, b: a & b, terms) if terms else F.lit(True)


def _frame(spark, t: pa.Table):
    """A small Arrow table as a Spark frame, its types kept (int64 with nulls too)."""
    return spark.createDataFrame(t)


def _nth(times: list, i: int):
    """The i-th (from 1) of a state's times, None when it has fewer."""
    return times[i - 1] if i >= 1 and len(times) >= i else None


def _thresholds(pattern: Pattern, state: pa.Table, n: int) -> pa.Table:
    """Condition n's two thresholds per partition of its ``same``: the ``at_least``-th and
    the (``at_most`` + 1)-th of its K times (null: fewer)."""
    h, same = pattern.history[n], list(_same(pattern, n))
    a, b = h.at_least or 0, h.at_most
    mine = state.filter(pc.equal(state.column("item"), f"h{n}")).select([*same, "times"])
    times = mine.column("times").to_pylist()
    return mine.select(same).append_column(
        f"__t_lo{n}", pa.array([_nth(t, a) for t in times], pa.int64())).append_column(
        f"__t_hi{n}", pa.array([None if b is None else _nth(t, b + 1) for t in times],
                               pa.int64()))


def mark_columns(spark, df, pattern: Pattern, state: pa.Table):
    """The night's events with their partition's facts (``STATE_FACTS``, ns) and each
    history condition's mark, from the state (module docstring): one broadcast join per
    set of key attributes (the facts and every condition counting in X share one)."""
    from pyspark.sql import functions as F

    xs = list(pattern.partition_attributes)
    ts_ns = F.unix_micros(F.col("ts")) * F.lit(1000)
    facts = state.filter(pc.equal(state.column("item"), FACTS)).select(
        [*xs, "first_ts", "last_ts", "count"]).rename_columns([*xs, *STATE_FACTS.values()])
    groups: dict[tuple, pa.Table] = {tuple(sorted(xs)): facts}
    for n in range(len(pattern.history)):
        key = tuple(sorted(_same(pattern, n)))
        t = _thresholds(pattern, state, n)
        groups[key] = t if key not in groups else groups[key].join(
            t, list(key), join_type="full outer")
    for key, t in groups.items():
        names = [c for c in t.column_names if c not in key]
        if not t.num_rows:
            df = df.select("*", *[F.lit(None).cast("long").alias(c) for c in names])
        elif not key:  # no X: the whole source is the partition
            df = df.crossJoin(F.broadcast(_frame(spark, t)))
        else:
            df = df.join(F.broadcast(_frame(spark, t)), on=list(key), how="left")
    for n, h in enumerate(pattern.history):
        same = list(_same(pattern, n))
        lo_name, hi_name = f"__t_lo{n}", f"__t_hi{n}"
        a, b = h.at_least or 0, h.at_most

        def in_range(t, h=h):
            if h.direction == "before":
                return (t + F.lit(h.by) <= ts_ns) if h.by else (t < ts_ns)
            return (t >= ts_ns + F.lit(h.by)) if h.by else (t > ts_ns)

        ok = reduce_and([col(s).isNotNull() for s in same])
        if a:
            ok = ok & F.col(lo_name).isNotNull() & in_range(F.col(lo_name))
        if b is not None:
            ok = ok & ~F.coalesce(in_range(F.col(hi_name)), F.lit(False))
        df = df.withColumn(history_attribute(n), F.coalesce(ok, F.lit(False))) \
            .drop(lo_name, hi_name)
    return df


def state_after(lake: lk.Lake, pattern: Pattern, since: datetime) -> bool:
    """Whether the pattern's state was written after ``since`` (the last successful run
    started): a run killed before writing it leaves an older one, which the next night
    does not trust (it rebuilds the state)."""
    dt = lake.snapshot(lake.partition_state(pattern.name))
    if dt is None:
        return False
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    last = dt.history(1)
    return bool(last) and datetime.fromtimestamp(last[0]["timestamp"] / 1000,
                                                 tz=timezone.utc) >= since


def stage_state(lake: lk.Lake, staging: str, state: pa.Table) -> None:
    stage_table(lake, staging, STAGED, state)


def publish_state(lake: lk.Lake, pattern: Pattern, staging: str) -> bool:
    """The staged state as the pattern's ``partition_state`` table (after its publish)."""
    return publish_table(lake, staging, STAGED, lake.partition_state(pattern.name))


