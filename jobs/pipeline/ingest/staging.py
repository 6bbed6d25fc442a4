"""Staging one source's pending files as a batch (nothing committed): the driver lists the
files and plans the splits, the tasks type them (``tasks``), and the driver then settles
what needs the whole batch, reading integer columns of the staged parts, not the rows:

* content-hash ids are numbered over each whole file (``renumber``);
* an ``event_id`` seen twice in the batch with the same values is a re-delivery (counted),
  with other values a correction (quarantined with both versions named);
* an ``event_id`` already in the table likewise (events are immutable once ingested;
  ``ses retract`` removes one first);
* a rebuilt table leaves out what was retracted before.

The new events are then the tasks' files, or, when rows were dropped, one file of the
kept rows (``Batch.events_path``); the events suite checks them before ``commit`` loads
them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import Source, TimeRange
from jobs.lake import store as lk
from jobs.landing.ids import id_key, numbered, occurrences
from jobs.landing.reading import IngestError
from jobs.landing.splits import Split, estimated_rows, landing_files, splits_of, whole
from jobs.landing.typing import LINEAGE, events_schema, quarantine_table
from jobs.pipeline.ingest.listing import Digests
from jobs.pipeline.ingest.tasks import REREAD, part, run_splits
from jobs.spark.session import LazySession
from jobs.spark.tables import read_parquet_spark

INGEST_FOLDER = "_ingest"  # staging/_ingest/<run>/<source>: a batch's typed events
CHUNK_ROWS = 100_000  # rows the driver streams from a staged part at a time
SORT_ROWS = 200_000_000  # a batch's repeated ids are found on the driver up to this many rows
CHUNK_KEYS = 10_000_000  # id keys the driver sorts at once (``repeated_keys``)


@dataclass
class IngestResult:
    source: str
    files: int = 0
    skipped_files: int = 0
    rows: int = 0
    new_events: int = 0
    quarantined: int = 0
    duplicates: int = 0  # rows whose event was already there with the same values
    # the events table was missing while the ingest log listed files: they are re-ingested
    rebuilt: list[str] | None = None  # the logged files read again
    gone: list[str] = field(default_factory=list)  # logged files no longer in the landing
    reasons: list[str] = field(default_factory=list)  # the first quarantined rows: file:line: why
    changed: list[str] = field(default_factory=list)  # files ingested before with other content
    seconds: dict[str, float] = field(default_factory=dict)  # where the time went, by step


@dataclass
class Batch:
    """One source's pending files, typed, not yet committed: the new events in Parquet in
    the staging (``events_path``: a file or a folder of them; ``num_events``); ``events``
    reads them (small batches, tests)."""

    source: Source
    run_id: str
    now: datetime
    lake: lk.Lake
    folder: str
    events_path: str
    num_events: int
    quarantine: list[pa.Table]
    log: list[dict]
    result: IngestResult
    # when every typed event is new: the splits' data files (``tasks.DataFile``: the
    # ``load.LOADED`` fields and ``staged``, where it is) and the staged files of the
    # others (None: every file of ``events_path``)
    direct: list[dict] = field(default_factory=list)
    load_files: list[str] | None = None

    @property
    def events(self) -> pa.Table:
        schema = events_schema(self.source)
        if not self.num_events:
            return schema.empty_table()
        return read_parquet(self.lake, self.events_path, columns=schema.names)

    def discard(self) -> None:
        self.lake.remove(self.folder)


def read_parquet(lake: lk.Lake, uri: str, columns=None, filter=None) -> pa.Table:
    import pyarrow.dataset as pads

    fs, where = lake.filesystem(uri)
    return pads.dataset(where, filesystem=fs, format="parquet").to_table(
        columns=columns, filter=filter)


def staged_files(lake: lk.Lake, uri: str) -> list[str]:
    """A Parquet file, or a folder's files in name order (not the hidden ones, ``.``/``_``:
    a killed task's temporary file, as Spark skips them), as URIs of the lake."""
    import pyarrow.fs as pafs

    fs, where = lake.filesystem(uri)
    if fs.get_file_info(where).type != pafs.FileType.Directory:
        return [uri]
    found = fs.get_file_info(pafs.FileSelector(where))
    return [lk.join(uri, name) for name in sorted(
        f.base_name for f in found if f.type == pafs.FileType.File
        and not f.base_name.startswith((".", "_")))]


