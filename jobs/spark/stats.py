"""``stats/<source>`` brought up to date after an ingest (``jobs.lake.stats`` has the
table, the dates to compute and the driver's engine): the dates to compute are computed on
the driver when they are small, else by Spark (``SparkStats``); both give the same rows
(tested)."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa

from jobs.lake import store as lk
from jobs.lake.stats import (
    DRIVER_CELLS,
    DRIVER_EVENTS,
    HLL_LG_K,
    QUANTILES,
    ROW_COLUMNS,
    SCHEMA,
    DriverStats,
    computed_dates,
    covered_attributes,
    latest_ingested,
    needed_attributes,
    numeric,
    per_file_date,
    set_covered_attributes,
    stale_dates,
    write_stats,
)
from jobs.progress import say
from jobs.spark.tables import read_spark


def update_stats(spark, lake: lk.Lake, source: str, patterns, columns: dict[str, str],
                 echo=say, engine: str = "auto") -> dict:
    """Bring ``stats/<source>`` up to date; returns {'dates': recomputed, 'rows': written}.
    ``engine``: ``driver`` (up to ``DRIVER_EVENTS`` events to compute, ``auto``'s choice) or
    ``spark``; both give the same rows (tested)."""
    events_path = lake.events(source)
    if not lake.exists(events_path):
        return {"dates": 0, "rows": 0}
    attrs, keys = needed_attributes(patterns)
    attrs = {a for a in attrs if a in columns}
    keys = {k for k in keys if k in columns}
    wanted = {"*"} | attrs | {"@" + k for k in keys}
    files = pa.table(lake.snapshot(events_path, required=True).get_add_actions(flatten=True))
    latest = latest_ingested(lake, events_path, files)
    done = computed_dates(lake, source, wanted)
    per_date = (per_file_date(files, files.column("num_records"), "sum") or {}) \
        if files.num_rows else {}
    if engine == "auto":
        engine = choose_engine(spark, lake, events_path, per_date, latest, done, wanted,
                               len(attrs | keys))
    rows = DriverStats(lake, events_path) if engine == "driver" else \
        SparkStats(spark, lake, events_path)
    if latest is None:  # a file without statistics: read the column
        latest = rows.latest()
    stale = stale_dates(latest, done, wanted)
    if not stale:
        return {"dates": 0, "rows": 0}
    echo(f"stats {source}: {len(stale)} date(s) to compute")
    table = rows.compute(stale, attrs, keys, columns, ",".join(sorted(wanted)), per_date)
    now = pa.array([datetime.now(timezone.utc)] * table.num_rows, SCHEMA.field("computed_at").type)
    table = table.append_column("computed_at", now).select(SCHEMA.names).cast(SCHEMA)
    path = lake.stats(source)
    before = lake.read_table(path)
    held = covered_attributes(before)
    if held is not None and not held <= wanted:  # the new dates lack some: lower it first
        set_covered_attributes(before, held & wanted)
    write_stats(lake, source, table, stale)
    set_covered_attributes(lake.read_table(path), wanted)  # every date has these now
    return {"dates": len(stale), "rows": table.num_rows}


def choose_engine(spark, lake: lk.Lake, path: str, per_date: dict[str, int],
                  latest: dict[str, int] | None, done: dict, wanted: set[str],
                  attributes: int) -> str:
    """``driver`` when the dates to compute hold at most ``DRIVER_EVENTS`` events, or
    at most ``DRIVER_CELLS`` values of the columns read (``per_date``: the Delta log's
    record counts: no data read); else ``spark``."""
    if spark is None:
        return "driver"
    if latest is None:
        return "driver" if lake.count_rows(path) <= DRIVER_EVENTS else "spark"
    if not per_date:
        return "driver"
    events = sum(int(per_date.get(d) or 0) for d in stale_dates(latest, done, wanted))
    return "driver" if events <= DRIVER_EVENTS or events * (2 + attributes) <= DRIVER_CELLS \
        else "spark"


class SparkStats:
    """The statistics computed by Spark (a source too large for the driver)."""

    def __init__(self, spark, lake: lk.Lake, path: str):
        from pyspark.sql import functions as F

        # partition discovery types the date
        self.events = read_spark(spark, lake, path).withColumn(
            "event_date", F.col("event_date").cast("string"))

    def latest(self) -> dict[str, int]:
        """Per event date, when its last event was ingested (µs)."""
        from pyspark.sql import functions as F

        return {r["event_date"]: r["ingested"] for r in self.events.groupBy("event_date").agg(
            F.unix_micros(F.max("ingested_at")).alias("ingested")).collect()}

    def compute(self, stale: list[str], attrs: set[str], keys: set[str],
                columns: dict[str, str], computed: str,
                per_date: dict[str, int] | None = None) -> pa.Table:
        """The rows of the ``stale`` dates (``per_date`` is the driver's: not needed)."""
        from pyspark.sql import functions as F

        # the stale dates' columns, cached: every aggregate below reads them once from memory
        df = (self.events.where(F.col("event_date").isin(stale))
              .select("event_date", "ts", *[F.col(f"`{c}`") for c in sorted(attrs | keys)])
              .cache())
        parts = [df.groupBy("event_date").agg(
            F.lit("*").alias("attribute"), F.lit(computed).alias("value"),
            F.count(F.lit(1)).alias("events"), F.lit(None).cast("long").alias("distinct"),
            F.lit(None).cast("array<double>").alias("quantiles"),
            F.lit(None).cast("binary").alias("sketch"),
            F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))]
        for a in sorted(attrs):
            c = F.col(f"`{a}`")
            if numeric(columns[a]):
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
                F.hll_sketch_agg(c.cast("string"), HLL_LG_K).alias("sketch"),
                F.lit(None).cast("timestamp").alias("first_ts"),
                F.lit(None).cast("timestamp").alias("last_ts")))
        rows = []
        try:
            for part in parts:
                rows.extend(r.asDict() for r in part.select(*ROW_COLUMNS).collect())
        finally:
            df.unpersist()
        return pa.Table.from_pylist(rows, schema=pa.schema([SCHEMA.field(n) for n in ROW_COLUMNS]))
