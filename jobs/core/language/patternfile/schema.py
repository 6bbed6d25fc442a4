"""A parsed pattern against its source's schema (``conf/sources.yaml``): attributes that
exist, literals and arithmetic of the column's kind, no condition on a timestamp."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from jobs.core.language.conditions.expressions import (
    NUMERIC_AGGREGATES,
    TIME,
    Agg,
    Attr,
    Cmp,
    Duration,
    In,
    Lit,
    MatchTime,
    Neg,
    aggregates_of,
    comparisons_of,
    expr_attributes,
    is_fact,
    is_time,
    stored,
    time_function,
)
from jobs.core.language.measures import measure_type
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.core.language.patternfile.nodes import TIME_REFUSED, Problem
from jobs.core.language.window_conditions import read_attributes


def check_schema(pattern: Pattern | Disjunction, schema: dict[str, str]) -> list[Problem]:
    """Problems of ``pattern`` against a source schema ``{column: 'string'|'number'|...}``.

    Attributes must exist; a literal must have the column's kind; two attributes compared
    with each other must be of one kind.
    """
    problems = []
    path = pattern.path or "<pattern>"
    columns = ", ".join(sorted(schema))

    def kind_of(attr):
        if is_fact(attr):  # partition.count is a number, its times are times
            return None if is_time(attr) else "number"
        if time_function(attr):  # hour(ts), weekday(ts) are numbers; date(ts) a time
            return None if is_time(attr) else "number"
        return "number" if schema.get(attr) in ("number", "integer", "double") else schema.get(attr)

    if pattern.kind == "window":
        conditions = [(_Clause(e, name), pattern.line(name if name in pattern.conditions
                                                       or name == "where" else "select"))
                      for name, e in [*pattern.conditions.items(), ("where", pattern.where),
                                      *pattern.select] if e is not None]
    else:
        conditions = [(c, line) for p in pattern.alternatives
                      for c, line in zip(p.conditions,
                                         p.condition_lines or (0,) * len(p.conditions))]
        conditions += [(_Measure(m), m.line) for p in pattern.alternatives for m in p.measures]
        problems += _measure_conflicts(pattern, schema, path)
    for cond, line in conditions:
        where = str(cond) if isinstance(cond, _Measure) else f"in condition '{cond}'"
        attrs = cond.attributes
        missing = [a for a in attrs if a not in schema and stored(a) != TIME and not is_fact(a)]
        for a in missing:
            hint = difflib.get_close_matches(a, list(schema), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            problems.append(Problem(path, line, f"{where}: the source has no "
                                    f"attribute {a!r} (columns: {columns}){extra}"))
        if missing:
            continue
        timed = [a for a in attrs if schema.get(a) == "timestamp" and a != TIME]
        if timed:
            problems.append(Problem(path, line, f"{where}: {', '.join(timed)} "
                                    f"holds timestamps: {TIME_REFUSED}"))
            continue
        for message in _type_problems(cond.expr, kind_of, isinstance(cond, _Measure)):
            problems.append(Problem(path, line, f"{where}: {message}"))
    return problems


@dataclass(frozen=True)
class _Clause:
    """A window pattern's clause, checked like a condition."""

    expr: object
    name: str

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(sorted(read_attributes(self.expr)))

    def __str__(self) -> str:
        return f"{self.name}: {self.expr}"


@dataclass(frozen=True)
class _Measure:
    """A sequence pattern's measure, checked like a condition."""

    measure: object  # pattern.Measure

    @property
    def expr(self):
        return self.measure.expr

    @property
    def attributes(self) -> tuple[str, ...]:
        return expr_attributes(self.measure.expr)

    def __str__(self) -> str:
        return f"in measure '{self.measure.name}: {self.measure.expr}'"


def _measure_conflicts(pattern, schema: dict[str, str], path: str) -> list[Problem]:
    """A measure of a disjunction's alternatives is one column: one type in all of them."""
    seen: dict[str, str] = {}
    out = []
    for alt in pattern.alternatives:
        for m in alt.measures:
            kind = measure_type(m.expr, schema.get) or "double"
            if seen.setdefault(m.name, kind) != kind:
                out.append(Problem(path, m.line, f"measure {m.name!r} is {kind} here but "
                                   f"{seen[m.name]} in an earlier alternative: one column has "
                                   "one type"))
    return out


def _type_problems(expr, kind_of, value: bool = False) -> list[str]:
    """Type mismatches of a condition (``value``: a measure) against the source's column
    kinds: arithmetic on text, a comparison of text with a number, sum or avg of text."""
    out: list[str] = []

    def kind(e):
        if isinstance(e, Lit):
            return "string" if isinstance(e.value, str) else "number"
        if isinstance(e, MatchTime) or (isinstance(e, Lit) and isinstance(e.value, Duration)) \
                or (isinstance(e, (Attr, Agg)) and e.attr is not None and is_time(e.attr)):
            return None  # times and durations: conditions.time_problems checks them
        if isinstance(e, Agg):
            if e.attr is None or e.func == "count" or e.func in NUMERIC_AGGREGATES:
                return "number"
            k = kind_of(e.attr)
            return k if k in ("string", "number") else None
        if isinstance(e, Attr):
            k = kind_of(e.attr)
            return k if k in ("string", "number") else None
        parts = (e.item,) if isinstance(e, Neg) else (e.left, e.right)
        for p in parts:
            if kind(p) == "string":
                what = "negates" if isinstance(e, Neg) else {
                    "+": "adds", "-": "subtracts", "*": "multiplies", "/": "divides"}[e.op]
                out.append(f"{e} {what} text ({p} holds strings): + - * / need numbers")
        return "number"

    for g in aggregates_of(expr):
        if g.func in NUMERIC_AGGREGATES and g.attr is not None \
                and kind_of(g.attr) not in (None, "number"):
            out.append(f"{g}: {g.func} needs numbers, but {g.attr} holds "
                       f"{kind_of(g.attr)}s (count, min, max, first and last take any type)")
    if value:
        kind(expr)
    for c in comparisons_of(expr):
        if isinstance(c, Cmp):
            kl, kr = kind(c.left), kind(c.right)
            if kl and kr and kl != kr:
                if isinstance(c.right, Lit) and isinstance(c.left, Attr):
                    out.append(f"{c.left.attr} holds {kl}s but is compared with a {kr}")
                elif isinstance(c.left, Attr) and isinstance(c.right, Attr):
                    out.append(f"compares attributes of different types ({kl}, {kr})")
                else:
                    out.append(f"compares a {kl} with a {kr} ({c})")
        elif isinstance(c, In):
            k = kind(c.item)
            others = {kind(v) for v in c.values}
            if k and others - {k}:
                out.append(f"{c.item} holds {k}s but the list after in has "
                           f"{' and '.join(sorted(others - {k}))}s")
    return list(dict.fromkeys(out))
