"""Quality gates with Great Expectations (GX 1.x), between match and publish.

Suites live as GX JSON files in ``expectations/``. What depends on a source or a pattern
is derived, never written by hand per pattern:

* events: the checks of ``expectations/events.json`` plus, per column of the source schema
  (``conf/sources.yaml``), its type: the Spark type name on a Spark frame, the pandas one
  on a batch small enough for the driver (``DRIVER_ROWS``);
* matches: the checks of ``expectations/matches.json`` on a frame that joins every staged
  match with the events it binds (span, set order, equal partition values, distinct and
  existing events, start/end = first/last bound event), plus, from the pattern file, each
  variable's count (a singleton exactly once, a group within its bounds), the fewest
  events of a match, the linked negations and τ; a disjunction's rows against the
  alternative that matched.

A failing suite stops publishing; the message names the failed expectations, and the Data
Docs HTML is written next to the lake (``<lake>/gx/uncommitted/data_docs/local_site``).
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from functools import reduce

from jobs.config import Source
from jobs.config.suites import load_suite
from jobs.core.errors import UserError
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.lake import store as lk
from jobs.landing.typing import events_schema, typed_schema
from jobs.pipeline.validate.check_frames import (
    DriverFrames,
    StagedMatches,
    checked_negations,
    counted_measures,
    has_counted_measures,
    prefix,
    required,
)
from jobs.pipeline.validate.gx import (
    Outcome,
    build_docs,
    context,
    run_suite,
    validated,
)
from jobs.spark.predicates import col, event_date_filters, property_column
from jobs.spark.tables import read_parquet_spark, read_spark
from jobs.status import new_run_id

SPARK_TYPES = {"string": "StringType", "integer": "LongType", "double": "DoubleType",
               "number": "DoubleType", "timestamp": "TimestampType"}
# a night's check frames (or one events batch) up to this many rows in all are built on the
# driver (DuckDB, Arrow) and checked with GX's pandas engine; larger ones stay on Spark
DRIVER_ROWS = 1_000_000
# the same types as GX's pandas engine names them, on a frame from ``driver_frame``
PANDAS_TYPES = {"string": "str", "integer": "int64", "double": "float64", "number": "float64",
                "timestamp": "Timestamp"}


def events_expectations(source: Source, types: dict[str, str] = SPARK_TYPES) -> list[dict]:
    """The events suite of ``source``; ``types``: the engine's type names."""
    suite = load_suite("events")["expectations"]
    for name, kind in source.columns.items():
        column = "ts" if name == source.time_column else name
        suite.append({"type": "expect_column_values_to_be_of_type",
                      "kwargs": {"column": column, "type_": types[kind]}})
    return suite


def driver_frame(table):
    """An Arrow batch as a pandas frame whose dtypes keep the schema's types: nullable
    integers and strings (a null does not turn an integer column into floats), times in
    UTC."""
    import pandas as pd
    import pyarrow as pa

    nullable = {pa.int64(): pd.Int64Dtype(), pa.string(): pd.StringDtype(),
                pa.large_string(): pd.StringDtype()}
    return table.to_pandas(types_mapper=nullable.get)


