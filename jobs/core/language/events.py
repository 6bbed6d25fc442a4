"""Events and reading them from a file (CSV with a header, or Parquet), without Spark.

An event is a tuple of attributes with a timestamp ``ts`` (kept as integer nanoseconds
since the epoch, UTC) and a stable ``id``. The processing order is ``(ts, id)`` with ids
compared as strings (docs/semantics.md); ``seq`` is an event's rank in that order.
"""

from __future__ import annotations

import csv
import math
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable

from jobs.core.errors import UserError
from jobs.core.language.conditions.expressions import TIME, Instant

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class EventFileError(UserError, ValueError):
    """A file, column or row that cannot be read as events; the message says where and why."""


class Event:
    __slots__ = ("id", "ts", "attrs", "seq", "_values")

    def __init__(self, id: str, ts: int, attrs: dict[str, Any], seq: int = 0):
        self.id = id
        self.ts = ts
        self.attrs = attrs
        self.seq = seq
        self._values = None

    @property
    def values(self) -> dict[str, Any]:
        """What conditions read of the event (the reference evaluator): its attributes,
        and its time under ``ts`` (an exact ``conditions.Instant``), whatever the file's
        time column was called or held."""
        if self._values is None:
            self._values = {**self.attrs, TIME: Instant(self.ts)}
        return self._values

    def __repr__(self) -> str:
        return f"Event({self.id!r}, {format_ts(self.ts)})"


def order(events: Iterable[Event]) -> list[Event]:
    """Sort into processing order (ts, id) and number the events (``seq``)."""
    out = sorted(events, key=lambda e: (e.ts, e.id))
    for i, e in enumerate(out):
        e.seq = i
    return out


def parse_ts(value: Any) -> int:
    """ISO-8601 text, a datetime or a date -> nanoseconds since the epoch (naive = UTC)."""
    if isinstance(value, str):
        text = value.strip()
        frac_ns = 0
        # datetime keeps microseconds; keep nanoseconds of longer fractions ourselves
        if "." in text:
            head, _, rest = text.partition(".")
            digits = ""
            for ch in rest:
                if not ch.isdigit():
                    break
                digits += ch
            if len(digits) > 6:
                frac_ns = int(digits[6:9].ljust(3, "0"))
                text = head + "." + digits[:6] + rest[len(digits):]
        value = datetime.fromisoformat(text)
        return _datetime_ns(value) + frac_ns
    if isinstance(value, datetime):
        return _datetime_ns(value)
    if isinstance(value, date):
        return _datetime_ns(datetime(value.year, value.month, value.day))
    raise ValueError(f"not a timestamp: {value!r}")


def _datetime_ns(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def to_datetime(ns: int) -> datetime:
    """Nanoseconds -> an aware UTC datetime (to the microsecond), the inverse of
    ``parse_ts``."""
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)


def format_ts(ns: int) -> str:
    """Nanoseconds -> ISO-8601 (UTC, no offset), with as many fraction digits as needed."""
    secs, rem = divmod(ns, 1_000_000_000)
    text = (datetime(1970, 1, 1) + timedelta(seconds=secs)).isoformat()
    if rem:
        frac = f"{rem:09d}"
        text += "." + (frac[:3] if frac[3:] == "000000" else frac[:6] if frac[6:] == "000" else frac)
    return text


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if math.isnan(value):
            raise
        return value


def events_from_arrow(table, id_column: str = "event_id", time_column: str = "ts") -> list[Event]:
    """Events from an Arrow table with a timestamp column (e.g. a Delta events table), in
    processing order; the other columns become attributes."""
    import pyarrow as pa

    ts = table.column(time_column).cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64())
    rows = table.drop_columns([time_column]).to_pylist()
    return order(Event(str(r[id_column]), t, r) for t, r in zip(ts.to_pylist(), rows))


