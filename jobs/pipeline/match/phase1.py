"""``match-job``: one pattern over the events of its source, on Spark.

Phase 1 (Spark): read ``events/<source>`` for the run's range — partition pruning on
``event_date`` and a ``ts`` range [low, high + τ] — apply the Theorem 1 filter as a Spark
predicate (pushed into the Parquet scan), repartition by the partition attributes X and
sort by (X, ts, event_id). Without X, or for a partition with more events than
``max_partition_events``, time is cut into slices that overlap by τ: an event is copied to
every slice whose start range it can complete, and each slice keeps only the matches that
start inside it, so the result is exact.

Phase 2 (executors, ``jobs.pipeline.match.phase2``): the match-window matcher per group. Executors write
the match rows and per-group stats rows as Parquet into ``staging/<pattern>/<run_id>``; the
driver reads back only the stats rows (one per group), never the events or the matches.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import reduce

from jobs.config import Profile
from jobs.core.engine.batches import MatchStats
from jobs.core.engine.matchers import MATCHER_CLASSES
from jobs.core.engine.options import MatchOptions
from jobs.core.language.conditions.expressions import is_fact, stored
from jobs.core.language.events import to_datetime
from jobs.core.language.pattern import (
    Disjunction,
    Pattern,
    first_ever_attribute,
    history_attribute,
)
from jobs.core.language.window import can_drop
from jobs.lake import store as lk
from jobs.pipeline.match import partition_state
from jobs.pipeline.match.episode_seeds import EpisodePlan, with_begins
from jobs.pipeline.match.first_ever import FirstEverPlan, build_state, mark_events, stage_state
from jobs.pipeline.match.horizons import earliest_start
from jobs.pipeline.match.partition_state import HistoryPlan, mark_columns
from jobs.pipeline.match.partition_state import build_state as build_history_state
from jobs.pipeline.match.phase2 import (
    NOT_SLICED,
    SLICE,
    Phase2Spec,
    output_columns,
    position_column,
    run_partition,
)
from jobs.pipeline.match.start_ranges import BEGIN, LOW, STATE_FACTS
from jobs.runrecord import COUNTERS
from jobs.spark.predicates import (
    col,
    event_date_filters,
    filter_column,
    read_range,
    starting_partitions,
    ts_in,
    window_analysis,
)
from jobs.spark.session import match_tasks
from jobs.spark.tables import spark_uri


def leading_negation(pattern: Pattern | Disjunction) -> bool:
    return any(n.before is None for alt in pattern.alternatives for n in alt.negations)


def lookback(pattern: Pattern | Disjunction) -> int:
    """How far before a match's first event its job reads: τ after a leading negated set
    (its witnesses), else 0; so also how far an event reaches into a later time slice."""
    return pattern.tau if leading_negation(pattern) else 0


def slices_column(reach_back: int, reach_ahead: int, length: int, origin: int = 0):
    """The time slices an event goes to: ⌊(ts − reach_back − origin) / L⌋ to
    ⌊(ts + reach_ahead − origin) / L⌋ (``phase2.SharedSpec.in_slice`` takes the same in
    numpy, with the same floating-point division)."""
    from pyspark.sql import functions as F

    ts_ns = F.unix_micros(F.col("ts")) * F.lit(1000)
    first = F.floor((ts_ns - F.lit(reach_back) - F.lit(origin)) / F.lit(length)).cast("long")
    last = F.floor((ts_ns + F.lit(reach_ahead) - F.lit(origin)) / F.lit(length)).cast("long")
    return F.sequence(first, last)


def unlinked_negation(pattern: Pattern | Disjunction) -> bool:
    """Whether some negated variable may find its witness outside the match's group of
    the partition attributes (then groups are time slices over all partitions). For a
    disjunction, a variable linked on its alternative's X is linked on the common X (a
    subset); the others count as unlinked, which is exact either way."""
    return bool(pattern.partition_attributes) and any(
        set(v.name for v in alt.negated) - alt.linked_negations for alt in pattern.alternatives)


def positions_column(pattern: Pattern):
    """Contiguity positions, numbered before any filter: a row number over the source
    in processing order (strict) or within the partition values X (partition), one
    column per alternative of a disjunction that asks for contiguity."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = list(pattern.partition_attributes)
    window = Window.orderBy("ts", "event_id")
    if pattern.position_rule == "partition" and keys:
        window = Window.partitionBy(*[col(k) for k in keys]).orderBy("ts", "event_id")
    return (F.row_number().over(window) - 1).cast("long")


