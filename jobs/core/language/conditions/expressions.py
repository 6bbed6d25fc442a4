"""The expression tree of conditions and values: literals, attributes, aggregates,
arithmetic, comparisons and boolean connectives (docs/language.md), frozen and printable
in one canonical form; the walks that find what an expression reads."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Union

from jobs.core.errors import UserError

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
ARITH = ("+", "-", "*", "/")
KEYWORDS = {"and", "or", "not", "in", "prev", "distinct"}
TIME = "ts"  # the attribute that is each event's time
MATCH_TIMES = ("start_ts", "end_ts")  # the first and the last event time of a match
DURATION_UNITS = {"ms": 10**6, "s": 10**9, "min": 60 * 10**9, "h": 3600 * 10**9,
                  "d": 86400 * 10**9}
AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")
# functions of an event's time (UTC): the calendar day (a time, its midnight), the hour
# 0-23 and the ISO weekday 1 (Monday) - 7 (Sunday); ``hour(p.ts)`` reads the derived
# column ``hour(ts)``, which the engine's columns compute from the time
TIME_FUNCTIONS = ("date", "hour", "weekday")
DAY_NS, HOUR_NS = 86400 * 10**9, 3600 * 10**9


def time_function(attr: str) -> str | None:
    """The function of a derived column (``'hour(ts)'`` -> ``'hour'``), else None."""
    if attr.endswith(f"({TIME})") and attr[:-len(TIME) - 2] in TIME_FUNCTIONS:
        return attr[:-len(TIME) - 2]
    return None


def stored(attr: str) -> str:
    """The stored column an attribute reads: ``ts`` for a function of the time."""
    return TIME if time_function(attr) else attr


# ``partition.first_ts``, ``partition.last_ts``, ``partition.count``: facts of the partition
# as a whole, read as attributes of a bound event (docs/semantics.md, "Partition facts")
PARTITION = "partition"
PARTITION_FACTS = {"first_ts": "__partition_first_ts", "last_ts": "__partition_last_ts",
                   "count": "__partition_count"}
FACT_NAMES = {v: k for k, v in PARTITION_FACTS.items()}


def is_fact(attr: str) -> bool:
    """Whether an attribute is a partition fact (computed, never stored)."""
    return attr in FACT_NAMES


def is_time(attr: str) -> bool:
    """Whether an attribute's values are times: ``ts``, ``date(ts)`` and the partition's
    first and last time."""
    return attr == TIME or time_function(attr) == "date" or attr in (
        PARTITION_FACTS["first_ts"], PARTITION_FACTS["last_ts"])


def derive(func: str, ns):
    """``func`` of a time in nanoseconds since the epoch (UTC): the day's midnight in
    nanoseconds, the hour, or the ISO weekday (1970-01-01 was a Thursday, 4). ``ns`` is an
    int or a numpy int64 array (floor division and modulo agree for both)."""
    if func == "date":
        return ns - ns % DAY_NS
    if func == "hour":
        return (ns // HOUR_NS) % 24
    return (ns // DAY_NS + 3) % 7 + 1
NUMERIC_AGGREGATES = ("sum", "avg")  # the others also take text


class ConditionSyntaxError(UserError, ValueError):
    """A condition that does not follow the grammar; ``column`` is 1-based."""

    def __init__(self, message: str, column: int | None = None):
        super().__init__(message)
        self.column = column


# --------------------------------------------------------------------------------------
# The expression tree
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lit:
    value: Any

    def __str__(self) -> str:
        return _literal(self.value)


@dataclass(frozen=True)
class Attr:
    var: str
    attr: str
    prev: bool = False

    def __str__(self) -> str:
        return column_text(self.var, self.attr, self.prev)


def column_text(var: str, attr: str, prev: bool = False) -> str:
    """``p.value``, ``prev(p.value)``, ``hour(p.ts)``, ``hour(prev(p.ts))``."""
    func = time_function(attr)
    inner = f"{var}.{stored(attr)}"
    inner = f"prev({inner})" if prev else inner
    return f"{func}({inner})" if func else inner


class Duration(int):
    """A duration in nanoseconds: the value of a literal such as ``9d`` and of the
    difference of two times (docs/semantics.md, time)."""

    def __repr__(self) -> str:
        for unit, ns in sorted(DURATION_UNITS.items(), key=lambda u: -u[1]):
            if self % ns == 0:
                return f"{int(self) // ns}{unit}"
        return f"{int(self)}ns"  # pragma: no cover - literals are whole milliseconds

    __str__ = __repr__


class Instant(int):
    """An event time in nanoseconds since the epoch (``v.ts``, ``first(p.ts)``,
    ``start_ts``) in the reference evaluator."""


@dataclass(frozen=True)
class MatchTime:
    """``start_ts`` or ``end_ts``: the time of a match's first or last event."""

    which: str

    def __str__(self) -> str:
        return self.which


