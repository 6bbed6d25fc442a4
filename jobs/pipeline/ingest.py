"""``ingest``: raw landing files -> ``events/<source>`` (Delta, typed, partitioned by
``event_date``) and ``quarantine/<source>`` (rows that did not parse, with the reason).

* Extract: list the landing folder (regular files only: a link, a device or a FIFO fails
  the source, named), skip files already ingested with the same content (``ingest_log``),
  stream every pending file in chunks. A file that cannot be read at all (corrupt gzip,
  not UTF-8, not Parquet, no time column, a column named twice) fails the source: nothing
  of it is written.
* Transform (pure, ``type_rows``): type each row by the source schema; give it a stable
  ``event_id`` (its id column, or a hash of its content and its occurrence number in the
  whole file); rows that fail, over-long values, timestamps outside the accepted range
  and values that are not finite go to quarantine with the reason. Typed chunks are
  spooled to Parquet in the lake's staging, so memory is bounded by the chunk and a few
  integer columns; then repeated ids are found (``_repeated``, ``_corrections``): an
  ``event_id`` seen again with other values (a *correction*) is quarantined with both
  versions named: events are immutable once ingested, and ``ses retract`` removes one
  first (recorded).
* Gate: the caller's check (the events suite) runs on the typed batch *before* anything
  is committed, so events that fail it never become visible to matching.
* Load: append the new events from the spool (``Lake.insert_new_stream``), insert the
  quarantine by (file, line, reason) and the ingest log by (source, file, sha256), in that
  order: the log comes last, so a crash leaves the files pending and the rerun adds
  nothing twice.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import Source, TimeRange
from jobs.core.errors import UserError
from jobs.core.inputs import json_keys_twice, refusal, repeated
from jobs.core.language.events import format_ts, parse_ts
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


class Digests:
    """The sha256 of each landing file of a source, remembered by its size and modification
    time (``_digests/<source>.json`` in the lake): a night hashes only the files that are
    new or changed, not every file of the history again."""

    def __init__(self, lake: lk.Lake, source: str):
        self.lake, self.uri = lake, lk.join(lake.root, "_digests", f"{source}.json")
        try:
            self.old = json.loads(lake.read_text(self.uri))
        except (FileNotFoundError, OSError, ValueError):
            self.old = {}
        self.new: dict[str, list] = {}

    def of(self, label: str, path: Path) -> str:
        st = path.stat()
        key = [st.st_size, st.st_mtime_ns]
        kept = self.old.get(label)
        digest = kept[2] if isinstance(kept, list) and kept[:2] == key else sha256(path)
        self.new[label] = [*key, digest]
        return digest

    def save(self) -> None:
        if self.new != self.old:
            self.lake.write_text(self.uri, json.dumps(self.new))


def _open_text(path: Path):
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    # utf-8-sig: a byte-order mark is not part of the first column's name
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def read_raw(path: Path, fmt: str, time_column: str | None = None
             ) -> Iterator[tuple[int, dict | str]]:
    """(line or row number, record) pairs, streamed; a record that is not an object stays
    a string (it goes to quarantine). Raises ``IngestError`` for a file that cannot be
    read (also midway: the caller writes nothing of it), and for a CSV header without
    ``time_column``."""
    try:
        if fmt == "csv":
            with _open_text(path) as f:
                reader = csv.reader(f)
                header = next(reader, None)
                if header is None:
                    return  # an empty file: no rows
                names = [name.strip() for name in header]
                twice = repeated(names)
                if twice:
                    raise IngestError(f"{path}: the header names column(s) "
                                      f"{', '.join(excerpt(n, 40) for n in twice[:5])} more "
                                      "than once: which value is meant cannot be known")
                if time_column is not None and time_column not in names:
                    raise IngestError(f"{path}: no column {time_column!r} in the header "
                                      f"(it begins {excerpt(','.join(names))})")
                for fields in reader:
                    if not fields:
                        continue  # a blank line
                    if len(fields) != len(names):  # a field missing or one too many:
                        # which value belongs to which column cannot be known
                        yield reader.line_num, Refused(
                            f"{len(fields)} field(s) where the header names {len(names)}: "
                            "which value belongs to which column cannot be known",
                            json.dumps(fields)[:MAX_RAW])
                        continue
                    yield reader.line_num, dict(zip(names, fields))
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
                    if not isinstance(rec, dict):
                        yield n, line.rstrip("\r\n")
                        continue
                    key = _written_twice(line, rec)
                    if key is not None:
                        yield n, Refused(f"key {excerpt(key, 40)} appears twice in the "
                                         "record: which value is meant cannot be known",
                                         line.rstrip("\r\n")[:MAX_RAW])
                        continue
                    yield n, rec
            return
        import pyarrow.parquet as pq

        n = 0
        parquet = pq.ParquetFile(path)
        names = parquet.schema_arrow.names
        twice = repeated(names)
        if twice:
            raise IngestError(f"{path}: the file names column(s) "
                              f"{', '.join(excerpt(c, 40) for c in twice[:5])} more than "
                              "once: which value is meant cannot be known")
        for batch in parquet.iter_batches(batch_size=CHUNK):
            for r in batch.to_pylist():
                n += 1
                yield n, r
    except (OSError, EOFError, UnicodeDecodeError, csv.Error, pa.ArrowInvalid) as exc:
        raise IngestError(f"{path}: cannot be read as {fmt}: {str(exc)[:200]}") from None


_KEY = re.compile(r'"\s*:')  # the end of a JSON key (or, rarely, of a string value)


def _written_twice(line: str, rec: dict) -> str | None:
    """A key the JSON object on ``line`` writes twice (``json.loads`` keeps the last value
    without a word), or None. Only a line with more key ends than ``rec`` has keys (nested
    objects, or text that looks like a key end) is parsed again, key by key."""
    if len(_KEY.findall(line)) <= len(rec):
        return None
    _, doubled = json_keys_twice(line)
    return doubled[0] if doubled else None


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
    typed = type_rows(source, read_raw(path, fmt, source.time_column), path.name, "match",
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
    reasons: list[str] = field(default_factory=list)  # the first quarantined rows: file:line: why


INGEST_FOLDER = "_ingest"  # staging/_ingest/<run>/<source>: a batch's typed events
# what the spool keeps beside the events: the raw line, a digest of the row's values, a
# 64-bit key of its id, and for content-hash ids a 64-bit key of the content and the
# file's number, so that repeated ids are found and numbered by counting and sorting
# integers (memory: the chunk and a few integer columns, not a dict of every row)
SPOOLED = (pa.field("_line", pa.int64()), pa.field("_digest", pa.binary()),
           pa.field("_k", pa.int64()), pa.field("_ck", pa.int64()), pa.field("_fi", pa.int32()))
MIX = 1_000_003  # the id key of a content-hash id: content key * MIX + its number (wraps)


def _content_key(digest_hex: str) -> int:
    return int.from_bytes(bytes.fromhex(digest_hex[:16]), "big", signed=True)


def _id_key(content_key, n):
    """The 64-bit key of ``<content>-<n>`` (ints, or numpy int64 arrays that wrap alike)."""
    if isinstance(content_key, int):
        return (content_key * MIX + n + 2**63) % 2**64 - 2**63
    return content_key * MIX + n


def _key64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big",
                          signed=True)


@dataclass
class Batch:
    """One source's pending files, typed, not yet committed. The events are spooled to
    Parquet in the lake's staging chunk by chunk (``events_path``, ``num_events``), so
    memory is bounded by the chunk, not the files; ``events`` reads them (small batches,
    tests)."""

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

    @property
    def events(self) -> pa.Table:
        if not self.num_events:
            return events_schema(self.source).empty_table()
        return _read_parquet(self.lake, self.events_path)

    def discard(self) -> None:
        self.lake.remove(self.folder)


def _content(row: dict, columns) -> str:
    return json.dumps([row.get(c) for c in columns], default=str)


def _read_parquet(lake: lk.Lake, uri: str, columns=None, filter=None) -> pa.Table:
    import pyarrow.dataset as pads

    fs, where = lake.filesystem(uri)
    return pads.dataset(where, filesystem=fs, format="parquet").to_table(
        columns=columns, filter=filter)


def _batches(lake: lk.Lake, uri: str):
    import pyarrow.parquet as pq

    fs, where = lake.filesystem(uri)
    with fs.open_input_file(where) as f:
        yield from pq.ParquetFile(f).iter_batches(batch_size=CHUNK)


class _Spool:
    """Arrow tables appended to one Parquet file of the lake's staging."""

    def __init__(self, lake: lk.Lake, uri: str, schema: pa.Schema):
        self.lake, self.uri, self.schema, self.rows = lake, uri, schema, 0
        self.writer = self.stream = None

    def append(self, t: pa.Table) -> None:
        import pyarrow.parquet as pq

        if not t.num_rows:
            return
        if self.writer is None:
            fs, where = self.lake.filesystem(self.uri)
            fs.create_dir(where.rsplit("/", 1)[0], recursive=True)
            self.stream = fs.open_output_stream(where)
            self.writer = pq.ParquetWriter(self.stream, self.schema)
        self.writer.write_table(t.select(self.schema.names).cast(self.schema))
        self.rows += t.num_rows

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.stream.close()


