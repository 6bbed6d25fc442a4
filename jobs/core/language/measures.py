"""Measures (``measures:``, docs/language.md): the computed columns of a sequence
pattern's matches. A measure is a value expression over a whole match: aggregates of group
variables, attributes of positive singletons, literals and arithmetic. Here: the kind of
a measure's values from the source's columns (``measure_type``, the match table's
column types) and its value for one match by the reference evaluator
(``reference_measures``), as plain Python values of that kind (``plain``: integer
measures as int, other numbers as float, text as str, a missing value as None)."""

from __future__ import annotations

from typing import Any, Callable

from jobs.core.language.conditions.evaluation import measure_value
from jobs.core.language.conditions.expressions import (
    Agg,
    Arith,
    Attr,
    Lit,
    Neg,
    is_fact,
    time_function,
)
from jobs.core.language.conditions.typecheck import value_kind
from jobs.core.language.events import format_ts

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
        return _attribute(expr.attr, column_type)
    if isinstance(expr, Agg):
        if expr.func == "count":
            return "integer"
        kind = _attribute(expr.attr, column_type)
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


def _attribute(attr: str, column_type) -> str | None:
    """The type of an attribute's values: the column's, an integer for ``hour(ts)`` and
    ``weekday(ts)`` (``date(ts)`` is a time, found by ``value_kind``)."""
    if time_function(attr) or is_fact(attr):  # a partition's times are found by value_kind
        return "integer"
    return _column(column_type(attr))


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