@dataclass(frozen=True)
class MatchJob:
    """One match job: ``pattern`` (``text``: its file, for the executors) for first events
    in [low, high) (None: unbounded), staged in ``staging/<pattern>/<run_id>``, within the
    profile's limits (``slice_length``, ``max_partition_events``, ``options``:
    ``Profile.match_options()``). ``force_slices``: time slices even with partition
    attributes; ``plan_json``: a ZStream plan chosen on the driver; ``first_ever``: the
    pattern's first-ever state, when the night read it; ``sink='noop'``: phase 1 only;
    ``since``: match only the partitions with an event ingested after it (ns), whole (the
    night of an episode or history pattern), and count their keys as ``touched``."""

    pattern: Pattern | Disjunction
    text: str
    run_id: str
    low: int | None = None
    high: int | None = None
    slice_length: int = Profile.slice_length
    max_partition_events: int = Profile.max_partition_events
    options: MatchOptions = MatchOptions()
    force_slices: bool = False
    sink: str = "parquet"
    plan_json: str | None = None
    first_ever: FirstEverPlan | None = None
    since: int | None = None  # whole partitions: only those with an event ingested after
    opened: int | None = None  # ... or with an event that may start a match in [opened, high)
    history: HistoryPlan | None = None  # a history or facts pattern's state (None: none)
    lows: tuple | None = None  # RunRange.lows: partitions matched from before ``low``
    episodes: EpisodePlan | None = None  # episodes: where each partition's walk starts


@dataclass
class MatchJobResult:
    staging: str
    stats: dict


def touched_partitions(df, keys: list[str], since: int, opened: int | None = None,
                       high: int | None = None):
    """The rows of the partitions (values of ``keys``) that hold an event ingested after
    ``since`` (any event: one no variable fits still changes a partition's facts and
    history) or an event in [opened, high), where the night's new matches start, and
    those partitions' keys (collected: a night's are few)."""
    from pyspark.sql import functions as F

    hit = F.col("ingested_at") > F.lit(to_datetime(since))
    if opened is not None and high is not None:
        hit = hit | ((F.col("ts") >= F.lit(to_datetime(opened)))
                     & (F.col("ts") < F.lit(to_datetime(high))))
    found = (df.where(hit)
             .select(*[col(k) for k in keys]).distinct())
    touched = [[v if v is None or isinstance(v, (str, int, float, bool)) else str(v)
                for v in r] for r in found.collect()]
    return df.join(found, on=keys, how="left_semi"), touched


def with_lows(spark, df, lows: tuple | None, low: int):
    """The events with ``LOW``: their partition's earliest start tonight (``RunRange.lows``
    for the partitions matched from before the range, else the night's ``low``)."""
    from pyspark.sql import functions as F

    if not lows or not lows[1]:
        return df.withColumn(LOW, F.lit(low).cast("long"))
    keys = list(lows[0])
    types = {f.name: f.dataType for f in df.schema.fields}
    t = spark.createDataFrame([(*v, x) for v, x in lows[1]], [*keys, LOW])
    t = t.select(*[F.col(k).cast(types[k]).alias(k) for k in keys],
                 F.col(LOW).cast("long").alias(LOW))
    return df.join(F.broadcast(t), on=keys, how="left") \
        .withColumn(LOW, F.coalesce(F.col(LOW), F.lit(low).cast("long")))