def stage(source: Source, landing_root: str, lake: lk.Lake, run_id: str,
          now: datetime | None = None, ts_range: TimeRange = TimeRange()) -> Batch:
    """Extract and transform the pending files of ``source``: type them chunk by chunk into
    a spooled file of the lake's staging, then drop the rows that are not new events
    (nothing is committed). Memory is bounded by the chunk and one column of ids."""
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
    folder = lk.join(lake.staging(INGEST_FOLDER), run_id, source.name)
    lake.remove(folder)
    raw = _Spool(lake, lk.join(folder, "typed.parquet"), pa.schema([*schema, *SPOOLED]))
    quarantine, entries = [], []
    path = None
    digests = Digests(lake, source.name)
    try:
        for path in landing_files(source, landing_root):
            label = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
            digest = digests.of(label, path)
            if (label, digest) in done:
                result.skipped_files += 1
                continue
            rows = events = quarantined = 0
            first_ingest = logged.get((label, digest))
            file_run, file_now = ((first_ingest["ingest_run"], first_ingest["ingested_at"])
                                  if first_ingest else (run_id, now))
            records = read_raw(path, source.format, source.time_column)
            while True:
                chunk = []
                for item in records:
                    chunk.append(item)
                    if len(chunk) >= CHUNK:
                        break
                if not chunk:
                    break
                rows += len(chunk)
                # content-hash ids count occurrences within the chunk here; _renumber
                # makes them count over the whole file (a dict of every row would not
                # fit the memory bound)
                typed = type_rows(source, chunk, label, file_run, file_now, ts_range)
                for e in typed.events:
                    e["_digest"] = hashlib.sha1(_content(e, columns).encode()).digest()
                    if source.id_column:
                        e["_k"], e["_ck"] = _key64(e["event_id"]), 0
                    else:
                        content, n = e["event_id"].rsplit("-", 1)
                        e["_ck"] = _content_key(content)
                        e["_k"] = _id_key(e["_ck"], int(n))
                    e["_fi"] = len(entries)
                events += len(typed.events)
                quarantined += len(typed.quarantine)
                if typed.events:
                    raw.append(_to_arrow(typed.events, raw.schema))
                if typed.quarantine:
                    quarantine.append(_to_arrow(typed.quarantine, QUARANTINE_SCHEMA))
            result.files += 1
            result.rows += rows
            entries.append({"source": source.name, "file": label, "sha256": digest,
                            "rows": rows, "events": events, "quarantined": quarantined,
                            "ingest_run": run_id, "ingested_at": now})
        digests.save()
    except MemoryError:
        quarantine.clear()  # what makes room for this line
        raise IngestError(f"{path}: the ingest of source {source.name!r} ran out of memory "
                          "(a chunk of its typed rows did not fit); give the process more "
                          "memory or split the file") from None
    finally:
        raw.close()
    batch = Batch(source, run_id, now, lake, folder, lk.join(folder, "events.parquet"), 0,
                  quarantine, entries, result)
    if raw.rows:
        if not source.id_column:
            _renumber(batch, raw)
        drop = _repeated(batch, raw, columns) | _corrections(batch, raw, columns)
        _keep(batch, raw, drop, _retracted(lake, source.name) if rebuild else None)
    return batch


