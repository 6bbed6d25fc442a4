"""``ingest``: raw landing files -> ``events/<source>`` (Delta, typed, partitioned by
``event_date``) and ``quarantine/<source>`` (rows that did not parse, with the reason).

* Extract: list the landing folder, skip files already ingested with the same content
  (``ingest_log``), read every pending file. A file that cannot be read at all (corrupt
  gzip, not UTF-8, not Parquet, no time column) stops the job before anything is written.
* Transform (pure, ``type_rows``): type each row by the source schema; give it a stable
  ``event_id`` (its id column, or a hash of its content and its occurrence number in the
  file); rows that fail go to quarantine with the reason.
* Load: MERGE the events by ``event_id`` (re-ingesting adds nothing twice), MERGE the
  quarantine by (file, line), append the ingest log.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from . import lake as lk
from .config import Source
from .core.events import format_ts, parse_ts

SUFFIXES = {"csv": (".csv", ".csv.gz"), "jsonl": (".jsonl", ".jsonl.gz", ".json", ".json.gz"),
            "parquet": (".parquet",)}
ARROW = {"string": pa.string(), "integer": pa.int64(), "double": pa.float64(),
         "number": pa.float64(), "timestamp": pa.timestamp("us", tz="UTC")}


class IngestError(RuntimeError):
    """A landing file that cannot be read; nothing was written."""


@dataclass
class Typed:
    """The result of typing one file's rows."""

    events: list[dict] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)


def landing_files(source: Source, landing_root: str) -> list[Path]:
    folder = Path(landing_root) / (source.landing or source.name)
    if not folder.is_dir():
        raise IngestError(f"source {source.name!r}: landing folder {folder} does not exist")
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and p.name.endswith(SUFFIXES[source.format]))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _open_text(path: Path):
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")


def read_raw(path: Path, fmt: str) -> list[tuple[int, dict | str]]:
    """(line or row number, record) pairs; a record that is not an object stays a string
    (it goes to quarantine). Raises ``IngestError`` for a file that cannot be read."""
    try:
        if fmt == "csv":
            with _open_text(path) as f:
                reader = csv.DictReader(f)
                if not reader.fieldnames:
                    raise IngestError(f"{path}: empty file (a CSV file needs a header line)")
                out = []
                for rec in reader:
                    if None in rec:  # more fields than the header
                        out.append((reader.line_num, json.dumps(list(rec.values()), default=str)))
                    else:
                        out.append((reader.line_num, rec))
                return out
        if fmt == "jsonl":
            out = []
            with _open_text(path) as f:
                for n, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        out.append((n, line.rstrip("\n")))
                        continue
                    out.append((n, rec if isinstance(rec, dict) else line.rstrip("\n")))
            return out
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        return [(i + 1, r) for i, r in enumerate(rows)]
    except (OSError, EOFError, UnicodeDecodeError, csv.Error, pa.ArrowInvalid) as exc:
        raise IngestError(f"{path}: cannot be read as {fmt}: {exc}") from None


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
            return int(value)
        return int(value)
    if kind in ("double", "number"):
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        return None if math.isnan(number) else number
    if kind == "timestamp":
        if isinstance(value, datetime):
            return parse_ts(value)
        return parse_ts(str(value))
    raise ValueError(kind)


def type_rows(source: Source, records: list[tuple[int, dict | str]], file_label: str,
              run_id: str, now: datetime) -> Typed:
    """Type raw records by the source schema (pure: no I/O)."""
    out = Typed()
    seen: dict[str, int] = {}
    for line, rec in records:
        def reject(reason: str, raw=rec, line=line):
            out.quarantine.append({
                "source_file": file_label, "line": line, "reason": reason,
                "raw": raw if isinstance(raw, str) else json.dumps(raw, default=str),
                "ingest_run": run_id, "quarantined_at": now})

        if not isinstance(rec, dict):
            reject("not a record with named fields (malformed line)")
            continue
        row, problems = {}, []
        for col, kind in source.columns.items():
            if col not in rec:
                problems.append(f"missing column {col!r}")
                continue
            try:
                row[col] = _convert(rec[col], kind)
            except (ValueError, TypeError, OverflowError):
                problems.append(f"column {col!r}: {str(rec[col])[:40]!r} is not a {kind}")
        if problems:
            reject("; ".join(problems))
            continue
        ts = row.get(source.time_column)
        if ts is None:
            reject(f"empty time column {source.time_column!r}")
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
                   source_file=file_label, ingest_run=run_id, ingested_at=now)
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


@dataclass
class IngestResult:
    source: str
    files: int = 0
    skipped_files: int = 0
    rows: int = 0
    new_events: int = 0
    quarantined: int = 0


def ingest(source: Source, landing_root: str, lake: lk.Lake, run_id: str,
           now: datetime | None = None) -> IngestResult:
    now = now or datetime.now(timezone.utc)
    result = IngestResult(source.name)
    files = landing_files(source, landing_root)
    log = lk.read_arrow(lake.ingest_log())
    done = set()
    if log is not None:
        for r in log.to_pylist():
            if r["source"] == source.name:
                done.add((r["file"], r["sha256"]))
    root = Path(landing_root)
    pending = []
    for path in files:
        label = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        digest = sha256(path)
        if (label, digest) in done:
            result.skipped_files += 1
            continue
        pending.append((path, label, digest))
    # read and type every pending file before writing anything
    typed_files = []
    for path, label, digest in pending:
        records = read_raw(path, source.format)
        if source.format == "csv" and records and isinstance(records[0][1], dict) \
                and source.time_column not in records[0][1]:
            raise IngestError(f"{path}: no column {source.time_column!r} in the header "
                              f"(columns: {', '.join(records[0][1])})")
        typed_files.append((label, digest, len(records), type_rows(source, records, label,
                                                                   run_id, now)))
    events = [e for *_, t in typed_files for e in t.events]
    quarantine = [q for *_, t in typed_files for q in t.quarantine]
    result.files = len(typed_files)
    result.rows = sum(n for _, _, n, _ in typed_files)
    result.quarantined = len(quarantine)
    # load
    path = lake.events(source.name)
    if events:
        unique = {}
        for e in events:
            unique.setdefault(e["event_id"], e)
        data = _to_arrow(list(unique.values()), events_schema(source))
        result.new_events = lk.insert_new(path, data, key="event_id",
                                          partition_by=["event_date"])
    if quarantine:
        qpath = lake.quarantine(source.name)
        lk.insert_new(qpath, _to_arrow(quarantine, QUARANTINE_SCHEMA),
                      key=("source_file", "line"))
    if typed_files:
        lk.append(lake.ingest_log(), pa.table({
            "source": [source.name] * len(typed_files),
            "file": [label for label, *_ in typed_files],
            "sha256": [digest for _, digest, *_ in typed_files],
            "rows": [n for _, _, n, _ in typed_files],
            "events": [len(t.events) for *_, t in typed_files],
            "quarantined": [len(t.quarantine) for *_, t in typed_files],
            "ingest_run": [run_id] * len(typed_files),
            "ingested_at": pa.array([now] * len(typed_files), ARROW["timestamp"]),
        }))
    return result


def describe(result: IngestResult) -> str:
    return (f"{result.source}: {result.files} new file(s), {result.skipped_files} already "
            f"ingested; {result.rows} rows -> {result.new_events} new events, "
            f"{result.quarantined} quarantined")