def run_match_job(spark, lake: lk.Lake, job: MatchJob) -> MatchJobResult:
    """Match ``job.pattern`` for first events in [low, high) (None: unbounded) within the
    limits of ``job.options``; ``sink='noop'`` runs phase 1 only (for measuring it)."""
    pattern, low, high = job.pattern, job.low, job.high
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    started = time.perf_counter()
    path = lake.events(pattern.source)
    tau = pattern.tau
    # a leading negated set looks back τ before a match's first event
    first = earliest_start(low, job.lows)  # partitions matched from before ``low`` too
    read_low = None if first is None else first - lookback(pattern)
    filters = event_date_filters(read_low, high, tau)
    df = read_range(spark, lake, path, read_low, high, tau)
    keep = filter_column(pattern)
    keys = list(pattern.partition_attributes)
    # a negated variable not linked to X may find its witness in another partition (or
    # in an event without X): then the groups are time slices over all partitions
    unlinked = unlinked_negation(pattern)
    scanned = lake.count_rows(path, filters)
    stats = {"events": scanned}
    extra = []
    state = None
    if job.since is not None and keys:
        df, values = touched_partitions(df, keys, job.since, job.opened, high)
        stats["touched"] = {"keys": keys, "values": values}
    if (job.history is not None or job.episodes is not None) and low is not None:
        # each partition from its own start tonight (the night's low, or before it)
        df = with_lows(spark, df, job.lows, low)
        df = df.where(F.unix_micros(F.col("ts")) * 1000 >= F.col(LOW) - F.lit(lookback(pattern)))
        extra.append(LOW)
    if job.episodes is not None and low is not None:  # episodes resumed per partition
        df = with_begins(spark, df, pattern, job.episodes)
        extra.append(BEGIN)
    history = None
    if job.history is not None:  # marks and facts from the partition state
        history = job.history.state if job.history.state is not None \
            else build_history_state(spark, lake, pattern)
        df = mark_columns(spark, df, pattern, history)
        extra += [history_attribute(k) for k in range(len(pattern.history))] \
            + list(STATE_FACTS.values())
    if pattern.first_ever and not pattern.whole_history:
        # each event: is it its partition's first? (with history conditions, phase 2 marks
        # whole partitions of the whole history itself)
        known = job.first_ever if job.first_ever is not None \
            and job.first_ever.state is not None else None
        state = known.state if known is not None else build_state(spark, lake, pattern)
        df = mark_events(spark, df, pattern, state)
        extra += [first_ever_attribute(v) for v in pattern.first_ever]
        counts = known.counts() if known is not None else {"first_ever_new": state.num_rows}
        stats.update(counts)
    for alt in pattern.alternatives:
        if alt.position_rule is not None:  # contiguity, next steps
            df = df.withColumn(position_column(alt), positions_column(alt))
            extra.append(position_column(alt))
    if keep is not None:
        df = df.where(keep)
    window = pattern.kind == "window"
    if window and keys and pattern.missing_keys_matter and df.where(
            reduce(lambda a, b: a | b, [col(k).isNull() for k in keys])
            & F.coalesce(can_drop(pattern, *window_analysis()), F.lit(False))).limit(1).count():
        keys = []  # an event without X may drop windows of every partition: time slices
    if not unlinked:
        for k in keys:
            df = df.where(col(k).isNotNull())
    needed = ["event_id", "ts", *sorted({stored(a) for a in pattern.attributes
                                         if not is_fact(a)} | set(keys)),
              *extra]
    df = df.select(*[col(c) for c in dict.fromkeys(needed)])
    if keys and not unlinked and low is not None:  # a night: τ read before its start range
        starts = ts_in(low, high) if LOW not in extra else (
            (F.unix_micros(F.col("ts")) * 1000 >= F.col(LOW)) & ts_in(None, high))
        df = starting_partitions(df, keys, [starts], scanned)

    slicing = None
    # whole partitions, always: episodes, history conditions
    episodes = pattern.after_match != "all" or pattern.whole_history
    if (not keys or job.force_slices or unlinked) and not episodes:
        slicing = "all"
    elif job.max_partition_events and scanned > job.max_partition_events and not episodes:
        big = (df.groupBy(*[col(k) for k in keys]).count()
               .where(F.col("count") > job.max_partition_events).drop("count"))
        big_keys = big.limit(10_000).collect()
        if big_keys:
            slicing = "big"
            flag = spark.createDataFrame(big_keys, big.schema).withColumn("__big", F.lit(True))
            df = df.join(F.broadcast(flag), on=keys, how="left")
    origin = 0
    if slicing:
        slices = slices_column(tau, lookback(pattern), job.slice_length, origin)
        if slicing == "big":  # only the large partitions; the others are one group each
            slices = F.when(F.col("__big"), slices).otherwise(
                F.array(F.lit(NOT_SLICED).cast("long")))
        df = df.withColumn(SLICE, F.explode(slices)).drop("__big")
    group = ([] if unlinked else keys) + ([SLICE] if slicing else [])
    n_parts = match_tasks(spark, scanned)
    if group:
        df = df.repartition(n_parts, *[col(c) for c in group])
    else:  # episodes without X: the whole source is one group (docs/semantics.md)
        df = df.repartition(1)
    df = df.sortWithinPartitions(*[col(c) for c in group], "ts", "event_id")
    spec = Phase2Spec(pattern_text=job.text, keys=tuple(keys), low=low, high=high,
                      group_by_keys=not unlinked,
                      slice_origin=origin, slice_length=job.slice_length if slicing else None,
                      max_matches_per_window=job.options.max_matches_per_window,
                      memory_budget=job.options.memory_budget, limits=job.options.limits,
                      plan=job.plan_json, funnel=job.options.funnel,
                      marks_given=history is not None)
    key_fields = [df.schema[k] for k in keys]
    disjunctive = isinstance(pattern, Disjunction)
    valued = window or bool(pattern.measure_names)  # window select values, or measures
    schema = T.StructType([
        T.StructField("kind", T.StringType()), T.StructField("match_id", T.StringType()),
        *([T.StructField("alternative", T.IntegerType())] if disjunctive else []),
        *[T.StructField(f.name, f.dataType) for f in key_fields],
        T.StructField("start_ts", T.TimestampType()), T.StructField("end_ts", T.TimestampType()),
        T.StructField("n_events", T.LongType()), T.StructField("bindings", T.StringType()),
        *([T.StructField("values", T.StringType())] if valued else []),
        T.StructField("stats", T.StringType())])
    assert [f.name for f in schema] == output_columns(tuple(keys), disjunctive, valued)
    staging = lake.staging(pattern.name, job.run_id)
    if job.sink == "noop":
        df.write.format("noop").mode("overwrite").save()
        stats["seconds"] = time.perf_counter() - started
        return MatchJobResult(staging, stats)
    out = df.mapInPandas(lambda it: run_partition(spec, it), schema)
    out.write.mode("overwrite").parquet(spark_uri(staging))
    stats.update(staged_counters(lake, staging, keys))
    if state is not None:  # published with the matches (publish_steps)
        stage_state(lake, staging, state)
    if history is not None:
        partition_state.stage_state(lake, staging, history)
    stats["work_item"] = "tested events" if window else MATCHER_CLASSES[pattern.matcher].work_item
    stats["sliced"] = slicing or "no"
    stats["seconds"] = round(time.perf_counter() - started, 3)
    return MatchJobResult(staging, stats)



