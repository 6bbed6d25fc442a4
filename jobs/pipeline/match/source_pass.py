"""One pass per source: the patterns of a night that read one source and partition it by
the same attributes X are matched by one Spark job (docs/pipeline.md), not one job each.

Phase 1 reads the source once over the union of the patterns' event ranges, keeps the
events that pass at least one pattern's Theorem 1 filter and tags each with the patterns
it can serve (bit i: pattern i), repartitions by X once and sorts once. Phase 2
(``jobs.pipeline.match.phase2.run_shared_partition``) runs every pattern's matcher over its own
events of each partition: the rows of its tag inside its own read range, which are
exactly the rows its own match job would give it, so its matches and counters are the
same. The output is written once, partitioned by pattern, and each pattern's files are
moved to its own staging folder, where validate and publish find them as before.

Which patterns share a pass (``shareable``): sequence patterns with partition attributes
and no negated variable outside X, without contiguity or with partition contiguity
(``numbered``); and sequence patterns without partition attributes and without
contiguity, whose own jobs cut the source into time slices (``match.slice_length``): their
pass explodes each event into every slice some pattern puts it in, sorts by slice, and
gives each pattern, slice by slice, the rows its own job puts there (an event belongs
to the slices from ⌊(ts − τ) / L⌋ to ⌊(ts + τ') / L⌋, τ' = τ after a leading negated
set, else 0). Window patterns, patterns whose negated variables are not linked to X and
the rest keep their own match job.

A pattern's own job numbers the positions of partition contiguity within X over its read
range, before any filter; a pass of such patterns numbers them once over the union of
their ranges. Within a partition, a pattern's range is an interval of that order, so its
numbers are its own job's plus a constant, and the matcher only compares positions with
each other (consecutive or not): the same matches. Patterns with and without numbering
are in separate passes, so that a pass without contiguity still filters before its
shuffle. A pass whose partitions exceed ``max_partition_events`` (they would be sliced)
is not run: its patterns run alone (``NotShared``).

The source is scanned once: when a second job reads the pass's filtered, tagged events
(the plan samples of its ZStream patterns, taken between phase 1 and phase 2, or the
check for oversized partitions), they are cached. The samples need τ before a pattern's
first events, so the pass reads from there (phase 2 gives each pattern only its own
read range); the events without X are dropped after the samples, as a pattern's own
sample keeps them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from jobs.config import Profile
from jobs.core.engine.matchers import MATCHER_CLASSES
from jobs.core.engine.options import MatchOptions
from jobs.core.language.conditions.expressions import stored
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.lake import store as lk
from jobs.pipeline.match.phase1 import (
    MatchJobResult,
    lookback,
    positions_column,
    slices_column,
    staged_counters,
    unlinked_negation,
)
from jobs.pipeline.match.phase2 import (
    MAX_SHARED,
    PATTERN,
    PATTERNS_COLUMN,
    POSITION,
    SLICE,
    Phase2Spec,
    SharedSpec,
    output_columns,
    run_shared_partition,
)
from jobs.spark.predicates import (
    any_of,
    col,
    event_date_filters,
    filter_column,
    has_tag,
    read_range,
    starting_partitions,
    tag_column,
    ts_in,
)
from jobs.spark.session import match_tasks
from jobs.spark.tables import spark_uri

PASS_FOLDER = "_pass"  # staging/_pass/<run_id>/<source>_<n>: a pass's output, then moved


class NotShared(Exception):
    """The pass cannot give every pattern its own job's result: run them alone."""


@dataclass(frozen=True)
class PassItem:
    """One pattern of a pass: its file's text, its start range [low, high) and, for
    ZStream, the driver's plan (JSON)."""
    pattern: Pattern | Disjunction
    text: str
    low: int | None
    high: int
    plan_json: str | None = None

    @property
    def read_low(self) -> int | None:
        """The first event its own job reads: a leading negated set looks back τ."""
        if self.low is None:
            return None
        return self.low - lookback(self.pattern)

    @property
    def read_high(self) -> int:
        return self.high + self.pattern.tau



def numbered(pattern: Pattern | Disjunction) -> bool:
    """A sequence pattern (one alternative) with partition contiguity: its positions are
    numbered within X (``phase1.positions_column``)."""
    return not isinstance(pattern, Disjunction) and pattern.position_rule == "partition"


def shareable(pattern: Pattern | Disjunction) -> bool:
    if pattern.kind == "window" or unlinked_negation(pattern) \
            or pattern.after_match != "all" or pattern.marks_needed:
        return False  # (first_ever, history: its events carry marks of their own)
    free = all(alt.position_rule is None for alt in pattern.alternatives)
    if not pattern.partition_attributes:  # a pass by time slices
        return free
    return free or numbered(pattern)


