"""``after_match`` episodes across nights (docs/semantics.md, "After-match skip"): where a
night starts each partition's walk, so that it reads what its new events can change, not
the partition's whole history.

Which match the rule keeps depends on the previous kept one. A match that starts before
``s`` and ends after it reaches at most τ back, so the kept matches that start before
``s − τ`` cannot stop a match starting at ``s`` or later from being kept. A night that
must match a partition from ``s`` (its range's start, or τ before its earliest event
ingested since the last success: a late event) therefore looks up, in the published
table, the partition's kept matches that start in [s − τ, s): with none, the walk starts
fresh at ``s``; else it starts at the last of them, K, which a fresh walk keeps again
(it is the first of its first event in the rule's order), and every later decision is
the one the whole history gives. Phase 1 carries K's events (``BEGIN``) to phase 2, whose
walk drops the matches whose first event is before K's first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.language.events import parse_ts, to_datetime
from jobs.core.language.pattern import Pattern
from jobs.lake import store as lk
from jobs.lake.extent import files_ingested_after
from jobs.pipeline.match.horizons import PartitionStarts, partition_key
from jobs.pipeline.match.start_ranges import BEGIN

TS = pa.timestamp("us", tz="UTC")


@dataclass
class EpisodePlan(PartitionStarts):
    """The partitions whose walk starts before the night's ``low`` (``PartitionStarts``)
    and, per key, the ids of the kept match it starts at (``begins``, JSON; none: a fresh
    walk)."""

    begins: dict[str, str] = field(default_factory=dict)


def _pairs(bindings) -> list[tuple[str, list[str]]]:
    """A published match's bindings (a map column, or its JSON text) as (variable, ids)."""
    if isinstance(bindings, str):
        return list(json.loads(bindings).items())
    return [(k, list(v or [])) for k, v in bindings or []]


def plan_episodes(lake: lk.Lake, pattern: Pattern, low: int, since: datetime) -> EpisodePlan:
    """The night's starts: τ before each partition's earliest event ingested after
    ``since`` (when before ``low``), then moved back to the kept match the walk resumes
    from (module docstring)."""
    xs = list(pattern.partition_attributes)
    tau = pattern.tau
    plan = EpisodePlan()
    files = files_ingested_after(lake, pattern.source, since)
    arrived = lake.read_arrow(lake.events(pattern.source), columns=[*xs, "ts"],
                              filter=pc.field("ingested_at") > pa.scalar(since, TS),
                              only=files) if files or files is None else None
    if arrived is not None and arrived.num_rows:
        values = [arrived.column(a).to_pylist() for a in xs]
        ts = arrived.column("ts").cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64()).to_pylist()
        for r, t in enumerate(ts):
            x = [v[r] for v in values]
            if any(v is None or v != v for v in x):
                continue
            if t - tau < plan.lows.get(partition_key(x), low):
                plan.lower(x, t - tau)
    floor = min([low, *plan.lows.values()]) - tau
    path = lake.matches(pattern.name)
    found = lake.read_arrow(path, columns=[*xs, "start_ts", "bindings"], filter=(
        (pc.field("pattern_version") == pattern.version)
        & (pc.field("start_ts") >= pa.scalar(to_datetime(floor), TS))
        & (pc.field("start_ts") < pa.scalar(to_datetime(low), TS)))) \
        if lake.exists(path) else None
    if found is None or not found.num_rows:
        return plan
    last: dict[str, tuple[int, list, list[str]]] = {}
    values = [found.column(a).to_pylist() for a in xs]
    starts = found.column("start_ts").to_pylist()
    bindings = found.column("bindings").to_pylist()
    for r in range(found.num_rows):
        x = [v[r] for v in values]
        k = partition_key(x)
        s, own = parse_ts(starts[r]), plan.lows.get(k, low)
        if not own - tau <= s < own:  # an earlier kept match cannot stop one at ``own``
            continue
        ids = [i for _, group in _pairs(bindings[r]) for i in group]
        now = last.get(k)
        if now is None or s > now[0]:
            last[k] = (s, x, ids)
        elif s == now[0]:  # kept matches starting together: the walk starts at the first
            now[2].extend(ids)
    for k, (s, x, ids) in last.items():
        plan.lower(x, s)
        plan.begins[k] = json.dumps(sorted(set(ids)))
    return plan


def with_begins(spark, df, pattern: Pattern, plan: EpisodePlan):
    """The events with ``BEGIN``: the ids of the kept match their partition's walk resumes
    from (null: a fresh walk)."""
    from pyspark.sql import functions as F

    xs = list(pattern.partition_attributes)
    if not xs or not plan.begins:  # without X, one partition: the whole source
        begin = next(iter(plan.begins.values()), None)
        return df.withColumn(BEGIN, F.lit(begin).cast("string"))
    types = {f.name: f.dataType for f in df.schema.fields}
    t = spark.createDataFrame([(*plan.values[k], b) for k, b in plan.begins.items()],
                              [*xs, BEGIN])
    t = t.select(*[F.col(k).cast(types[k]).alias(k) for k in xs], BEGIN)
    return df.join(F.broadcast(t), on=xs, how="left")
