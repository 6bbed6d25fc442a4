"""A row-local DEFINE condition (``pruning.row_local``) computed on whole columns with
Arrow's kernels instead of row by row: SQL's three-valued logic is Arrow's Kleene logic,
and a condition holds on a row only where it is true. Expressions Arrow does not compute
the way SQL does here (division, ``%``, ``||``, functions, casts, timestamps and
intervals, a list with a null) are left to the row-by-row evaluator."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.rowpattern.evaluate import column_value
from jobs.core.rowpattern.model import Between, Binary, Col, InList, IsNull, Like, Lit, Unary
from jobs.core.rowpattern.values import Interval, Ts

_COMPARE = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
            ">": pc.greater, ">=": pc.greater_equal}
_ARITHMETIC = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}


class _Unsupported(Exception):
    pass


def fitting_vector(expr, rows: list[dict], cache: dict) -> list[bool] | None:
    """Whether each row fits ``expr`` (a row-local condition), or None when Arrow cannot
    compute it as SQL would. ``cache``: the rows' columns as Arrow arrays, filled here."""
    try:
        result = _eval(expr, rows, cache)
    except (_Unsupported, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if isinstance(result, pa.Scalar):
        return [result.as_py() is True] * len(rows)
    if not pa.types.is_boolean(result.type):
        return None
    return pc.fill_null(result, False).to_pylist()


def _column(name: str, rows: list[dict], cache: dict) -> pa.Array:
    if name not in cache:
        values = [column_value(r, name) for r in rows]
        if any(isinstance(v, (Ts, Interval)) for v in values):
            raise _Unsupported(name)
        cache[name] = pa.array(values)
    return cache[name]


def _eval(e, rows, cache):
    t = type(e)
    if t is Lit:
        if isinstance(e.value, (Ts, Interval)):
            raise _Unsupported("time")
        return pa.scalar(e.value)
    if t is Col:
        return _column(e.name, rows, cache)
    if t is Binary:
        if e.op == "AND":
            return pc.and_kleene(_eval(e.left, rows, cache), _eval(e.right, rows, cache))
        if e.op == "OR":
            return pc.or_kleene(_eval(e.left, rows, cache), _eval(e.right, rows, cache))
        a, b = _eval(e.left, rows, cache), _eval(e.right, rows, cache)
        if e.op in _COMPARE:
            _same_kind(a, b)
            return _COMPARE[e.op](a, b)
        if e.op in _ARITHMETIC:
            return _ARITHMETIC[e.op](a, b)
        raise _Unsupported(e.op)
    if t is Unary:
        a = _eval(e.arg, rows, cache)
        if e.op == "NOT":
            return pc.invert(a)
        return pc.negate_checked(a) if e.op == "-" else a
    if t is IsNull:
        a = _eval(e.arg, rows, cache)
        return pc.is_valid(a) if e.negated else pc.is_null(a)
    if t is Between:
        a, lo, hi = (_eval(x, rows, cache) for x in (e.arg, e.low, e.high))
        _same_kind(a, lo)
        _same_kind(a, hi)
        inside = pc.and_kleene(pc.greater_equal(a, lo), pc.less_equal(a, hi))
        return pc.invert(inside) if e.negated else inside
    if t is InList:
        if not all(isinstance(i, Lit) and i.value is not None for i in e.items):
            raise _Unsupported("IN")
        a = _eval(e.arg, rows, cache)
        values = pa.array([i.value for i in e.items])
        _same_kind(a, values)
        found = pc.is_in(a, value_set=values)
        found = pc.if_else(pc.is_valid(a), found, pa.scalar(None, pa.bool_()))
        return pc.invert(found) if e.negated else found
    if t is Like:
        if not isinstance(e.pattern, Lit) or not isinstance(e.pattern.value, str):
            raise _Unsupported("LIKE")
        a = _eval(e.arg, rows, cache)
        if not pa.types.is_string(a.type):
            raise _Unsupported("LIKE")
        found = pc.match_like(a, e.pattern.value)
        return pc.invert(found) if e.negated else found
    raise _Unsupported(t.__name__)


def _kind(x) -> str:
    t = x.type
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    return str(t)


def _same_kind(a, b) -> None:
    """SQL compares text with text and numbers with numbers; anything else is the
    row-by-row evaluator's to refuse."""
    ka, kb = _kind(a), _kind(b)
    if "null" not in (ka, kb) and ka != kb:
        raise _Unsupported(f"{ka} with {kb}")