def pass_groups(items: list[PassItem]) -> list[list[PassItem]]:
    """The passes of a night: shareable patterns grouped by source, X and output shape
    (a disjunction's rows say which alternative matched, a pattern with measures has
    their values), at most ``MAX_SHARED`` each;
    a group of one is no pass."""
    groups: dict[tuple, list[PassItem]] = {}
    for item in items:
        p = item.pattern
        if shareable(p):
            key = (p.source, tuple(p.partition_attributes), isinstance(p, Disjunction),
                   bool(p.measure_names), numbered(p))
            groups.setdefault(key, []).append(item)
    out = []
    for group in groups.values():
        for i in range(0, len(group), MAX_SHARED):
            if len(group[i:i + MAX_SHARED]) > 1:
                out.append(group[i:i + MAX_SHARED])
    return out


def run_source_pass(spark, lake: lk.Lake, items: list[PassItem], run_id: str, n: int,
                    max_partition_events: int, options: MatchOptions = MatchOptions(),
                    slice_length: int = Profile.slice_length,
                    prepare: Callable[[object], list[PassItem]] | None = None,
                    sampled: frozenset[str] = frozenset()) -> dict[str, MatchJobResult]:
    """Match ``items`` (one group of ``pass_groups``) in one Spark job into each pattern's
    staging folder; per pattern its staging and counters, as ``run_match_job`` returns
    them. ``n`` numbers the passes of a run; ``slice_length``: the time slices of a pass
    of patterns without partition attributes (``match.slice_length``).

    ``prepare``: called with the pass's events (filtered and tagged, cached when a second
    job reads them) before phase 2; returns the items to match, with their plans (the
    night samples its ZStream patterns there). Its events reach back τ before the first
    events of the patterns named in ``sampled``, as their plan samples do. The events are
    also what the check for oversized partitions counts: the source is scanned once."""
    started = time.perf_counter()
    first = items[0].pattern
    path = lake.events(first.source)
    keys = list(first.partition_attributes)
    lows = [i.read_low for i in items] + [
        None if i.low is None else i.low - i.pattern.tau
        for i in items if i.pattern.name in sampled]
    read_low = None if any(v is None for v in lows) else min(lows)
    read_high = max(i.read_high for i in items)
    df = read_range(spark, lake, path, read_low, read_high, 0)
    numbering = numbered(first)
    if numbering:  # before any filter, over the union of the ranges (see the module doc)
        df = df.withColumn(POSITION, positions_column(first))
    counts: dict[tuple, int] = {}  # by date partitions: variations share them
    scanned = {}
    for i in items:
        dates = event_date_filters(i.read_low, i.high, i.pattern.tau)
        key = tuple(dates or ())
        if key not in counts:
            counts[key] = lake.count_rows(path, dates)
        scanned[i.pattern.name] = counts[key]
    filters = [filter_column(i.pattern) for i in items]
    served = any_of(filters)  # before the tags: those are computed for the kept events only
    if served is not None:
        df = df.where(served)
    df = df.withColumn(PATTERNS_COLUMN, tag_column(filters))
    attributes = {stored(a) for i in items for a in i.pattern.attributes}
    needed = ["event_id", "ts", *sorted(attributes | set(keys)),
              *([POSITION] if numbering else []), PATTERNS_COLUMN]
    df = df.select(*[col(c) for c in dict.fromkeys(needed)])
    sliced = not keys
    oversized = not sliced and bool(max_partition_events) and \
        max(scanned.values()) > max_partition_events
    cached = oversized or bool(prepare is not None and sampled)
    if cached:
        df = df.persist()
    limits_of = dict(max_matches_per_window=options.max_matches_per_window,
                     memory_budget=options.memory_budget, limits=options.limits,
                     funnel=options.funnel)
    try:
        chosen = prepare(df) if prepare is not None else items
        if not chosen:
            return {}
        # the tasks follow the events phase 2 gets: counted in the cache when there is one
        kept = df.count() if cached else max(scanned.values())
        return _phase2(spark, lake, items, chosen, df, scanned, kept, run_id, n,
                       max_partition_events if oversized else 0, slice_length, limits_of,
                       started)
    finally:
        if cached:
            df.unpersist()


