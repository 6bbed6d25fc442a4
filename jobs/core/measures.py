"""Measures: the computed columns of a sequence pattern's matches (``measures:``,
docs/language.md).

A measure is a value expression over a whole match: aggregates of group variables,
attributes of positive singletons, literals and arithmetic. ``measure_value`` is the
reference (through ``conditions.measure_value``); ``batch_measures`` computes every
measure for a batch of matches on the engine's columns, with the same per-match
aggregates as aggregate conditions (``jobs.core.aggregates``). Both give plain Python
values of the measure's kind: ``integer`` measures as int, other numbers as float, text
as str, a missing value as None.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jobs.core.aggregates import BatchValues
from jobs.core.columns import NUMBER, STRING, EventColumns
from jobs.core.conditions import Agg, Arith, Attr, Lit, Neg, measure_value, value_kind
from jobs.core.events import format_ts
from jobs.core.programs import vector_value

TYPES = ("integer", "double", "string")
NUMERIC = {"integer": "integer", "double": "double", "number": "double"}


def measure_type(expr, column_type: Callable[[str], str | None] = lambda _: None) -> str | None:
    """The kind of a measure's values (integer, double, string, timestamp, duration) from
    the kinds of the source's columns (``column_type``: a column's schema kind, None when
    unknown); None when it depends on data with no schema."""
    time = value_kind(expr)
    if time != "value":
        return "timestamp" if time == "time" else "duration"
    if isinstance(expr, Lit):
        v = expr.value
        return "string" if isinstance(v, str) else "integer" if isinstance(v, int) else "double"
    if isinstance(expr, Attr):
        return _column(column_type(expr.attr))
    if isinstance(expr, Agg):
        if expr.func == "count":
            return "integer"
        kind = _column(column_type(expr.attr))
        if expr.func == "avg":
            return "double"
        if expr.func == "sum":
            return "integer" if kind == "integer" else "double"
        return kind
    if isinstance(expr, Neg):
        return measure_type(expr.item, column_type)
    if isinstance(expr, Arith):
        left, right = measure_type(expr.left, column_type), measure_type(expr.right, column_type)
        if expr.op != "/" and left == right == "integer":
            return "integer"
        return "double"
    return None  # pragma: no cover - the parser builds nothing else


def _column(kind: str | None) -> str | None:
    if kind is None:
        return None
    return NUMERIC.get(kind, "string" if kind == "string" else None)


def measure_types(pattern, columns: dict[str, str]) -> dict[str, str]:
    """Each measure column of a pattern (a disjunction: of all its alternatives) and its
    type in the match table; a value whose kind the schema does not tell is a double."""
    out: dict[str, str] = {}
    for alt in pattern.alternatives:
        for m in alt.measures:
            kind = measure_type(m.expr, columns.get) or "double"
            out.setdefault(m.name, "double" if kind == "duration" else kind)  # seconds
    return out


def plain(value: Any, kind: str | None) -> Any:
    """A value as the measure's kind gives it: int for integer, float for other numbers,
    ISO text for a time, seconds (float) for a duration."""
    if value is None or isinstance(value, str):
        return value
    if kind == "timestamp":
        return format_ts(int(value))
    if kind == "duration":
        return int(value) / 1e9
    if isinstance(value, float) and value != value:
        return None
    return int(value) if kind == "integer" else float(value)


def reference_measures(pattern, binding: dict[str, list[dict]]) -> dict[str, Any]:
    """The measures of one match of ``pattern`` (one alternative), by the reference
    evaluator: ``binding`` maps each variable to its events' attributes in processing
    order."""
    return {m.name: plain(measure_value(m.expr, binding), measure_type(m.expr))
            for m in pattern.measures}


def batch_measures(pattern, batch, cols: EventColumns) -> dict[str, list[Any]]:
    """Every measure of ``pattern`` (one alternative) for each match of ``batch``."""
    values = BatchValues(batch, cols, {v.name: k for k, v in enumerate(pattern.variables)},
                         cols.row)
    words = cols.dictionary.to_pylist() if pattern.measures else []
    out = {}
    for m in pattern.measures:
        v, k = vector_value(m.expr, len(batch), values.read, cols.encode_literal)
        kind = measure_type(m.expr)
        column: list[Any] = [None] * len(batch)
        number = np.flatnonzero(k == NUMBER)
        if kind in ("timestamp", "duration"):  # encoded in the unit of ``ts`` (exact)
            ns = cols.time_ns(v[number]) if kind == "timestamp" else \
                np.rint(v[number]).astype(np.int64) * cols.time_unit
            for i, x in zip(number.tolist(), ns.tolist()):
                column[i] = plain(x, kind)
            number = number[:0]
        for i in number.tolist():
            column[i] = plain(v[i], kind)
        for i in np.flatnonzero(k == STRING).tolist():
            code = v[i]
            column[i] = words[int(code)] if code == int(code) else None
        out[m.name] = column
    return out


def measure_columns(pattern, batch, cols: EventColumns, columns: tuple[str, ...]
                    ) -> dict[str, list[Any]]:
    """Every measure column of a file (``columns``: a disjunction's are all its
    alternatives') for the matches of one alternative ``pattern``: None where it has no
    such measure."""
    own = batch_measures(pattern, batch, cols)
    return {c: own.get(c, [None] * len(batch)) for c in columns}