def _renumber(batch: Batch, raw: _Spool) -> None:
    """Content-hash ids (``<hash>-<n>``) numbered over each whole file: chunks number the
    identical rows of their own chunk, so the spool is read as two integer columns (file,
    content key), sorted stably, and each row's number within its (file, content) group
    is computed with numpy; the spool is rewritten when any number changes."""
    import warnings

    import numpy as np

    lake = batch.lake
    t = _read_parquet(lake, raw.uri, columns=["_fi", "_ck"])
    fi, ck = t.column("_fi").to_numpy(), t.column("_ck").to_numpy()
    del t
    rows = len(fi)
    order = np.lexsort((np.arange(rows), ck, fi))  # by file, content, then position
    fi_s, ck_s = fi[order], ck[order]
    del fi, ck
    first = np.ones(rows, bool)
    first[1:] = (fi_s[1:] != fi_s[:-1]) | (ck_s[1:] != ck_s[:-1])
    del fi_s, ck_s
    starts = np.maximum.accumulate(np.where(first, np.arange(rows), 0))
    number = np.empty(rows, np.int64)
    number[order] = np.arange(rows) - starts + 1
    del order, first, starts
    if int(number.max()) == 1:
        return  # no content repeats within a file
    renumbered = _Spool(lake, raw.uri + ".renumbered", raw.schema)
    offset = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the key wraps, as int64 does
            for b in _batches(lake, raw.uri):
                t = pa.Table.from_batches([b])
                n = number[offset:offset + t.num_rows]
                offset += t.num_rows
                content = pc.replace_substring_regex(t.column("event_id"), pattern=r"-\d+$",
                                                     replacement="")
                ids = pc.binary_join_element_wise(content, pc.cast(pa.array(n), pa.string()),
                                                  "-")
                t = t.set_column(t.schema.get_field_index("event_id"), "event_id", ids)
                t = t.set_column(t.schema.get_field_index("_k"), "_k", pa.array(
                    _id_key(t.column("_ck").to_numpy(), n)))
                renumbered.append(t)
    finally:
        renumbered.close()
    fs, where = lake.filesystem(raw.uri)
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


