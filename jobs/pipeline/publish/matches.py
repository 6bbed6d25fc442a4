"""``publish``: staging matches -> ``matches/<pattern>`` (Delta).

The staged match rows of a run replace the published matches of the same pattern version
whose first event lies in the run's range, with the outcome of a MERGE on ``match_id``:
rows that are new are inserted, rows that no longer match are deleted, rows that stay are
untouched (they keep the ``run_id`` that published them). A rerun of the same logical
date therefore changes nothing (no commit at all). A full recompute (new or changed
pattern version) also deletes the old version's rows in the same commit; when the new
version's columns differ (other partition attributes), it replaces the table's files and
schema in one commit instead.

A large run's rows never pass through the driver (``jobs.lake.delta_files``): the executors
write the table's new Parquet files, and the driver commits add and remove actions through
delta-rs, so its memory does not grow with the number of matches. A small run (at most
``DRIVER_ROWS`` staged and published rows) takes the same steps with Arrow on the driver:
a Spark job costs more than the whole of such a publish.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.language.events import parse_ts, to_datetime
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.lake import delta_files
from jobs.lake import store as lk
from jobs.lake.match_commits import RUN_KEY
from jobs.lake.match_rows import MatchRows
from jobs.lake.table_docs import description_of, documented_schema
from jobs.pipeline.match.horizons import RunRange
from jobs.spark.tables import read_parquet_spark, read_spark

COUNTS = ("ses.inserted", "ses.deleted")  # commit metadata: the commit's own counts
SEP = "\x1f"  # between the partition attributes of a key
# a run whose staged matches and published table hold at most this many rows each is
# published by the driver with Arrow (no Spark job); larger ones by the executors
DRIVER_ROWS = 1_000_000


def publish(spark, lake: lk.Lake, pattern: Pattern | Disjunction, run_id: str, staging: str,
            rng: RunRange, run_row: dict | None = None, engine: str = "auto") -> dict:
    """Publish a run's staged matches; returns {'inserted', 'deleted', 'published',
    'committed'} (whether a commit was made: a rerun that changes nothing makes none).

    The table's files that can hold rows of the run's scope (or rows with a staged
    ``match_id``) are *touched*: they are replaced by files holding their rows minus the
    deleted ones, in the same commit that adds the new matches. The commit carries
    ``run_row`` (the run's log row without its counts) and the counts as custom metadata,
    so that a crash between this commit and the runs row is repaired by the next run
    (``jobs.pipeline.upkeep.reconcile``) from the table's own history.

    ``engine``: where the rows are joined and written. ``spark``: the executors write the
    new data files and the driver reads only the Delta log and the files' statistics;
    ``arrow``: the driver does the same steps with Arrow, without a Spark job; ``auto``
    (the default): ``arrow`` when the staged and touched rows are at most
    ``DRIVER_ROWS``. Both give the same rows, counts and commits (tests)."""
    import pyarrow.dataset as pads

    rows = MatchRows.of(pattern, run_id)
    path = lake.matches(pattern.name)
    fs, folder = lake.filesystem(staging)
    dataset = pads.dataset(folder, filesystem=fs, format="parquet")
    schema = rows.convert(dataset.schema.empty_table()).schema
    prefix = "part-" + "".join(c if c.isalnum() else "_" for c in run_id)
    meta = {RUN_KEY: json.dumps(run_row or {"run_id": run_id}, default=str)}
    table = lake.read_table(path)
    replace = table is None or (rng.full and _schema_changed(table, schema))
    if engine == "auto":
        small = dataset.count_rows(filter=pc.field("kind") == "match") <= DRIVER_ROWS
        if small and not replace:
            small = lake.count_rows(path, table=table) <= DRIVER_ROWS
        engine = "arrow" if small else "spark"
    rows_of = (_ArrowRows(lake, dataset) if engine == "arrow"
               else _SparkRows(spark, lake, staging))
    n, staged_span = rows_of.span()
    written: list[dict] = []
    try:
        if replace:
            before = table.count() if table is not None else 0
            written = rows_of.write(rows_of.staged, path, prefix, schema, n, rows.convert)
            delta_files.commit(lake, path, schema, written, [], _counts(meta, n, before),
                               replace_all=table is not None, create=(
                                   pattern.name, description_of(pattern),
                                   documented_schema(pattern, schema)))
            return {"inserted": n, "deleted": before, "published": n, "committed": True}
        touched = [f for f in pa.table(table.get_add_actions(flatten=True)).to_pylist()
                   if _may_hold(f, pattern.version, rng, staged_span)]
        inserted_rows, deleted, kept_rows, kept = rows_of.staged, 0, 0, None
        if touched:
            inserted_rows, deleted, kept = rows_of.diff(path, touched, pattern.version, rng)
            kept_rows = sum(int(f["num_records"] or 0) for f in touched) - deleted
        # at most n rows are new; what the files hold is the count (a task without rows
        # writes no file, so a rerun writes nothing)
        written = rows_of.write(inserted_rows, path, prefix, schema, n, rows.convert)
        n = sum(int(f["rows"]) for f in written)
        if n == 0 and deleted == 0:  # a rerun: nothing to change, no commit
            return {"inserted": 0, "deleted": 0, "published": table.count(),
                    "committed": False}
        if kept is not None:
            written += rows_of.write(kept, path, prefix, schema, kept_rows)
        delta_files.commit(lake, path, schema, written, touched, _counts(meta, n, deleted))
    except BaseException:
        delta_files.discard(lake, path, written)
        raise
    return {"inserted": n, "deleted": deleted, "published": lake.table(path).count(),
            "committed": True}


# commits that change no row of a match table: maintenance, and the table's documentation
# (``document_match_table``: its name, description, properties and column comments)
class _SparkRows:
    """The staged and published rows as Spark DataFrames: the executors join and write."""

    def __init__(self, spark, lake: lk.Lake, staging: str):
        from pyspark.sql import functions as F

        self.spark, self.lake, self.F = spark, lake, F
        self.staged = read_parquet_spark(spark, lake, staging).where(F.col("kind") == "match")

    def span(self) -> tuple[int, tuple[int, int] | None]:
        """(staged matches, (first, last) start_ts in ns or None)."""
        F = self.F
        b = self.staged.agg(F.count(F.lit(1)).alias("n"), F.min("start_ts").alias("low"),
                            F.max("start_ts").alias("high")).first()
        n = int(b["n"])
        return n, None if n == 0 else (parse_ts(b["low"]), parse_ts(b["high"]))

    def diff(self, path: str, touched: list[dict], version: str, rng: RunRange):
        """(staged rows not published yet, published rows to delete (a count), touched
        rows to keep)."""
        F = self.F
        old = read_spark(self.spark, self.lake, path,
                                   only={lk.file_name(f["path"]) for f in touched})
        low_column = None
        if rng.low is not None and rng.lows and rng.lows[1]:  # partitions' own starts
            keys, values = rng.lows
            types = {f.name: f.dataType for f in old.schema.fields}
            lows = self.spark.createDataFrame(
                [(*k, to_datetime(low)) for k, low in values], [*keys, "__scope_low"])
            old = old.join(F.broadcast(lows.select(
                *[F.col(k).cast(types[k]).alias(k) for k in keys], "__scope_low")),
                on=list(keys), how="left")
            low_column = F.col("__scope_low")
        mine = F.coalesce(_scope(F, version, rng, low_column), F.lit(False))
        marked = old.join(self.staged.select("match_id").distinct()
                          .withColumn("_staged", F.lit(True)), "match_id", "left")
        inserted = self.staged.join(old.select("match_id"), "match_id", "left_anti")
        deleted = marked.where(mine & F.col("_staged").isNull()).count()
        kept = marked.where(~mine | F.col("_staged").isNotNull()).drop("_staged")
        if low_column is not None:
            kept = kept.drop("__scope_low")
        return inserted, deleted, kept

    def write(self, df, path, prefix, schema, rows, convert=None) -> list[dict]:
        return delta_files.write(df, self.lake, path, prefix, schema, rows, convert)


class _ArrowRows:
    """The same steps as ``_SparkRows`` with Arrow tables on the driver (small runs)."""

    def __init__(self, lake: lk.Lake, dataset):
        self.lake = lake
        self.staged = dataset.to_table(filter=pc.field("kind") == "match")

    def span(self) -> tuple[int, tuple[int, int] | None]:
        n = self.staged.num_rows
        if n == 0:
            return 0, None
        ns = self.staged.column("start_ts").cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64())
        mm = pc.min_max(ns)
        return n, (mm["min"].as_py(), mm["max"].as_py())

    def diff(self, path: str, touched: list[dict], version: str, rng: RunRange):
        old = self.lake.read_arrow(path, only={lk.file_name(f["path"]) for f in touched})
        staged_ids = self.staged.column("match_id")
        published = pc.is_in(old.column("match_id"), value_set=staged_ids, skip_nulls=True)
        mine = pc.fill_null(_arrow_scope(old, version, rng), False)
        inserted = self.staged.filter(pc.invert(
            pc.is_in(staged_ids, value_set=old.column("match_id"), skip_nulls=True)))
        deleted = pc.sum(pc.and_(mine, pc.invert(published))).as_py() or 0
        kept = old.filter(pc.or_(pc.invert(mine), published))
        return inserted, deleted, kept

    def write(self, t: pa.Table, path, prefix, schema, rows, convert=None) -> list[dict]:
        if t.num_rows == 0:
            return []
        return [r for batch in delta_files.write_task(iter(t.to_batches()), self.lake, path,
                                                      prefix, schema, convert)
                for r in batch.to_pylist()]


def _counts(meta: dict, inserted: int, deleted: int) -> dict:
    return dict(meta, **dict(zip(COUNTS, (str(inserted), str(deleted)))))


def _scope(F, version: str, rng: RunRange, low_column=None):
    """The published rows this run is the truth for, as a Spark condition: its version's
    matches whose first event lies in the range and, on a full recompute, every row of
    another version. ``low_column``: each row's partition's own start (``rng.lows``),
    where it has one."""
    mine = F.col("pattern_version") == F.lit(version)
    mine &= F.col("start_ts") < F.lit(to_datetime(rng.high))
    if rng.low is not None:
        bound = F.lit(to_datetime(rng.low))
        mine &= F.col("start_ts") >= (bound if low_column is None
                                      else F.coalesce(low_column, bound))
    if rng.since is not None and rng.touched is not None:  # the night's partitions only
        keys, values = rng.touched
        joined = key_texts(values)
        mine &= F.concat_ws(SEP, *[F.col(k).cast("string") for k in keys]).isin(joined) \
            if joined else F.lit(False)
    return mine | (F.col("pattern_version") != F.lit(version)) if rng.full else mine


def _arrow_scope(old: pa.Table, version: str, rng: RunRange) -> pa.ChunkedArray:
    """``_scope`` over an Arrow table of published rows (null where Spark's is null)."""
    v, start = old.column("pattern_version"), old.column("start_ts")
    mine = pc.and_kleene(pc.equal(v, version),
                         pc.less(start, pa.scalar(to_datetime(rng.high), start.type)))
    if rng.low is not None and rng.lows and rng.lows[1]:
        keys, values = rng.lows
        at = pc.index_in(key_text(old, keys), value_set=pa.array(
            key_texts(k for k, _ in values), pa.string()))
        lows = pc.fill_null(pc.take(pa.array([low for _, low in values], pa.int64()), at),
                            rng.low)
        start_ns = pc.cast(pc.cast(start, pa.timestamp("ns", tz="UTC")), pa.int64())
        mine = pc.and_kleene(mine, pc.greater_equal(start_ns, lows))
    elif rng.low is not None:
        mine = pc.and_kleene(mine, pc.greater_equal(
            start, pa.scalar(to_datetime(rng.low), start.type)))
    if rng.since is not None and rng.touched is not None:  # the night's partitions only
        keys, values = rng.touched
        mine = pc.and_kleene(mine, pc.is_in(key_text(old, keys), value_set=pa.array(
            key_texts(values), pa.string())))
    return pc.or_kleene(mine, pc.not_equal(v, version)) if rng.full else mine


def key_text(t: pa.Table, keys) -> pa.ChunkedArray:
    """The partition attributes of each row as one text, as Spark's ``concat_ws`` of their
    casts writes it (a publish's scope on Spark and on Arrow, a row pattern's partitions)."""
    parts = [pc.cast(t.column(k), pa.string()) if not pa.types.is_floating(t.column(k).type)
             else _float_text(t.column(k)) for k in keys]
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, SEP)


def key_texts(values) -> list[str]:
    """Partitions' values (tuples) as the texts ``key_text`` gives their rows."""
    return [SEP.join(str(v) for v in k) for k in values]


def _float_text(column) -> pa.Array:
    """Floats as Python and Spark write them (``1.0``, not Arrow's ``1``)."""
    return pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())


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
    spans = [(rng.read_low if rng.read_low is not None else -2 ** 63, rng.high)]
    if staged:
        spans.append((staged[0], staged[1] + 1))
    return any(lo < high and hi > low for low, high in spans)


def _schema_changed(table, schema: pa.Schema) -> bool:
    current = pa.schema(table.schema().to_arrow())
    return [f.name for f in current] != [f.name for f in schema]