def batches(lake: lk.Lake, uri: str, columns=None):
    """The record batches of ``staged_files``."""
    import pyarrow.parquet as pq

    for path in staged_files(lake, uri):
        fs, where = lake.filesystem(path)
        with fs.open_input_file(where) as f:
            yield from pq.ParquetFile(f).iter_batches(batch_size=CHUNK_ROWS, columns=columns)


@dataclass
class Parts:
    """The typed parts of a batch, in split order; ``counts``: each part's rows, when the
    tasks that wrote them said (their ``INFO`` rows), else read from the footers."""

    lake: lk.Lake
    uris: list[str]
    counts: list[int] | None = None

    def read(self, columns=None, filter=None, **scan) -> pa.Table | None:
        """The parts' rows (``columns``, ``filter``) in part order: one scan of them all
        (a dataset per part cost 3 ms each); ``scan``: the scanner's options."""
        import pyarrow.dataset as pads

        if not self.uris:
            return None
        fs = self.lake.filesystem(self.uris[0])[0]
        where = [self.lake.filesystem(u)[1] for u in self.uris]
        return pads.dataset(where, filesystem=fs, format="parquet").to_table(
            columns=columns, filter=filter, **scan)

    def batches(self):
        for u in self.uris:
            yield from batches(self.lake, u)

    def row_counts(self) -> list[int]:
        """Each part's rows (``counts``, or from its footer)."""
        import pyarrow.parquet as pq

        if self.counts is not None:
            return list(self.counts)
        counts = []
        for u in self.uris:
            fs, where = self.lake.filesystem(u)
            counts.append(pq.read_metadata(where, filesystem=fs).num_rows)
        return counts


