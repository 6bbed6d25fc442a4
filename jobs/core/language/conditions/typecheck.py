"""What an expression may mean: arithmetic only on numbers, times compared with times and
durations with durations (docs/language.md, time); the kind of a value expression."""

from __future__ import annotations

from jobs.core.language.conditions.expressions import (
    NUMERIC_AGGREGATES,
    Agg,
    Arith,
    Attr,
    BoolOp,
    Cmp,
    ConditionSyntaxError,
    Duration,
    Expr,
    In,
    Lit,
    MatchTime,
    Neg,
    Not,
    comparisons_of,
    is_time,
)


def _check_types(e: Expr) -> None:
    """Refuse what can never be evaluated: arithmetic on a string literal, a value
    where a condition is needed (the parser guarantees the rest)."""
    if isinstance(e, (Arith, Neg)):
        parts = (e.item,) if isinstance(e, Neg) else (e.left, e.right)
        for p in parts:
            if isinstance(p, Lit) and isinstance(p.value, str):
                raise ConditionSyntaxError(f"arithmetic on the text {p}: + - * / need "
                                           "numbers")
            _check_types(p)
    elif isinstance(e, (Cmp,)):
        _check_types(e.left)
        _check_types(e.right)
    elif isinstance(e, In):
        _check_types(e.item)
    elif isinstance(e, Not):
        _check_types(e.item)
    elif isinstance(e, BoolOp):
        for x in e.items:
            _check_types(x)


def time_problems(e: Expr) -> list[str]:
    """What is wrong with the times and durations of an expression (docs/language.md,
    time): a time or a duration compared with a number or text, arithmetic that mixes
    them with numbers, ``*`` and ``/`` on them, ``sum``/``avg`` of ``ts``. Times compare
    with times, durations with durations; time - time is a duration, time ± duration a
    time. An empty list when nothing is wrong."""
    out: list[str] = []

    def kind(x) -> str:
        leaf = _leaf_kind(x)
        if leaf is not None:
            return leaf
        if isinstance(x, Agg):
            if x.attr is None or not is_time(x.attr) or x.func == "count":
                return "value"
            if x.func in NUMERIC_AGGREGATES:
                out.append(f"{x}: {x.func} of times is not defined; use first, last, min or "
                           "max, or subtract two times for a duration")
                return "value"
            return "time"
        if isinstance(x, Neg):
            k = kind(x.item)
            if k == "time":
                out.append(f"{x}: a time cannot be negated")
            return k
        if isinstance(x, Arith):
            kl, kr = kind(x.left), kind(x.right)
            if kl == kr == "value":
                return "value"
            if x.op in "*/":
                out.append(f"{x}: times and durations can only be added and subtracted")
                return "value"
            if x.op == "-" and kl == kr == "time":
                return "duration"
            if {kl, kr} == {"time", "duration"} and not (x.op == "-" and kl == "duration"):
                return "time"
            if kl == kr == "duration":
                return "duration"
            if "value" in (kl, kr):
                other = kl if kr == "value" else kr
                out.append(f"{x}: a {other} {'plus' if x.op == '+' else 'minus'} a number; "
                           "write a duration with its unit, e.g. 2h or 9d")
            else:
                out.append(f"{x}: a duration minus a time is not a time; write the time "
                           "first, e.g. c.ts - 2h")
            return "value"
        return "value"

    for c in comparisons_of(e):
        if isinstance(c, In):
            if kind(c.item) != "value":
                out.append(f"{c}: a list after in holds values, not times or durations")
            continue
        kl, kr = kind(c.left), kind(c.right)
        if kl == kr:
            continue
        pair = {kl, kr}
        if pair == {"time", "duration"}:
            out.append(f"{c} compares a time with a duration: subtract two times for a "
                       "duration, e.g. b.ts - c.ts <= 9d")
        elif "duration" in pair:
            out.append(f"{c} compares a duration with a number: write the number with its "
                       "unit, e.g. 10d or 36h")
        else:
            out.append(f"{c} compares a time with a number or text: compare it with another "
                       "time, e.g. b.ts > c.ts + 2h")
    if not out and not any(True for _ in comparisons_of(e)):
        kind(e)  # a measure: a value expression
    return list(dict.fromkeys(out))


def _leaf_kind(e: Expr) -> str | None:
    """'time', 'duration' or 'value' of a literal, an attribute or a match time (None for
    the other nodes)."""
    if isinstance(e, Lit):
        return "duration" if isinstance(e.value, Duration) else "value"
    if isinstance(e, MatchTime):
        return "time"
    if isinstance(e, Attr):
        return "time" if is_time(e.attr) else "value"
    return None


def value_kind(e: Expr) -> str:
    """'time', 'duration' or 'value' for a well-typed value expression (``time_problems``
    found nothing)."""
    leaf = _leaf_kind(e)
    if leaf is not None:
        return leaf
    if isinstance(e, Agg):
        return "time" if e.attr is not None and is_time(e.attr) and e.func != "count" \
            else "value"
    if isinstance(e, Neg):
        return value_kind(e.item)
    if isinstance(e, Arith):
        kl, kr = value_kind(e.left), value_kind(e.right)
        if kl == kr == "time":
            return "duration"
        if "time" in (kl, kr):
            return "time"
        return "duration" if "duration" in (kl, kr) else "value"
    return "value"
