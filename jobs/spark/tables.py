"""The lake's tables and staged files as Spark frames. Spark reads a Delta table's current
snapshot as its Parquet files (delta-spark's jars cannot be fetched here), with the data
columns' schema of the Delta log, so no job runs to infer one; a small table is held in
the session's memory once read; frames over the same files are kept per session. The lake
itself (``jobs.lake``) knows no Spark.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
from deltalake import DeltaTable

from jobs.lake.cache import Bounded
from jobs.lake.paths import file_name
from jobs.lake.snapshots import data_files, holdable, snapshot_key
from jobs.lake.store import Lake

# Spark frames over the same data files, kept per session: Spark lists every file of a
# new frame (0.3-0.5 s for the 1,096 date partitions of the hospital's events), and a
# night reads one table for many patterns. Delta data files never change, so the same
# files are the same rows.
FRAMES = Bounded(64)
# A small table's whole snapshot (at most ``HELD_BYTES`` of Parquet), held in the
# session's memory once it is read: Spark opens each data file once per query (a copy of
# the Hadoop configuration per file, 20 % of a night's JVM time over the committed data),
# and a night reads a source's events for every pattern. A query over the hospital's
# 1,096 files took 0.9-1.0 s from Parquet and 0.15 s from memory. Kept by table path (the
# latest snapshot read), a few at a time; a frame let go is unpersisted.
HELD = Bounded(4, on_evict=lambda held: _unpersist(held[2]))
PARTITION_OPS = {"=", "!=", "<", "<=", ">", ">=", "in", "not in"}


def _unpersist(frame) -> None:
    """Let a held frame's cached blocks go (nothing when its session has stopped)."""
    try:
        frame.unpersist()
    except Exception:  # noqa: BLE001, S110 - a stopped session holds nothing any more
        pass


def read_spark(spark, lake: Lake, path: str, partition_filters=None,
               only: set[str] | None = None):
    """Spark DataFrame over the current snapshot of a Delta table (only the files of
    the partitions that pass ``partition_filters``, e.g. [("event_date", ">=",
    "2006-01-01")], and, with ``only``, only the data files of these names). Spark
    reads an object-store lake through Hadoop's ``s3a`` filesystem
    (``jobs.spark.session.require_object_store``)."""
    dt = lake.snapshot(path, required=True)
    files = data_files(dt, partition_filters)
    if only is not None:
        files = [f for f in files if file_name(f) in only]
    if not files:
        return spark.createDataFrame([], _spark_schema(dt))
    if lake.local and only is None:
        try:
            held = _held_frame(spark, path, dt, partition_filters)
        except Exception:
            lake.check_files(path, footers=True)  # as below
            raise
        if held is not None:
            return held
    key = (id(spark), path, tuple(files))
    hit = FRAMES.get(key)  # the night's match jobs may read from several threads
    if hit is not None and hit[0] is spark:
        if all(os.path.exists(f) for f in files):  # a file lost: BrokenTable below
            return hit[1]
        FRAMES.pop(key)
    try:
        df = _reader(spark, dt).option("basePath", spark_uri(path)).parquet(
            *(spark_uri(f) for f in files))
    except Exception:
        # a data file gone or not Parquet: BrokenTable says so in one line
        lake.check_files(path, footers=True)
        raise
    if lake.local:  # an object store would be asked for every file on each hit
        FRAMES.put(key, (spark, df))
    return df


def read_parquet_spark(spark, lake: Lake, uri: str):
    """Spark DataFrame over a folder of Parquet files the pipeline wrote (a run's
    staged rows), with the schema of a footer read here, as Spark would infer it: the
    Spark schema a Spark writer leaves in the footer (its timestamps are INT96, which
    Arrow reads as local times), else the Arrow schema's. Spark then runs no job to
    infer it (one per read). A folder without files, or a type Spark has no equivalent
    for (nanosecond times among them), leaves the inference to Spark (and its error)."""
    import pyarrow.dataset as pads
    from pyspark.sql.types import StructType

    reader = spark.read
    fs, folder = lake.filesystem(uri)
    try:
        schema = pads.dataset(folder, filesystem=fs, format="parquet").schema
        written = (schema.metadata or {}).get(SPARK_ROW_METADATA)
        if written is not None:
            reader = spark.read.schema(StructType.fromJson(json.loads(written)))
        elif len(schema) and not any(pa.types.is_timestamp(f.type) and f.type.unit == "ns"
                                     for f in schema):  # Spark reads no nanoseconds
            reader = spark.read.schema(_arrow_to_spark(schema))
    except (OSError, TypeError, ValueError, KeyError, NotImplementedError,
            pa.ArrowException):
        pass
    return reader.parquet(spark_uri(uri))


def _held_frame(spark, path: str, dt: DeltaTable, partition_filters):
    """The frame of ``dt``'s snapshot, from the session's memory (``HELD``), with the
    rows of the partitions ``partition_filters`` keeps; None when the table is too large
    to hold or a filter is not a plain comparison of a partition column."""
    from pyspark.sql import functions as F

    wanted = list(partition_filters or ())
    if not all(isinstance(f, tuple) and len(f) == 3 and f[1] in PARTITION_OPS
               and f[0] in dt.metadata().partition_columns for f in wanted):
        return None
    key = snapshot_key(dt)
    hit = HELD.get(path)
    if hit is not None and hit[0] is spark and hit[1] == key and \
            all(os.path.exists(f) for f in hit[3]):
        whole = hit[2]
    else:
        if not holdable(dt):
            return None
        files = dt.file_uris()
        whole = _reader(spark, dt).option("basePath", spark_uri(path)).parquet(
            *(spark_uri(f) for f in files)).cache()
        HELD.put(path, (spark, key, whole, files))
    kinds = {f.name: f.dataType.typeName() for f in whole.schema.fields}
    if any(kinds.get(name) not in ("string", "date") for name, _, _ in wanted):
        return None  # compared as text below: only text and dates compare as they do
    df = whole
    for name, op, value in wanted:
        c = F.col(name).cast("string")
        if op in ("in", "not in"):
            test = c.isin([str(v) for v in value])
            df = df.where(test if op == "in" else ~test)
        else:
            df = df.where({"=": c == str(value), "!=": c != str(value), "<": c < str(value),
                           "<=": c <= str(value), ">": c > str(value),
                           ">=": c >= str(value)}[op])
    return df


SPARK_ROW_METADATA = b"org.apache.spark.sql.parquet.row.metadata"  # a Spark writer's schema


def _spark_schema(dt: DeltaTable):
    """The Spark schema of the table's Delta log."""
    return _arrow_to_spark(pa.schema(dt.schema().to_arrow()))


def _arrow_to_spark(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _reader(spark, dt: DeltaTable):
    """``spark.read`` with the data columns' schema of the table's Delta log, as a Delta
    reader takes it: Spark then reads no Parquet footer to infer one (a Spark job per
    read, two thirds of the time of registering a lake's views). The partition columns
    are left out, so Spark types them from the folder names as it did before (``event_date``
    a date); a type Spark has no equivalent for leaves the inference on."""
    from pyspark.sql.types import StructType

    parts = set(dt.metadata().partition_columns)
    try:
        schema = _spark_schema(dt)
    except (TypeError, ValueError, NotImplementedError):
        return spark.read
    return spark.read.schema(StructType([f for f in schema.fields if f.name not in parts]))


def spark_uri(uri: str) -> str:
    """The URI Spark reads: Hadoop's S3 filesystem is ``s3a://`` (delta-rs writes
    ``s3://``)."""
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri
