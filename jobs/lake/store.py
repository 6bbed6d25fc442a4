"""The lake: one store through which every step reaches its tables and staged files.

``Lake`` knows where each table lives and carries the storage options of the lake's
object store (``storage_options`` in the profile; none for a local folder). Delta tables
are read and written through delta-rs (``deltalake``): delta-spark's JVM jars cannot be
fetched here (no Maven), so tables are written from Arrow, and Spark reads a table's
current snapshot as its Parquet files (``jobs.spark.tables``). Other files (staged artifacts, run plans, listings) go
through pyarrow's filesystem layer with the same options, so that no step needs to know
whether the lake is a local folder or a bucket.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import CommitProperties, DeltaTable, write_deltalake

from jobs.core.errors import UserError
from jobs.lake.paths import file_name, filesystem, join
from jobs.lake.snapshots import data_files, held_table, latest, scan, snapshot_dataset

BROKEN_HELP = ("docs/operations.md, 'A table that cannot be read': restore the file, or move "
               "the table's folder away and run `ses run` to rebuild it")


class BrokenTable(UserError):
    """A table of the lake whose Delta log or data files cannot be read (a commit file cut
    short, a data file gone): one line naming the table, the cause and the next step. The
    other tables keep working."""

    def __init__(self, table: str, cause: str):
        super().__init__(f"the lake's table {table} cannot be read ({cause}); {BROKEN_HELP}")
        self.table = table


TABLE_KINDS = ("events", "matches", "quarantine", "stats", "models")
# the tables of one name at the lake's root: the run logs, retractions, the night's checks
# and the patterns' funnels
SINGLE_TABLES = ("runs", "ingest_log", "retractions", "health", "funnels")


def broken_in(text: str) -> BrokenTable | None:
    """The ``BrokenTable`` of the lake's table whose data file a Spark error ``text`` names
    (a corrupt or truncated Parquet file, met while a job ran), or None when it names
    none."""
    import re

    kinds = "|".join(TABLE_KINDS)
    found = re.search(r"(?:^|[\s:'\"\[(])((?:[a-z0-9]+:)?/\S*?/(" + kinds + r")/([^/\s]+)/"
                      r"(?:[^/\s]+/)?([^/\s]+\.parquet))", text)
    if found is None:
        return None
    why = next((line.strip() for line in text.splitlines()
                if any(w in line for w in ("not a Parquet file", "footer", "Corrupt",
                                           "corrupt", "magic number", "EOF", "truncated"))),
               "its data file cannot be read")
    return BrokenTable(f"{found.group(2)}/{found.group(3)}",
                       f"data file {found.group(4)}: {why[:160]}")


LOCAL_HOME = "~/.cache/ses-lakehouse"  # this machine's side of a lake on an object store


# rows per commit of a streamed insert: delta-rs holds each open partition file's bytes
# until its commit, so a batch of a million rows over a thousand dates would be held whole
COMMIT_ROWS = 250_000


@dataclass(frozen=True)
class Lake:
    root: str
    options: tuple[tuple[str, str], ...] = ()  # delta-rs storage options, as sorted pairs

    @classmethod
    def of(cls, root: str, storage_options: dict[str, str] | None = None) -> "Lake":
        return cls(root, tuple(sorted((storage_options or {}).items())))

    @classmethod
    def of_profile(cls, profile) -> "Lake":
        """The profile's lake (``conf/pipeline.yaml``), with its storage options."""
        return cls.of(profile.lake, profile.storage_options)

    @property
    def storage_options(self) -> dict[str, str] | None:
        return dict(self.options) or None

    @property
    def local(self) -> bool:
        return "://" not in self.root

    def local_home(self, base: str | None = None) -> Path:
        """A folder on this machine for what belongs to the lake but is no table (its
        locks, the Great Expectations context and Data Docs): the lake's own folder for a
        local lake; for a lake on an object store (or with ``base``) a folder under
        ``base`` (default ``~/.cache/ses-lakehouse``) named after the lake."""
        if base is None and self.local:
            return Path(self.root)
        digest = hashlib.sha256(self.root.encode()).hexdigest()[:16]
        return Path(base or LOCAL_HOME).expanduser() / digest

    # -- where things are ----------------------------------------------------------------
    def _p(self, *parts: str) -> str:
        return join(self.root, *parts)

    def events(self, source: str) -> str:
        return self._p("events", source)

    def quarantine(self, source: str) -> str:
        return self._p("quarantine", source)

    def ingest_log(self) -> str:
        return self._p("ingest_log")

    def staging(self, pattern: str | None = None, run_id: str | None = None) -> str:
        return self._p("staging", *(p for p in (pattern, run_id) if p))

    def run_plans(self) -> str:
        return self._p("_runs")

    def matches(self, pattern: str | None = None) -> str:
        return self._p("matches", *([pattern] if pattern else []))

    def runs(self) -> str:
        return self._p("runs")

    def stats(self, source: str) -> str:
        return self._p("stats", source)

    def health(self) -> str:
        """The night's checks: freshness, volume, held changes (``jobs.lake.health``)."""
        return self._p("health")

    def first_ever(self, pattern: str) -> str:
        """A ``first_ever`` pattern's state: each partition's first event per variable."""
        return self._p("first_ever", pattern)

    def partition_state(self, pattern: str) -> str:  # match/partition_state.py
        return self._p("partition_state", pattern)

    def funnels(self) -> str:
        """How far each pattern's windows got, step by step, per run (``jobs.lake.funnels``)."""
        return self._p("funnels")

    def changes(self, pattern: str | None = None) -> str:
        """A match table's change feed (``jobs.lake.changes``)."""
        return self._p("changes", *([pattern] if pattern else []))

    def lineage(self) -> str:
        """OpenLineage events, one JSON file each (``jobs.pipeline.upkeep.lineage``)."""
        return self._p("_lineage")

    def retractions(self) -> str:
        return self._p("retractions")

    def model(self, name: str) -> str:
        return self._p("models", name)

    # -- Delta tables (delta-rs) ---------------------------------------------------------
    def exists(self, path: str) -> bool:
        return DeltaTable.is_deltatable(path, storage_options=self.storage_options)

    def read_table(self, path: str) -> DeltaTable | None:
        """The table at ``path``, or None when there is none (one read of its log);
        ``BrokenTable`` when its log cannot be read."""
        from deltalake.exceptions import DeltaError, TableNotFoundError

        try:
            return DeltaTable(path, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        except DeltaError as exc:
            raise BrokenTable(self.name_of(path), _first_line(exc)) from None

    def name_of(self, path: str) -> str:
        """A table's path as the lake names it (``matches/<pattern>``, ``runs``)."""
        root = self.root.rstrip("/")
        rel = path[len(root):].lstrip("/\\") if path.startswith(root) else path
        return rel.replace(os.sep, "/") or path

    def check_files(self, path: str, footers: bool = False) -> None:
        """``BrokenTable`` when a data file of the table's current snapshot is gone (and,
        with ``footers``, when one is not Parquet: its footer is read; for the failure
        paths that must say which table)."""
        import pyarrow.parquet as pq

        dt = self.read_table(path)
        if dt is None:
            return
        for uri in data_files(dt):
            fs, where = self.filesystem(uri)
            if fs.get_file_info(where).type == pafs.FileType.NotFound:
                raise BrokenTable(self.name_of(path),
                                  f"its data file {file_name(uri)} is missing")
            if footers:
                try:
                    with fs.open_input_file(where) as f:
                        pq.read_metadata(f)
                except (pa.ArrowInvalid, OSError) as exc:
                    raise BrokenTable(self.name_of(path), f"data file {file_name(uri)}: "
                                      f"{_first_line(exc)[:160]}") from None

    def snapshot(self, path: str, required: bool = False) -> DeltaTable | None:
        """The table's latest snapshot, to read and never to write through (the object is
        shared by the process's readers): on a local lake kept while its log gains no
        commit (``snapshots.latest``); else ``read_table``. None when there is no table;
        ``required``: the error of ``table`` instead."""
        opener = self.table if required else self.read_table
        return latest(path, opener) if self.local else opener(path)

    def table(self, path: str) -> DeltaTable:
        dt = self.read_table(path)
        if dt is None:
            raise FileNotFoundError(
                f"no Delta table at {path}: run the step that creates it first (ingest "
                "creates events/<source>, publish creates matches/<pattern>)")
        return dt

    def read_arrow(self, path: str, columns: list[str] | None = None,
                   filter=None, partition_filters=None,
                   only: set[str] | None = None) -> pa.Table | None:
        """A table's current snapshot as Arrow (for small tables: runs, ingest log, a
        small night's events), only the files of the partitions that pass
        ``partition_filters`` and, with ``only``, only the data files of these names (as
        in ``jobs.spark.tables.read_spark``)."""
        import pyarrow.dataset as pads

        dt = self.snapshot(path)
        if dt is None:
            return None
        try:
            if self.local and only is None and not _special(columns, filter):
                held = held_table(dt)
                if held is not None:
                    try:
                        return _filtered(held, columns, filter, partition_filters)
                    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
                        pass  # a filter the files' scan takes otherwise: read them
            dataset = snapshot_dataset(dt, partition_filters)
            if only is not None:
                dataset = pads.FileSystemDataset(
                    [f for f in dataset.get_fragments() if file_name(f.path) in only],
                    dataset.schema, dataset.format, dataset.filesystem)
            return scan(dataset, columns, filter)
        except FileNotFoundError as exc:
            raise BrokenTable(self.name_of(path),
                              f"a data file is missing: {_first_line(exc)[:200]}") from None
        except (pa.ArrowInvalid, OSError) as exc:  # a data file that is not Parquet
            if "parquet" not in str(exc).lower() and "magic" not in str(exc).lower():
                raise
            raise BrokenTable(self.name_of(path),
                              f"a data file cannot be read: {_first_line(exc)[:200]}") from None

    def write(self, path: str, data, mode: str = "error", **kw) -> None:
        """``deltalake.write_deltalake`` on this lake (``kw``: its other arguments)."""
        write_deltalake(path, data, mode=mode, storage_options=self.storage_options, **kw)

    def append(self, path: str, data: pa.Table, partition_by: list[str] | None = None,
               metadata: dict[str, str] | None = None) -> None:
        """Append ``data`` (``metadata``: the commit's custom metadata)."""
        kw = {"commit_properties": CommitProperties(custom_metadata=metadata)} if metadata else {}
        self.write(path, data, mode="append", partition_by=partition_by,
                   schema_mode="merge" if self.exists(path) else None, **kw)

    def insert_new(self, path: str, data: pa.Table, key: str | tuple[str, ...],
                   partition_by: list[str] | None = None, same_partition: bool = False) -> int:
        """Insert the rows of ``data`` whose key is not in the table yet, creating the table
        if needed; returns the number of rows inserted. Not a delta-rs MERGE: its files
        store ``string_view`` columns, and a table that mixes them with ``string`` files
        cannot be read with a filter (``jobs.lake.rewrite``). The keys already there are
        read (a filter on the first key's values), the others appended in one commit;
        callers hold the lake lock, so no other writer inserts the same key meanwhile.
        ``same_partition``: a key already there is in the partition its row would go to
        (events: a row with an id already there and another date was quarantined as a
        correction before), so only the batch's partitions are read."""
        import pyarrow.compute as pc

        if data.num_rows == 0:
            return 0
        if not self.exists(path):
            self.write(path, data, partition_by=partition_by)
            return data.num_rows
        keys = (key,) if isinstance(key, str) else tuple(key)
        parts = None
        if same_partition and partition_by:
            parts = [(c, "in", [str(v) for v in pc.unique(data.column(c)).to_pylist()])
                     for c in partition_by]
        there = self.read_arrow(path, columns=list(keys), partition_filters=parts,
                                filter=pc.field(keys[0]).isin(pc.unique(data.column(keys[0]))))
        if there is not None and there.num_rows:
            new = pc.invert(pc.is_in(_key_text(data, keys), value_set=_key_text(there, keys)))
            data = data.filter(new)
        if data.num_rows:
            self.append(path, data, partition_by=partition_by)
        return data.num_rows

    def insert_new_stream(self, path: str, batches, schema: pa.Schema, key: str,
                          partition_by: list[str] | None = None,
                          same_partition: bool = False) -> int:
        """``insert_new`` for rows that do not fit in memory: ``batches()`` gives them as
        Arrow record batches (called twice when the table exists: once for the keys already
        there, once to write), appended from Arrow (plain types) in commits of at most
        ``COMMIT_ROWS`` rows: memory holds one commit's rows and the key column. A crash
        between two commits leaves the rest for the rerun, which inserts only the keys
        that are not there yet (ingest logs its files after all of them)."""
        import pyarrow.compute as pc

        there = None
        if self.exists(path):
            keys, parts = [], {c: set() for c in (partition_by or []) if same_partition}
            for b in batches():
                keys.append(pc.unique(b.column(key)))
                for c in parts:
                    parts[c].update(str(v) for v in pc.unique(b.column(c)).to_pylist())
            if keys:
                wanted = pc.unique(pa.chunked_array(keys, schema.field(key).type))
                del keys
                found = self.read_arrow(path, columns=[key], filter=pc.field(key).isin(wanted),
                                        partition_filters=[(c, "in", sorted(v))
                                                           for c, v in parts.items()] or None)
                there = found.column(key) if found is not None and found.num_rows else None
        inserted, part = 0, []

        def flush() -> None:
            reader = pa.RecordBatchReader.from_batches(schema, part)
            if self.exists(path):
                self.write(path, reader, mode="append", partition_by=partition_by,
                           schema_mode="merge")
            else:
                self.write(path, reader, partition_by=partition_by)
            part.clear()

        for b in batches():
            t = pa.Table.from_batches([b]).select(schema.names).cast(schema)
            if there is not None:
                t = t.filter(pc.invert(pc.is_in(t.column(key), value_set=there)))
            inserted += t.num_rows
            part.extend(t.to_batches())
            if sum(x.num_rows for x in part) >= COMMIT_ROWS:
                flush()
        if part:
            flush()
        return inserted

    def count_rows(self, path: str, partition_filters=None, table=None) -> int:
        """Rows in the files a read with ``partition_filters`` scans, from the Delta log's
        per-file statistics (no data is read); ``table``: the table, when it is open."""
        dt = table if table is not None else self.snapshot(path, required=True)
        files = data_files(dt, partition_filters)
        actions = pa.table(dt.get_add_actions(flatten=True))
        records = dict(zip(actions.column("path").to_pylist(),
                           actions.column("num_records").to_pylist()))
        wanted = {file_name(f) for f in files}
        return sum(n or 0 for p, n in records.items() if file_name(p) in wanted)

    # -- other files (pyarrow filesystems) -----------------------------------------------
    def filesystem(self, uri: str):
        """(pyarrow filesystem, path in it) for a local path or an object-store URI."""
        return filesystem(uri, self.storage_options)

    def write_text(self, uri: str, text: str) -> None:
        """Write a small file (its folder is created when missing)."""
        fs, path = self.filesystem(uri)
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(path) as f:
            f.write(text.encode())

    def read_text(self, uri: str) -> str:
        fs, path = self.filesystem(uri)
        with fs.open_input_stream(path) as f:
            return f.read().decode()

    def remove(self, uri: str) -> None:
        """Delete a file or a folder and everything in it; nothing when it is not there."""
        import pyarrow.fs as pafs

        fs, path = self.filesystem(uri)
        kind = fs.get_file_info(path).type
        if kind == pafs.FileType.Directory:
            fs.delete_dir(path)
        elif kind == pafs.FileType.File:
            fs.delete_file(path)

    def children(self, uri: str, files: bool = False) -> list[str]:
        """Names of the folders (``files``: the files) directly in ``uri``; none when it
        is not there."""
        import pyarrow.fs as pafs

        fs, path = self.filesystem(uri)
        if fs.get_file_info(path).type != pafs.FileType.Directory:
            return []
        kind = pafs.FileType.File if files else pafs.FileType.Directory
        found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(i.base_name for i in found if i.type == kind)


def _key_text(t: pa.Table, keys: tuple[str, ...]) -> pa.Array:
    """One text per row of ``t`` for the composite key ``keys`` (unit separators between)."""
    import pyarrow.compute as pc

    cols = [pc.cast(t.column(k), pa.string()) for k in keys]
    if len(cols) == 1:
        return cols[0]
    return pc.binary_join_element_wise(*[pc.fill_null(c, "\x00") for c in cols], "\x1f")


def _special(columns, filter) -> bool:
    """A read that asks for a column only the files have (``__filename``)."""
    return any(c.startswith("__") for c in columns or ()) or "__" in str(filter)


def _filtered(table: pa.Table, columns, filter, partition_filters) -> pa.Table:
    """What a scan of ``table``'s files with these arguments returns."""
    import pyarrow.parquet as pq

    if partition_filters:
        table = table.filter(pq.filters_to_expression(partition_filters))
    if filter is not None:
        table = table.filter(filter)
    return table.select(columns) if columns else table


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__
