"""``match-job``: one pattern over the events of its source, on Spark.

Phase 1 (Spark): read ``events/<source>`` for the run's range — partition pruning on
``event_date`` and a ``ts`` range [low, high + τ] — apply the Theorem 1 filter as a Spark
predicate (pushed into the Parquet scan), repartition by the partition attributes X and
sort by (X, ts, event_id). Without X, or for a partition with more events than
``max_partition_events``, time is cut into slices that overlap by τ: an event is copied to
every slice whose start range it can complete, and each slice keeps only the matches that
start inside it, so the result is exact.

Phase 2 (executors, ``jobs.phase2``): the match-window matcher per group. Executors write
the match rows and per-group stats rows as Parquet into ``staging/<pattern>/<run_id>``; the
driver reads back only the stats rows (one per group), never the events or the matches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import reduce

from . import lake as lk
from .core.conditions import Property
from .core.engine import MATCHERS, MatchStats
from .core.events import format_ts
from .core.pattern import Pattern
from .phase2 import NOT_SLICED, SLICE, Phase2Spec, output_columns, run_partition


def col(name: str):
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def property_column(p: Property):
    """One property as a Spark predicate; null compares false, as in the matcher."""
    from pyspark.sql import functions as F

    left = col(p.attr)
    right = col(p.other_attr) if p.other_attr is not None else F.lit(p.value)
    return {"=": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[p.op]


def filter_column(pattern: Pattern):
    """Theorem 1: OR over the variables of the AND of their properties; None when some
    variable has no property (every event could fit it)."""
    terms = []
    for v in pattern.variables:
        props = pattern.properties[v.name]
        if not props:
            return None
        terms.append(reduce(lambda a, b: a & b, map(property_column, props)))
    return reduce(lambda a, b: a | b, terms)


@dataclass
class MatchJobResult:
    staging: str
    stats: dict


def event_date_filters(low: int | None, high: int | None, tau: int) -> list | None:
    """The ``event_date`` partitions that hold events with ts in [low, high + τ]."""
    filters = []
    if low is not None:
        filters.append(("event_date", ">=", format_ts(low)[:10]))
    if high is not None:
        filters.append(("event_date", "<=", format_ts(high + tau)[:10]))
    return filters or None


def _ts(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)


def run_match_job(spark, pattern: Pattern, pattern_text: str, lake: lk.Lake, run_id: str,
                  low: int | None, high: int | None, slice_length: int,
                  max_partition_events: int, max_matches_per_window: int,
                  force_slices: bool = False, sink: str = "parquet",
                  memory_budget: int = 2 * 1024**3, limits: str | None = None
                  ) -> MatchJobResult:
    """Match ``pattern`` for first events in [low, high) (None: unbounded); ``sink='noop'``
    runs phase 1 only (for measuring it)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    started = time.perf_counter()
    path = lake.events(pattern.source)
    tau = pattern.tau
    filters = event_date_filters(low, high, tau)
    df = lk.read_spark(spark, path, filters)
    if low is not None:
        df = df.where(F.col("ts") >= F.lit(_ts(low)))
    if high is not None:
        df = df.where(F.col("ts") <= F.lit(_ts(high + tau)))
    keep = filter_column(pattern)
    keys = list(pattern.partition_attributes)
    scanned = lk.count_rows(path, filters)
    stats = {"events": scanned}
    if keep is not None:
        df = df.where(keep)
    for k in keys:
        df = df.where(col(k).isNotNull())
    needed = ["event_id", "ts", *sorted(pattern.attributes | set(keys))]
    df = df.select(*[col(c) for c in dict.fromkeys(needed)])

    slicing = None
    if not keys or force_slices:
        slicing = "all"
    elif max_partition_events and scanned > max_partition_events:
        big = (df.groupBy(*[col(k) for k in keys]).count()
               .where(F.col("count") > max_partition_events).drop("count"))
        big_keys = big.limit(10_000).collect()
        if big_keys:
            slicing = "big"
            flag = spark.createDataFrame(big_keys, big.schema).withColumn("__big", F.lit(True))
            df = df.join(F.broadcast(flag), on=keys, how="left")
    origin = 0
    if slicing:
        L = slice_length
        ts_ns = F.unix_micros(F.col("ts")) * F.lit(1000)
        first = F.floor((ts_ns - F.lit(tau) - F.lit(origin)) / F.lit(L)).cast("long")
        own = F.floor((ts_ns - F.lit(origin)) / F.lit(L)).cast("long")
        slices = F.sequence(first, own)
        if slicing == "big":  # only the large partitions; the others are one group each
            slices = F.when(F.col("__big"), slices).otherwise(
                F.array(F.lit(NOT_SLICED).cast("long")))
        df = df.withColumn(SLICE, F.explode(slices)).drop("__big")
    group = keys + ([SLICE] if slicing else [])
    n_parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    if group:
        df = df.repartition(n_parts, *[col(c) for c in group])
    else:  # pragma: no cover - without X every event is sliced
        df = df.repartition(1)
    df = df.sortWithinPartitions(*[col(c) for c in group], "ts", "event_id")
    spec = Phase2Spec(pattern_text=pattern_text, keys=tuple(keys), low=low, high=high,
                      slice_origin=origin, slice_length=slice_length if slicing else None,
                      max_matches_per_window=max_matches_per_window,
                      memory_budget=memory_budget,
                      **({"limits": limits} if limits else {}))
    key_fields = [df.schema[k] for k in keys]
    schema = T.StructType([
        T.StructField("kind", T.StringType()), T.StructField("match_id", T.StringType()),
        *[T.StructField(f.name, f.dataType) for f in key_fields],
        T.StructField("start_ts", T.TimestampType()), T.StructField("end_ts", T.TimestampType()),
        T.StructField("n_events", T.LongType()), T.StructField("bindings", T.StringType()),
        T.StructField("stats", T.StringType())])
    assert [f.name for f in schema] == output_columns(tuple(keys))
    staging = lake.staging(pattern.name, run_id)
    if sink == "noop":
        df.write.format("noop").mode("overwrite").save()
        stats["seconds"] = time.perf_counter() - started
        return MatchJobResult(staging, stats)
    out = df.mapInPandas(lambda it: run_partition(spec, it), schema)
    out.write.mode("overwrite").parquet(staging)
    # the per-group stats rows are summed in Spark: the driver gets one row back
    sums = ("events_after_filter", "windows", "candidate_windows", "matcher_calls", "matches",
            "work")
    schema_json = ", ".join(f"{f} long" for f in MatchStats.numeric_fields() if f != "seconds")
    schema_json += ", seconds double"
    parsed = (spark.read.parquet(staging).where(F.col("kind") == "stats")
              .select(F.from_json("stats", schema_json).alias("s"), *[col(k) for k in keys]))
    aggs = [F.sum(F.coalesce(F.col(f"s.{f}"), F.lit(0))).alias(f) for f in sums]
    aggs += [F.max(F.coalesce(F.col(f"s.{f}"), F.lit(0))).alias(f) for f in MatchStats.MAXIMA]
    aggs += [F.sum("s.seconds").alias("phase2_seconds"), F.count(F.lit(1)).alias("groups"),
             F.sum(F.coalesce(F.col("s.partitions"), F.lit(0))).alias("whole"),
             (F.countDistinct(F.when(F.col("s.partitions") == 0, F.struct(*[col(k) for k in keys])))
              if keys else F.lit(1)).alias("sliced")]
    total = parsed.agg(*aggs).first()
    for f in sums + MatchStats.MAXIMA:
        stats[f] = int(total[f] or 0)
    # whole partitions are counted by the engine, sliced ones once by their key
    stats["partitions"] = (int(total["whole"] or 0) + int(total["sliced"] or 0)) \
        if total["groups"] else 0
    stats["groups"] = int(total["groups"] or 0)
    stats["work_item"] = MATCHERS[pattern.matcher].work_item
    stats["phase2_seconds"] = round(float(total["phase2_seconds"] or 0.0), 3)
    stats["sliced"] = slicing or "no"
    stats["seconds"] = round(time.perf_counter() - started, 3)
    return MatchJobResult(staging, stats)


def write_text(uri: str, text: str) -> None:
    """Write a small file next to the staging data (local path or object store)."""
    import pyarrow.fs as pafs

    fs, path = pafs.FileSystem.from_uri(uri if "://" in uri else "file://" + uri)
    with fs.open_output_stream(path) as f:
        f.write(text.encode())


def read_text(uri: str) -> str:
    import pyarrow.fs as pafs

    fs, path = pafs.FileSystem.from_uri(uri if "://" in uri else "file://" + uri)
    with fs.open_input_stream(path) as f:
        return f.read().decode()