def read_events(path: str | Path, id_column: str = "event_id", time_column: str = "ts") -> list[Event]:
    """Read a CSV (with a header) or Parquet file into events in processing order.

    CSV columns whose non-empty values all parse as numbers become numbers; an empty CSV
    field is a missing value. Raises ``EventFileError`` naming the file, row and column.
    """
    path = Path(path)
    if not path.is_file():
        raise EventFileError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        columns, rows, ts_is_ns = _read_parquet(path, time_column)
        where = "row"
        first_row = 1
    elif suffix in (".csv", ".txt"):
        columns, rows = _read_csv(path)
        ts_is_ns = False
        where = "line"
        first_row = 2
    else:
        raise EventFileError(f"{path}: unknown file type {suffix!r}: use .csv (with a header) "
                             "or .parquet")
    for col, flag in ((id_column, "--id-column"), (time_column, "--time-column")):
        if col not in columns:
            raise EventFileError(f"{path}: no column {col!r} (columns: {', '.join(columns)}); "
                                 f"name the right one with {flag}")
    events, seen = [], {}
    for n, row in enumerate(rows):
        rowno = row.pop("__line__", n + first_row)
        raw_id, raw_ts = row.get(id_column), row.get(time_column)
        if raw_id is None or raw_id == "":
            raise EventFileError(f"{path}: {where} {rowno}: empty {id_column!r}")
        eid = str(raw_id)
        if isinstance(raw_id, float) and raw_id.is_integer():
            eid = str(int(raw_id))
        if eid in seen:
            raise EventFileError(f"{path}: {where} {rowno}: duplicate {id_column} {eid!r} "
                                 f"(first at {where} {seen[eid]})")
        seen[eid] = rowno
        if raw_ts is None or raw_ts == "":
            raise EventFileError(f"{path}: {where} {rowno}: empty {time_column!r}")
        try:
            ts = raw_ts if ts_is_ns else parse_ts(raw_ts)
        except (ValueError, TypeError):
            raise EventFileError(f"{path}: {where} {rowno}: {time_column} {raw_ts!r} is not an "
                                 "ISO-8601 timestamp (e.g. 2010-07-03T09:00:00)") from None
        events.append(Event(eid, ts, row))
    return order(events)


def _read_csv(path: Path):
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise EventFileError(f"{path}: empty file (a CSV file needs a header line)")
            header = [h.strip() for h in header]
            if len(set(header)) != len(header):
                raise EventFileError(f"{path}: line 1: duplicate column names in the header")
            raw = []
            for fields in reader:
                if not fields or fields == [""]:
                    continue
                if len(fields) != len(header):
                    raise EventFileError(f"{path}: line {reader.line_num}: {len(fields)} fields, "
                                         f"the header has {len(header)}")
                raw.append((reader.line_num, fields))
    except UnicodeDecodeError:
        raise EventFileError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise EventFileError(f"{path}: not valid CSV: {exc}") from None
    numeric = []
    for j in range(len(header)):
        values = [fields[j] for _, fields in raw if fields[j] != ""]
        try:
            for v in values:
                _number(v)
            numeric.append(bool(values))
        except ValueError:
            numeric.append(False)
    rows = []
    for line, fields in raw:
        row: dict[str, Any] = {"__line__": line}
        for j, name in enumerate(header):
            v = fields[j]
            row[name] = None if v == "" else (_number(v) if numeric[j] else v)
        rows.append(row)
    return header, rows


def _read_parquet(path: Path, time_column: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise EventFileError(f"{path}: not a readable Parquet file: {exc}") from None
    columns = table.column_names
    data, ts_is_ns = {}, False
    for name in columns:
        col = table.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if pa.types.is_timestamp(col.type):
            ns = col.cast(pa.timestamp("ns", tz=col.type.tz)).cast(pa.int64()).to_pylist()
            if name == time_column:
                data[name], ts_is_ns = ns, True
            else:  # other timestamp attributes are compared as ISO text
                data[name] = [None if v is None else format_ts(v) for v in ns]
        else:
            data[name] = col.to_pylist()
    rows = [{name: data[name][i] for name in columns} for i in range(table.num_rows)]
    return columns, rows, ts_is_ns
