"""``first_ever: [a]`` across nights (docs/semantics.md, "First ever"): the state that
says, per partition, which event is a's first, so that no night reads the whole history.

The table ``first_ever/<pattern>`` holds one row per variable and partition: the first
event (``ts``, ``event_id``) fitting the variable's properties, the values of X, and the
``watermark``: the newest ``ingested_at`` the state has seen. A full run (a new or
changed pattern) builds it on Spark from the whole history it reads anyway. A nightly run
reads only the events ingested after the watermark (the Delta log's ``ingested_at``
statistics pick the files) and the retractions logged since:

* an arriving event earlier than its partition's first *replaces* it (a late event); a
  partition's first event that arrives late is *new*; either way the night re-matches
  from τ before it, so the match of the old first is replaced;
* a retracted first is *promoted*: that partition's next event fitting the variable is
  read (its partition only) and becomes the first; the retraction already re-matches
  from τ before the retracted event.

Phase 1 marks each event of the night's range with ``first_ever_attribute(a)`` (is it the
state's first?), and phase 2 runs the pattern's ``marked()`` form. The run log counts the
replaced and promoted firsts. The state is written after the publish; a run killed in
between leaves the old state and its watermark, so the next run reads the same events
again and comes to the same state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.engine.columns import from_arrow, processing_order
from jobs.core.engine.marks import first_rows
from jobs.core.language.conditions.expressions import stored
from jobs.core.language.events import parse_ts
from jobs.core.language.pattern import Pattern, first_ever_attribute
from jobs.lake import store as lk
from jobs.lake.extent import files_ingested_after
from jobs.pipeline.match.horizons import partition_key
from jobs.pipeline.match.staged import publish_table, stage_table
from jobs.spark.predicates import col, property_column
from jobs.spark.tables import read_spark

TS = pa.timestamp("us", tz="UTC")
FIRST_ID = "__first_ever_id"  # the state's event id, joined onto the night's events
STAGED = "_first_ever.parquet"  # the night's new state, beside its staged matches


@dataclass
class FirstEverPlan:
    """What a night knows of its pattern's firsts before matching: the ``state`` (None: a
    full run builds it on Spark), the earliest first event to re-match from (``reopen``,
    ns; None: nothing), and the counts for the run log."""

    state: pa.Table | None
    reopen: int | None = None
    new: int = 0
    replaced: int = 0
    promoted: int = 0

    def counts(self) -> dict:
        return {"first_ever_new": self.new, "first_ever_replaced": self.replaced,
                "first_ever_promoted": self.promoted}


def state_schema(pattern: Pattern, key_types: dict[str, pa.DataType]) -> pa.Schema:
    return pa.schema([("variable", pa.string()), ("key", pa.string()),
                      *[(k, key_types[k]) for k in pattern.partition_attributes],
                      ("ts", TS), ("event_id", pa.string()), ("pattern_version", pa.string()),
                      ("watermark", TS)])


def _needed(pattern: Pattern) -> list[str]:
    """The columns the state's reads take (the pattern compiles on its attributes)."""
    return list(dict.fromkeys(["event_id", "ts", "ingested_at", *sorted(
        {stored(a) for a in pattern.attributes} | set(pattern.partition_attributes))]))


def firsts_of(pattern: Pattern, t: pa.Table) -> dict[tuple[str, str], dict]:
    """Per (variable, partition key), the first row of ``t`` (events) that fits the
    variable's properties: {ts (ns), event_id, X values}."""
    if t.num_rows == 0:
        return {}
    t = t.take(pa.array(processing_order(t)))
    cols = from_arrow(t, sorted(pattern.attributes), ordered=True)
    xs = [t.column(k).to_pylist() for k in pattern.partition_attributes]
    ids = t.column("event_id").to_pylist()
    out: dict[tuple[str, str], dict] = {}
    for v in pattern.first_ever:
        for r in first_rows(pattern, cols, v).tolist():  # events without X are in none
            values = [x[r] for x in xs]
            out[(v, partition_key(values))] = {"ts": int(cols.ts[r]), "event_id": ids[r], "x": values}
    return out


def plan_first_ever(lake: lk.Lake, pattern: Pattern, full: bool) -> FirstEverPlan:
    """The night's plan: the stored state brought up to date with the events ingested and
    retracted since its watermark (module docstring); a full run, a new pattern version
    or no state: build it on Spark (``state`` None)."""
    path = lake.first_ever(pattern.name)
    old = None if full or not lake.exists(path) else lake.read_arrow(path)
    if old is None or old.num_rows == 0 or set(
            old.column("pattern_version").to_pylist()) != {pattern.version}:
        return FirstEverPlan(None)
    schema = old.schema
    rows = {(r["variable"], r["key"]): r for r in old.to_pylist()}
    since = watermark = max(r["watermark"] for r in rows.values())
    plan = FirstEverPlan(None)
    events = lake.events(pattern.source)
    files = files_ingested_after(lake, pattern.source, watermark)
    arrived = lake.read_arrow(events, columns=_needed(pattern),
                              filter=pc.field("ingested_at") > pa.scalar(watermark, TS),
                              only=files) if files or files is None else None
    if arrived is not None and arrived.num_rows:
        newest = pc.max(arrived.column("ingested_at")).as_py()
        for k, f in firsts_of(pattern, arrived).items():
            now = rows.get(k)
            if now is not None and (parse_ts(now["ts"]), now["event_id"]) <= (f["ts"], f["event_id"]):
                continue
            if now is None:
                plan.new += 1
            else:
                plan.replaced += 1
            rows[k] = _row(pattern, k, f, newest)
            low = f["ts"] - pattern.tau
            plan.reopen = low if plan.reopen is None else min(plan.reopen, low)
        watermark = max(watermark, newest)
    for k in _retracted_firsts(lake, pattern, rows, since):
        plan.promoted += 1
        del rows[k]
        found = _first_in_partition(lake, pattern, k)
        if found is not None:
            rows[k] = _row(pattern, k, found, watermark)
    for r in rows.values():
        r["watermark"] = watermark
    plan.state = pa.Table.from_pylist(list(rows.values()), schema)
    return plan


