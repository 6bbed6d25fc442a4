"""The lake: table locations and Delta Lake reads and writes through delta-rs (``deltalake``).

delta-spark's JVM jars cannot be fetched here (no Maven), so Delta tables are written with
delta-rs from Arrow, and Spark reads a table's current snapshot as Parquet files
(``DeltaTable.file_uris()``, with ``basePath`` so that partition columns come back).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake


@dataclass(frozen=True)
class Lake:
    root: str

    def _p(self, *parts: str) -> str:
        return join(self.root, *parts)

    def events(self, source: str) -> str:
        return self._p("events", source)

    def quarantine(self, source: str) -> str:
        return self._p("quarantine", source)

    def ingest_log(self) -> str:
        return self._p("ingest_log")

    def staging(self, pattern: str, run_id: str) -> str:
        return self._p("staging", pattern, run_id)

    def matches(self, pattern: str) -> str:
        return self._p("matches", pattern)

    def runs(self) -> str:
        return self._p("runs")

    def stats(self, source: str) -> str:
        return self._p("stats", source)

    def retractions(self) -> str:
        return self._p("retractions")

    def model(self, name: str) -> str:
        return self._p("models", name)


def exists(path: str) -> bool:
    return DeltaTable.is_deltatable(path)


def table(path: str) -> DeltaTable:
    if not exists(path):
        raise FileNotFoundError(f"no Delta table at {path}: run the step that creates it first "
                                "(ingest creates events/<source>, publish creates matches/<pattern>)")
    return DeltaTable(path)


def read_arrow(path: str, columns: list[str] | None = None, filter=None) -> pa.Table:
    """A table's current snapshot as Arrow (for small tables: runs, ingest log)."""
    if not exists(path):
        return None
    ds = DeltaTable(path).to_pyarrow_dataset()
    return ds.to_table(columns=columns, filter=filter)


def append(path: str, data: pa.Table, partition_by: list[str] | None = None) -> None:
    write_deltalake(path, data, mode="append", partition_by=partition_by,
                    schema_mode="merge" if exists(path) else None)


def insert_new(path: str, data: pa.Table, key: str | tuple[str, ...],
               partition_by: list[str] | None = None) -> int:
    """Insert the rows of ``data`` whose key is not in the table yet (MERGE ... WHEN NOT
    MATCHED INSERT), creating the table if needed; returns the number of rows inserted."""
    if data.num_rows == 0:
        return 0
    if not exists(path):
        write_deltalake(path, data, partition_by=partition_by)
        return data.num_rows
    keys = (key,) if isinstance(key, str) else key
    predicate = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    metrics = (DeltaTable(path).merge(data, predicate=predicate, source_alias="s",
                                      target_alias="t")
               .when_not_matched_insert_all().execute())
    return int(metrics.get("num_target_rows_inserted", 0))


def count_rows(path: str, partition_filters=None) -> int:
    """Rows in the files a read with ``partition_filters`` scans, from the Delta log's
    per-file statistics (no data is read)."""
    dt = table(path)
    files = dt.file_uris(file_pruning_predicate=partition_filters) if partition_filters \
        else dt.file_uris()
    actions = pa.table(dt.get_add_actions(flatten=True))
    records = dict(zip(actions.column("path").to_pylist(),
                       actions.column("num_records").to_pylist()))
    wanted = {file_name(f) for f in files}
    return sum(n or 0 for p, n in records.items() if file_name(p) in wanted)


def file_name(path: str) -> str:
    """A data file's name, from its URI or from its path in the Delta log."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def read_spark(spark, path: str, partition_filters=None, only: set[str] | None = None):
    """Spark DataFrame over the current snapshot of a Delta table (only the files of the
    partitions that pass ``partition_filters``, e.g. [("event_date", ">=", "2006-01-01")],
    and, with ``only``, only the data files of these names)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    dt = table(path)
    files = dt.file_uris(file_pruning_predicate=partition_filters) if partition_filters \
        else dt.file_uris()
    if only is not None:
        files = [f for f in files if file_name(f) in only]
    if not files:
        schema = from_arrow_schema(pa.schema(dt.schema().to_arrow()))
        return spark.createDataFrame([], schema)
    return spark.read.option("basePath", path).parquet(*files)


# Files next to the tables (staged artifacts, listings), on a local path or an object
# store alike, through pyarrow's filesystem layer: no step needs to know which it is.

def filesystem(uri: str):
    """(pyarrow filesystem, path in it) for a local path or a URI (``s3://...``)."""
    import pyarrow.fs as pafs

    return pafs.FileSystem.from_uri(uri if "://" in uri else "file://" + os.path.abspath(uri))


def write_text(uri: str, text: str) -> None:
    """Write a small file (its folder is created when missing)."""
    fs, path = filesystem(uri)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as f:
        f.write(text.encode())


def read_text(uri: str) -> str:
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as f:
        return f.read().decode()


def remove_tree(uri: str) -> None:
    """Delete a folder and everything in it; nothing when it is not there."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def children(uri: str) -> list[str]:
    """Names of the folders directly in ``uri`` (none when it is not there)."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(i.base_name for i in found if i.type == pafs.FileType.Directory)


def join(root: str, *parts: str) -> str:
    """A path under ``root``: ``/`` for URIs, the OS separator for local paths."""
    return "/".join([root.rstrip("/"), *parts]) if "://" in root else os.path.join(root, *parts)
