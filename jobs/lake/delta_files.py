"""Delta data files written by the executors and committed by the driver.

The Delta protocol separates the two: a writer puts Parquet files into the table's folder,
and they become part of the table only with the commit of ``add`` actions that name them
(with their size and column statistics); ``remove`` actions in the same commit take other
files out. So the rows never pass through the driver: each Spark task writes its own file
and returns one small row (path, size, rows, statistics), and the driver commits the
actions through delta-rs's transaction API in one atomic commit. Readers see the old
snapshot or the new one, never a mix. A file written by a task whose commit never happens
(a crash, a retried task) is not part of any snapshot; ``discard`` deletes those of a run,
and ``vacuum`` any that are left.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from datetime import datetime, timedelta
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake.store import Lake

FILE_INFO = "path string, size long, rows long, stats string"  # one row per written file
ROWS_PER_FILE = 1_000_000


def write_task(batches: Iterator[pa.RecordBatch], lake: Lake, folder: str, prefix: str,
               schema: pa.Schema, convert: Callable | None = None
               ) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function: the task's batches, converted (``convert``) and cast to
    ``schema``, into one Parquet file ``<prefix>-<uuid>.parquet`` of ``folder``; yields
    the file's ``FILE_INFO`` row (nothing when the task has no rows). ``lake`` gives the
    task the store's filesystem and options (it runs on an executor)."""
    import pyarrow.parquet as pq

    filesystem, root = lake.filesystem(folder)
    name = f"{prefix}-{uuid.uuid4().hex}.parquet"
    target = f"{root}/{name}"
    writer, stats = None, FileStats(schema)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            t = convert(batch) if convert else pa.Table.from_batches([batch])
            t = t.select(schema.names).cast(schema)
            if writer is None:
                filesystem.create_dir(root, recursive=True)
                writer = pq.ParquetWriter(target, schema, filesystem=filesystem)
            writer.write_table(t)
            stats.update(t)
    except BaseException:
        if writer is not None:
            writer.close()
            filesystem.delete_file(target)
        raise
    if writer is None:
        return
    writer.close()
    size = filesystem.get_file_info(target).size
    yield pa.RecordBatch.from_pydict({"path": [name], "size": [size], "rows": [stats.rows],
                                      "stats": [stats.to_json()]})


def write(df, lake: Lake, folder: str, prefix: str, schema: pa.Schema, rows: int,
          convert: Callable | None = None) -> list[dict]:
    """The rows of Spark DataFrame ``df`` as Parquet files of ``folder``, written by the
    executors, about ``ROWS_PER_FILE`` rows per file (``rows``: how many ``df`` has);
    returns one ``FILE_INFO`` dict per file (a few per million rows)."""
    if rows == 0:
        return []
    files = max(1, math.ceil(rows / ROWS_PER_FILE))
    if df.rdd.getNumPartitions() > files:
        df = df.coalesce(files)
    out = df.mapInArrow(lambda it: write_task(it, lake, folder, prefix, schema, convert),
                        FILE_INFO)
    return [r.asDict() for r in out.collect()]


class FileStats:
    """Delta column statistics of one file (``numRecords``, ``minValues``,
    ``maxValues``, ``nullCount``) for its top-level primitive columns. Timestamps are
    written in milliseconds, the minimum rounded down and the maximum up, so data skipping
    on them never skips a file it should read; strings longer than 32 characters get no
    bounds (a truncated maximum would be too small)."""

    def __init__(self, schema: pa.Schema):
        self.fields = [f for f in schema if pa.types.is_primitive(f.type)
                       or pa.types.is_string(f.type)]
        self.rows = 0
        self.low: dict = {}
        self.high: dict = {}
        self.nulls = {f.name: 0 for f in self.fields}

    def update(self, t: pa.Table) -> None:
        self.rows += t.num_rows
        for f in self.fields:
            c = t.column(f.name)
            self.nulls[f.name] += c.null_count
            mm = pc.min_max(c)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if lo is None:
                continue
            self.low[f.name] = lo if f.name not in self.low else min(self.low[f.name], lo)
            self.high[f.name] = hi if f.name not in self.high else max(self.high[f.name], hi)

    def to_json(self) -> str:
        low, high = {}, {}
        for name, v in self.low.items():
            w = self.high[name]
            if isinstance(v, datetime):
                low[name], high[name] = _ms(v, up=False), _ms(w, up=True)
            elif isinstance(v, str):
                if len(v) <= 32 and len(w) <= 32:
                    low[name], high[name] = v, w
            elif isinstance(v, float) and not (math.isfinite(v) and math.isfinite(w)):
                continue
            else:
                low[name], high[name] = v, w
        return json.dumps({"numRecords": self.rows, "minValues": low, "maxValues": high,
                           "nullCount": self.nulls})


def _ms(ts: datetime, up: bool) -> str:
    us = ts.microsecond
    ms = us // 1000
    if up and us % 1000:
        ms += 1
    base = ts.replace(microsecond=0, tzinfo=None)
    if ms == 1000:
        base, ms = base + timedelta(seconds=1), 0
    return f"{base:%Y-%m-%dT%H:%M:%S}.{ms:03d}Z"


def add_actions(files: list[dict], partition: str | None = None):
    """``add`` actions for ``FILE_INFO`` dicts (``partition``: the column whose value each
    file's ``date`` holds)."""
    from deltalake.transaction import AddAction

    now = int(time.time() * 1000)
    return [AddAction(f["path"], int(f["size"]), {partition: f["date"]} if partition else {},
                      now, True, f["stats"]) for f in files]


def remove_actions(files: list[dict]):
    """``remove`` actions for rows of ``DeltaTable.get_add_actions(flatten=True)``."""
    from deltalake.transaction import RemoveAction

    now = int(time.time() * 1000)
    return [RemoveAction(path=f["path"], deletion_timestamp=now, data_change=True,
                         partition_values={}, size=int(f["size_bytes"])) for f in files]


def commit(lake: Lake, path: str, schema: pa.Schema, added: list[dict], removed: list[dict],
           metadata: dict[str, str], replace_all: bool = False,
           create: tuple[str, str, pa.Schema] | None = None) -> None:
    """One commit: ``added`` files in, ``removed`` files out (``replace_all``: every file
    out and ``schema`` the table's new schema); creates the table when there is none,
    with ``create`` (name, description, schema with the columns' comments) when given."""
    from deltalake import CommitProperties, Schema
    from deltalake.transaction import create_table_with_add_actions

    props = CommitProperties(custom_metadata=metadata)
    if not lake.exists(path):
        name, description, documented = create or (None, None, schema)
        create_table_with_add_actions(path, Schema.from_arrow(documented), add_actions(added),
                                      mode="error", name=name, description=description,
                                      commit_properties=props,
                                      storage_options=lake.storage_options)
        return
    dt = lake.table(path)
    if replace_all:
        dt.create_write_transaction(add_actions(added), mode="overwrite", schema=schema,
                                    commit_properties=props)
    else:
        dt.create_write_transaction(remove_actions(removed) + add_actions(added),
                                    mode="append", schema=schema, commit_properties=props)


def discard(lake: Lake, folder: str, files: list[dict]) -> None:
    """Delete written files that were not committed."""
    filesystem, root = lake.filesystem(folder)
    for f in files:
        filesystem.delete_file(f"{root}/{f['path']}")