def stage(source: Source, landing_root: str, lake: lk.Lake, run_id: str,
          now: datetime | None = None, ts_range: TimeRange = TimeRange(), spark=None,
          echo=None, before_tasks=None) -> Batch:
    """Extract and transform the pending files of ``source`` (by Spark's executors when
    ``spark`` is given) into the lake's staging, then drop the rows that are not new
    events (nothing is committed)."""
    t0 = time.perf_counter()
    now = now or datetime.now(timezone.utc)
    result = IngestResult(source.name)
    log = lake.read_arrow(lake.ingest_log(),
                          columns=["source", "file", "sha256", "ingest_run", "ingested_at"])
    logged = {(r["file"], r["sha256"]): r for r in (log.to_pylist() if log is not None else [])
              if r["source"] == source.name}
    root = Path(landing_root)
    # a lost events table (deleted, or replaced by something else) with files in the log:
    # read the logged files again, with their first ingest's run and time, so the table
    # comes back as it was; files no longer in the landing are named
    rebuild = bool(logged) and not lake.exists(lake.events(source.name))
    done = set() if rebuild else set(logged)
    ingested = {f for f, _ in logged}
    files = landing_files(source, landing_root)
    labels = [str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in files]
    if rebuild:
        result.rebuilt = sorted(ingested)
        present = set(labels)
        result.gone = [f for f in result.rebuilt if f not in present]
    folder = lk.join(lake.staging(INGEST_FOLDER), run_id, source.name)
    if isinstance(spark, LazySession) and (rebuild or not ingested.issuperset(labels)):
        spark.start_soon()  # a new file is pending: the JVM starts while the files are hashed
    lake.remove(folder)
    digests = Digests(lake, source.name)
    pending, entries = [], []
    for path, label in zip(files, labels):
        digest = digests.of(label, path)
        if (label, digest) in done:
            result.skipped_files += 1
            continue
        first = logged.get((label, digest))
        if not rebuild and label in ingested:
            result.changed.append(label)
        pending.append((path, label, *((first["ingest_run"], first["ingested_at"]) if first
                                       else (run_id, now))))
        entries.append({"source": source.name, "file": label, "sha256": digest, "rows": 0,
                        "events": 0, "quarantined": 0, "ingest_run": run_id,
                        "ingested_at": now})
    if pending and before_tasks is not None:  # while the JVM starts (GX loads meanwhile)
        before_tasks(estimated_rows([p for p, *_ in pending]))
    # the task slots (a night with nothing new starts no Spark)
    slots = spark.sparkContext.defaultParallelism if spark is not None and pending else 1
    splits = []
    for i, (path, label, file_run, file_now) in enumerate(pending):
        splits += splits_of(path, source.format, source.time_column, i, label, len(splits),
                            file_run, file_now, slots)
    staged = lk.join(folder, "typed")
    result.seconds["plan"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # a split that is its file's whole may give a data file (content-hash ids are numbered
    # over the whole file: a split of several may change them)
    per_file = Counter(s.file_index for s in splits)
    direct = frozenset(s.index for s in splits
                       if source.id_column or per_file[s.file_index] == 1)
    infos = run_splits(spark, splits, source, ts_range, lake, staged, echo, direct)
    splits, infos = _reread(spark, splits, infos, source, ts_range, lake, staged, echo)
    result.seconds["tasks"] = time.perf_counter() - t0
    for k in ("read", "type", "ids"):
        result.seconds[f"tasks: {k}"] = sum(i.get(k, 0.0) for i in infos)
    result.seconds["tasks: write"] = sum(i["seconds"] - i["read"] - i["type"] - i.get("ids", 0.0)
                                         for i in infos)
    t0 = time.perf_counter()
    failed = next((i["error"] for i in infos if i["error"]), None)
    if failed:
        lake.remove(folder)
        raise IngestError(failed)
    for s, info in zip(splits, infos):
        e = entries[s.file_index]
        e["rows"] += info["rows"]
        e["events"] += info["events"]
        e["quarantined"] += info["quarantined"]
    result.files = len(entries)
    result.rows = sum(e["rows"] for e in entries)
    digests.save()
    exists = [i for i in infos if i["events"]]
    parts = Parts(lake, [part(staged, "part", i["split"]) for i in exists],
                  [i["events"] for i in exists])
    quarantine = [read_parquet(lake, part(staged, "quarantine", i["split"]))
                  for i in infos if i["quarantined"]]
    batch = Batch(source, run_id, now, lake, folder, lk.join(folder, "events.parquet"), 0,
                  quarantine, entries, result)
    if parts.uris:
        if not source.id_column:  # a file read by one task was numbered by it
            split_files = Counter(s.file_index for s in splits)
            shared = [i for s, i in zip(splits, infos)
                      if i["events"] and split_files[s.file_index] > 1]
            renumber(Parts(lake, [part(staged, "part", i["split"]) for i in shared],
                           [i["events"] for i in shared]))
        columns = [c for c in source.columns if c not in LINEAGE]
        drop = _repeated(batch, parts, columns, spark, lk.join(staged, "part")) \
            | _corrections(batch, parts, columns)
        retracted = _retracted(lake, source.name) if rebuild else None
        if drop or retracted is not None:
            _keep(batch, parts, drop, retracted)
        else:  # every typed event is new: the parts are the batch's events
            batch.events_path = lk.join(staged, "part")
            batch.num_events = sum(i["events"] for i in infos)
            batch.direct = [{**json.loads(i["data"]), "staged": part(staged, "data", i["split"])}
                            for i in exists if i.get("data")]
            batch.load_files = [part(staged, "part", i["split"]) for i in exists
                                if not i.get("data")]
    lake.remove(lk.join(staged, "quarantine"))
    result.seconds["settle"] = time.perf_counter() - t0
    return batch


def _reread(spark, splits: list[Split], infos: list[dict], source: Source,
            ts_range: TimeRange, lake: lk.Lake, staged: str, echo):
    """The files one of whose splits ended inside a quoted field (its cut was not a
    record's end: a quote character in an unquoted field made the count odd), read again
    whole by Python's readers; their splits' parts are deleted."""
    files = {splits[i["split"]].file_index for i in infos
             if (i["error"] or "").startswith(REREAD)}
    if not files:
        return splits, infos
    for s in splits:
        if s.file_index in files:
            for kind in ("part", "quarantine", "data"):
                lake.remove(part(staged, kind, s.index))
    again = [whole(next(s for s in splits if s.file_index == f), len(splits) + k)
             for k, f in enumerate(sorted(files))]
    more = run_splits(spark, again, source, ts_range, lake, staged, echo,
                      frozenset(s.index for s in again))  # each its file's whole
    kept = [(s, i) for s, i in zip(splits, infos) if s.file_index not in files]
    kept += list(zip(again, more))
    kept.sort(key=lambda p: (p[0].file_index, p[0].start))
    return [s for s, _ in kept], [i for _, i in kept]


def renumber(parts: Parts) -> None:
    """Content-hash ids numbered over each whole file: each task numbered the identical
    rows of its own split (``_n``); (file, content key, line, number) of every row are
    read as integer columns, each row's number within its (file, content) group computed
    (``ids.occurrences``), and only the parts where one differs (a row whose content an
    earlier split of its file holds too) are rewritten."""
    import pyarrow.parquet as pq

    if not parts.uris:
        return
    t = parts.read(columns=["_fi", "_ck", "_line", "_n"])
    number = occurrences(t.column("_fi").to_numpy(), t.column("_ck").to_numpy(),
                         t.column("_line").to_numpy())
    local = t.column("_n").to_numpy()
    del t
    counts = parts.row_counts()
    if sum(counts) != len(number):  # the tasks' counts are not the parts': number nothing
        raise IngestError(f"the staged parts hold {len(number)} rows, their tasks counted "
                          f"{sum(counts)}: rerun the ingest")
    offset = 0
    for uri, rows in zip(parts.uris, counts):
        n, was = number[offset:offset + rows], local[offset:offset + rows]
        offset += rows
        if np.array_equal(n, was):
            continue
        table = read_parquet(parts.lake, uri)
        ids = numbered(table.column("event_id").combine_chunks(), n)
        table = table.set_column(table.schema.get_field_index("event_id"), "event_id", ids)
        keys = id_key(table.column("_ck").to_numpy(), n)
        table = table.set_column(table.schema.get_field_index("_k"), "_k", pa.array(keys))
        table = table.set_column(table.schema.get_field_index("_n"), "_n", pa.array(n))
        fs, where = parts.lake.filesystem(uri)
        pq.write_table(table, where + ".renumbered", filesystem=fs)
        fs.move(where + ".renumbered", where)


def _keys(files, lines) -> pa.Array:
    """One text per row for its (source_file, line)."""
    return pc.binary_join_element_wise(pc.cast(files, pa.string()),
                                       pc.cast(lines, pa.string()), "\x1f")


def _moved(batch: Batch, file: str, quarantined: bool) -> None:
    """A typed event of ``file`` that is not a new event: the per-file counts follow."""
    for e in batch.log:
        if e["file"] == file:
            e["events"] -= 1
            e["quarantined"] += int(quarantined)


def _content(row: dict, columns) -> str:
    return json.dumps([row.get(c) for c in columns], default=str)


def _quarantined(batch: Batch, row: dict, reason: str, columns) -> None:
    batch.quarantine.append(quarantine_table(
        [(row["_line"], reason, {c: row.get(c) for c in columns})], row["source_file"],
        batch.run_id, batch.now))


def repeated_keys(parts: Parts, spark=None, folder: str | None = None) -> pa.Array:
    """The 64-bit id keys (``_k``) that more than one staged row holds, sorted. Up to
    ``SORT_ROWS`` rows, the key column sorted on the driver one range of the 64-bit space
    at a time (``key_ranges``: about ``CHUNK_KEYS`` keys each, one read of the column
    each, two ranges at once), so that the driver holds a few ranges' keys whatever the
    batch's size (a hash count of distinct keys takes twenty times a sort's memory);
    above, with Spark, on the executors over the staged parts in ``folder``
    (``_repeated_on_executors``)."""
    rows = sum(parts.row_counts())
    if spark is not None and folder is not None and rows > SORT_ROWS:
        return _repeated_on_executors(spark, parts.lake, folder, rows)

    def twice(where) -> np.ndarray:
        t = parts.read(columns=["_k"], filter=where, fragment_readahead=1, batch_readahead=2)
        return _twice(t.column("_k").combine_chunks().to_numpy()) if t is not None \
            else np.zeros(0, np.int64)

    with ThreadPoolExecutor(2) as pool:  # numpy's sort and Arrow's reads let go of the GIL
        found = list(pool.map(twice, key_ranges(rows)))
    return pa.array(np.concatenate(found), pa.int64())


def key_ranges(keys: int) -> list:
    """Filters that split the non-null 64-bit keys into consecutive ranges of equal width,
    as many as hold about ``CHUNK_KEYS`` of ``keys`` keys each: the keys are hashes,
    spread evenly over the space."""
    n = max(1, -(-keys // CHUNK_KEYS))
    edges = [-(2**63) + (2**64 * i) // n for i in range(1, n)]
    k = pc.field("_k")
    out = []
    for i in range(n):
        where = k.is_valid()
        if i > 0:
            where = where & (k >= edges[i - 1])
        if i < n - 1:
            where = where & (k < edges[i])
        out.append(where)
    return out


def _twice(keys: np.ndarray) -> np.ndarray:
    """The values ``keys`` holds more than once, sorted."""
    keys = np.sort(keys)
    return np.unique(keys[1:][keys[1:] == keys[:-1]])


TASK_KEYS = 4_000_000  # keys a task sorts when the executors look for repeated ids


def _repeated_on_executors(spark, lake: lk.Lake, folder: str, rows: int) -> pa.Array:
    """``repeated_keys`` by Spark: the keys hash-partitioned into tasks of about
    ``TASK_KEYS`` keys, each task's keys sorted by numpy (Spark's count by key, a hash
    aggregation of as many groups as keys, took a minute for 100M keys on two cores)."""
    tasks = max(spark.sparkContext.defaultParallelism, -(-rows // TASK_KEYS))
    keys = read_parquet_spark(spark, lake, folder).select("_k").where("_k IS NOT NULL")
    found = keys.repartition(tasks, "_k").mapInArrow(_task_twice, "_k long").toArrow()
    return pa.array(np.sort(found.column("_k").to_numpy()), pa.int64())


def _task_twice(batches):
    """A ``mapInArrow`` function: the keys of a task's batches that occur more than once."""
    keys = [b.column(0).to_numpy() for b in batches]
    twice = _twice(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    yield pa.RecordBatch.from_arrays([pa.array(twice, pa.int64())], ["_k"])


def _repeated(batch: Batch, parts: Parts, columns: list[str], spark=None,
              folder: str | None = None) -> set[str]:
    """The (file, line) keys of rows whose ``event_id`` came earlier in the batch: the same
    values are a re-delivery (counted), other values a correction (quarantined with both)."""
    twice = repeated_keys(parts, spark, folder)
    if not len(twice):
        return set()
    rows = parts.read(filter=pc.field("_k").isin(twice)).sort_by(
        [("_fi", "ascending"), ("_line", "ascending")])
    first: dict[str, tuple[str, str, int]] = {}
    drop = set()
    for e in rows.to_pylist():  # in file and line order
        prior = first.get(e["event_id"])
        if prior is None:
            first[e["event_id"]] = (_content(e, columns), e["source_file"], e["_line"])
            continue
        drop.add(f"{e['source_file']}\x1f{e['_line']}")
        if prior[0] == _content(e, columns):
            batch.result.duplicates += 1
            _moved(batch, e["source_file"], False)
            continue
        _quarantined(batch, e, f"event_id {e['event_id']!r} appears again with other values "
                     f"(first in {prior[1]} line {prior[2]}): an event is ingested once; "
                     "send a correction under a new id, or retract the old one first "
                     "(ses retract)", columns)
        _moved(batch, e["source_file"], True)
    return drop


def _corrections(batch: Batch, parts: Parts, columns: list[str]) -> set[str]:
    """The (file, line) keys of rows whose ``event_id`` is already in the table: the same
    values are a re-delivery (dropped, counted), other values a correction (quarantined
    with both versions named)."""
    lake, path = batch.lake, batch.lake.events(batch.source.name)
    if not lake.exists(path):
        return set()
    spooled = parts.read(columns=["event_id", "event_date"])
    ids = pc.unique(spooled.column("event_id"))
    # a content-hash id hashes the row's values, its time among them: an event stored
    # with the same id lies on the same date, so only the batch's dates are searched (the
    # night reads what it adds, not the history's ids); a source's own ids may come back
    # with another time (a correction), so the whole table is searched for them
    days = None
    if batch.source.id_column is None:
        days = sorted(d for d in pc.unique(spooled.column("event_date")).to_pylist() if d)
    del spooled
    old = _stored(lake, path, ids, ["event_id", "source_file", *columns], days)
    del ids
    if old is None or old.num_rows == 0:
        return set()
    stored = {r["event_id"]: r for r in old.to_pylist()}
    rows = parts.read(filter=pc.field("event_id").isin(old.column("event_id")))
    drop = set()
    for r in rows.to_pylist():
        prior = stored[r["event_id"]]
        drop.add(f"{r['source_file']}\x1f{r['_line']}")
        if _content(prior, columns) == _content(r, columns):
            batch.result.duplicates += 1
            _moved(batch, r["source_file"], False)
            continue
        changed = [f"{c}: {prior.get(c)!r} -> {r.get(c)!r}" for c in columns
                   if prior.get(c) != r.get(c)]
        _quarantined(batch, r, f"event_id {r['event_id']!r} was already ingested from "
                     f"{prior['source_file']} with other values ({'; '.join(changed)[:300]}): "
                     "events are immutable; retract it first (ses retract "
                     f"--source {batch.source.name} --event-id {r['event_id']}) to replace it",
                     columns)
        _moved(batch, r["source_file"], True)
    return drop


def _stored(lake: lk.Lake, path: str, ids: pa.Array, columns: list[str],
            days: list[str] | None = None) -> pa.Table | None:
    """The stored rows of ``path`` whose ``event_id`` is in ``ids`` (``days``: only those
    ``event_date`` partitions): the files that hold one found on the id column alone (on
    most nights none: the history's other columns are never decoded), then those files'
    rows read whole."""
    if days is not None and not days:
        return None
    where = pc.field("event_id").isin(ids)
    dates = [("event_date", "in", days)] if days is not None else None
    try:
        hits = lake.read_arrow(path, columns=["__filename"], filter=where,
                               partition_filters=dates)
    except (KeyError, pa.ArrowInvalid):  # a table of mixed string types: one whole read
        return lake.read_arrow(path, columns=columns, filter=where, partition_filters=dates)
    if hits is None or hits.num_rows == 0:
        return None
    only = {lk.file_name(f) for f in pc.unique(hits.column("__filename")).to_pylist()}
    return lake.read_arrow(path, columns=columns, filter=where, only=only)


def _retracted(lake: lk.Lake, source: str) -> tuple[pa.Array, pa.Array] | None:
    """(ids, files) retracted before from ``source``, for a rebuilt batch."""
    t = lake.read_arrow(lake.retractions())
    rows = [r for r in (t.to_pylist() if t is not None else []) if r["source"] == source]
    ids = {i for r in rows for i in r["event_ids"] or []}
    files = {r["source_file"] for r in rows if r["source_file"]}
    if not ids and not files:
        return None
    return pa.array(sorted(ids), pa.string()), pa.array(sorted(files), pa.string())


def _keep(batch: Batch, parts: Parts, drop: set[str],
          retracted: tuple[pa.Array, pa.Array] | None) -> None:
    """The staged rows that are new events (not in ``drop``, not retracted), as the
    batch's events file (the events schema), streamed part by part."""
    import pyarrow.parquet as pq

    schema = events_schema(batch.source)
    dropped = pa.array(sorted(drop), pa.string())
    fs, where = batch.lake.filesystem(batch.events_path)
    fs.create_dir(where.rsplit("/", 1)[0], recursive=True)
    rows = 0
    with fs.open_output_stream(where) as stream, pq.ParquetWriter(stream, schema) as writer:
        for b in parts.batches():
            t = pa.Table.from_batches([b])
            keep = None
            if len(dropped):
                keep = pc.invert(pc.is_in(_keys(t.column("source_file"), t.column("_line")),
                                          value_set=dropped))
            if retracted is not None:
                gone = pc.invert(pc.or_(
                    pc.is_in(t.column("event_id"), value_set=retracted[0]),
                    pc.is_in(t.column("source_file"), value_set=retracted[1])))
                keep = gone if keep is None else pc.and_(keep, gone)
            if keep is not None:
                t = t.filter(keep)
            if t.num_rows:
                writer.write_table(t.select(schema.names).cast(schema))
                rows += t.num_rows
    batch.num_events = rows
