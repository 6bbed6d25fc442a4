"""``stats/<source>``: the lake's own statistics for choosing plans (docs/engine.md, plans).

A step after ingest computes, per source and ``event_date`` partition, one row per

* ``(attribute, value)`` of each text attribute that a pattern's properties read: the
  number of events with that value;
* numeric attribute: the count of values and 21 quantiles (0 %, 5 %, …, 100 %), enough for
  range selectivities;
* partition attribute X of a pattern (``attribute = '@' + X``): all events of the date, the
  distinct X values that date, and an HLL sketch of them (mergeable across dates, so the
  distinct partitions of any date range are known without rereading events);
* ``attribute = '*'``: all events of the date, with their first and last ``ts`` (its
  ``value`` lists the attributes computed for the date).

Incremental: only dates that are new, re-ingested since they were computed (late events),
or lack an attribute a pattern now needs are (re)computed, each date replaced in one
commit. ``jobs.core.estimates`` turns the table into a plan's statistics.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa

from jobs.lake import store as lk

QUANTILES = [i / 20 for i in range(21)]
SCHEMA = pa.schema([
    ("event_date", pa.string()), ("attribute", pa.string()), ("value", pa.string()),
    ("events", pa.int64()), ("distinct", pa.int64()), ("quantiles", pa.list_(pa.float64())),
    ("sketch", pa.binary()), ("first_ts", pa.timestamp("us", tz="UTC")),
    ("last_ts", pa.timestamp("us", tz="UTC")), ("computed_at", pa.timestamp("us", tz="UTC"))])


def needed_attributes(patterns) -> tuple[set[str], set[str]]:
    """(attributes the patterns' properties read, partition attributes X) of the given
    patterns (alternatives included)."""
    attrs, keys = set(), set()
    for p in patterns:
        keys |= set(p.partition_attributes)
        for alt in p.alternatives:
            keys |= set(alt.partition_attributes)
            for props in alt.properties.values():
                for prop in props:
                    attrs |= set(prop.attributes)
    return attrs, keys


def update_stats(spark, lake: lk.Lake, source: str, patterns, columns: dict[str, str],
                 echo=print) -> dict:
    """Bring ``stats/<source>`` up to date; returns {'dates': recomputed, 'rows': written}."""
    from pyspark.sql import functions as F

    events_path = lake.events(source)
    if not lake.exists(events_path):
        return {"dates": 0, "rows": 0}
    attrs, keys = needed_attributes(patterns)
    attrs = {a for a in attrs if a in columns}
    keys = {k for k in keys if k in columns}
    wanted = {"*"} | attrs | {"@" + k for k in keys}
    events = lake.read_spark(spark, events_path)  # partition discovery types the date
    events = events.withColumn("event_date", F.col("event_date").cast("string"))
    latest = {r["event_date"]: r["ingested"] for r in events.groupBy("event_date").agg(
        F.unix_micros(F.max("ingested_at")).alias("ingested")).collect()}
    done = computed_dates(lake, source)
    stale = sorted(d for d, ingested in latest.items()
                   if d not in done or not wanted <= done[d][0] or ingested > done[d][1])
    if not stale:
        return {"dates": 0, "rows": 0}
    echo(f"stats {source}: {len(stale)} date(s) to compute")
    # the stale dates' columns, cached: every aggregate below reads them once from memory
    df = (events.where(F.col("event_date").isin(stale))
          .select("event_date", "ts", *[F.col(f"`{c}`") for c in sorted(attrs | keys)])
          .cache())
    now = datetime.now(timezone.utc)
    parts = [df.groupBy("event_date").agg(
        F.lit("*").alias("attribute"), F.lit(",".join(sorted(wanted))).alias("value"),
        F.count(F.lit(1)).alias("events"), F.lit(None).cast("long").alias("distinct"),
        F.lit(None).cast("array<double>").alias("quantiles"),
        F.lit(None).cast("binary").alias("sketch"),
        F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))]
    for a in sorted(attrs):
        c = F.col(f"`{a}`")
        if columns[a] in ("number", "integer", "double"):
            agg = df.where(c.isNotNull()).groupBy("event_date").agg(
                F.lit(a).alias("attribute"), F.lit(None).cast("string").alias("value"),
                F.count(F.lit(1)).alias("events"), F.lit(None).cast("long").alias("distinct"),
                F.percentile_approx(c.cast("double"), QUANTILES, 1000).alias("quantiles"))
        else:
            agg = df.where(c.isNotNull()).groupBy("event_date", c.cast("string").alias("value")).agg(
                F.lit(a).alias("attribute"), F.count(F.lit(1)).alias("events"),
                F.lit(None).cast("long").alias("distinct"),
                F.lit(None).cast("array<double>").alias("quantiles"))
        parts.append(agg.withColumn("sketch", F.lit(None).cast("binary"))
                     .withColumn("first_ts", F.lit(None).cast("timestamp"))
                     .withColumn("last_ts", F.lit(None).cast("timestamp")))
    for k in sorted(keys):
        c = F.col(f"`{k}`")
        parts.append(df.groupBy("event_date").agg(
            F.lit("@" + k).alias("attribute"), F.lit(None).cast("string").alias("value"),
            F.count(F.lit(1)).alias("events"), F.countDistinct(c).alias("distinct"),
            F.lit(None).cast("array<double>").alias("quantiles"),
            F.hll_sketch_agg(c.cast("string")).alias("sketch"),
            F.lit(None).cast("timestamp").alias("first_ts"),
            F.lit(None).cast("timestamp").alias("last_ts")))
    names = [f.name for f in SCHEMA if f.name != "computed_at"]
    rows = []
    try:
        for part in parts:
            rows.extend(part.select(*names).collect())
    finally:
        df.unpersist()
    table = pa.Table.from_pylist(
        [{**r.asDict(), "computed_at": now} for r in rows], schema=SCHEMA)
    write_stats(lake, source, table, stale)
    return {"dates": len(stale), "rows": table.num_rows}


def computed_dates(lake: lk.Lake, source: str) -> dict[str, tuple[set[str], int]]:
    """Per date of ``stats/<source>``: (the attributes computed, when, in µs)."""
    done: dict[str, tuple] = {}
    current = lake.read_arrow(lake.stats(source), columns=["event_date", "attribute", "value",
                                                           "computed_at"])
    if current is None:
        return done
    micros = current.column("computed_at").cast(pa.int64()).to_pylist()
    for d, a, v, c in zip(current.column("event_date").to_pylist(),
                          current.column("attribute").to_pylist(),
                          current.column("value").to_pylist(), micros):
        if a == "*":
            done[d] = (set((v or "").split(",")), c)
    return done


def write_stats(lake: lk.Lake, source: str, table: pa.Table, dates: list[str]) -> None:
    """Replace the rows of ``dates`` in ``stats/<source>`` by ``table`` in one commit."""
    path = lake.stats(source)
    if lake.exists(path):
        listed = ", ".join("'" + d + "'" for d in dates)
        lake.write(path, table, mode="overwrite", predicate=f"event_date IN ({listed})",
                   partition_by=["event_date"])
    else:
        lake.write(path, table, mode="overwrite", partition_by=["event_date"])
