"""A checked batch's events into ``events/<source>``: the Delta data files are written by
Spark's executors, straight into the table's ``event_date=<date>/`` folders, and the
driver commits their ``add`` actions through delta-rs in one commit (as publish commits
the match files), so the rows never pass through the driver.

The staged files (each split's typed events, or the one file of the kept rows when the
batch dropped some) are packed into tasks by their sizes; each file's rows are cast to
the events schema and grouped by ``event_date``, one data file per date. A split whose
events hold one date was written as its data file by the ingest task itself
(``tasks.DataFile``): that file is moved into its folder, not written again. A file
written or moved for a commit that never happens (a failed job, a killed driver) is part
of no snapshot; ``vacuum`` removes it. Without Spark the same task runs here, file after
file.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake import store as lk
from jobs.lake.delta_files import add_actions, discard, write_task
from jobs.landing.splits import balanced
from jobs.landing.typing import PARTITION, data_schema
from jobs.pipeline.ingest.staging import read_parquet
from jobs.pipeline.ingest.tasks import died

# a ``LOADED`` dict, one per data file written: path (relative to the table), size,
# rows, stats (Delta's JSON statistics) and date (its ``event_date``)
JOB_ATTEMPTS = 2  # the load job, run again once when a task was lost to a dead worker


def write_dates(table: pa.Table, lake: lk.Lake, path: str, schema: pa.Schema
                ) -> list[dict]:
    """The rows of ``table`` (the events schema) as data files of the table ``path``,
    one per ``event_date`` (``delta_files.write_task``); returns one ``LOADED`` dict per
    file (its path relative to the table)."""
    if table.num_rows == 0:
        return []
    table = table.select(schema.names).cast(schema)
    dates = table.column(PARTITION).combine_chunks()
    if dates.null_count:  # the events suite refuses them before any load
        raise ValueError("an event without its event_date reached the load")
    if len(dates) > 1 and pc.any(pc.less(dates[1:], dates[:-1])).as_py():
        # out of date order (a file's rows usually come in it: then nothing is moved)
        table = table.take(pc.sort_indices(dates, sort_keys=[("", "ascending")]))
        dates = table.column(PARTITION).combine_chunks()
    cuts = np.flatnonzero(pc.not_equal(dates[1:], dates[:-1]).to_numpy(zero_copy_only=False))
    starts = np.r_[0, cuts + 1]
    ends = np.r_[cuts + 1, len(dates)]
    data = table.drop_columns([PARTITION])
    written = data_schema(schema)
    out = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        date = dates[a].as_py()
        folder = f"{PARTITION}={date}"
        for batch in write_task(iter(data.slice(a, b - a).to_batches()), lake,
                                lk.join(path, folder), "part", written):
            out += [{**info, "path": f"{folder}/{info['path']}", "date": date}
                    for info in batch.to_pylist()]
    return out


def write_staged(uri: str, lake: lk.Lake, path: str, schema: pa.Schema) -> list[dict]:
    """One staged file's rows as data files of ``path`` (``write_dates``)."""
    return write_dates(read_parquet(lake, uri, columns=schema.names), lake, path, schema)


def _load_task(positions: Iterator[int], tasks: list[list[str]], lake: lk.Lake,
               path: str, schema: pa.Schema) -> Iterator[dict]:
    """A partition function of the load job: the staged files of the tasks at
    ``positions``, one after another; yields a ``LOADED`` dict per data file."""
    for k in positions:
        for f in tasks[k]:
            yield from write_staged(f, lake, path, schema)


def write_files(spark, lake: lk.Lake, files: list[str], path: str, schema: pa.Schema
                ) -> list[dict]:
    """Every staged file's rows as data files of ``path`` (by Spark's executors, the
    files packed into tasks by their sizes; without Spark here); returns the ``LOADED``
    dicts."""
    if not files:
        return []
    if spark is None:
        return [info for f in files for info in write_staged(f, lake, path, schema)]
    sizes = []
    for f in files:
        fs, where = lake.filesystem(f)
        sizes.append(fs.get_file_info(where).size or 0)
    sc = spark.sparkContext
    tasks = [[files[k] for k in t] for t in balanced(sizes, sc.defaultParallelism)]
    for attempt in range(JOB_ATTEMPTS):
        positions = sc.parallelize(range(len(tasks)), len(tasks))  # a task each, no plan
        try:
            return positions.mapPartitions(
                lambda it: _load_task(it, tasks, lake, path, schema)).collect()
        except Exception as exc:  # noqa: BLE001 - a dead worker: the job runs again
            if attempt + 1 == JOB_ATTEMPTS or not died(exc):
                raise
    return []


def commit_files(lake: lk.Lake, path: str, schema: pa.Schema, loaded: list[dict]) -> None:
    """One commit of the ``loaded`` files into ``path`` (created, partitioned by
    ``event_date``, when there is none)."""
    from deltalake import Schema
    from deltalake.transaction import create_table_with_add_actions

    actions = add_actions(loaded, PARTITION)
    if not lake.exists(path):
        create_table_with_add_actions(path, Schema.from_arrow(schema), actions, mode="error",
                                      partition_by=[PARTITION],
                                      storage_options=lake.storage_options)
        return
    lake.table(path).create_write_transaction(actions, mode="append", schema=schema,
                                              partition_by=[PARTITION])


def loadable(lake: lk.Lake, path: str, schema: pa.Schema) -> bool:
    """Whether the batch can be loaded as files: a new table, or one partitioned by
    ``event_date`` whose schema is the batch's (a source whose columns changed is
    appended by delta-rs, which merges the schemas)."""
    if not lake.exists(path):
        return True
    dt = lake.snapshot(path, required=True)
    if dt.metadata().partition_columns != [PARTITION]:
        return False
    have = pa.schema(dt.schema().to_arrow())
    return [(f.name, str(f.type)) for f in have] == [(f.name, str(f.type)) for f in schema]


def move_files(lake: lk.Lake, path: str, direct: list[dict], moved: list[dict]) -> None:
    """The tasks' data files (``Batch.direct``) moved into their ``event_date`` folders of
    ``path`` under new names; each one's ``LOADED`` dict goes to ``moved`` as it lands."""
    fs, root = lake.filesystem(path)
    for d in direct:
        folder = f"{PARTITION}={d['date']}"
        name = f"{folder}/part-{uuid.uuid4().hex}.parquet"
        fs.create_dir(f"{root}/{folder}", recursive=True)
        fs.move(lake.filesystem(d["staged"])[1], f"{root}/{name}")
        moved.append({"path": name, "size": d["size"], "rows": d["rows"],
                      "stats": d["stats"], "date": d["date"]})


def load(spark, lake: lk.Lake, path: str, files: list[str], schema: pa.Schema,
         direct: list[dict] = ()) -> int:
    """The staged ``files`` (the events schema and extra columns) and the tasks' data files
    (``direct``) committed into ``path``: the files written as data files (by the
    executors), the data files moved in place, then one commit; returns the rows."""
    loaded = write_files(spark, lake, files, path, schema)
    try:
        move_files(lake, path, direct, loaded)
        if loaded:
            commit_files(lake, path, schema, loaded)
    except BaseException:
        discard(lake, path, loaded)
        raise
    return sum(f["rows"] for f in loaded)
