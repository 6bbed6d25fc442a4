"""Why a pattern found nothing, counted on Spark: how many events fit each variable's
properties, and for a property that no event fits, the nearest values the events have.
The run prints these after a pattern with no matches; ``explain`` shows them too."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import reduce

from jobs.core.errors import InputError
from jobs.core.language.conditions.expressions import Attr, Cmp, In, Lit, comparisons_of, conjoined
from jobs.core.language.conditions.kinds import Property
from jobs.spark.predicates import property_column

NEAREST = 3  # known values shown for a literal no event has


@dataclass(frozen=True)
class VariableCount:
    alternative: int | None  # 1, 2, ... for a disjunction's alternatives
    variable: str
    negated: bool
    events: int  # events that satisfy every property of the variable
    properties: tuple[tuple[str, int], ...]  # (property, events satisfying it alone)
    hints: tuple[str, ...] = ()  # for properties no event satisfies

    @property
    def label(self) -> str:
        alt = f"alternative {self.alternative}: " if self.alternative else ""
        return f"{alt}{'not ' if self.negated else ''}{self.variable}"

    def describe(self) -> str:
        if not self.properties:
            return f"{self.label}: any event (no property)"
        props = conjoined(p for p, _ in self.properties)
        line = f"{self.label}: {self.events:,} event(s) with {props}"
        if self.events == 0 and len(self.properties) > 1:
            line += " (" + "; ".join(f"{p}: {n:,}" for p, n in self.properties) + ")"
        return line + "".join(f"; {h}" for h in self.hints)


def _variables(pattern):
    """(alternative number or None, the alternative, variable, negated) of a sequence
    pattern."""
    alts = pattern.alternatives
    for k, alt in enumerate(alts, start=1):
        for v in alt.variables:
            yield (k if len(alts) > 1 else None), alt, v, False
        for v in alt.negated:
            yield (k if len(alts) > 1 else None), alt, v, True


def variable_counts(events_df, pattern) -> list[VariableCount]:
    """Per variable of a sequence pattern, the events of ``events_df`` (Spark) that satisfy
    its properties, in one pass; hints for the properties no event satisfies."""
    return variable_counts_many(events_df, [pattern])[pattern.name]


def variable_counts_many(events_df, patterns: list) -> dict[str, list[VariableCount]]:
    """``variable_counts`` of several sequence patterns of one source, in one pass over
    ``events_df`` (one aggregate shared by all; a property common to several patterns
    is counted once)."""
    from pyspark.sql import functions as F

    for pattern in patterns:
        if pattern.kind == "window":
            raise InputError(f"{pattern.name} is a window pattern: per-variable counts are "
                             "for sequence patterns (a window pattern has no variables)")
    columns, index = [], {}
    for pattern in patterns:
        for k, alt, v, _ in _variables(pattern):
            for p in alt.properties[v.name]:
                key = str(p)
                if key not in index:
                    index[key] = len(columns)
                    columns.append(F.sum(F.when(property_column(p), 1).otherwise(0)))
            props = alt.properties[v.name]
            if props:
                every = reduce(lambda a, b: a & b, map(property_column, props))
                key = " and ".join(sorted(str(p) for p in props))
                if key not in index:
                    index[key] = len(columns)
                    columns.append(F.sum(F.when(every, 1).otherwise(0)))
                index[(pattern.name, k, v.name)] = index[key]
    row = events_df.agg(*columns).collect()[0] if columns else []
    total = None
    out = {}
    for pattern in patterns:
        out[pattern.name] = []
        for k, alt, v, negated in _variables(pattern):
            props = alt.properties[v.name]
            counts = tuple((str(p), int(row[index[str(p)]] or 0)) for p in props)
            if props:
                n = int(row[index[(pattern.name, k, v.name)]] or 0)
            else:
                total = events_df.count() if total is None else total
                n = total
            hints = tuple(h for p, (_, c) in zip(props, counts) if c == 0
                          for h in [nearest_values(events_df, p)] if h)
            out[pattern.name].append(VariableCount(k, v.name, negated, n, counts, hints))
    return out


def _literals(p: Property):
    """(attribute, op, literal values) of the comparisons of ``p`` with literals."""
    for c in comparisons_of(p.expr):
        if isinstance(c, Cmp) and isinstance(c.left, Attr) and isinstance(c.right, Lit):
            yield c.left.attr, c.op, (c.right.value,)
        elif isinstance(c, In) and isinstance(c.item, Attr):
            yield c.item.attr, "in", tuple(v.value for v in c.values)


def nearest_values(events_df, p: Property) -> str | None:
    """For a property no event satisfies: the known values of the attribute it compares
    with a literal, nearest first (text), or the attribute's range (numbers)."""
    from pyspark.sql import functions as F

    hints = []
    for attr, _op, values in _literals(p):
        if attr not in events_df.columns:
            hints.append(f"no event has attribute {attr!r} (columns: "
                         f"{', '.join(c for c in events_df.columns if c not in ('event_date',))})")
            continue
        if all(isinstance(v, str) for v in values):
            known = [r[0] for r in events_df.where(F.col(attr).isNotNull())
                     .groupBy(attr).count().orderBy(F.desc("count")).limit(1000).collect()]
            near = []
            for v in values:
                near += [k for k in difflib.get_close_matches(v, [str(k) for k in known],
                                                               n=NEAREST, cutoff=0.5)
                         if k not in near]
            shown = near or [str(k) for k in known[:NEAREST]]
            label = "known" if near else "most frequent"
            if shown:
                hints.append(f"{attr} {label}: " + ", ".join(repr(s) for s in shown))
            else:
                hints.append(f"{attr} is missing on every event")
        else:
            lo, hi = events_df.agg(F.min(attr), F.max(attr)).collect()[0]
            hints.append(f"{attr} ranges from {lo} to {hi}" if lo is not None
                         else f"{attr} is missing on every event")
    return "; ".join(dict.fromkeys(hints)) or None


def unsatisfiable(counts: list[VariableCount]) -> list[str]:
    """Warnings for the positive variables no event can bind: the pattern cannot match
    (for a disjunction, that alternative cannot)."""
    return [f"variable {c.label} can never bind: " + c.describe().split(": ", 1)[1]
            for c in counts if not c.negated and c.properties and c.events == 0]