def matches_expectations(pattern: Pattern | Disjunction) -> list[dict]:
    suite = load_suite("matches")["expectations"]
    if pattern.kind == "window":  # one first and one last event each
        return suite + [{"type": "expect_column_values_to_be_in_set",
                         "kwargs": {"column": f"n_{v}", "value_set": [1]}}
                        for v in ("first", "last")]
    if isinstance(pattern, Disjunction):
        suite.append({"type": "expect_column_values_to_be_in_set", "kwargs": {
            "column": "alternative", "value_set": list(range(1, len(pattern.alternatives) + 1))}})
    for alt in pattern.alternatives:
        pre = prefix(alt)
        for v in alt.variables:  # a singleton once, a group within its Kleene bounds
            kwargs = {"column": f"{pre}n_{v.name}", "min_value": v.min}
            if v.max is not None:
                kwargs["max_value"] = v.max
            suite.append({"type": "expect_column_values_to_be_between", "kwargs": kwargs})
        suite.append({"type": "expect_column_values_to_be_between",
                      "kwargs": {"column": f"{pre}n_events", "min_value": alt.min_events}})
        for n in checked_negations(alt):
            suite.append({"type": "expect_column_values_to_be_in_set",
                          "kwargs": {"column": f"{pre}no_{n.var.name}_ok", "value_set": [True]}})
        for name, v in counted_measures(alt):  # count(v) within v's Kleene bounds
            kwargs = {"column": f"{pre}m_{name}", "min_value": v.min}
            if v.max is not None:
                kwargs["max_value"] = v.max
            suite.append({"type": "expect_column_values_to_be_between", "kwargs": kwargs})
    return suite


# -- the frame the match suite checks ------------------------------------------------------
def match_check_frame(spark, lake: lk.Lake, staging: str, pattern: Pattern | Disjunction,
                      low: int | None, high: int | None, events=None):
    """One row per staged match with the columns the match suite checks; a disjunction's
    rows are checked against the alternative that matched. ``events``: the source's
    events as ``check_events`` gives them, when several frames share one read."""
    from pyspark.sql import functions as F


    disjunctive = isinstance(pattern, Disjunction)
    counted = has_counted_measures(pattern)
    staged = (read_parquet_spark(spark, lake, staging).where(F.col("kind") == "match")
              .select("match_id", *(["alternative"] if disjunctive else []), "start_ts",
                      "end_ts", "n_events", *(["values"] if counted else []),
                      F.from_json("bindings", "map<string,array<string>>").alias("b")))
    if events is None:
        events = check_events(spark, lake, [pattern], event_date_filters(low, high, pattern.tau))
    if pattern.kind == "window":
        return _window_frame(staged, events, pattern)
    if not disjunctive:
        return _alternative_frame(spark, lake, staged, events, pattern, low, high)
    frames = [_alternative_frame(spark, lake, staged.where(F.col("alternative") == alt.alternative),
                                 events, alt, low, high)
              for alt in pattern.alternatives]
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def check_keys(pattern: Pattern | Disjunction) -> set[str]:
    return {*pattern.partition_attributes,  # a window pattern has no alternatives
            *(k for alt in pattern.alternatives for k in alt.partition_attributes)}


def check_events(spark, lake: lk.Lake, patterns: list, filters):
    """The events of the patterns' source that their check frames join the bound ids
    with: id, time and every partition attribute of any of them (frames that share this
    frame share its scan and shuffle in one Spark job)."""
    from pyspark.sql import functions as F

    keys = sorted(set().union(*(check_keys(p) for p in patterns)))
    return read_spark(spark, lake, lake.events(patterns[0].source), filters).select(
        "event_id", F.col("ts").alias("ets"), *[col(k) for k in keys])