@dataclass(frozen=True)
class Agg:
    """An aggregate over the events a match binds to group variable ``var``: ``count``
    (of events, or of present values of ``attr``), ``sum``, ``avg``, ``min``, ``max``
    (missing values skipped; over no values: missing), ``first`` and ``last`` (the value
    of the first or last event in processing order)."""

    func: str
    var: str
    attr: str | None  # None: count(v)
    running: bool = False  # func(prev(v.attr)): over the events bound to v before this one
    distinct: bool = False  # count(distinct v.attr): the number of distinct present values

    def __str__(self) -> str:
        if self.running:
            return f"{self.func}({column_text(self.var, self.attr, True)})"
        if self.attr is None:
            return f"{self.func}({self.var})"
        return f"{self.func}({'distinct ' if self.distinct else ''}" \
            f"{column_text(self.var, self.attr)})"


@dataclass(frozen=True)
class Neg:
    item: "Expr"

    def __str__(self) -> str:
        return f"-{_wrap(self.item, 3)}"


@dataclass(frozen=True)
class Arith:
    op: str
    left: "Expr"
    right: "Expr"

    def __str__(self) -> str:
        level = 1 if self.op in "+-" else 2
        return f"{_wrap(self.left, level)} {self.op} {_wrap(self.right, level + 1)}"


@dataclass(frozen=True)
class Cmp:
    op: str
    left: "Expr"
    right: "Expr"

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class In:
    item: "Expr"
    values: tuple[Lit, ...]
    negated: bool = False

    def __str__(self) -> str:
        word = "not in" if self.negated else "in"
        return f"{self.item} {word} ({', '.join(map(str, self.values))})"


@dataclass(frozen=True)
class Not:
    item: "Expr"

    def __str__(self) -> str:
        return f"not {_wrap_bool(self.item, 'not')}"


@dataclass(frozen=True)
class BoolOp:
    op: str  # 'and' | 'or'
    items: tuple["Expr", ...]

    def __str__(self) -> str:
        return f" {self.op} ".join(_wrap_bool(x, self.op) for x in self.items)


@dataclass(frozen=True)
class Truth:
    """The constant conditions ``TRUE`` and ``FALSE`` (pattern-based windows)."""

    value: bool

    def __str__(self) -> str:
        return "TRUE" if self.value else "FALSE"


Expr = Union[Lit, Attr, Agg, MatchTime, Neg, Arith, Cmp, In, Not, BoolOp, Truth]


def _wrap(e: Expr, level: int) -> str:
    mine = 1 if isinstance(e, Arith) and e.op in "+-" else 2 if isinstance(e, Arith) else 3
    return f"({e})" if mine < level else str(e)


def _wrap_bool(e: Expr, context: str) -> str:
    if isinstance(e, BoolOp) and (context == "not" or (context == "and" and e.op == "or")):
        return f"({e})"
    return str(e)


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def nodes_of(e: Expr, kind: type):
    """Every node of type ``kind`` in an expression, in reading order."""
    if isinstance(e, kind):
        yield e
    elif isinstance(e, (Neg, Not)):
        yield from nodes_of(e.item, kind)
    elif isinstance(e, (Arith, Cmp)):
        yield from nodes_of(e.left, kind)
        yield from nodes_of(e.right, kind)
    elif isinstance(e, In):
        yield from nodes_of(e.item, kind)
    elif isinstance(e, BoolOp):
        for x in e.items:
            yield from nodes_of(x, kind)


def conjoined(texts) -> str:
    """Conditions' texts joined by ``and`` for people, an ``or`` among them parenthesized
    (``a = 1 and (b > 2 or b < 0)``, not ``a = 1 and b > 2 or b < 0``)."""
    texts = list(texts)
    return " and ".join(f"({t})" if " or " in t and len(texts) > 1 else t for t in texts)


def rebuilt(e: Expr, leaf) -> Expr:
    """``e`` with each leaf (literal, attribute, aggregate, match time) replaced by
    ``leaf(it)``, the operators around them kept."""
    if isinstance(e, Neg):
        return Neg(rebuilt(e.item, leaf))
    if isinstance(e, Not):
        return Not(rebuilt(e.item, leaf))
    if isinstance(e, (Arith, Cmp)):
        return type(e)(e.op, rebuilt(e.left, leaf), rebuilt(e.right, leaf))
    if isinstance(e, In):
        return In(rebuilt(e.item, leaf), e.values, e.negated)
    if isinstance(e, BoolOp):
        return BoolOp(e.op, tuple(rebuilt(x, leaf) for x in e.items))
    return leaf(e)


def attributes_of(e: Expr):
    """Every ``Attr`` node of an expression."""
    return nodes_of(e, Attr)


def aggregates_of(e: Expr):
    """Every ``Agg`` node of an expression."""
    return nodes_of(e, Agg)


def match_times_of(e: Expr):
    """Every ``MatchTime`` node (``start_ts``, ``end_ts``) of an expression."""
    return nodes_of(e, MatchTime)


def expr_attributes(e: Expr) -> tuple[str, ...]:
    """The event attributes an expression reads (of attributes and aggregates)."""
    return tuple(dict.fromkeys([a.attr for a in attributes_of(e)]
                               + [g.attr for g in aggregates_of(e) if g.attr is not None]))


def comparisons_of(e: Expr):
    """Every comparison (``Cmp`` and ``In``) of a boolean expression."""
    if isinstance(e, (Cmp, In)):
        yield e
    elif isinstance(e, Not):
        yield from comparisons_of(e.item)
    elif isinstance(e, BoolOp):
        for x in e.items:
            yield from comparisons_of(x)

