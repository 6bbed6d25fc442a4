"""Typing raw blocks by the source schema, on columns: each value converted as
``convert`` converts one (the definition), the time range and the id rule applied, the
rows that fail quarantined with the reason naming the column and the value.

Values in the forms nearly every file uses (decimal integers and numbers, ISO-8601 times
without a week or an ordinal date, text) are converted by Arrow kernels and numpy over the
whole column; every other value goes through ``convert`` itself, once per distinct value.
A property test holds the columns equal to ``convert`` on random values.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import date, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import Source, TimeRange
from jobs.core.language.events import parse_ts
from jobs.landing.ids import content_ids, id_key, id_keys
from jobs.landing.reading import MAX_FIELD, MISSING, RawBlock, only_space, raw_text, value_bytes

ARROW = {"string": pa.string(), "integer": pa.int64(), "double": pa.float64(),
         "number": pa.float64(), "timestamp": pa.timestamp("us", tz="UTC")}
LINEAGE = ("event_id", "ts", "event_date", "source_file", "ingest_run", "ingested_at")
_INTEGER = r"^-?[0-9]{1,18}$"
_DOUBLE = r"^-?[0-9]{1,30}(\.[0-9]{1,30})?$"
_TIME = (r"^(?P<y>[0-9]{4})-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})(?:[T ](?P<H>[0-9]{2}):"
         r"(?P<M>[0-9]{2})(?::(?P<S>[0-9]{2})(?:\.(?P<f>[0-9]{1,9}))?)?"
         r"(?P<z>Z|[+-][0-9]{2}:[0-9]{2})?)?$")
OK, MISSING_COLUMN, TOO_LONG, NOT_KIND, NOT_FINITE = range(5)


class NotFinite(ValueError):
    """A number that overflows a double (``1e400``) or is infinite."""


def convert(value, kind: str):
    """One raw value as ``kind`` (None: empty); raises ``ValueError`` (``NotFinite``) for
    a value that is not one. The definition the columns follow."""
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


@dataclass
class Column:
    """One column typed: ``values`` (Arrow; timestamps as int64 ns, null where ``big``),
    ``problem`` per row (``OK`` …), ``big``: row -> its time beyond int64 nanoseconds
    (held here as a Python int: outside the default range, inside a wider one)."""

    values: pa.Array
    problem: np.ndarray
    big: dict[int, int] = field(default_factory=dict)


def _target(kind: str) -> pa.DataType:
    return pa.int64() if kind == "timestamp" else ARROW[kind]


def _each(values: list, kind: str) -> Column:
    """``convert`` on each value (``MISSING``: the record lacks the key)."""
    out, problem, big = [], np.zeros(len(values), np.int8), {}
    memo: dict = {}
    for i, v in enumerate(values):
        if v is MISSING:
            problem[i] = MISSING_COLUMN
            out.append(None)
            continue
        if isinstance(v, str) and len(v) > MAX_FIELD:
            problem[i] = TOO_LONG
            out.append(None)
            continue
        try:
            key = (type(v), v) if isinstance(v, (str, int, float)) else None
        except TypeError:
            key = None
        got = memo.get(key, memo) if key is not None else memo
        if got is memo:
            try:
                got = (OK, convert(v, kind))
            except NotFinite:
                got = (NOT_FINITE, None)
            except (ValueError, TypeError, OverflowError):
                got = (NOT_KIND, None)
            if key is not None:
                memo[key] = got
        problem[i], value = got
        if kind == "timestamp" and value is not None and not -(2**63) <= value < 2**63:
            big[i], value = value, None
        out.append(value)
    return Column(pa.array(out, _target(kind)), problem, big)


# the two forms nearly every file writes, byte by byte: a digit ("0"), or that byte itself
_FORMS = {10: b"0000-00-00", 19: b"0000-00-00T00:00:00"}


def _fixed(text: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of ``text`` in the form ``_FORMS[width]``, their bytes as a (rows, width)
    array): a length and a byte-by-byte look at the values' bytes, no regular expression
    (the form's bytes are ASCII, so a value of ``width`` bytes in it is ``width``
    characters). Between a date and a time stands "T" or " "."""
    data, starts = value_bytes(text)
    rows = np.flatnonzero(np.diff(starts) == width)
    if text.null_count:
        rows = rows[np.asarray(text.is_valid().to_numpy(zero_copy_only=False), bool)[rows]]
    b = data[starts[rows][:, None] + np.arange(width)]
    form = np.frombuffer(_FORMS[width], np.uint8)
    digit, same = form == 0x30, form != 0x30
    same[10:11] = False  # the date's and the time's separator
    ok = ((b[:, digit] >= 0x30) & (b[:, digit] <= 0x39)).all(axis=1)
    ok &= (b[:, same] == form[same]).all(axis=1)
    if width > 10:
        ok &= (b[:, 10] == 0x54) | (b[:, 10] == 0x20)
    return rows[ok], b[ok]