def _repeated(batch: Batch, raw: _Spool, columns: list[str]) -> set[str]:
    """The (file, line) keys of rows whose ``event_id`` came earlier in the batch: the same
    values are a re-delivery (counted), other values a correction (quarantined with both)."""
    ks = _read_parquet(batch.lake, raw.uri, columns=["_k"]).column("_k")
    counts = pc.value_counts(ks)
    twice = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    del ks, counts
    if not len(twice):
        return set()
    rows = _read_parquet(batch.lake, raw.uri, filter=pc.field("_k").isin(twice)
                         ).sort_by([("source_file", "ascending"), ("_line", "ascending")])
    first: dict[str, tuple[bytes, str, int]] = {}
    drop = set()
    for e in rows.to_pylist():  # in file and line order
        prior = first.get(e["event_id"])
        if prior is None:
            first[e["event_id"]] = (e["_digest"], e["source_file"], e["_line"])
            continue
        drop.add(f"{e['source_file']}\x1f{e['_line']}")
        if prior[0] == e["_digest"]:
            batch.result.duplicates += 1
            _moved(batch, e["source_file"], False)
            continue
        batch.quarantine.append(_to_arrow([_quarantine_row(
            e["source_file"], e["_line"], f"event_id {e['event_id']!r} appears again with "
            f"other values (first in {prior[1]} line {prior[2]}): an event is ingested once; "
            "send a correction under a new id, or retract the old one first (ses retract)",
            {c: e.get(c) for c in columns}, batch.run_id, batch.now)], QUARANTINE_SCHEMA))
        _moved(batch, e["source_file"], True)
    return drop


def _corrections(batch: Batch, raw: _Spool, columns: list[str]) -> set[str]:
    """The (file, line) keys of rows whose ``event_id`` is already in the table: the same
    values are a re-delivery (dropped, counted), other values a correction (quarantined
    with both versions named)."""
    lake, path = batch.lake, batch.lake.events(batch.source.name)
    if not lake.exists(path):
        return set()
    spooled = _read_parquet(lake, raw.uri, columns=["event_id", "event_date"])
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
    rows = _read_parquet(lake, raw.uri, filter=pc.field("event_id").isin(old.column("event_id")))
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
        batch.quarantine.append(_to_arrow([_quarantine_row(
            r["source_file"], r["_line"], f"event_id {r['event_id']!r} was already ingested "
            f"from {prior['source_file']} with other values ({'; '.join(changed)[:300]}): "
            "events are immutable; retract it first (ses retract "
            f"--source {batch.source.name} --event-id {r['event_id']}) to replace it",
            {c: r.get(c) for c in columns}, batch.run_id, batch.now)], QUARANTINE_SCHEMA))
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


