"""A row pattern's matches as a typed Arrow table, the form the match table stores: ONE
ROW PER MATCH gives a row per match (the pattern's name, its partition columns, ``match_number``,
``match_id``, ``start_ts``, ``end_ts``, the event ids each variable binds, then the
measures as of its last row); ALL ROWS PER MATCH a row per output row (its partition
columns, ``match_number``, ``match_id``, the row's ``event_id``, ``ts`` and
``classifier``, then the measures as of that row). Measures keep their SQL types
(``types``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import pyarrow as pa

from jobs.core.errors import UserError
from jobs.core.rowpattern.evaluate import column_value
from jobs.core.rowpattern.model import ROWS_ALL_OMIT, RowPatternQuery
from jobs.core.rowpattern.output import final_measures, matches, measures_at
from jobs.core.rowpattern.types import measure_type, output_type, simple_type
from jobs.core.rowpattern.values import Interval, Ts

TS = pa.timestamp("us", tz="UTC")
BINDINGS = pa.map_(pa.string(), pa.list_(pa.string()))
_ARROW = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64(),
          "boolean": pa.bool_(), "timestamp": TS}


def arrow_type(t: str) -> pa.DataType:
    if t.startswith("array<"):
        return pa.list_(arrow_type(t[6:-1]))
    return _ARROW[t]


def match_schema(query: RowPatternQuery, columns: dict[str, str]) -> pa.Schema:
    """The table's schema; ``columns``: the source's column name -> type."""
    lower = {k.lower(): simple_type(v) for k, v in columns.items()}
    lower.setdefault("ts", "timestamp")
    lower.setdefault("event_id", "string")
    head = [pa.field("pattern", pa.string())]
    head += [pa.field(c, arrow_type(lower.get(c.lower(), "string"))) for c in query.partition_by]
    head += [pa.field("match_number", pa.int64()), pa.field("match_id", pa.string())]
    if query.all_rows:
        head += [pa.field("event_id", pa.string()), pa.field("ts", TS),
                 pa.field("classifier", pa.string())]
    else:
        head += [pa.field("start_ts", TS), pa.field("end_ts", TS),
                 pa.field("bindings", BINDINGS)]
    taken = {f.name for f in head}
    for m in query.measures:
        if m.name in taken:
            raise UserError(f"{query.path}:{m.pos}: measure {m.name} has the name of a column "
                            f"the match table has already ({', '.join(sorted(taken))})")
        head.append(pa.field(m.name, arrow_type(output_type(measure_type(m.expr, lower)))))
    return pa.schema(head)


def match_id(query: RowPatternQuery, key: tuple, event_ids: Iterable[str], number: int) -> str:
    """A stable id: the pattern, the partition, the match's event ids (its number for an
    empty match)."""
    text = "\x1f".join([query.name, repr(key), str(number) if not event_ids else "",
                        *map(str, event_ids)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def match_table(query: RowPatternQuery, rows: list[dict], schema: pa.Schema) -> pa.Table:
    """The matches of ``rows`` (every row of one or more partitions) as ``schema``."""
    out: dict[str, list] = {f.name: [] for f in schema}
    names = [m.name for m in query.measures]
    for pm in matches(query, rows):
        m = pm.match
        ids = [pm.rows[m.start + i].get("event_id") for i in range(len(m.labels))]
        common = {"pattern": query.name} | dict(zip(query.partition_by, pm.key)) | {
            "match_number": m.number, "match_id": match_id(query, pm.key, ids, m.number)}
        if not query.all_rows:
            bindings: dict[str, list] = {}
            for label, eid in zip(m.labels, ids):
                bindings.setdefault(label, []).append(eid)
            _add(out, common | {
                "start_ts": None if m.empty else column_value(pm.rows[m.start], "ts"),
                "end_ts": None if m.empty else column_value(pm.rows[m.end], "ts"),
                "bindings": list(bindings.items())} | final_measures(query, pm))
        elif m.empty:
            if query.rows_per_match != ROWS_ALL_OMIT:
                row = pm.rows[m.start]
                _add(out, common | {"event_id": row.get("event_id"), "ts": column_value(row, "ts"),
                                    "classifier": None} | measures_at(query, pm, None))
        else:
            for i, excluded in enumerate(m.excluded):
                if not excluded:
                    row = pm.rows[m.start + i]
                    _add(out, common | {"event_id": row.get("event_id"),
                                        "ts": column_value(row, "ts"), "classifier": m.labels[i]}
                         | measures_at(query, pm, m.start + i))
    return pa.table({f.name: _array(out[f.name], f, query, f.name in names)
                     for f in schema}, schema=schema)


def _add(out: dict, values: dict) -> None:
    for k, column in out.items():
        column.append(values.get(k))


def _array(values: list, field: pa.Field, query, measure: bool) -> pa.Array:
    try:
        return pa.array([_value(v, field.type) for v in values], type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        what = f"measure {field.name}" if measure else f"column {field.name}"
        raise UserError(f"{query.path}: {what} is typed {field.type} but gave a value it "
                        f"cannot hold ({exc}); CAST it in the measure") from None


def _value(v, t: pa.DataType):
    if v is None:
        return None
    if pa.types.is_timestamp(t):
        return int(v) // 1000 if isinstance(v, (Ts, int)) else v
    if pa.types.is_floating(t):
        return int(v) / 10**9 if isinstance(v, Interval) else float(v)
    if pa.types.is_integer(t):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v
    if pa.types.is_string(t):
        return v if isinstance(v, str) else str(v)
    if pa.types.is_list(t):
        return [_value(x, t.value_type) for x in v]
    return v