def _alternative_frame(spark, lake: lk.Lake, staged, events, pattern: Pattern,
                       low: int | None, high: int | None):
    """The checked frame of the matches of one conjunctive pattern."""
    from pyspark.sql import functions as F


    pre = prefix(pattern)
    bound = (staged.select("match_id", F.explode("b").alias("var", "ids"))
             .select("match_id", "var", F.explode("ids").alias("event_id")))
    keys = list(pattern.partition_attributes)
    joined = bound.join(events, on="event_id", how="left")
    per_var = joined.groupBy("match_id", "var").agg(
        F.count(F.lit(1)).alias("n"), F.min("ets").alias("lo"), F.max("ets").alias("hi"))
    aggs = [F.count(F.lit(1)).alias("bound"), F.count("ets").alias("found"),
            F.countDistinct("event_id").alias("distinct"),
            F.min("ets").alias("first_ts"), F.max("ets").alias("last_ts")]
    for k in keys:
        aggs += [F.countDistinct(col(k)).alias(f"dk_{k}"), F.count(col(k)).alias(f"nk_{k}"),
                 F.first(col(k), ignorenulls=True).alias(f"key_{k}")]
    per_match = joined.groupBy("match_id").agg(*aggs)
    pivot = per_var.groupBy("match_id").pivot("var", [v.name for v in pattern.variables]).agg(
        F.first("n").alias("n"), F.first("lo").alias("lo"), F.first("hi").alias("hi"))
    df = staged.drop("b").join(per_match, "match_id", "left").join(pivot, "match_id", "left")
    order_terms = []
    for a, b in zip(pattern.sets, pattern.sets[1:]):
        last_a = F.greatest(*[F.col(f"{v.name}_hi") for v in a]) if len(a) > 1 else F.col(f"{a[0].name}_hi")
        first_b = F.least(*[F.col(f"{v.name}_lo") for v in b]) if len(b) > 1 else F.col(f"{b[0].name}_lo")
        # a set that may be absent (optional steps) leaves nothing to compare
        order_terms.append(F.coalesce(last_a < first_b, F.lit(not required(pattern, a, b))))
    part_terms = [(F.col(f"dk_{k}") == 1) & (F.col(f"nk_{k}") == F.col("bound")) for k in keys]
    true = F.lit(True)
    negation_cols = []
    checked = checked_negations(pattern)
    if checked:  # the witnesses may lie up to τ before the run's first start
        wit_low = None if low is None else low - pattern.tau
        source = read_spark(spark, lake, lake.events(pattern.source),
                                 event_date_filters(wit_low, high, pattern.tau))
    for n in checked:
        name = n.var.name
        tau = F.expr(f"INTERVAL {pattern.tau // 1000} MICROSECONDS")
        if n.before is None:
            lo, hi, lo_in, hi_in = F.col("end_ts") - tau, F.col("start_ts"), True, False
        else:
            before = pattern.sets[n.before]
            lo = F.greatest(*[F.col(f"{v.name}_hi") for v in before]) if len(before) > 1 \
                else F.col(f"{before[0].name}_hi")
            lo_in = False
            if n.after is None:
                hi, hi_in = F.col("start_ts") + tau, True
            else:
                after = pattern.sets[n.after]
                hi = F.least(*[F.col(f"{v.name}_lo") for v in after]) if len(after) > 1 \
                    else F.col(f"{after[0].name}_lo")
                hi_in = False
        props = [property_column(p) for p in pattern.properties[name]]
        cand = source
        if props:
            cand = cand.where(reduce(lambda x, y: x & y, props))
        cand = cand.select(F.col("ts").alias("wts"), *[col(k).alias(f"key_{k}") for k in keys])
        win = df.select("match_id", "start_ts", "end_ts", *[f"key_{k}" for k in keys],
                        lo.alias("nlo"), hi.alias("nhi"))
        inside = ((F.col("wts") >= F.col("nlo")) if lo_in else (F.col("wts") > F.col("nlo"))) \
            & ((F.col("wts") <= F.col("nhi")) if hi_in else (F.col("wts") < F.col("nhi")))
        hits = (win.join(cand, on=[f"key_{k}" for k in keys]).where(inside)
                .groupBy("match_id").count().where(F.col("count") >= n.var.min)  # not n{k,}
                .select("match_id").withColumn(f"hit_{name}", F.lit(True)))
        df = df.join(hits, "match_id", "left")
        negation_cols.append(F.col(f"hit_{name}").isNull().alias(f"{pre}no_{name}_ok"))
    return df.select(
        "match_id", *(["alternative"] if pre else []), *_bound_checks(),
        (reduce(lambda x, y: x & y, order_terms) if order_terms else true).alias("set_order_ok"),
        (F.coalesce(reduce(lambda x, y: x & y, part_terms), F.lit(False)) if part_terms
         else true).alias("partition_ok"),
        *[F.coalesce(F.col(f"{v.name}_n"), F.lit(0)).alias(f"{pre}n_{v.name}")
          for v in pattern.variables],
        *([F.col("n_events").alias(f"{pre}n_events")] if pre else []),
        *[F.get_json_object("values", f"$.{name}").cast("long").alias(f"{pre}m_{name}")
          for name, _ in counted_measures(pattern)],
        *negation_cols,
    )