def _keep(batch: Batch, raw: _Spool, drop: set[str],
          retracted: tuple[pa.Array, pa.Array] | None) -> None:
    """The spooled rows that are new events (not in ``drop``, not retracted), as the
    batch's events file (the events schema), streamed batch by batch."""
    schema = events_schema(batch.source)
    out = _Spool(batch.lake, batch.events_path, schema)
    dropped = pa.array(sorted(drop), pa.string())
    try:
        for b in _batches(batch.lake, raw.uri):
            t = pa.Table.from_batches([b])
            keep = pc.invert(pc.is_in(_keys(t.column("source_file"), t.column("_line")),
                                      value_set=dropped))
            if retracted is not None:
                keep = pc.and_(keep, pc.invert(pc.or_(
                    pc.is_in(t.column("event_id"), value_set=retracted[0]),
                    pc.is_in(t.column("source_file"), value_set=retracted[1]))))
            out.append(t.filter(keep))
    finally:
        out.close()
    batch.num_events = out.rows
    batch.lake.remove(raw.uri)


INGEST_LOG_SCHEMA = pa.schema([
    ("source", pa.string()), ("file", pa.string()), ("sha256", pa.string()),
    ("rows", pa.int64()), ("events", pa.int64()), ("quarantined", pa.int64()),
    ("ingest_run", pa.string()), ("ingested_at", ARROW["timestamp"])])


def commit(lake: lk.Lake, batch: Batch) -> IngestResult:
    """Load a staged batch: events, then quarantine, then the ingest log (the log comes
    last: a crash before it leaves the files pending, and their rerun adds nothing twice).
    The events are streamed from the batch's file; its staging is removed after."""
    result = batch.result
    quarantine = pa.concat_tables(batch.quarantine) if batch.quarantine else None
    result.quarantined = quarantine.num_rows if quarantine is not None else 0
    if quarantine is not None:
        result.reasons = [f"{r['source_file']}:{r['line']}: {r['reason']}" if r["line"] >= 0
                          else f"{r['source_file']}: {r['reason']}" for r in
                          quarantine.select(["source_file", "line", "reason"]).slice(
                              0, SHOWN_REASONS).to_pylist()]
    if batch.num_events:
        result.new_events = lake.insert_new_stream(
            lake.events(batch.source.name), lambda: _batches(lake, batch.events_path),
            events_schema(batch.source), key="event_id", partition_by=["event_date"],
            same_partition=True)
    reached("ingest:after-events")
    if quarantine is not None:
        lake.insert_new(lake.quarantine(batch.source.name), quarantine,
                        key=("source_file", "line", "reason"))
    reached("ingest:after-quarantine")
    if batch.log:
        lake.insert_new(lake.ingest_log(), _to_arrow(batch.log, INGEST_LOG_SCHEMA),
                        key=("source", "file", "sha256"))
    batch.discard()
    return result


Gate = Callable[[Source, Batch], None]


def ingest(source: Source, landing_root: str, lake: lk.Lake, run_id: str,
           now: datetime | None = None, ts_range: TimeRange = TimeRange(),
           gate: Gate | None = None) -> IngestResult:
    """Stage, check with ``gate`` (raises to refuse the batch), commit."""
    batch = stage(source, landing_root, lake, run_id, now, ts_range)
    try:
        if gate is not None and batch.num_events:
            gate(source, batch)
        return commit(lake, batch)
    finally:
        batch.discard()


SHOWN_REASONS = 3  # quarantined rows an ingest's lines show


def describe(result: IngestResult, run_id: str = "<run id>") -> str:
    """What an ingest did, for people: counts; with quarantined rows, the first of them
    (file, line, reason) and the query that lists every one."""
    dup = f", {result.duplicates} already there" if result.duplicates else ""
    text = (f"{result.source}: {result.files} new file(s), {result.skipped_files} already "
            f"ingested; {result.rows} rows -> {result.new_events} new events, "
            f"{result.quarantined} quarantined{dup}")
    if result.quarantined:
        text += "".join(f"\n  quarantined {r}" for r in result.reasons)
        more = result.quarantined - len(result.reasons)
        text += (f"\n  {'and ' + str(more) + ' more; ' if more > 0 else ''}every one: ses query "
                 f"\"SELECT source_file, line, reason FROM quarantine_{result.source} WHERE "
                 f"ingest_run = '{run_id}'\"")
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
