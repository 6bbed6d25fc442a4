"""Events as columns: the engine's input (numpy arrays, built from Arrow or from events).

``EventColumns`` holds a group of events in processing order ``(ts, id)``
(docs/semantics.md): ``ts`` as int64 nanoseconds, the ids, and every attribute a pattern reads as
a pair of arrays ``values`` (float64) and ``kinds`` (int8: 0 missing, 1 number, 2 string).
Strings are dictionary-encoded with one sorted dictionary shared by all columns, so codes
compare (=, <, ...) exactly as the strings do, also across two columns. A NaN number is a
missing value. Comparisons between a number and a string follow the matcher's rule (only
``!=`` holds); see ``docs/engine.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.language.conditions.expressions import (
    TIME,
    Duration,
    derive,
    is_time,
    stored,
    time_function,
)
from jobs.core.language.events import Event, EventFileError, format_ts, read_events

MISSING, NUMBER, STRING = 0, 1, 2


@dataclass
class EventColumns:
    ts: np.ndarray  # int64 ns, processing order
    ids: pa.Array  # event ids as strings
    names: tuple[str, ...]  # attribute names, in the row order of values/kinds
    values: np.ndarray  # float64 [len(names), n]
    kinds: np.ndarray  # int8 [len(names), n]
    dictionary: pa.Array  # sorted strings; a string's code is its index
    # the attribute ``ts`` (conditions on time): (ts - time_base) / time_unit, exact
    time_base: int = 0
    time_unit: int = 1  # ns per unit: 1000 when every time is whole microseconds
    # what the engine derived from these events that other patterns reading the same
    # events and attributes may reuse (``engine.group_events``); not part of the value
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.ts)

    def row(self, name: str) -> int:
        return self.names.index(name)

    def encode_literal(self, value) -> tuple[float, int]:
        """(value, kind) of a literal in this encoding; a string absent from the
        dictionary gets a code between its neighbours, so < and > still hold."""
        if value is None:
            return np.nan, MISSING
        if isinstance(value, Duration):  # in the unit of the time attribute
            return float(int(value) / self.time_unit), NUMBER
        if isinstance(value, str):
            pos = int(np.searchsorted(self.dictionary.to_numpy(zero_copy_only=False), value))
            if pos < len(self.dictionary) and self.dictionary[pos].as_py() == value:
                return float(pos), STRING
            return pos - 0.5, STRING
        if isinstance(value, (int, float, bool, np.integer, np.floating)):
            v = float(value)
            return (v, NUMBER) if v == v else (np.nan, MISSING)
        return self.encode_literal(str(value))

    def nbytes(self) -> int:
        """Memory held by the columns (for the matchers' memory budget)."""
        return (self.ts.nbytes + self.ids.nbytes + self.values.nbytes + self.kinds.nbytes
                + self.dictionary.nbytes)

    def take(self, index: np.ndarray) -> EventColumns:
        return EventColumns(self.ts[index], self.ids.take(pa.array(index)), self.names,
                            self.values[:, index], self.kinds[:, index], self.dictionary,
                            self.time_base, self.time_unit)

    def time_ns(self, values: np.ndarray) -> np.ndarray:
        """Encoded times (or durations, ``base`` 0) back to nanoseconds."""
        return np.rint(values).astype(np.int64) * self.time_unit + self.time_base

    def id_rank(self) -> np.ndarray:
        """Each event's rank among the ids in string order (for Python-equal sorting)."""
        order = pc.sort_indices(self.ids).to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank


def dense_ranks(*keys: np.ndarray) -> np.ndarray:
    """Per position, the rank of its tuple (keys[0], keys[1], ...) among the distinct
    tuples in lexicographic order: the inverse of ``np.unique(np.stack(keys), axis=1,
    return_inverse=True)`` (equal for equal tuples, ordered as they are; a NaN equals
    nothing), by one ``lexsort`` instead of a sort of rows (ten times faster)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort(keys[::-1])
    new = np.zeros(n, np.bool_)
    new[0] = True
    for k in keys:
        s = k[order]
        new[1:] |= s[1:] != s[:-1]
    rank = np.empty(n, np.int64)
    rank[order] = np.cumsum(new) - 1
    return rank


def _processing_order(ts: np.ndarray, ids: pa.Array) -> np.ndarray:
    """Indices that sort by (ts, id), ids compared as strings."""
    if len(ts) < 2:
        return np.arange(len(ts))
    id_order = pc.sort_indices(ids).to_numpy()
    id_rank = np.empty(len(ids), dtype=np.int64)
    id_rank[id_order] = np.arange(len(ids))
    return np.lexsort((id_rank, ts))


def processing_order(table: pa.Table, id_column: str = "event_id", time_column: str = "ts"
                     ) -> np.ndarray:
    """Row indices of ``table`` in processing order (ts, id)."""
    ts = table.column(time_column)
    ts = ts.cast(pa.timestamp("ns", tz=ts.type.tz)) if pa.types.is_timestamp(ts.type) else ts
    ts = ts.cast(pa.int64()).to_numpy()
    ids = table.column(id_column)
    ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    if not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
        ids = _ids_as_text(ids)
    return _processing_order(ts, ids)


def _plain(col) -> pa.Array | None:
    """One Arrow array, dictionaries decoded; None for a column of Python objects."""
    if not isinstance(col, (pa.Array, pa.ChunkedArray)):
        return None
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return col


def _string_array(col: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    col = _plain(col)
    if col is None:
        return None
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return col.cast(pa.string())
    return None


def _numeric(col) -> np.ndarray | None:
    col = _plain(col)
    if col is None:
        return None
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) \
            or pa.types.is_decimal(t) or pa.types.is_null(t):
        return col.cast(pa.float64()).to_numpy(zero_copy_only=False)
    return None


def from_arrow(table: pa.Table, attributes: Iterable[str], id_column: str = "event_id",
               time_column: str = "ts", ordered: bool = False) -> EventColumns:
    """Columns of ``attributes`` from an Arrow table with an id and a time column.

    ``ordered``: the rows are already in processing order (Spark sorted them).
    Timestamp attributes other than the time column are compared as ISO text, as the
    event reader does.
    """
    ts_col = table.column(time_column)
    if pa.types.is_timestamp(ts_col.type):
        ts = ts_col.cast(pa.timestamp("ns", tz=ts_col.type.tz)).cast(pa.int64())
    else:
        ts = ts_col.cast(pa.int64())
    ts = ts.to_numpy() if isinstance(ts, pa.Array) else ts.combine_chunks().to_numpy()
    ids_col = table.column(id_column)
    ids = ids_col.combine_chunks() if isinstance(ids_col, pa.ChunkedArray) else ids_col
    if not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
        ids = _ids_as_text(ids)
    ids = ids.cast(pa.string())
    names = tuple(a for a in dict.fromkeys(attributes))
    raw = {}
    for name in names:
        if stored(name) == TIME:  # the event time and its functions: made by ``_encode``
            raw[name] = pa.nulls(table.num_rows, pa.float64())
            continue
        if name not in table.column_names:
            raw[name] = pa.nulls(table.num_rows, pa.float64())
            continue
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            ns = col.cast(pa.timestamp("ns", tz=col.type.tz)).cast(pa.int64()).to_pylist()
            col = pa.array([None if v is None else format_ts(v) for v in ns], pa.string())
        elif pa.types.is_date(col.type):
            col = pc.cast(col, pa.string())
        raw[name] = col
    return _encode(ts, ids, names, raw, ordered)


def _ids_as_text(ids: pa.Array) -> pa.Array:
    """Integral float ids read as their integer text (as the event reader does)."""
    if pa.types.is_floating(ids.type):
        values = ids.to_pylist()
        return pa.array([str(int(v)) if float(v).is_integer() else str(v) for v in values])
    return pc.cast(ids, pa.string())


def _encode(ts, ids, names, raw: dict, ordered: bool) -> EventColumns:
    strings = {n: _string_array(c) for n, c in raw.items()}
    pieces = [pc.unique(s.drop_null()) for s in strings.values() if s is not None]
    objects = {n: c for n, c in raw.items() if strings[n] is None and _numeric(c) is None}
    mixed_strings = []
    for n, c in objects.items():  # Python objects (mixed columns from events)
        values = c.to_pylist() if isinstance(c, (pa.Array, pa.ChunkedArray)) else list(c)
        objects[n] = values
        mixed_strings.extend(v for v in values if isinstance(v, str))
    if mixed_strings:
        pieces.append(pa.array(sorted(set(mixed_strings)), pa.string()))
    if pieces:
        allstr = pa.concat_arrays([p.cast(pa.string()) for p in pieces])
        uniq = pc.unique(allstr)
        dictionary = uniq.take(pc.sort_indices(uniq))
    else:
        dictionary = pa.array([], pa.string())
    n = len(ts)
    values = np.full((len(names), n), np.nan)
    kinds = np.zeros((len(names), n), dtype=np.int8)
    lookup = None
    for r, name in enumerate(names):
        s = strings[name]
        if s is not None:
            codes = pc.index_in(s, value_set=dictionary).to_numpy(zero_copy_only=False)
            ok = ~np.isnan(codes.astype(np.float64))
            values[r, ok] = codes[ok]
            kinds[r, ok] = STRING
            continue
        if name in objects:
            if lookup is None:
                lookup = {v: i for i, v in enumerate(dictionary.to_pylist())}
            for j, v in enumerate(objects[name]):
                if isinstance(v, str):
                    values[r, j], kinds[r, j] = lookup[v], STRING
                elif isinstance(v, (bool, int, float)) and v == v:
                    values[r, j], kinds[r, j] = float(v), NUMBER
            continue
        num = _numeric(raw[name])
        ok = ~np.isnan(num)
        values[r, ok] = num[ok]
        kinds[r, ok] = NUMBER
    ts = np.asarray(ts, dtype=np.int64)
    base, unit = 0, 1
    if any(is_time(name) for name in names):
        base, unit = _time_encoding(ts)
    for r, name in enumerate(names):  # the time and its functions (date(ts), hour(ts), ...)
        if name == TIME:
            values[r] = (ts - base) // unit
        elif time_function(name):  # the reference's formula, on the whole column
            derived = derive(time_function(name), ts)
            values[r] = (derived - base) // unit if is_time(name) else derived
        else:
            continue
        kinds[r] = NUMBER
    cols = EventColumns(ts, ids, names, values, kinds, dictionary, base, unit)
    if not ordered:
        order = _processing_order(cols.ts, ids)
        if not np.array_equal(order, np.arange(n)):
            cols = cols.take(order)
    return cols


EXACT = 2 ** 53  # integers up to this are exact as float64


def _time_encoding(ts: np.ndarray) -> tuple[int, int]:
    """(base, unit) that make every time an exact float64 ``(ts - base) / unit``: whole
    microseconds (Spark's and the lake's times) span up to 285 years, nanoseconds up to
    104 days; a longer span of nanosecond times is refused rather than rounded."""
    if not len(ts):
        return 0, 1
    base = int(ts.min())
    unit = 1000 if not (ts % 1000).any() else 1
    if (int(ts.max()) - base) // unit >= EXACT:
        raise EventFileError("event times with nanoseconds spanning more than 104 days cannot "
                             "be compared exactly in conditions on ts: round the times to "
                             "microseconds")
    return base, unit


def from_events(events: list[Event], attributes: Iterable[str]) -> EventColumns:
    """Columns from ``Event`` objects already in processing order (tests, examples, oracle
    comparisons); ``events[k]`` is row k."""
    names = tuple(dict.fromkeys(attributes))
    ts = np.array([e.ts for e in events], dtype=np.int64)
    ids = pa.array([e.id for e in events], pa.string())
    raw = {}
    for name in names:
        if stored(name) == TIME:  # the event time and its functions: made by ``_encode``
            raw[name] = pa.nulls(len(events), pa.float64())
            continue
        vals = [e.attrs.get(name) for e in events]
        kinds = {type(v) for v in vals if v is not None}
        if kinds and kinds <= {str}:
            raw[name] = pa.array(vals, pa.string())
        elif kinds and kinds <= {int, float, bool}:
            raw[name] = pa.array([None if v is None else float(v) for v in vals], pa.float64())
        elif not kinds:
            raw[name] = pa.nulls(len(events), pa.float64())
        else:
            raw[name] = _Objects(vals)
    return _encode(ts, ids, names, raw, ordered=True)


class _Objects(list):
    """A column of mixed Python values (encoded value by value)."""


def file_schema(events: list[Event]) -> dict[str, str | None]:
    """Column kinds seen in events: 'number', 'string', 'mixed' or None (all missing)."""
    schema: dict[str, str | None] = dict.fromkeys(events[0].attrs) if events else {}
    for e in events:
        for k, v in e.attrs.items():
            if v is not None:
                kind = "number" if isinstance(v, (int, float)) and not isinstance(v, bool) \
                    else "string"
                schema[k] = kind if schema.get(k) in (None, kind) else "mixed"
    return schema


def _arrow_schema(table: pa.Table) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for f in table.schema:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_null(t):
            out[f.name] = None
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            out[f.name] = "number"
        else:
            out[f.name] = "string"
    return out


def read_columns(path, attributes: Iterable[str], id_column: str = "event_id",
                 time_column: str = "ts") -> tuple[EventColumns, dict[str, str | None]]:
    """A CSV or Parquet file as columns in processing order, and the kinds of its columns.

    Parquet with a timestamp column is read by Arrow directly; everything else goes
    through ``events.read_events`` (its checks and messages apply to both paths).
    """
    from pathlib import Path

    import pyarrow.parquet as pq


    path = Path(path)
    if path.suffix.lower() == ".parquet" and path.is_file():
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise EventFileError(f"{path}: not a readable Parquet file: {exc}") from None
        names = table.column_names
        if id_column in names and time_column in names \
                and pa.types.is_timestamp(table.schema.field(time_column).type):
            _check_ids_and_times(path, table, id_column, time_column)
            schema = _arrow_schema(table)
            schema.pop(id_column, None)
            schema.pop(time_column, None)
            return from_arrow(table, attributes, id_column, time_column), schema
    events = read_events(path, id_column=id_column, time_column=time_column)
    schema = file_schema(events)
    return from_events(events, attributes), schema


def _check_ids_and_times(path, table: pa.Table, id_column: str, time_column: str) -> None:
    """``read_events``' row checks, vectorized: empty ids or times, duplicate ids."""

    ids = table.column(id_column).combine_chunks()
    ids_text = _ids_as_text(ids) if not pa.types.is_string(ids.type) else ids
    empty = pc.or_(pc.is_null(ids_text), pc.equal(ids_text, "")).to_numpy(zero_copy_only=False)
    if empty.any():
        raise EventFileError(f"{path}: row {int(np.argmax(empty)) + 1}: empty {id_column!r}")
    values = np.asarray(ids_text.to_numpy(zero_copy_only=False), dtype=object)
    _, first, inverse, counts = np.unique(values, return_index=True, return_inverse=True,
                                          return_counts=True)
    if (counts > 1).any():
        dup = np.flatnonzero(counts[inverse] > 1)
        dup = dup[dup != first[inverse[dup]]]
        row = int(dup.min())
        raise EventFileError(f"{path}: row {row + 1}: duplicate {id_column} {values[row]!r} "
                             f"(first at row {int(first[inverse[row]]) + 1})")
    missing = pc.is_null(table.column(time_column)).to_numpy(zero_copy_only=False)
    if missing.any():
        raise EventFileError(f"{path}: row {int(np.argmax(missing)) + 1}: empty "
                             f"{time_column!r}")
