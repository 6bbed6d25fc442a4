"""``ingest``: raw landing files -> ``events/<source>`` (Delta, typed, partitioned by
``event_date``) and ``quarantine/<source>`` (rows that did not parse, with the reason).

* Extract: list the landing folder, skip files already ingested with the same content
  (``ingest_log``), stream every pending file in chunks (memory is bounded by the typed
  Arrow batch, not by Python objects per raw line). A file that cannot be read at all
  (corrupt gzip, not UTF-8, not Parquet, no time column) fails the source: nothing of it
  is written.
* Transform (pure, ``type_rows``): type each row by the source schema; give it a stable
  ``event_id`` (its id column, or a hash of its content and its occurrence number in the
  whole file, counted across chunks); rows that fail, timestamps outside the accepted range and values that are not
  finite go to quarantine with the reason. An ``event_id`` seen again with other values (a
  *correction*) is quarantined with both versions named: events are immutable once
  ingested, and ``ses retract`` removes one first (recorded).
* Gate: the caller's check (the events suite) runs on the typed batch *before* anything
  is committed, so events that fail it never become visible to matching.
* Load: MERGE the events by ``event_id``, the quarantine by (file, line), the ingest log
  by (source, file, sha256).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import Source, TimeRange
from jobs.core.errors import UserError
from jobs.core.events import format_ts, parse_ts
from jobs.core.inputs import refusal
from jobs.failpoints import reached
from jobs.lake import store as lk

SUFFIXES = {"csv": (".csv", ".csv.gz"), "jsonl": (".jsonl", ".jsonl.gz", ".json", ".json.gz"),
            "parquet": (".parquet",)}
ARROW = {"string": pa.string(), "integer": pa.int64(), "double": pa.float64(),
         "number": pa.float64(), "timestamp": pa.timestamp("us", tz="UTC")}
CHUNK = 10_000  # raw records typed at a time
MAX_RAW = 2_000  # characters of a quarantined raw record that are kept
MAX_FIELD = 65_536  # characters of one value: a longer one quarantines its row
MAX_LINE = 1 << 20  # characters of one JSON line: a longer one is quarantined unparsed
# the csv module's own limit (131,072) raised an error that failed the whole file: rows
# with longer fields are read and quarantined by MAX_FIELD instead
csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
# the timestamps the engine can represent (int64 nanoseconds)


@dataclass(frozen=True)
class Refused:
    """A raw record the reader already knows to quarantine (``reason``; ``raw``: an
    excerpt of it)."""

    reason: str
    raw: str


def excerpt(text: str, limit: int = 80) -> str:
    """At most ``limit`` characters of a raw text, escaped (``repr``): what an error
    message may quote of a file."""
    return repr(text[:limit]) + (f" (… {len(text):,} characters)" if len(text) > limit else "")


class IngestError(UserError, RuntimeError):
    """A landing file that cannot be read, or a batch that failed the gate; nothing of the
    source was written."""


@dataclass
class Typed:
    """The result of typing one chunk of rows."""

    events: list[dict] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)


def landing_files(source: Source, landing_root: str) -> list[Path]:
    """The source's landing files (its folder and sub-folders, by suffix). A file or
    sub-folder that is a symbolic link, a device or a FIFO fails the source, named: it is
    never opened (``jobs.core.inputs``)."""
    folder = Path(landing_root) / (source.landing or source.name)
    if not folder.is_dir():
        raise IngestError(f"source {source.name!r}: landing folder {folder} does not exist")
    found = []
    for here, dirs, files in os.walk(folder):  # does not descend into linked folders
        for name in sorted(dirs) + sorted(files):
            path = Path(here) / name
            wanted = name in files and name.endswith(SUFFIXES[source.format])
            refused = refusal(path)
            if refused and (wanted or path.is_symlink()):
                raise IngestError(f"{path}: {refused} (source {source.name!r} is not "
                                  "ingested until it is replaced or removed)")
            if wanted:
                found.append(path)
    return sorted(found)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _open_text(path: Path):
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    # utf-8-sig: a byte-order mark is not part of the first column's name
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def read_raw(path: Path, fmt: str) -> Iterator[tuple[int, dict | str]]:
    """(line or row number, record) pairs, streamed; a record that is not an object stays
    a string (it goes to quarantine). Raises ``IngestError`` for a file that cannot be
    read (also midway: the caller writes nothing of it)."""
    try:
        if fmt == "csv":
            with _open_text(path) as f:
                reader = csv.DictReader(f)
                if reader.fieldnames is None:
                    return  # an empty file: no rows
                reader.fieldnames = [name.strip() for name in reader.fieldnames]
                twice = sorted({n for n in reader.fieldnames if reader.fieldnames.count(n) > 1})
                if twice:
                    raise IngestError(f"{path}: the header names column(s) "
                                      f"{', '.join(excerpt(n, 40) for n in twice[:5])} more "
                                      "than once: which value is meant cannot be known")
                for rec in reader:
                    if None in rec:  # more fields than the header
                        yield reader.line_num, json.dumps(list(rec.values()), default=str)
                    else:
                        yield reader.line_num, rec
            return
        if fmt == "jsonl":
            with _open_text(path) as f:
                for n, line in enumerate(f, start=1):
                    if len(line) > MAX_LINE:
                        yield n, Refused(f"a line of {len(line):,} characters, over the limit "
                                         f"of {MAX_LINE:,}", line[:MAX_RAW])
                        continue
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except (json.JSONDecodeError, RecursionError):
                        yield n, line.rstrip("\r\n")
                        continue
                    yield n, rec if isinstance(rec, dict) else line.rstrip("\r\n")
            return
        import pyarrow.parquet as pq

        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=CHUNK):
            for r in batch.to_pylist():
                n += 1
                yield n, r
    except (OSError, EOFError, UnicodeDecodeError, csv.Error, pa.ArrowInvalid) as exc:
        raise IngestError(f"{path}: cannot be read as {fmt}: {str(exc)[:200]}") from None


class NotFinite(ValueError):
    """A number that overflows a double (``1e400``) or is infinite."""


def _convert(value, kind: str):
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    if kind == "string":
        return value if isinstance(value, str) else str(value)
    if kind == "integer":
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError
            value = int(value)
        number = int(value)
        if not -(2**63) <= number < 2**63:
            raise ValueError
        return number
    if kind in ("double", "number"):
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        if math.isnan(number):
            return None
        if math.isinf(number):
            raise NotFinite  # 1e400 is not a measurement
        return number
    if kind == "timestamp":
        if isinstance(value, datetime):
            return parse_ts(value)
        return parse_ts(str(value))
    raise ValueError(kind)


def _raw_text(raw) -> str:
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    return text if len(text) <= MAX_RAW else text[:MAX_RAW] + f"... ({len(text):,} characters)"


def _quarantine_row(file_label: str, line: int, reason: str, raw, run_id: str,
                    now: datetime) -> dict:
    """One row of ``quarantine/<source>`` (``line`` -1: the line is not known)."""
    return {"source_file": file_label, "line": line, "reason": reason, "raw": _raw_text(raw),
            "ingest_run": run_id, "quarantined_at": now}


def type_rows(source: Source, records, file_label: str, run_id: str, now: datetime,
              ts_range: TimeRange = TimeRange(), seen: dict[str, int] | None = None) -> Typed:
    """Type raw records by the source schema (pure: no I/O). ``seen``: the occurrences of
    each content hash so far in the file, carried from chunk to chunk by the caller, so
    that a content-hash id (``<hash>-<n>``, the n-th identical row of the file) does not
    depend on where the chunks are cut."""
    out = Typed()
    seen = {} if seen is None else seen
    for line, rec in records:
        def reject(reason: str, raw=rec, line=line):
            out.quarantine.append(_quarantine_row(file_label, line, reason, raw, run_id, now))

        if isinstance(rec, Refused):
            reject(rec.reason, rec.raw)
            continue
        if not isinstance(rec, dict):
            reject("not a record with named fields (malformed line)")
            continue
        row, problems = {}, []
        for col, kind in source.columns.items():
            if col not in rec:
                problems.append(f"missing column {col!r}")
                continue
            if isinstance(rec[col], str) and len(rec[col]) > MAX_FIELD:
                problems.append(f"column {col!r}: a value of {len(rec[col]):,} characters, "
                                f"over the limit of {MAX_FIELD:,}")
                continue
            try:
                row[col] = _convert(rec[col], kind)
            except NotFinite:
                problems.append(f"column {col!r}: {str(rec[col])[:40]!r} is not a finite "
                                "number")
            except (ValueError, TypeError, OverflowError):
                problems.append(f"column {col!r}: {str(rec[col])[:40]!r} is not a {kind}")
        if problems:
            reject("; ".join(problems))
            continue
        ts = row.get(source.time_column)
        if ts is None:
            reject(f"empty time column {source.time_column!r}")
            continue
        if not ts_range.low <= ts <= ts_range.high:
            reject(f"time {str(rec.get(source.time_column))[:40]!r} is outside the accepted "
                   f"range {ts_range.describe()}")
            continue
        if source.id_column:
            raw_id = rec.get(source.id_column)
            if raw_id is None or str(raw_id).strip() == "":
                reject(f"empty id column {source.id_column!r}")
                continue
            event_id = str(raw_id)
        else:
            content = json.dumps([source.name] + [row[c] for c in source.columns], default=str)
            digest = hashlib.sha256(content.encode()).hexdigest()[:20]
            seen[digest] = seen.get(digest, 0) + 1
            event_id = f"{digest}-{seen[digest]}"
        row.update(event_id=event_id, ts=ts, event_date=format_ts(ts)[:10],
                   source_file=file_label, ingest_run=run_id, ingested_at=now, _line=line)
        out.events.append(row)
    return out


LINEAGE = ("event_id", "ts", "event_date", "source_file", "ingest_run", "ingested_at")


def events_schema(source: Source) -> pa.Schema:
    """The source's columns, then the columns every events table has."""
    fields = [pa.field(c, ARROW[k]) for c, k in source.columns.items() if c not in LINEAGE]
    fields += [pa.field("event_id", pa.string()), pa.field("ts", ARROW["timestamp"]),
               pa.field("event_date", pa.string()), pa.field("source_file", pa.string()),
               pa.field("ingest_run", pa.string()), pa.field("ingested_at", ARROW["timestamp"])]
    return pa.schema(fields)