def _row(pattern: Pattern, k: tuple[str, str], f: dict, watermark) -> dict:
    return {"variable": k[0], "key": k[1],
            **dict(zip(pattern.partition_attributes, f["x"])),
            "ts": datetime.fromtimestamp(f["ts"] / 1e9, tz=timezone.utc),
            "event_id": f["event_id"], "pattern_version": pattern.version,
            "watermark": watermark}


def _retracted_firsts(lake: lk.Lake, pattern: Pattern, rows: dict, since: datetime
                      ) -> list[tuple[str, str]]:
    """The state's firsts that a retraction logged after ``since`` removed."""
    t = lake.read_arrow(lake.retractions())
    if t is None:
        return []
    spans = [(parse_ts(r["ts_min"]), parse_ts(r["ts_max"])) for r in t.to_pylist()
             if r["source"] == pattern.source and r["retracted_at"] > since]
    if not spans:
        return []
    suspects = {k: r for k, r in rows.items()
                if any(lo <= parse_ts(r["ts"]) <= hi for lo, hi in spans)}
    if not suspects:
        return []
    ids = sorted({r["event_id"] for r in suspects.values()})
    days = sorted({str(r["ts"])[:10] for r in suspects.values()})
    there = lake.read_arrow(lake.events(pattern.source), columns=["event_id"],
                            filter=pc.field("event_id").isin(pa.array(ids, pa.string())),
                            partition_filters=[("event_date", "in", days)])
    kept = set(there.column("event_id").to_pylist()) if there is not None else set()
    return [k for k, r in suspects.items() if r["event_id"] not in kept]


def _first_in_partition(lake: lk.Lake, pattern: Pattern, k: tuple[str, str]) -> dict | None:
    """The first event of one partition that fits the variable (after a retraction)."""
    values = json.loads(k[1])
    flt = None
    for a, v in zip(pattern.partition_attributes, values):
        one = pc.field(a) == v
        flt = one if flt is None else flt & one
    t = lake.read_arrow(lake.events(pattern.source), columns=_needed(pattern), filter=flt)
    if t is None:
        return None
    return firsts_of(pattern, t).get(k)


# ----------------------------------------------------------------------------------------
# Spark: the full build and the marks of the night's events
# ----------------------------------------------------------------------------------------
def build_state(spark, lake: lk.Lake, pattern: Pattern) -> pa.Table:
    """The state from the whole history (a full run), on Spark."""
    from pyspark.sql import functions as F

    df = read_spark(spark, lake, lake.events(pattern.source))
    keys = list(pattern.partition_attributes)
    newest = df.agg(F.max("ingested_at")).first()[0]
    parts = []
    for v in pattern.first_ever:
        fit = df
        for p in pattern.properties[v]:
            fit = fit.where(property_column(p))
        for k in keys:
            fit = fit.where(col(k).isNotNull())
        first = (fit.groupBy(*[col(k) for k in keys])
                 .agg(F.min(F.struct("ts", "event_id")).alias("f"))
                 .select(*[col(k) for k in keys], F.col("f.ts").alias("ts"),
                         F.col("f.event_id").alias("event_id")))
        t = first.toArrow()
        xs = [t.column(k).to_pylist() for k in keys]
        ts, ids = t.column("ts").to_pylist(), t.column("event_id").to_pylist()
        for r in range(t.num_rows):
            values = [x[r] for x in xs]
            parts.append({"variable": v, "key": partition_key(values), **dict(zip(keys, values)),
                          "ts": ts[r], "event_id": ids[r], "pattern_version": pattern.version,
                          "watermark": newest})
    types = {k: df.select(col(k)).limit(0).toArrow().schema.field(k).type for k in keys}
    return pa.Table.from_pylist(parts, state_schema(pattern, types))


def mark_events(spark, df, pattern: Pattern, state: pa.Table):
    """The night's events with each ``first_ever`` variable's mark column."""
    from pyspark.sql import functions as F

    keys = list(pattern.partition_attributes)
    for v in pattern.first_ever:
        mine = state.filter(pc.equal(state.column("variable"), v)).select(
            [*keys, "event_id"]).rename_columns([*keys, FIRST_ID])
        firsts = F.broadcast(spark.createDataFrame(mine.to_pandas()))
        df = (df.join(firsts, on=keys, how="left") if keys else df.crossJoin(firsts))
        df = df.withColumn(first_ever_attribute(v),
                           F.coalesce(F.col("event_id") == F.col(FIRST_ID), F.lit(False))
                           ).drop(FIRST_ID)
    return df


def stage_state(lake: lk.Lake, staging: str, state: pa.Table) -> None:
    stage_table(lake, staging, STAGED, state)


def publish_state(lake: lk.Lake, pattern: Pattern, staging: str) -> bool:
    """The staged state as the pattern's ``first_ever`` table (after its publish)."""
    return publish_table(lake, staging, STAGED, lake.first_ever(pattern.name))