def _times(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(ns, certain) of ISO-8601 texts: ``certain`` where the text is in a common form,
    a real date and time, and a year that fits 64-bit nanoseconds. The two forms nearly
    every file uses (a date; a date and a time to the second) are read from the values'
    bytes by position, the others by a regular expression."""
    n = len(text)
    ns, ok = np.zeros(n, np.int64), np.zeros(n, bool)
    rest = np.ones(n, bool)
    for width in (10, 19):
        at, b = _fixed(text, width)
        if not len(at):
            continue
        d = b.astype(np.int64) - 0x30

        def num(lo: int, hi: int, d=d) -> np.ndarray:
            out = d[:, lo]
            for k in range(lo + 1, hi):
                out = out * 10 + d[:, k]
            return out
        zero = np.zeros(len(at), np.int64)
        clock = (num(11, 13), num(14, 16), num(17, 19)) if width == 19 else (zero,) * 3
        got, good = _instants(num(0, 4), num(5, 7), num(8, 10), *clock, zero, zero, zero,
                              np.ones(len(at), np.int64))
        ns[at], ok[at] = got, good
        rest[at] = False
    if rest.any():
        at = np.flatnonzero(rest)
        got, good = _times_by_pattern(text.take(pa.array(at)))
        ns[at], ok[at] = got, good
    return ns, ok


def _times_by_pattern(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    parts = pc.extract_regex(text, _TIME)

    def num(name: str, default: int = 0) -> np.ndarray:
        f = pc.struct_field(parts, name)
        f = pc.if_else(pc.equal(pc.utf8_length(f), 0), None, f)
        return np.asarray(pc.cast(f, pa.int64()).fill_null(default).to_numpy(
            zero_copy_only=False), np.int64)
    ok = np.asarray(pc.is_valid(parts).to_numpy(zero_copy_only=False), bool)
    y, m, d = num("y", 1970), num("m", 1), num("d", 1)
    hh, mm, ss = num("H"), num("M"), num("S")
    frac = pc.struct_field(parts, "f")
    digits = np.asarray(pc.utf8_length(frac).fill_null(0).to_numpy(zero_copy_only=False),
                        np.int64)
    f = num("f")
    ns_frac = f * (10 ** (9 - np.clip(digits, 0, 9)))
    zone = pc.struct_field(parts, "z").fill_null("")
    sign = np.where(np.asarray(pc.starts_with(zone, "-").to_numpy(zero_copy_only=False),
                               bool), -1, 1)
    zh = np.asarray(pc.cast(pc.if_else(pc.greater(pc.utf8_length(zone), 1),
                                       pc.utf8_slice_codeunits(zone, 1, 3), "0"),
                            pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    zm = np.asarray(pc.cast(pc.if_else(pc.greater(pc.utf8_length(zone), 1),
                                       pc.utf8_slice_codeunits(zone, 4, 6), "0"),
                            pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    got, good = _instants(y, m, d, hh, mm, ss, ns_frac, zh, zm, sign)
    return got, good & ok


_YEARS = np.arange(1678, 2262)  # the years whose every instant fits int64 nanoseconds
_LEAP = (((_YEARS % 4 == 0) & (_YEARS % 100 != 0)) | (_YEARS % 400 == 0)).astype(np.int64)
_YEAR_DAYS = np.array([(date(int(y), 1, 1) - date(1970, 1, 1)).days for y in _YEARS], np.int64)
_MONTH_DAYS = np.array([[31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31],
                        [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]], np.int64)
_MONTH_START = np.concatenate([np.zeros((2, 1), np.int64),
                               np.cumsum(_MONTH_DAYS, axis=1)[:, :-1]], axis=1)


def _instants(y, m, d, hh, mm, ss, ns_frac, zh, zm, sign) -> tuple[np.ndarray, np.ndarray]:
    """Nanoseconds since the epoch of calendar fields (numpy), and where they are a real
    date and time whose year fits 64-bit nanoseconds."""
    yi = np.clip(y - _YEARS[0], 0, len(_YEARS) - 1)
    leap = _LEAP[yi]
    mi = np.clip(m, 1, 12) - 1
    ok = (y >= _YEARS[0]) & (y <= _YEARS[-1]) & (m >= 1) & (m <= 12) & (d >= 1)
    ok &= (d <= _MONTH_DAYS[leap, mi]) & (hh <= 23) & (mm <= 59) & (ss <= 59)
    ok &= (zh <= 23) & (zm <= 59)
    days = _YEAR_DAYS[yi] + _MONTH_START[leap, mi] + d - 1
    secs = days * 86400 + hh * 3600 + mm * 60 + ss - sign * (zh * 3600 + zm * 60)
    ns = np.where(ok, secs, 0) * 1_000_000_000 + np.where(ok, ns_frac, 0)
    return ns, ok


def _long_and_empty(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(longer than ``MAX_FIELD`` characters, null or only white space) per value: the
    characters are counted only where the bytes are more than the limit."""
    _, starts = value_bytes(text)
    long_ = np.zeros(len(text), bool)
    at = np.flatnonzero(np.diff(starts) > MAX_FIELD)
    if len(at):
        chars = pc.utf8_length(text.take(pa.array(at, pa.int64()))).fill_null(0)
        long_[at] = np.asarray(chars.to_numpy(zero_copy_only=False)) > MAX_FIELD
    return long_, _blank(text)


def _blank(text: pa.Array) -> np.ndarray:
    """Per value: null, or empty or only white space."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    blank = only_space(text)
    if text.null_count:
        blank |= np.asarray(text.is_null().to_numpy(zero_copy_only=False), bool)
    return blank


def _strings(text: pa.Array, kind: str) -> Column:
    """A column of raw texts (nulls: JSON nulls) as ``kind``."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    n = len(text)
    long_, empty = _long_and_empty(text)
    problem = np.where(long_, TOO_LONG, OK).astype(np.int8)
    if kind == "string":
        return Column(pc.if_else(pa.array(empty | long_), pa.scalar(None, pa.string()), text),
                      problem)
    if kind == "timestamp":
        values, certain = _times(text)
    else:
        pattern = _INTEGER if kind == "integer" else _DOUBLE
        certain = np.asarray(pc.match_substring_regex(text, pattern).fill_null(False)
                             .to_numpy(zero_copy_only=False), bool)
        dtype = np.int64 if kind == "integer" else np.float64
        values = np.zeros(n, dtype)
        if certain.any():
            values[certain] = np.asarray(pc.cast(text.filter(pa.array(certain)),
                                                 _target(kind)).to_numpy(), dtype)
    valid = certain & ~empty & ~long_
    rest = ~certain & ~empty & ~long_
    if rest.any():
        at = np.flatnonzero(rest)
        sub = text.take(pa.array(at))
        uniq = pc.unique(sub)
        col = _each(uniq.to_pylist(), kind)
        where = np.asarray(pc.index_in(sub, uniq).to_numpy(zero_copy_only=False), np.int64)
        u_vals = np.asarray(col.values.fill_null(0).to_numpy(zero_copy_only=False),
                            values.dtype)
        u_valid = ~np.asarray(col.values.is_null().to_numpy(zero_copy_only=False), bool)
        values[at] = u_vals[where]
        valid[at] = u_valid[where]
        problem[at] = col.problem[where]
        big = {int(at[j]): col.big[int(w)] for j, w in enumerate(where) if int(w) in col.big}
    else:
        big = {}
    if kind in ("double", "number"):
        infinite = np.isinf(values) & valid  # 1e400 written plainly
        problem[infinite], valid[infinite] = NOT_FINITE, False
    arr = pa.array(values, _target(kind), mask=~valid)
    return Column(arr, problem, big)


def _typed_array(arr: pa.Array, kind: str) -> Column | None:
    """A column already of the kind's Arrow type (Parquet), or None."""
    n = len(arr)
    if kind in ("double", "number") and pa.types.is_floating(arr.type):
        v = pc.cast(arr, pa.float64())
        vals = v.fill_null(0).to_numpy(zero_copy_only=False)
        nan, inf = np.isnan(vals), np.isinf(vals)
        problem = np.where(inf, NOT_FINITE, OK).astype(np.int8)
        valid = ~np.asarray(v.is_null().to_numpy(zero_copy_only=False), bool) & ~nan & ~inf
        return Column(pa.array(vals, pa.float64(), mask=~valid), problem)
    if kind == "integer" and pa.types.is_integer(arr.type) and arr.type != pa.uint64():
        return Column(pc.cast(arr, pa.int64()), np.zeros(n, np.int8))
    if kind == "timestamp" and pa.types.is_timestamp(arr.type) and arr.type.unit != "ns":
        ns = pc.cast(pc.cast(arr, pa.timestamp("us", tz=arr.type.tz)), pa.int64())
        return Column(pc.multiply(ns, 1000), np.zeros(n, np.int8))
    return None


def type_column(raw, kind: str, n: int) -> Column:
    """One column of a raw block as ``kind``."""
    if raw is None:
        return Column(pa.nulls(n, _target(kind)), np.full(n, MISSING_COLUMN, np.int8))
    if isinstance(raw, list):
        present = [v for v in raw if v is not MISSING]
        if len(present) == n and all(v is None or type(v) is str for v in raw):
            return _strings(pa.array(raw, pa.string()), kind)
        if all(v is None or type(v) is str or v is MISSING for v in raw):
            at = np.array([v is not MISSING for v in raw], bool)
            sub = _strings(pa.array(present, pa.string()), kind)
            return _scatter(sub, at, n, kind)
        if kind in ("double", "number") and all(
                v is None or v is MISSING or type(v) in (int, float) for v in raw):
            try:
                arr = pa.array([None if v is MISSING else v for v in raw], pa.float64())
            except (pa.ArrowInvalid, OverflowError):
                return _each(raw, kind)
            col = _typed_array(arr, kind)
            col.problem[np.array([v is MISSING for v in raw], bool)] = MISSING_COLUMN
            return col
        return _each(raw, kind)
    if pa.types.is_string(raw.type) or pa.types.is_large_string(raw.type):
        return _strings(pc.cast(raw, pa.string()), kind)
    typed = _typed_array(raw, kind)
    return typed if typed is not None else _each(raw.to_pylist(), kind)


def _scatter(sub: Column, at: np.ndarray, n: int, kind: str) -> Column:
    idx = np.full(n, -1, np.int64)
    idx[at] = np.arange(int(at.sum()))
    take = pa.array(idx, mask=idx < 0)
    problem = np.full(n, MISSING_COLUMN, np.int8)
    problem[at] = sub.problem
    rows = np.flatnonzero(at)
    return Column(sub.values.take(take), problem,
                  {int(rows[k]): v for k, v in sub.big.items()})


def _shown(value) -> str:
    return repr(str(value)[:40])


def _raw_at(raw, i: int):
    if isinstance(raw, list):
        return raw[i]
    return raw[i].as_py()


def events_schema(source: Source) -> pa.Schema:
    """The source's columns, then the columns every events table has."""
    fields = [pa.field(c, ARROW[k]) for c, k in source.columns.items() if c not in LINEAGE]
    fields += [pa.field("event_id", pa.string()), pa.field("ts", ARROW["timestamp"]),
               pa.field("event_date", pa.string()), pa.field("source_file", pa.string()),
               pa.field("ingest_run", pa.string()), pa.field("ingested_at", ARROW["timestamp"])]
    return pa.schema(fields)


PARTITION = "event_date"  # an events table's partition column


def data_schema(schema: pa.Schema) -> pa.Schema:
    """The columns of an events table's data file: the table's (``schema``), without the
    partition column (its value is the file's folder and its ``add`` action's)."""
    return pa.schema([f for f in schema if f.name != PARTITION])


QUARANTINE_SCHEMA = pa.schema([
    ("source_file", pa.string()), ("line", pa.int64()), ("reason", pa.string()),
    ("raw", pa.string()), ("ingest_run", pa.string()),
    ("quarantined_at", pa.timestamp("us", tz="UTC"))])
# what a typed block keeps beside the events: the line, a 64-bit key of the id, and for
# content-hash ids a 64-bit key of the content (numbered over the whole file later)
TYPED_EXTRA = (pa.field("_line", pa.int64()), pa.field("_k", pa.int64()),
               pa.field("_ck", pa.int64()), pa.field("_fi", pa.int32()),
               pa.field("_n", pa.int64()))


def typed_schema(source: Source) -> pa.Schema:
    return pa.schema([*events_schema(source), *TYPED_EXTRA])


def quarantine_table(rows: list[tuple[int, str, str | dict]], label: str, run_id: str,
                     now: datetime) -> pa.Table:
    """Rows of ``quarantine/<source>`` from (line, reason, raw text or record)."""
    rows = sorted(rows, key=lambda r: r[0])
    return pa.table({"source_file": [label] * len(rows), "line": [r[0] for r in rows],
                     "reason": [r[1] for r in rows],
                     "raw": [r[2] if isinstance(r[2], str) else raw_text(r[2]) for r in rows],
                     "ingest_run": [run_id] * len(rows),
                     "quarantined_at": pa.array([now] * len(rows), ARROW["timestamp"])},
                    schema=QUARANTINE_SCHEMA)


def type_block(source: Source, block: RawBlock, label: str, run_id: str, now: datetime,
               ts_range: TimeRange = TimeRange(), file_index: int = 0,
               clock: dict | None = None) -> tuple[pa.Table, pa.Table]:
    """(typed events, quarantined rows) of one raw block. Content-hash ids are numbered
    1 here: ``ids.renumber`` numbers identical rows over the whole file. ``clock``: the
    seconds spent on the ids are added to its ``ids``."""
    n = len(block)
    typed, problems = {}, []
    for col, kind in source.columns.items():
        c = type_column(block.columns.get(col), kind, n)
        typed[col] = c
        problems.append((col, kind, c))
    ts_col = typed.get(source.time_column)
    ts = ts_col.values if ts_col is not None else pa.nulls(n, pa.int64())
    any_problem = np.zeros(n, bool)
    for _, _, c in problems:
        any_problem |= c.problem != OK
    ts_np = np.asarray(ts.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    ts_null = np.asarray(ts.is_null().to_numpy(zero_copy_only=False), bool)
    low, high = max(ts_range.low, -(2**63)), min(ts_range.high, 2**63 - 1)  # int64 bounds
    outside = ~ts_null & ((ts_np < low) | (ts_np > high))
    for i, v in (ts_col.big.items() if ts_col is not None else ()):  # not null: beyond int64
        ts_null[i] = False
        outside[i] = not ts_range.low <= v <= ts_range.high
    bad_id = np.zeros(n, bool)
    raw_ids = None
    if source.id_column:
        raw_ids = _id_texts(block.columns.get(source.id_column), n)
        bad_id = _blank(raw_ids)
    bad = any_problem | ts_null | outside | bad_id
    quarantined = list(block.refused)
    for i in np.flatnonzero(bad):
        i = int(i)
        quarantined.append((int(block.lines[i]), _reason(source, block, problems, i,
                                                        bool(ts_null[i]), bool(outside[i]),
                                                        ts_range), block.raw(i)))
    keep = pa.array(~bad)
    events = {c: (_us(typed[c]) if source.columns[c] == "timestamp" else typed[c].values
                  ).filter(keep) for c in source.columns if c not in LINEAGE}
    ts_us = (_us(ts_col) if ts_col is not None else pa.nulls(n, ARROW["timestamp"])).filter(keep)
    lines = pa.array(block.lines[~bad], pa.int64())
    started = time.perf_counter()
    if source.id_column:
        ids = raw_ids.filter(keep)
        keys, content = id_keys(ids), np.zeros(len(ids), np.int64)
    else:
        texts = {c: _big_texts(typed[c]).filter(keep) for c in source.columns
                 if typed[c].big}
        ids, content = content_ids(source, {c: typed[c].values.filter(keep)
                                            for c in source.columns}, texts)
        keys = id_key(content, 1)  # numbered over the file by ``staging.renumber``
    if clock is not None:
        clock["ids"] = clock.get("ids", 0.0) + time.perf_counter() - started
    events.update(event_id=ids, ts=ts_us,
                  event_date=_dates(ts_us),
                  source_file=pa.repeat(pa.scalar(label, pa.string()), len(ids)),
                  ingest_run=pa.repeat(pa.scalar(run_id, pa.string()), len(ids)),
                  ingested_at=pa.repeat(pa.scalar(now, ARROW["timestamp"]), len(ids)),
                  _line=lines, _k=_keys_of(keys, ids), _ck=pa.array(content, pa.int64()),
                  _fi=pa.array(np.full(len(ids), file_index, np.int32)),
                  _n=pa.array(np.ones(len(ids), np.int64)))
    schema = typed_schema(source)
    table = pa.table({f.name: events[f.name] for f in schema}, schema=schema)
    return table, quarantine_table(quarantined, label, run_id, now)


def _keys_of(keys: np.ndarray, ids: pa.Array) -> pa.Array:
    """The 64-bit key of each id (``_k``), null where the id is: a staged part's keys
    stand for its ids in the events suite's verdict (``quality.keyed_ids``), nulls too."""
    if not ids.null_count:
        return pa.array(keys, pa.int64())
    return pa.array(keys, pa.int64(), mask=ids.is_null().to_numpy(zero_copy_only=False))


def _dates(us: pa.Array) -> pa.Array:
    """The UTC date (``YYYY-MM-DD``) of each time (``format_ts(ns)[:10]``)."""
    micros = np.asarray(us.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False),
                        np.int64)
    days = np.floor_divide(micros, 86_400_000_000).astype(np.int32)
    return pa.array(days, pa.int32(), mask=np.asarray(us.is_null().to_numpy(
        zero_copy_only=False), bool)).cast(pa.date32()).cast(pa.string())


def _us(col: Column) -> pa.Array:
    """A time column's nanoseconds as UTC microseconds (floor, as ``ns // 1000``)."""
    ns = col.values
    v = np.asarray(ns.fill_null(0).to_numpy(zero_copy_only=False), np.int64) // 1000
    null = np.asarray(ns.is_null().to_numpy(zero_copy_only=False), bool)
    for i, big in col.big.items():
        if -(2**63) <= big // 1000 < 2**63:
            v[i], null[i] = big // 1000, False
    return pa.array(v, pa.int64(), mask=null).cast(ARROW["timestamp"])


def _big_texts(col: Column) -> pa.Array:
    """A time column's nanoseconds as text, those beyond int64 too."""
    texts = pc.cast(col.values, pa.string()).to_pylist()
    for i, big in col.big.items():
        texts[i] = str(big)
    return pa.array(texts, pa.string())


def _id_texts(raw, n: int) -> pa.Array:
    """The id column's raw values as text (``str`` of a JSON number), null where none."""
    if raw is None:
        return pa.nulls(n, pa.string())
    if isinstance(raw, list):
        return pa.array([None if v is None or v is MISSING else v if isinstance(v, str)
                         else str(v) for v in raw], pa.string())
    if pa.types.is_string(raw.type):
        return raw
    return pa.array([None if v is None else str(v) for v in raw.to_pylist()], pa.string())


def _reason(source: Source, block: RawBlock, problems, i: int, ts_null: bool,
            outside: bool, ts_range: TimeRange) -> str:
    said = []
    for col, kind, c in problems:
        p = c.problem[i]
        if p == OK:
            continue
        if p == MISSING_COLUMN:
            said.append(f"missing column {col!r}")
            continue
        value = _raw_at(block.columns[col], i)
        if p == TOO_LONG:
            said.append(f"column {col!r}: a value of {len(value):,} characters, over the "
                        f"limit of {MAX_FIELD:,}")
        elif p == NOT_FINITE:
            said.append(f"column {col!r}: {_shown(value)} is not a finite number")
        else:
            said.append(f"column {col!r}: {_shown(value)} is not a {kind}")
    if said:
        return "; ".join(said)
    if ts_null:
        return f"empty time column {source.time_column!r}"
    if outside:
        value = _raw_at(block.columns[source.time_column], i)
        return (f"time {_shown(value)} is outside the accepted range "
                f"{ts_range.describe()}")
    return f"empty id column {source.id_column!r}"
