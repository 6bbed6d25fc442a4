"""``publish``: staging matches -> ``matches/<pattern>`` (Delta), and the ``runs`` log.

The staged match rows of a run replace the published matches of the same pattern version
whose first event lies in the run's range, with the outcome of a MERGE on ``match_id``:
rows that are new are inserted, rows that no longer match are deleted, rows that stay are
untouched (they keep the ``run_id`` that published them). A rerun of the same logical
date therefore changes nothing (no commit at all). A full recompute (new or changed
pattern version) also deletes the old version's rows in the same commit; when the new
version's columns differ (other partition attributes), it replaces the table's files and
schema in one commit instead.

The rows never pass through the driver (``jobs.lake.delta_files``): the executors write the
table's new Parquet files, and the driver commits add and remove actions through
delta-rs, so its memory does not grow with the number of matches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa

from jobs import runrecord
from jobs.core.events import parse_ts, to_datetime
from jobs.core.pattern import Disjunction, Pattern
from jobs.lake import delta_files
from jobs.lake import store as lk
from jobs.lake.match_rows import MatchRows
from jobs.pipeline.horizons import RunRange
from jobs.runrecord import RunRecord

RUN_KEY = "ses.run"  # commit metadata: the runs row of the run that made the commit
COUNTS = ("ses.inserted", "ses.deleted")  # commit metadata: the commit's own counts


def publish(spark, lake: lk.Lake, pattern: Pattern | Disjunction, run_id: str, staging: str,
            rng: RunRange, run_row: dict | None = None) -> dict:
    """Publish a run's staged matches; returns {'inserted', 'deleted', 'published'}.

    The executors write the new data files; the driver reads only the Delta log and the
    files' statistics, counts in Spark, and commits. The table's files that can hold rows
    of the run's scope (or rows with a staged ``match_id``) are *touched*: they are
    replaced by files holding their rows minus the deleted ones, in the same commit that
    adds the new matches. The commit carries ``run_row`` (the run's log row without its
    counts) and the counts as custom metadata, so that a crash between this commit and
    the runs row is repaired by the next run (``jobs.pipeline.reconcile``) from the table's own
    history."""
    from pyspark.sql import functions as F

    rows = MatchRows.of(pattern, run_id)
    path = lake.matches(pattern.name)
    staged = spark.read.parquet(lk.spark_uri(staging)).where(F.col("kind") == "match")
    fs, folder = lake.filesystem(staging)
    import pyarrow.dataset as pads

    schema = rows.convert(pads.dataset(folder, filesystem=fs, format="parquet")
                          .schema.empty_table()).schema
    bounds = staged.agg(F.count(F.lit(1)).alias("n"), F.min("start_ts").alias("low"),
                        F.max("start_ts").alias("high")).first()
    n = int(bounds["n"])
    prefix = "part-" + "".join(c if c.isalnum() else "_" for c in run_id)
    meta = {RUN_KEY: json.dumps(run_row or {"run_id": run_id}, default=str)}
    written: list[dict] = []
    try:
        table = lake.read_table(path)
        if table is None or (rng.full and _schema_changed(table, schema)):
            before = table.count() if table is not None else 0
            written = delta_files.write(staged, lake, path, prefix, schema, n, rows.convert)
            delta_files.commit(lake, path, schema, written, [], _counts(meta, n, before),
                               replace_all=table is not None)
            return {"inserted": n, "deleted": before, "published": n}
        staged_span = None if n == 0 else (parse_ts(bounds["low"]), parse_ts(bounds["high"]))
        touched = [f for f in pa.table(table.get_add_actions(flatten=True)).to_pylist()
                   if _may_hold(f, pattern.version, rng, staged_span)]
        inserted_rows, deleted, kept_rows, kept = staged, 0, 0, None
        if touched:
            old = lake.read_spark(spark, path, only={lk.file_name(f["path"]) for f in touched})
            mine = F.coalesce(_scope(F, pattern.version, rng), F.lit(False))
            marked = old.join(staged.select("match_id").distinct()
                              .withColumn("_staged", F.lit(True)), "match_id", "left")
            inserted_rows = staged.join(old.select("match_id"), "match_id", "left_anti")
            deleted = marked.where(mine & F.col("_staged").isNull()).count()
            kept_rows = sum(int(f["num_records"] or 0) for f in touched) - deleted
            kept = marked.where(~mine | F.col("_staged").isNotNull()).drop("_staged")
        # at most n rows are new; what the files hold is the count (a task without rows
        # writes no file, so a rerun writes nothing)
        written = delta_files.write(inserted_rows, lake, path, prefix, schema, n, rows.convert)
        n = sum(int(f["rows"]) for f in written)
        if n == 0 and deleted == 0:  # a rerun: nothing to change, no commit
            return {"inserted": 0, "deleted": 0, "published": table.count()}
        if kept is not None:
            written += delta_files.write(kept, lake, path, prefix, schema, kept_rows)
        delta_files.commit(lake, path, schema, written, touched, _counts(meta, n, deleted))
    except BaseException:
        delta_files.discard(lake, path, written)
        raise
    return {"inserted": n, "deleted": deleted, "published": lake.table(path).count()}


def _counts(meta: dict, inserted: int, deleted: int) -> dict:
    return dict(meta, **dict(zip(COUNTS, (str(inserted), str(deleted)))))


def _scope(F, version: str, rng: RunRange):
    """The published rows this run is the truth for, as a Spark condition: its version's
    matches whose first event lies in the range and, on a full recompute, every row of
    another version."""
    mine = F.col("pattern_version") == F.lit(version)
    mine &= F.col("start_ts") < F.lit(to_datetime(rng.high))
    if rng.low is not None:
        mine &= F.col("start_ts") >= F.lit(to_datetime(rng.low))
    return mine | (F.col("pattern_version") != F.lit(version)) if rng.full else mine


def _may_hold(f: dict, version: str, rng: RunRange, staged: tuple[int, int] | None) -> bool:
    """Whether a data file (its Delta statistics ``f``) may hold a row of the run's scope
    or a staged match; False only when its statistics prove it cannot. The statistics'
    timestamps have millisecond precision: a maximum may be up to 1 ms below the truth."""
    lo_v, hi_v = f.get("min.pattern_version"), f.get("max.pattern_version")
    lo_t, hi_t = f.get("min.start_ts"), f.get("max.start_ts")
    if None in (lo_v, hi_v, lo_t, hi_t):
        return True
    if rng.full and (lo_v != version or hi_v != version):
        return True  # rows of another version are all in scope
    if not lo_v <= version <= hi_v:
        return False
    lo, hi = parse_ts(lo_t), parse_ts(hi_t) + 1_000_000  # hi: strictly above the file's last start
    spans = [(rng.low if rng.low is not None else -2 ** 63, rng.high)]
    if staged:
        spans.append((staged[0], staged[1] + 1))
    return any(lo < high and hi > low for low, high in spans)


def _schema_changed(table, schema: pa.Schema) -> bool:
    current = pa.schema(table.schema().to_arrow())
    return [f.name for f in current] != [f.name for f in schema]


def log_run(lake: lk.Lake, record: RunRecord | Mapping) -> None:
    """Append one record (one pattern, one run) to the runs table; a mapping (a commit's
    metadata, a run plan's entry) is read as a record."""
    if not isinstance(record, RunRecord):
        record = RunRecord.from_row(record)
    lake.append(lake.runs(), runrecord.to_arrow([record]))


def all_runs(lake: lk.Lake) -> list[RunRecord]:
    """Every record of the runs table."""
    return runrecord.from_arrow(lake.read_arrow(lake.runs()))


def previous_runs(lake: lk.Lake, pattern: str) -> list[RunRecord]:
    return [r for r in all_runs(lake) if r.pattern == pattern]