def added_funnel(groups: list) -> dict:
    """The run's funnel from its groups' (``phase2._funnel``): windows and stops added
    up, partitions added up where each group holds whole partitions and counted once by
    key where a partition may span groups; ``incomplete``: groups whose funnel hit the
    matcher's limits."""
    steps: dict[tuple, dict] = {}
    incomplete, seconds = 0, 0.0
    for g in groups:
        if g is None:
            incomplete += 1
            continue
        rows, spent = g
        seconds += spent
        for alternative, step, partitions, windows, stopped, keys in rows:
            acc = steps.setdefault((alternative or 0, step), {
                "alternative": alternative, "step": step, "partitions": 0, "windows": 0,
                "stopped": {}, "keys": set()})
            if keys is None:
                acc["partitions"] += partitions
            else:
                acc["keys"].update(keys)
            acc["windows"] += windows
            for label, n in stopped.items():
                acc["stopped"][label] = acc["stopped"].get(label, 0) + n
    out = []
    for key in sorted(steps):
        acc = steps[key]
        acc["partitions"] += len(acc.pop("keys"))
        out.append(acc)
    return {"steps": out, "incomplete_groups": incomplete, "seconds": round(seconds, 3)}


def staged_counters(lake: lk.Lake, staging: str, keys: list[str]) -> dict:
    """The run's counters from the per-group stats rows of its staged files, read on the
    driver with Arrow (one small column read; the match rows' bindings are not read):
    sums of the counters, maxima of the peaks, and the partitions (whole ones counted
    by the engine, sliced ones once by their key)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    fs, folder = lake.filesystem(staging)
    rows = pads.dataset(folder, filesystem=fs, format="parquet").to_table(
        columns=["stats", *keys], filter=pc.field("kind") == "stats").to_pylist()
    sums = (*(c for c in COUNTERS if c not in ("events", "partitions")), "work")
    out = dict.fromkeys(sums + MatchStats.MAXIMA, 0)
    whole, sliced, seconds = 0, set(), 0.0
    for row in rows:
        s = json.loads(row["stats"]) if row["stats"] else {}
        for f in sums:
            out[f] += int(s.get(f) or 0)
        for f in MatchStats.MAXIMA:
            out[f] = max(out[f], int(s.get(f) or 0))
        seconds += float(s.get("seconds") or 0.0)
        whole += int(s.get("partitions") or 0)
        if s.get("partitions") == 0:
            sliced.add(tuple(row[k] for k in keys))
    if not keys and rows:
        sliced = {()}
    out["partitions"] = whole + len(sliced) if rows else 0
    out["groups"] = len(rows)
    if any("funnel" in json.loads(r["stats"] or "{}") for r in rows):
        out["funnel"] = added_funnel([json.loads(r["stats"] or "{}").get("funnel")
                                      for r in rows])
    out["phase2_seconds"] = round(seconds, 3)
    return out