def _bound_checks() -> list:
    """The checked columns every match frame has, from its per-match aggregates (bound,
    found, distinct, first_ts, last_ts): times, span, existing and distinct events."""
    from pyspark.sql import functions as F

    return [
        "start_ts", "end_ts", "n_events",
        (F.unix_micros("last_ts") - F.unix_micros("first_ts")).cast("double").__truediv__(1e6)
        .alias("span_seconds"),
        F.coalesce((F.col("start_ts") == F.col("first_ts")) & (F.col("end_ts") == F.col("last_ts"))
                   & (F.col("n_events") == F.col("bound")), F.lit(False)).alias("times_ok"),
        F.coalesce(F.col("found") == F.col("bound"), F.lit(False)).alias("events_found_ok"),
        F.coalesce(F.col("distinct") == F.col("bound"), F.lit(False)).alias("distinct_events_ok")]


def _window_frame(staged, events, pattern):
    """The checked frame of a window pattern's rows: the bound events exist, are distinct
    and in processing order (first, buffer, last), start/end are the first and last
    event's times, and, with partition attributes, all share the first event's values."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F


    keys = list(pattern.partition_attributes)
    rank = {"first": 0, "buffer": 1, "last": 2}
    role = F.create_map(*[x for k, v in rank.items() for x in (F.lit(k), F.lit(v))])
    bound = (staged.select("match_id", F.explode("b").alias("var", "ids"))
             .select("match_id", "var", F.posexplode("ids").alias("pos", "event_id")))
    joined = bound.join(events, on="event_id", how="left")
    order = Window.partitionBy("match_id").orderBy(role[F.col("var")], "pos")
    joined = joined.withColumn("prev_ts", F.lag("ets").over(order)).withColumn(
        "prev_id", F.lag("event_id").over(order))
    in_order = F.when(F.col("prev_ts").isNull(), True).otherwise(
        (F.col("prev_ts") < F.col("ets")) | ((F.col("prev_ts") == F.col("ets"))
                                              & (F.col("prev_id") < F.col("event_id"))))
    aggs = [F.count(F.lit(1)).alias("bound"), F.count("ets").alias("found"),
            F.countDistinct("event_id").alias("distinct"),
            F.min(F.when(F.col("var") == "first", F.col("ets"))).alias("first_ts"),
            F.max(F.when(F.col("var") == "last", F.col("ets"))).alias("last_ts"),
            F.min(in_order.cast("int")).alias("ordered"),
            *[F.sum((F.col("var") == v).cast("int")).alias(f"n_{v}") for v in ("first", "last")]]
    for k in keys:
        aggs += [F.countDistinct(col(k)).alias(f"dk_{k}"), F.count(col(k)).alias(f"nk_{k}")]
    per_match = joined.groupBy("match_id").agg(*aggs)
    df = staged.drop("b").join(per_match, "match_id", "left")
    part = [(F.col(f"dk_{k}") == 1) & (F.col(f"nk_{k}") == F.col("bound")) for k in keys]
    return df.select(
        "match_id", *_bound_checks(),
        F.coalesce(F.col("ordered") == 1, F.lit(False)).alias("set_order_ok"),
        (F.coalesce(reduce(lambda x, y: x & y, part), F.lit(False)) if part else F.lit(True))
        .alias("partition_ok"),
        F.coalesce("n_first", F.lit(0)).alias("n_first"),
        F.coalesce("n_last", F.lit(0)).alias("n_last"))


def warm_up(lake: lk.Lake, spark=None, source: Source | None = None,
            ts_range=None, after=None) -> threading.Thread:
    """GX loaded and the lake's context made in a background thread (seconds of imports
    and file reads): the ingest starts it as soon as it sees a new file, while the JVM
    starts and the executors type the files; the events suite waits for it (``join``)
    before it validates. With ``spark`` and a ``source`` (a batch too large for the
    driver, ``DRIVER_ROWS``), the thread also runs the source's events suite once on Spark
    over a Parquet file of one row, stored nowhere: the batch's suite then finds GX's
    Spark engine and Spark's query code ready (seconds on a fresh session). ``after``:
    called first in the thread (waits for what GX's imports should not slow down)."""
    def load() -> None:
        try:
            if after is not None:
                after()
            context(lake)
            from great_expectations.validator.v1_validator import Validator  # noqa: F401
            if spark is not None and source is not None:
                _warm_spark_suite(spark, lake, source, ts_range)
        except Exception:  # noqa: BLE001, S110 - the suite itself reports any error
            pass

    thread = threading.Thread(target=load, name="gx-warm-up", daemon=True)
    thread.start()
    return thread


def _warm_spark_suite(spark, lake: lk.Lake, source: Source, ts_range) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = typed_schema(source)  # a staged part's columns: the batch's suite reads them
    folder = lk.join(lake.staging("_warm"), new_run_id())
    fs, where = lake.filesystem(folder)
    try:
        fs.create_dir(where, recursive=True)
        one = pa.table([pa.nulls(1, f.type) for f in schema], schema=schema.remove_metadata())
        pq.write_table(one, f"{where}/0.parquet", filesystem=fs)
        df, keyed = _suite_frames(read_parquet_spark(spark, lake, folder), source)
        validated(lake, f"events_{source.name}", events_expectations(source),
                  df if keyed is None else keyed, _range_parameters(ts_range), scan=True,
                  result_format="BOOLEAN_ONLY")
    finally:
        lake.remove(folder)


def validate_events(spark, lake: lk.Lake, source: Source, ts_range,
                    ingest_run: str | None = None) -> Outcome:
    """The events suite on one committed ingest batch of a source (all events if no run is
    given); ``ts_range``: the accepted timestamps (``ingest.TimeRange``)."""
    from pyspark.sql import functions as F

    df = read_spark(spark, lake, lake.events(source.name))
    if ingest_run is not None:
        df = df.where(F.col("ingest_run") == ingest_run)
    return _events_suite(lake, source, df, ts_range)


def validate_events_frame(spark, lake: lk.Lake, source: Source, events, ts_range,
                          docs: bool = True) -> Outcome:
    """The events suite on a typed batch that is not committed yet (an Arrow table, or an
    ingest batch whose events are spooled to a file: Spark reads that file): with
    GX's pandas engine on the driver up to ``DRIVER_ROWS`` rows (a Spark job per
    expectation costs seconds on a batch of any size), on Spark above. ``docs=False``:
    the caller builds the Data Docs of several batches at once (``build_docs``)."""
    spooled = hasattr(events, "events_path")  # an ingest batch: its events are in a file
    rows = events.num_events if spooled else events.num_rows
    if rows <= DRIVER_ROWS:
        table = events.events if spooled else events
        return _events_suite(lake, source, driver_frame(table), ts_range, PANDAS_TYPES, docs)
    df, keyed = _suite_frames(read_parquet_spark(spark, lake, events.events_path) if spooled
                             else spark.createDataFrame(events), source)
    return _events_suite(lake, source, df if keyed is None else keyed, ts_range, docs=docs,
                         exact=None if keyed is None else df)


def _suite_frames(whole, source: Source):
    """(the events columns of a Spark frame of typed events, the same with keyed ids for
    the suite's verdict, ``keyed_ids``, or None)."""
    names = events_schema(source).names
    return whole.select(*names), keyed_ids(whole, events_expectations(source), names)


def keyed_ids(df, expectations: list[dict], names: list[str]):
    """``df``'s columns ``names`` with each ``event_id`` replaced by a 64-bit key of it (a
    null stays null), for the suite's verdict: the staged parts' own key of each id
    (``_k``: made with the id, from its digest and number or from a source's own id,
    null where the id is) when ``df`` has it, so that the suite reads no id text; else
    the id's hash (``xxhash64``). Equal ids have equal keys, so unique keys mean unique
    ids, and GX's uniqueness check (a window over every id, most of the suite's time)
    sorts 8-byte numbers instead of texts: half the time. Two ids whose keys meet fail
    the verdict, and the suite runs again on the ids themselves (``run_suite``'s
    ``exact``): its result is the ids'. None when an expectation reads ``event_id`` for
    more than being there and unique (a source whose own id column is ``event_id``: its
    type is checked)."""
    from pyspark.sql import functions as F

    kinds = {e["type"] for e in expectations if e["kwargs"].get("column") == "event_id"}
    if not kinds <= {"expect_column_values_to_not_be_null", "expect_column_values_to_be_unique"}:
        return None
    ids = F.col("event_id")
    keyed = (F.col("_k") if "_k" in df.columns
             else F.when(ids.isNull(), F.lit(None)).otherwise(F.xxhash64(ids))).alias("event_id")
    return df.select(*[keyed if n == "event_id" else n for n in names])


def _events_suite(lake: lk.Lake, source: Source, df, ts_range,
                  types: dict[str, str] = SPARK_TYPES, docs: bool = True,
                  exact=None) -> Outcome:
    """The events suite on ``df``: a scan of files or rows held in memory, which GX then
    reads per expectation without caching it (``scan``); ``exact``: see ``keyed_ids``."""
    return run_suite(lake, f"events_{source.name}", events_expectations(source, types), df,
                     _range_parameters(ts_range), docs=docs, scan=True, exact=exact)


def _range_parameters(ts_range) -> dict:
    """The events suite's parameters: the accepted times (``TimeRange``) as UTC times."""
    return {"ts_min": datetime.fromtimestamp(ts_range.low / 1e9, tz=timezone.utc),
            "ts_max": datetime.fromtimestamp(ts_range.high / 1e9, tz=timezone.utc)}


def validate_matches(spark, lake: lk.Lake, pattern: Pattern | Disjunction, run_id: str,
                     low: int | None, high: int | None) -> Outcome:
    """The matches suite on one staged run (``validate_staged`` with one run)."""
    one = StagedMatches(pattern, run_id, low, high, DRIVER_ROWS + 1)
    outcome = validate_staged(spark, lake, [one])[pattern.name]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _suite(lake: lk.Lake, s: StagedMatches, df, docs: bool) -> Outcome:
    return run_suite(lake, f"matches_{s.pattern.name}", matches_expectations(s.pattern), df,
                     {"tau_seconds": s.pattern.tau / 1e9}, run_name=s.run_id, docs=docs)


def validate_staged(spark, lake: lk.Lake, staged: list[StagedMatches]
                    ) -> dict[str, Outcome | Exception]:
    """The matches suite of every staged run of a night in one pass. The runs go in
    batches of at most ``DRIVER_ROWS`` matches (``driver_batches``): a batch's check frames
    are computed on the driver (``check_frames.DriverFrames``: one DuckDB query per run,
    one read of each source's events the batch binds) and each suite runs with GX's pandas
    engine, so the driver holds one batch at a time however many runs a night (or a full
    recompute) has; a run larger than that is checked with Spark. The Data Docs are built
    once. Each pattern keeps its own suite, result and verdict; a run whose frame the
    driver cannot build is checked on Spark, so that an error (a missing staged file, a
    broken table) is its own pattern's, with the message Spark gives."""
    outcomes: dict[str, Outcome | Exception] = {}
    for batch, small in driver_batches(staged):
        frames = None
        if small:
            try:
                frames = DriverFrames(lake, batch)
            except Exception:  # noqa: BLE001 - each run then goes to Spark, with its own error
                frames = None
        for s in batch:
            try:
                df = None
                if frames is not None:
                    try:
                        df = frames.frame(s).to_pandas()
                    except Exception:  # noqa: BLE001 - Spark decides, with its own error
                        df = None
                if df is None:
                    df = _check_frame(spark, lake, s)
                    if small:
                        df = df.toPandas()
                outcomes[s.pattern.name] = _suite(lake, s, df, docs=False)
            except Exception as exc:  # noqa: BLE001 - one pattern's failure is its own
                outcomes[s.pattern.name] = exc
    build_docs(lake, [o.result_id for o in outcomes.values() if isinstance(o, Outcome)])
    return outcomes


def driver_batches(staged: list[StagedMatches], most: int | None = None):
    """(runs, small) in the order given: consecutive runs of at most ``most`` (default
    ``DRIVER_ROWS``) staged matches in all, checked on the driver (small), and each run
    larger than that alone, checked with Spark."""
    most = DRIVER_ROWS if most is None else most
    batch, rows = [], 0
    for s in staged:
        if s.rows > most:
            if batch:
                yield batch, True
                batch, rows = [], 0
            yield [s], False
            continue
        if batch and rows + s.rows > most:
            yield batch, True
            batch, rows = [], 0
        batch.append(s)
        rows += s.rows
    if batch:
        yield batch, True


def _check_frame(spark, lake: lk.Lake, s: StagedMatches, events=None):
    return match_check_frame(spark, lake, lake.staging(s.pattern.name, s.run_id), s.pattern,
                             s.low, s.high, events)


class ValidationFailed(UserError, RuntimeError):
    """A quality gate failed: nothing is published; the message names the expectations."""


# -- a .sql row pattern's matches ------------------------------------------------------------
def row_matches_expectations(query) -> list[dict]:
    """The suite of a row pattern's new rows (``matches_<name>``): named by the pattern,
    one row per match id (ONE ROW PER MATCH) or per match and event (ALL ROWS PER MATCH),
    match numbers from 1, a match's end not before its start and, with WITHIN, shorter than
    the interval. WITH UNMATCHED ROWS, a row without a match is allowed."""
    out = [{"type": "expect_column_values_to_be_in_set",
            "kwargs": {"column": "pattern", "value_set": [query.name]}},
           {"type": "expect_column_values_to_be_between",
            "kwargs": {"column": "match_number", "min_value": 1}}]
    if query.rows_per_match != "unmatched":
        out.append({"type": "expect_column_values_to_not_be_null",
                    "kwargs": {"column": "match_id"}})
    if query.all_rows:
        return out + [{"type": "expect_compound_columns_to_be_unique", "kwargs": {
            "column_list": ["match_id", "event_id"], "ignore_row_if": "any_value_is_missing"}}]
    out += [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "match_id"}},
            {"type": "expect_column_pair_values_a_to_be_greater_than_b",
             "kwargs": {"column_A": "end_ts", "column_B": "start_ts", "or_equal": True,
                        "ignore_row_if": "either_value_is_missing"}}]
    if query.within_ns is not None:
        out.append({"type": "expect_column_values_to_be_between", "kwargs": {
            "column": "span_seconds", "min_value": 0, "max_value": query.within_ns / 1e9,
            "strict_max": True}})
    return out


def validate_row_matches(lake: lk.Lake, query, table, run_id: str):
    """The suite of ``table`` (a row pattern's new rows, Arrow) on the driver, before they
    are published: a GX ``Outcome``."""
    import pyarrow.compute as pc

    frame = table.select([c for c in ("pattern", "match_number", "match_id", "event_id",
                                      "start_ts", "end_ts") if c in table.column_names])
    if query.within_ns is not None and not query.all_rows:
        span = pc.divide(pc.cast(pc.subtract(table.column("end_ts"), table.column("start_ts")),
                                 "int64"), 1e6)
        frame = frame.append_column("span_seconds", span)
    return run_suite(lake, f"matches_{query.name}", row_matches_expectations(query),
                     driver_frame(frame), {}, run_name=run_id)
