"""What a process keeps of the lake's table snapshots between reads, all in bounded
caches (``cache.Bounded``): each local table's latest snapshot while its log gains no
commit (``latest``), the Arrow datasets of snapshots, and small tables' snapshots held
whole as Arrow. Delta's data files never change, so what a snapshot names stays right;
a kept snapshot is for reading: a writer opens the table afresh."""

from __future__ import annotations

import os
from collections.abc import Callable

import pyarrow as pa
from deltalake import DeltaTable

from jobs.lake.cache import Bounded

# A small table's whole snapshot as Arrow on the driver (by table URI: its latest snapshot
# read), at most ``HELD_BYTES`` of Parquet, a few at a time: a night's reads of a source's
# events open each of its files once
HELD_ARROW = Bounded(4)
HELD_BYTES = 32 * 2**20
# Arrow datasets of table snapshots, by table, snapshot and partition filter: delta-rs
# makes an expression per data file (about 0.4 ms each: a day-partitioned events table
# has hundreds), and a night reads the same snapshot of a source's events several times
DATASETS = Bounded(32)
# The latest snapshot of local tables, by path: (the DeltaTable, its version, its commit
# file's signature), kept while no later commit exists (``latest``)
SNAPSHOTS = Bounded(64)


def latest(path: str, opener: Callable[[str], DeltaTable | None]) -> DeltaTable | None:
    """The latest snapshot of the local table at ``path``: the kept one while no later
    commit exists (a night reads its small tables dozens of times, and each open replays
    the log: about 5 ms), else ``opener(path)``'s, kept."""
    held = SNAPSHOTS.get(path)
    if held is not None and _still_latest(path, held[1], held[2]):
        return held[0]
    dt = opener(path)
    if dt is not None:
        version = dt.version()
        signature = _commit_signature(path, version)
        if signature is not None:
            SNAPSHOTS.put(path, (dt, version, signature))
    return dt


def _commit(path: str, version: int) -> str:
    return os.path.join(path, "_delta_log", f"{version:020d}.json")


def _commit_signature(path: str, version: int) -> tuple | None:
    """What tells a local table's commit file of ``version`` from any other written at
    that name later (a table deleted and made again): its inode, time and size."""
    try:
        st = os.stat(_commit(path, version))
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _still_latest(path: str, version: int, signature: tuple) -> bool:
    """Whether a local table's latest version is still ``version``, committed by the file
    of ``signature``: Delta's versions follow one another, so no commit after it means
    no file of the next version (two ``stat`` calls, not a replay of the log)."""
    return _commit_signature(path, version) == signature \
        and not os.path.exists(_commit(path, version + 1))


def snapshot_key(dt: DeltaTable) -> tuple:
    """What names a snapshot's files, which never change: the table, its id and version."""
    return (dt.table_uri, dt.metadata().id, dt.version())


def holdable(dt: DeltaTable) -> bool:
    """Whether the snapshot's data files add up to at most ``HELD_BYTES``."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    return sum(actions.column("size_bytes").to_pylist()) <= HELD_BYTES


def held_table(dt: DeltaTable) -> pa.Table | None:
    """A small table's whole snapshot as Arrow, read once per process (``HELD_ARROW``):
    the driver's reads of a source's events, as Spark's (``jobs.spark.tables``), open each
    of its files once. None when the table is larger than ``HELD_BYTES`` of Parquet."""
    key = snapshot_key(dt)
    hit = HELD_ARROW.get(dt.table_uri)
    if hit is not None and hit[0] == key and all(os.path.exists(f) for f in hit[2]):
        return hit[1]
    if not holdable(dt):
        return None
    files = dt.file_uris()
    table = scan(snapshot_dataset(dt))
    HELD_ARROW.put(dt.table_uri, (key, table, files))
    return table


def data_files(dt: DeltaTable, partition_filters=None) -> list[str]:
    """The URIs of the snapshot's data files (of the partitions ``partition_filters``
    keeps)."""
    if partition_filters:
        return dt.file_uris(file_pruning_predicate=partition_filters)
    return dt.file_uris()


def snapshot_dataset(dt: DeltaTable, partition_filters=None):
    """The Arrow dataset of ``dt``'s snapshot (only the files of the partitions that pass
    ``partition_filters``), made once per process: a table's id and version name its
    files, which never change."""
    key = (*snapshot_key(dt), repr(partition_filters or None))
    dataset = DATASETS.get(key)
    if dataset is None:
        dataset = dt.to_pyarrow_dataset(file_pruning_predicate=partition_filters or None)
        DATASETS.put(key, dataset)
    return dataset


def scan(dataset, columns: list[str] | None = None, filter=None) -> pa.Table:
    """``dataset.to_table`` of a Delta table's Arrow dataset, also when its files mix
    string types (``_read_mixed``)."""
    try:
        return dataset.to_table(columns=columns, filter=filter)
    except pa.ArrowNotImplementedError as exc:
        if "_view" not in str(exc):
            raise
        return _read_mixed(dataset, columns, filter)


def _read_mixed(dataset, columns, filter) -> pa.Table:
    """A filtered read of a table whose files mix ``string`` and ``string_view`` (written by
    delta-rs's MERGE or DELETE before the lake stopped calling them; the next writer
    repairs them, ``jobs.lake.rewrite.retype``): pyarrow cannot prune such files by their
    statistics, so the files are read whole (cast to the table's types) and then filtered.
    Slower, never wrong."""
    table = dataset.to_table()
    if filter is not None:
        table = table.filter(filter)
    return table.select(columns) if columns else table
