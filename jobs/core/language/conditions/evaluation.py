"""The three-valued evaluator (SQL's logic: unknown with a missing value): the reference
every compiled form must agree with, and the values a whole match gives a measure."""

from __future__ import annotations

import math
import operator
from typing import Any

from jobs.core.language.conditions.expressions import (
    NUMERIC_AGGREGATES,
    OPERATORS,
    TIME,
    Agg,
    Attr,
    BoolOp,
    Cmp,
    Duration,
    Expr,
    In,
    Instant,
    Lit,
    MatchTime,
    Neg,
    Not,
    Truth,
    aggregates_of,
    attributes_of,
    derive,
    match_times_of,
    time_function,
)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not (isinstance(v, float) and v != v)


def value_of(e: Expr, env: dict) -> Any:
    """The value of a value expression; ``env`` maps (variable, prev?) to an event's
    attributes. Missing (None) when an attribute is missing or arithmetic fails."""
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Attr):
        return read(env[(e.var, e.prev)], e.attr)
    if isinstance(e, (Agg, MatchTime)):
        return env[e]
    if isinstance(e, Neg):
        x = value_of(e.item, env)
        if isinstance(x, Duration):
            return Duration(-x)
        return -x if _is_number(x) else None
    a, b = value_of(e.left, env), value_of(e.right, env)
    if isinstance(a, (Instant, Duration)) or isinstance(b, (Instant, Duration)):
        return _time_arith(e.op, a, b)
    if not (_is_number(a) and _is_number(b)):
        return None
    if e.op == "/" and b == 0:
        return None
    out = {"+": operator.add, "-": operator.sub, "*": operator.mul,
           "/": operator.truediv}[e.op](float(a), float(b))
    return out if math.isfinite(out) else None


def read(values: dict, attr: str) -> Any:
    """An event's value of ``attr`` (missing: None, NaN too); a time function's
    (``hour(ts)``) from the event's time."""
    func = time_function(attr)
    if func is not None:
        ns = values.get(TIME)
        if ns is None:
            return None
        out = derive(func, int(ns))
        return Instant(out) if func == "date" else out
    v = values.get(attr)
    return None if isinstance(v, float) and v != v else v


def _time_arith(op: str, a: Any, b: Any) -> Any:
    """Exact arithmetic on times and durations (the loader allows only these forms):
    time - time is a duration, time ± duration a time, duration ± duration a duration."""
    if a is None or b is None:
        return None
    ta, tb = isinstance(a, Instant), isinstance(b, Instant)
    da, db = isinstance(a, Duration), isinstance(b, Duration)
    if op == "-" and ta and tb:
        return Duration(a - b)
    if op in "+-" and ta and db:
        return Instant(a + b if op == "+" else a - b)
    if op == "+" and da and tb:
        return Instant(a + b)
    if op in "+-" and da and db:
        return Duration(a + b if op == "+" else a - b)
    return None


def aggregate(func: str, attr: str | None, events: list[dict], distinct: bool = False) -> Any:
    """The value of ``func(v.attr)`` (``count(v)``: ``attr`` None) over the attributes of
    the events bound to v, in processing order: the reference for the engine's columns.
    ``sum`` and ``avg`` read numbers (other values are skipped, as missing ones are);
    ``min`` and ``max`` compare numbers when there is one, else text; ``count(distinct
    v.attr)`` counts the distinct present values (a number is never equal to a text)."""
    if attr is None:
        return len(events)
    values = [read(a, attr) for a in events]
    if func in ("first", "last"):
        return (values[0] if func == "first" else values[-1]) if values else None
    present = [v for v in values if v is not None]
    if func == "count":
        if distinct:
            return len({(isinstance(v, str), v if isinstance(v, str) else float(v))
                        for v in present})
        return len(present)
    numbers = [v for v in present if _is_number(v)]
    if func in NUMERIC_AGGREGATES:
        if not numbers:
            return None
        total = 0.0
        for v in numbers:
            total += float(v)
        return total if func == "sum" else total / len(numbers)
    pool = numbers or [v for v in present if isinstance(v, str)]
    if not pool:
        return None
    return min(pool) if func == "min" else max(pool)


def compare3(op: str, left: Any, right: Any) -> bool | None:
    """``left op right`` in three-valued logic (None: unknown)."""
    if left is None or right is None:
        return None
    ls, rs = isinstance(left, str), isinstance(right, str)
    if ls != rs:
        return False if op == "=" else True if op == "!=" else None
    return OPERATORS[op](left, right)


def compare(op: str, left: Any, right: Any) -> bool:
    """Whether ``left op right`` holds (unknown does not)."""
    return compare3(op, left, right) is True


def truth(e: Expr, env: dict) -> bool | None:
    """True, False or None (unknown) for a boolean expression."""
    if isinstance(e, Truth):
        return e.value
    if isinstance(e, Cmp):
        return compare3(e.op, value_of(e.left, env), value_of(e.right, env))
    if isinstance(e, In):
        x = value_of(e.item, env)
        found: bool | None = False
        for lit in e.values:
            r = compare3("=", x, lit.value)
            if r is True:
                found = True
                break
            if r is None:
                found = None
        return (None if found is None else not found) if e.negated else found
    if isinstance(e, Not):
        r = truth(e.item, env)
        return None if r is None else not r
    if isinstance(e, BoolOp):
        results = [truth(x, env) for x in e.items]
        if e.op == "and":
            return False if False in results else None if None in results else True
        return True if True in results else None if None in results else False
    raise TypeError(f"not a condition: {e}")  # pragma: no cover - the parser prevents it



def measure_value(expr: Expr, binding: dict[str, list[dict]]) -> Any:
    """The value of a measure for a match (the reference): ``binding`` maps each variable
    to its events' attributes in processing order."""
    return value_of(expr, match_env(expr, binding))


def match_env(expr: Expr, binding: dict[str, list[dict]]) -> dict:
    """The values ``expr`` reads of a whole match: singletons' attributes, aggregates and
    the match's first and last event times."""
    env: dict = {}
    for a in attributes_of(expr):  # an optional singleton bound to no event: all missing
        env[(a.var, False)] = binding[a.var][0] if binding[a.var] else {}
    for g in aggregates_of(expr):
        env[g] = aggregate(g.func, g.attr, binding[g.var], g.distinct)
    wanted = list(match_times_of(expr))
    times = [e[TIME] for es in binding.values() for e in es] if wanted else []
    for t in wanted:
        env[t] = (min(times) if t.which == "start_ts" else max(times)) if times else None
    return env
