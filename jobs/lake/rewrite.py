"""Rewriting a table's data files ourselves, so that every file keeps the types readers expect.

delta-rs writes the files of its MERGE, DELETE and OPTIMIZE through DataFusion, which keeps
strings as Arrow ``string_view`` and stores that in each Parquet file's Arrow schema. A
table that mixes such files with ``string`` ones cannot be read with a filter by pyarrow
(``Function 'greater_equal' has no kernel matching input types (string, string_view)``),
so one MERGE on the fourth night stopped a source for good. The lake therefore never
calls those operations: a delete (``delete_rows``) reads the files that hold the rows,
writes them again without those rows from Arrow with the table's own types, and commits
the removes and adds in one transaction (carrying the caller's commit metadata: a
retraction's row rides in its delete commit). ``retype`` repairs a table that already
holds view-typed files (a lake written before, or another tool's OPTIMIZE): the same rows,
plain types, one commit with ``dataChange`` false.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.lake.delta_files import FileStats
from jobs.lake.store import Lake, file_name, join

VIEWS = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}


def plain(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the view types of its top-level fields as plain strings/binaries."""
    return pa.schema([f.with_type(VIEWS.get(f.type, f.type)) for f in schema],
                     metadata=schema.metadata)


def has_views(schema: pa.Schema) -> bool:
    return any(f.type in VIEWS for f in schema)


def add_rows(lake: Lake, path: str, partition_filters=None) -> list[dict]:
    """The add actions of the table's snapshot (``DeltaTable.get_add_actions``, flat), only
    those of the partitions ``partition_filters`` keeps."""
    dt = lake.table(path)
    rows = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    if partition_filters:
        wanted = {file_name(u) for u in dt.file_uris(file_pruning_predicate=partition_filters)}
        rows = [r for r in rows if file_name(unquote(r["path"])) in wanted]
    return rows


def _partition_values(row: dict) -> dict[str, str | None]:
    return {k[len("partition."):]: (None if v is None else str(v))
            for k, v in row.items() if k.startswith("partition.")}


def _read(lake: Lake, path: str, row: dict) -> pa.Table:
    fs, where = lake.filesystem(join(path, unquote(row["path"])))
    with fs.open_input_file(where) as f:
        t = pq.read_table(f)
    return t.cast(plain(t.schema))


def _write(lake: Lake, path: str, row: dict, t: pa.Table, data_change: bool):
    """``t`` as a new file in the folder of ``row``'s file; its add action."""
    from deltalake.transaction import AddAction

    rel = unquote(row["path"])
    folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
    name = f"{folder}part-ses-{uuid.uuid4().hex}.parquet"
    fs, where = lake.filesystem(join(path, name))
    fs.create_dir(where.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(where) as out:
        pq.write_table(t, out, compression="snappy")
    stats = FileStats(t.schema)
    stats.update(t)
    size = fs.get_file_info(where).size
    return AddAction(name, size, _partition_values(row), int(time.time() * 1000), data_change,
                     stats.to_json())


def rewrite(lake: Lake, path: str, files: list[dict],
            keep: Callable[[pa.Table], pa.Table] | None, metadata: dict[str, str],
            data_change: bool = True) -> int:
    """Rewrite ``files`` (add-action rows) of the table at ``path``, each through ``keep``
    (None: the same rows), with plain types; one commit of their removes and the new adds,
    with ``metadata``. Returns the rows ``keep`` dropped. A file left with no rows is
    removed, not rewritten; a file ``keep`` leaves unchanged (and plain) is not touched."""
    from deltalake import CommitProperties
    from deltalake.transaction import RemoveAction

    actions, dropped, written = [], 0, []
    now = int(time.time() * 1000)
    try:
        for row in files:
            t = _read(lake, path, row)
            kept = keep(t) if keep is not None else t
            if kept.num_rows == t.num_rows and keep is not None:
                continue
            dropped += t.num_rows - kept.num_rows
            actions.append(RemoveAction(path=unquote(row["path"]), data_change=data_change,
                                        deletion_timestamp=now, size=int(row["size_bytes"]),
                                        partition_values=_partition_values(row)))
            if kept.num_rows:
                add = _write(lake, path, row, kept, data_change)
                written.append(add.path)
                actions.append(add)
        if not actions:
            return 0
        dt = lake.table(path)
        dt.create_write_transaction(actions, mode="append",
                                    schema=plain(pa.schema(dt.schema().to_arrow())),
                                    partition_by=dt.metadata().partition_columns or None,
                                    commit_properties=CommitProperties(custom_metadata=metadata))
    except BaseException:
        for name in written:  # not committed: no snapshot names them
            lake.remove(join(path, name))
        raise
    return dropped


def view_files(lake: Lake, path: str, since_ms: int = 0) -> list[dict]:
    """The data files of the table's snapshot (added after ``since_ms``) whose Parquet
    footer stores view types."""
    out = []
    for row in add_rows(lake, path):
        if int(row["modification_time"]) < since_ms:
            continue
        fs, where = lake.filesystem(join(path, unquote(row["path"])))
        with fs.open_input_file(where) as f:
            if has_views(pq.read_schema(f)):
                out.append(row)
    return out


def retype(lake: Lake, path: str, since_ms: int = 0) -> int:
    """Rewrite the table's view-typed files (added after ``since_ms``) with plain types, the
    same rows, in one commit that changes no data; returns the files rewritten."""
    files = view_files(lake, path, since_ms)
    if files:
        rewrite(lake, path, files, None, {"ses.operation": "retype"}, data_change=False)
    return len(files)