QUARANTINE_SCHEMA = pa.schema([
    ("source_file", pa.string()), ("line", pa.int64()), ("reason", pa.string()),
    ("raw", pa.string()), ("ingest_run", pa.string()),
    ("quarantined_at", pa.timestamp("us", tz="UTC"))])


def _to_arrow(rows: list[dict], schema: pa.Schema) -> pa.Table:
    cols = {}
    for f in schema:
        values = [r.get(f.name) for r in rows]
        if pa.types.is_timestamp(f.type):
            values = [v if v is None or isinstance(v, datetime) else v // 1000 for v in values]
        cols[f.name] = pa.array(values, type=f.type)
    return pa.table(cols, schema=schema)


def typed_file(source: Source, path: Path) -> tuple[pa.Table, list[dict]]:
    """One raw file typed exactly as ingest types it (same columns, ids and times), without
    the lake: (events as Arrow, quarantined rows). For ``match`` on a landing file."""
    fmt = next((f for f, suffixes in SUFFIXES.items() if path.name.endswith(suffixes)),
               source.format)
    typed = type_rows(source, read_raw(path, fmt), path.name, "match",
                      datetime.now(timezone.utc))
    return _to_arrow(typed.events, events_schema(source)), typed.quarantine


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


@dataclass
class Batch:
    """One source's pending files, typed, not yet committed."""

    source: Source
    run_id: str
    now: datetime
    events: pa.Table
    quarantine: list[pa.Table]
    log: list[dict]
    result: IngestResult


def _content(row: dict, columns) -> str:
    return json.dumps([row.get(c) for c in columns], default=str)


def stage(source: Source, landing_root: str, lake: lk.Lake, run_id: str,
          now: datetime | None = None, ts_range: TimeRange = TimeRange()) -> Batch:
    """Extract and transform the pending files of ``source`` (nothing is written)."""
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
    if rebuild:
        result.rebuilt = sorted({f for f, _ in logged})
        present = {str(p.relative_to(root)) if p.is_relative_to(root) else str(p)
                   for p in landing_files(source, landing_root)}
        result.gone = [f for f in result.rebuilt if f not in present]
    schema = events_schema(source)
    columns = [c for c in source.columns if c not in LINEAGE]
    first: dict[str, tuple[bytes, str, int]] = {}  # event_id -> (content digest, file, line)
    event_tables, quarantine, entries = [], [], []
    path = None
    try:
        for path in landing_files(source, landing_root):
            label = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
            digest = sha256(path)
            if (label, digest) in done:
                result.skipped_files += 1
                continue
            rows = events = quarantined = 0
            first_ingest = logged.get((label, digest))
            file_run, file_now = ((first_ingest["ingest_run"], first_ingest["ingested_at"])
                                  if first_ingest else (run_id, now))
            records = read_raw(path, source.format)
            checked_header = False
            seen: dict[str, int] = {}  # content-hash occurrences over the whole file
            while True:
                chunk = []
                for item in records:
                    chunk.append(item)
                    if len(chunk) >= CHUNK:
                        break
                if not chunk:
                    break
                if not checked_header and source.format == "csv" and isinstance(chunk[0][1], dict) \
                        and source.time_column not in chunk[0][1]:
                    raise IngestError(f"{path}: no column {source.time_column!r} in the header "
                                      f"(it begins {excerpt(','.join(chunk[0][1]))})")
                checked_header = True
                rows += len(chunk)
                typed = type_rows(source, chunk, label, file_run, file_now, ts_range, seen)
                kept = []
                for e in typed.events:
                    key = hashlib.sha1(_content(e, columns).encode()).digest()
                    prior = first.get(e["event_id"])
                    if prior is None:
                        first[e["event_id"]] = (key, label, e["_line"])
                        kept.append(e)
                    elif prior[0] == key:  # (a digest: the whole file's rows stay small)
                        result.duplicates += 1
                    else:
                        typed.quarantine.append(_quarantine_row(
                            label, e["_line"], f"event_id {e['event_id']!r} appears again with "
                            f"other values (first in {prior[1]} line {prior[2]}): an event is "
                            "ingested once; send a correction under a new id, or retract the old "
                            "one first (ses retract)", {c: e.get(c) for c in columns},
                            run_id, now))
                events += len(kept)
                quarantined += len(typed.quarantine)
                if kept:
                    event_tables.append(_to_arrow(kept, schema))
                if typed.quarantine:
                    quarantine.append(_to_arrow(typed.quarantine, QUARANTINE_SCHEMA))
            result.files += 1
            result.rows += rows
            entries.append({"source": source.name, "file": label, "sha256": digest, "rows": rows,
                            "events": events, "quarantined": quarantined, "ingest_run": run_id,
                            "ingested_at": now})
    except MemoryError:
        event_tables.clear()  # what made room for this line
        quarantine.clear()
        raise IngestError(f"{path}: the ingest of source {source.name!r} ran out of memory "
                          "(the file's typed rows did not fit); give the process more memory "
                          "or split the file") from None
    events_table = pa.concat_tables(event_tables) if event_tables else schema.empty_table()
    if rebuild:
        events_table = _without_retracted(lake, source.name, events_table)
    batch = Batch(source, run_id, now, events_table, quarantine, entries, result)
    _corrections(batch, lake, columns)
    return batch


def _without_retracted(lake: lk.Lake, source: str, events: pa.Table) -> pa.Table:
    """A rebuilt batch without the events retracted before (by id or by file)."""
    t = lake.read_arrow(lake.retractions())
    rows = [r for r in (t.to_pylist() if t is not None else []) if r["source"] == source]
    ids = {i for r in rows for i in r["event_ids"] or []}
    files = {r["source_file"] for r in rows if r["source_file"]}
    if not ids and not files:
        return events
    drop = pc.or_(pc.is_in(events.column("event_id"), pa.array(sorted(ids), pa.string())),
                  pc.is_in(events.column("source_file"), pa.array(sorted(files), pa.string())))
    return events.filter(pc.invert(drop))


def _corrections(batch: Batch, lake: lk.Lake, columns: list[str]) -> None:
    """Events of the batch whose id is already in the table: the same values are a
    re-delivery (dropped, counted), other values a correction (quarantined with both)."""
    path = lake.events(batch.source.name)
    if batch.events.num_rows == 0 or not lake.exists(path):
        return
    ids = batch.events.column("event_id")
    old = lake.read_arrow(path, columns=["event_id", "source_file", *columns],
                        filter=pc.field("event_id").isin(ids))
    if old is None or old.num_rows == 0:
        return
    stored = {r["event_id"]: r for r in old.to_pylist()}
    keep, bad = [], []
    for r in batch.events.to_pylist():
        prior = stored.get(r["event_id"])
        if prior is None:
            keep.append(True)
        elif _content(prior, columns) == _content(r, columns):
            keep.append(False)
            batch.result.duplicates += 1
        else:
            keep.append(False)
            changed = [f"{c}: {prior.get(c)!r} -> {r.get(c)!r}" for c in columns
                       if prior.get(c) != r.get(c)]
            # the typed batch no longer carries raw line numbers: -1 (the reason names the id)
            bad.append(_quarantine_row(
                r["source_file"], -1, f"event_id {r['event_id']!r} was already ingested from "
                f"{prior['source_file']} with other values ({'; '.join(changed)[:300]}): "
                "events are immutable; retract it first (ses retract "
                f"--source {batch.source.name} --event-id {r['event_id']}) to replace it",
                {c: r.get(c) for c in columns}, batch.run_id, batch.now))
    batch.events = batch.events.filter(pa.array(keep))
    if bad:
        batch.quarantine.append(_to_arrow(bad, QUARANTINE_SCHEMA))
        for e in batch.log:  # the per-file counts follow
            moved = sum(1 for q in bad if q["source_file"] == e["file"])
            e["events"] -= moved
            e["quarantined"] += moved


INGEST_LOG_SCHEMA = pa.schema([
    ("source", pa.string()), ("file", pa.string()), ("sha256", pa.string()),
    ("rows", pa.int64()), ("events", pa.int64()), ("quarantined", pa.int64()),
    ("ingest_run", pa.string()), ("ingested_at", ARROW["timestamp"])])


def commit(lake: lk.Lake, batch: Batch) -> IngestResult:
    """Load a staged batch: events, then quarantine, then the ingest log (the log comes
    last: a crash before it leaves the files pending, and their rerun adds nothing twice)."""
    result = batch.result
    quarantine = pa.concat_tables(batch.quarantine) if batch.quarantine else None
    result.quarantined = quarantine.num_rows if quarantine is not None else 0
    if batch.events.num_rows:
        result.new_events = lake.insert_new(lake.events(batch.source.name), batch.events,
                                            key="event_id", partition_by=["event_date"],
                                            same_partition=True)
    reached("ingest:after-events")
    if quarantine is not None:
        lake.insert_new(lake.quarantine(batch.source.name), quarantine,
                      key=("source_file", "line", "reason"))
    reached("ingest:after-quarantine")
    if batch.log:
        lake.insert_new(lake.ingest_log(), _to_arrow(batch.log, INGEST_LOG_SCHEMA),
                      key=("source", "file", "sha256"))
    return result


Gate = Callable[[Source, pa.Table], None]


def ingest(source: Source, landing_root: str, lake: lk.Lake, run_id: str,
           now: datetime | None = None, ts_range: TimeRange = TimeRange(),
           gate: Gate | None = None) -> IngestResult:
    """Stage, check with ``gate`` (raises to refuse the batch), commit."""
    batch = stage(source, landing_root, lake, run_id, now, ts_range)
    if gate is not None and batch.events.num_rows:
        gate(source, batch.events)
    return commit(lake, batch)


def describe(result: IngestResult) -> str:
    dup = f", {result.duplicates} already there" if result.duplicates else ""
    text = (f"{result.source}: {result.files} new file(s), {result.skipped_files} already "
            f"ingested; {result.rows} rows -> {result.new_events} new events, "
            f"{result.quarantined} quarantined{dup}")
    if result.rebuilt is None:
        return text
    back = len(result.rebuilt) - len(result.gone)
    text = (f"{result.source}: events/{result.source} was missing though the ingest log "
            f"lists {len(result.rebuilt)} file(s): re-ingested the {back} still in the "
            f"landing folder; " + text.split(": ", 1)[1])
    if result.gone:
        text += (f"; gone from the landing folder: {', '.join(result.gone)} (their events are "
                 "lost until the files are put back; docs/operations.md)")
    return text