def _phase2(spark, lake: lk.Lake, items: list[PassItem], chosen: list[PassItem], df,
            scanned: dict[str, int], kept: int, run_id: str, n: int, oversized: int,
            slice_length: int, limits: dict, started: float) -> dict[str, MatchJobResult]:
    """The pass's job over its phase-1 events ``df`` (``kept`` of them, or an upper
    bound): the ``chosen`` items matched (each with the tag bit of its place in
    ``items``), written once and moved to their stagings. ``oversized``: the partition
    size to check for first (0: none); ``limits``: the matchers' (``Phase2Spec``)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    first = items[0].pattern
    keys = list(first.partition_attributes)
    sliced = not keys
    disjunctive = isinstance(first, Disjunction)
    valued = bool(first.measure_names)
    bit = {item.pattern.name: b for b, item in enumerate(items)}
    for k in keys:
        df = df.where(col(k).isNotNull())
    if all(item.low is not None for item in chosen):  # nights: τ read before their ranges
        df = starting_partitions(df, keys, [
            has_tag(PATTERNS_COLUMN, bit[item.pattern.name]) & ts_in(item.low, item.high)
            for item in chosen], kept)
    if sliced:  # every slice any pattern puts the event in (each takes its own in phase 2)
        df = df.withColumn(SLICE, F.explode(slices_column(
            max(i.pattern.tau for i in items), max(lookback(i.pattern) for i in items),
            slice_length)))
    elif oversized:
        big = (df.groupBy(*[col(k) for k in keys]).count()
               .where(F.col("count") > oversized))
        if big.limit(1).count():
            raise NotShared(f"a partition of {first.source} has more than "
                            f"{oversized} events: sliced, pattern by pattern")
    group = [SLICE] if sliced else keys
    df = df.repartition(match_tasks(spark, kept), *[col(k) for k in group])
    df = df.sortWithinPartitions(*[col(k) for k in group], "ts", "event_id")
    specs = tuple(SharedSpec(
        item.pattern.name,
        Phase2Spec(pattern_text=item.text, keys=tuple(keys), low=item.low, high=item.high,
                   slice_length=slice_length if sliced else None, plan=item.plan_json,
                   **limits),
        item.read_low, item.read_high, item.pattern.tau, lookback(item.pattern),
        bit[item.pattern.name])
        for item in chosen)
    key_fields = [df.schema[k] for k in keys]
    schema = T.StructType([
        T.StructField("kind", T.StringType()), T.StructField("match_id", T.StringType()),
        *([T.StructField("alternative", T.IntegerType())] if disjunctive else []),
        *[T.StructField(f.name, f.dataType) for f in key_fields],
        T.StructField("start_ts", T.TimestampType()), T.StructField("end_ts", T.TimestampType()),
        T.StructField("n_events", T.LongType()), T.StructField("bindings", T.StringType()),
        *([T.StructField("values", T.StringType())] if valued else []),
        T.StructField("stats", T.StringType()), T.StructField(PATTERN, T.StringType())])
    assert [f.name for f in schema][:-1] == output_columns(tuple(keys), disjunctive, valued)
    shared = lk.join(lake.staging(PASS_FOLDER, run_id), f"{first.source}_{n}")
    out = df.mapInPandas(lambda it: run_shared_partition(specs, it), schema)
    out.write.mode("overwrite").partitionBy(PATTERN).parquet(spark_uri(shared))
    seconds = (time.perf_counter() - started) / len(chosen)
    results = {}
    for item in chosen:
        name = item.pattern.name
        staging = lake.staging(name, run_id)
        _move(lake, lk.join(shared, f"{PATTERN}={name}"), staging, schema)
        stats = {"events": scanned[name], **staged_counters(lake, staging, keys),
                 "work_item": MATCHER_CLASSES[item.pattern.matcher].work_item,
                 "sliced": "all" if sliced else "no", "shared_pass": len(chosen),
                 "seconds": round(seconds, 3)}
        results[name] = MatchJobResult(staging, stats)
    lake.remove(shared)
    return results


def _move(lake: lk.Lake, source: str, target: str, schema) -> None:
    """A pattern's files of a pass into its staging folder (emptied first); a pattern
    without any row gets one empty file with the staged columns."""
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    lake.remove(target)
    fs, src = lake.filesystem(source)
    _, dst = lake.filesystem(target)
    fs.create_dir(dst, recursive=True)
    files = [] if fs.get_file_info(src).type != pafs.FileType.Directory else [
        f for f in fs.get_file_info(pafs.FileSelector(src)) if f.type == pafs.FileType.File
        and f.base_name.endswith(".parquet")]
    for f in files:
        fs.move(f.path, f"{dst}/{f.base_name}")
    if not files:
        columns = to_arrow_schema(schema, timezone="UTC")
        columns = pa.schema([f for f in columns if f.name != PATTERN])
        pq.write_table(columns.empty_table(), f"{dst}/part-00000-empty.parquet",
                       filesystem=fs, coerce_timestamps="us")
