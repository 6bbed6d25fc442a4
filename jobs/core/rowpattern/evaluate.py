"""DEFINE conditions and MEASURES on a (partial) match, by SQL:2016's definitions
(Trino's semantics). A ``Frame`` is the rows of a partition, the match's first row and its
rows' labels so far, and the current row: in DEFINE the row being labelled (RUNNING: only
rows up to it are in the match), in MEASURES the output row (``complete``: the whole match
is known, so ``FINAL`` and ``NEXT(CLASSIFIER())`` see past it).

* ``A.x`` is ``x`` of the last row labelled A (RUNNING); ``x`` alone of the current row.
* ``FIRST(e, n)``/``LAST(e, n)``: ``e`` at the n-th row from the first/last row labelled
  with ``e``'s variable (all rows of the match for the universal variable); none: null.
  RUNNING ``LAST`` counts back from the current row; ``FIRST`` counts from the match's
  first row, in MEASURES over the whole match.
* ``PREV(e, n)``/``NEXT(e, n)``: ``e`` at the row n rows before/after that row (the last
  one of the variable, or the row a ``FIRST``/``LAST`` argument picks), anywhere in the
  partition; outside it: null. A row outside the match has no classifier (null).
* Aggregates run over the rows labelled with their argument's variable (``count(*)``:
  all rows of the match); nulls are skipped, and over no value the result is null
  (``count``: 0).
* Three-valued logic: a condition that is null does not hold.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal

from jobs.core.errors import UserError
from jobs.core.rowpattern.checks import referenced_vars
from jobs.core.rowpattern.model import (
    Agg,
    Between,
    Binary,
    Case,
    Cast,
    Classifier,
    Col,
    Func,
    InList,
    IsNull,
    Like,
    Lit,
    MatchNumber,
    Nav,
    Star,
    Unary,
)


class EvaluationError(UserError):
    """A value SQL refuses (division by zero, a text compared with a number, a bad cast)."""


class Frame:
    __slots__ = ("rows", "start", "labels", "current", "complete", "match_number",
                 "subsets", "_members")

    def __init__(self, rows, start, labels, current, complete, match_number, subsets):
        self.rows = rows  # the partition's rows (dicts), in order
        self.start = start
        self.labels = labels  # labels of rows start, start + 1, ...
        self.current = current  # the current row (None: an empty match)
        self.complete = complete
        self.match_number = match_number
        self.subsets = subsets
        self._members = {}

    def members(self, var):
        m = self._members.get(var)
        if m is None:
            m = self._members[var] = frozenset(self.subsets.get(var, (var,)))
        return m

    def label_of(self, row):
        i = row - self.start
        if 0 <= i < len(self.labels) and (self.complete or row <= self.current):
            return self.labels[i]
        return None

    def match_rows(self, var, final: bool) -> list[int]:
        """The rows of the match labelled with ``var`` (any label for None), up to the
        current row unless ``final``."""
        if final:
            end = self.start + len(self.labels)
        elif self.current is None:
            return []
        else:
            end = self.current + 1
        if var is None:
            return list(range(self.start, end))
        members = self.members(var)
        return [r for r in range(self.start, end) if self.labels[r - self.start] in members]


def column_value(row: dict, name: str):
    """A column of a row, by its name or case-insensitively."""
    if name in row:
        return row[name]
    for k, v in row.items():
        if k.lower() == name.lower():
            return v
    return None


def _only_var(e):
    vars_ = referenced_vars(e)
    return next(iter(vars_)) if vars_ else None


def value(e, f: Frame, at: int | None = None):
    """The value of expression ``e`` in frame ``f``; ``at``: the row a navigation or an
    aggregate fixed for every column reference inside it."""
    t = type(e)
    if t is Lit:
        return e.value
    if t is Col:
        row = at if at is not None else _row_of(e.var, f)
        return None if row is None else column_value(f.rows[row], e.name)
    if t is Binary:
        return _binary(e, f, at)
    if t is Nav:
        return _navigate(e, f)
    if t is Agg:
        return _aggregate(e, f)
    if t is Classifier:
        row = at if at is not None else _row_of(e.var, f)
        return None if row is None else f.label_of(row)
    if t is MatchNumber:
        return f.match_number
    if t is Unary:
        v = value(e.arg, f, at)
        if e.op == "NOT":
            return None if v is None else not v
        if v is None:
            return None
        return -v if e.op == "-" else v
    if t is IsNull:
        return (value(e.arg, f, at) is None) != e.negated
    if t is Between:
        v, lo, hi = (value(x, f, at) for x in (e.arg, e.low, e.high))
        if v is None or lo is None or hi is None:
            return None
        return (lo <= v <= hi) != e.negated
    if t is InList:
        return _in_list(e, f, at)
    if t is Like:
        v, p = value(e.arg, f, at), value(e.pattern, f, at)
        if v is None or p is None:
            return None
        rx = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in p)
        return (re.fullmatch(rx, str(v), re.DOTALL) is not None) != e.negated
    if t is Case:
        return _case(e, f, at)
    if t is Func:
        return _function(e.name, [value(a, f, at) for a in e.args], e)
    if t is Cast:
        return _cast(value(e.arg, f, at), e.type, e)
    if t is Star:
        raise EvaluationError("* is only the argument of count")
    raise TypeError(f"not an expression: {e!r}")  # pragma: no cover


def holds(e, f: Frame) -> bool:
    """A DEFINE condition: true (null and false do not hold)."""
    return value(e, f) is True


def _row_of(var, f: Frame):
    """The row a bare reference reads: the current row, or the last row of ``var``."""
    if var is None:
        return f.current
    rows = f.match_rows(var, final=False)
    return rows[-1] if rows else None


def _logical_row(e: Nav, f: Frame):
    # FIRST counts from the match's first row, and in MEASURES may reach rows after the
    # current one (the match is complete; Trino's FIRST(value, 2) on the first row)
    rows = f.match_rows(_only_var(e.arg), e.final or (e.kind == "FIRST" and f.complete))
    if e.offset >= len(rows):
        return None
    return rows[e.offset] if e.kind == "FIRST" else rows[-1 - e.offset]


def _navigate(e: Nav, f: Frame):
    if e.kind in ("FIRST", "LAST"):
        row = _logical_row(e, f)
        return None if row is None else value(e.arg, f, row)
    inner = e.arg
    if isinstance(inner, Nav):  # PREV(LAST(A.x, 2), 3)
        base, inner = _logical_row(inner, f), inner.arg
    else:
        base = _row_of(_only_var(inner), f)
    if base is None:
        return None
    row = base - e.offset if e.kind == "PREV" else base + e.offset
    if not 0 <= row < len(f.rows):
        return None
    return value(inner, f, row)


def _aggregate(e: Agg, f: Frame):
    rows = f.match_rows(_only_var(e.arg), e.final)
    if isinstance(e.arg, Star):
        return len(rows)
    values = [value(e.arg, f, r) for r in rows]
    if e.name == "array_agg":
        return values if values else None
    if e.by is not None:  # max_by, min_by: the argument where ``by`` is largest/smallest
        pairs = [(b, v) for v, b in zip(values, (value(e.by, f, r) for r in rows))
                 if b is not None]
        if not pairs:
            return None
        pick = max if e.name == "max_by" else min
        return pick(pairs, key=lambda p: p[0])[1]
    present = [v for v in values if v is not None]
    if e.name == "count_if":
        return sum(1 for v in present if v is True)
    if e.name in ("arbitrary", "any_value"):
        return present[0] if present else None
    if e.distinct:
        present = list(dict.fromkeys(present))
    if e.name == "count":
        return len(present)
    if not present:
        return None
    if e.name == "sum":
        return sum(present)
    if e.name == "avg":
        return sum(present) / len(present)
    if e.name in ("bool_and", "every"):
        return all(present)
    if e.name == "bool_or":
        return any(present)
    return min(present) if e.name == "min" else max(present)


def _in_list(e: InList, f, at):
    v = value(e.arg, f, at)
    if v is None:
        return None
    saw_null = False
    for item in e.items:
        w = value(item, f, at)
        if w is None:
            saw_null = True
        elif _compare("=", v, w, e):
            return not e.negated
    return None if saw_null else e.negated


def _case(e: Case, f, at):
    if e.operand is not None:
        operand = value(e.operand, f, at)
        for when, result in e.whens:
            w = value(when, f, at)
            if operand is not None and w is not None and _compare("=", operand, w, e):
                return value(result, f, at)
    else:
        for when, result in e.whens:
            if value(when, f, at) is True:
                return value(result, f, at)
    return None if e.default is None else value(e.default, f, at)


def _binary(e: Binary, f, at):
    op = e.op
    if op == "AND":
        a = value(e.left, f, at)
        if a is False:
            return False
        b = value(e.right, f, at)
        if b is False:
            return False
        return None if a is None or b is None else True
    if op == "OR":
        a = value(e.left, f, at)
        if a is True:
            return True
        b = value(e.right, f, at)
        if b is True:
            return True
        return None if a is None or b is None else False
    a, b = value(e.left, f, at), value(e.right, f, at)
    if a is None or b is None:
        return None
    if op in ("=", "<>", "<", "<=", ">", ">="):
        return _compare(op, a, b, e)
    if op == "||":
        return _text(a) + _text(b)
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if b == 0:
                raise EvaluationError(f"{e.pos}: division by zero")
            if _integral(a) and _integral(b):
                q = abs(a) // abs(b)  # SQL truncates toward zero
                return q if (a < 0) == (b < 0) else -q
            return a / b
        if op == "%":
            if b == 0:
                raise EvaluationError(f"{e.pos}: division by zero")
            return int(math.fmod(a, b)) if _integral(a) and _integral(b) else math.fmod(a, b)
    except TypeError:
        raise EvaluationError(f"{e.pos}: cannot compute {a!r} {op} {b!r}") from None
    raise TypeError(op)  # pragma: no cover


def _integral(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _compare(op, a, b, e) -> bool:
    if isinstance(a, bool) != isinstance(b, bool) or isinstance(a, str) != isinstance(b, str):
        raise EvaluationError(f"{e.pos}: cannot compare {a!r} with {b!r}")
    if op == "=":
        return a == b
    if op == "<>":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return repr(v)
    return str(v)


def _function(name, args, e):
    if name == "coalesce":
        return next((a for a in args if a is not None), None)
    if name == "nullif":
        return None if args[0] is not None and args[0] == args[1] else args[0]
    if name == "if":
        return args[1] if args[0] is True else (args[2] if len(args) > 2 else None)
    if name == "concat":
        return None if any(a is None for a in args) else "".join(map(_text, args))
    if name == "array":
        return list(args)
    if name == "concat_ws":
        if args[0] is None:
            return None
        items = [x for a in args[1:] for x in (a if isinstance(a, list) else [a])]
        return args[0].join(_text(x) for x in items if x is not None)
    if any(a is None for a in args):
        return None
    try:
        if name == "abs":
            return abs(args[0])
        if name in ("lower", "upper"):
            return args[0].lower() if name == "lower" else args[0].upper()
        if name in ("length", "cardinality"):
            return len(args[0])
        if name == "trim":
            return args[0].strip()
        if name in ("substr", "substring"):
            s, start = args[0], int(args[1])
            begin = start - 1 if start > 0 else len(s) + start
            return s[begin:] if len(args) == 2 else s[begin:begin + int(args[2])]
        if name == "round":
            digits = int(args[1]) if len(args) > 1 else 0
            if _integral(args[0]) and digits >= 0:
                return args[0]
            return float(Decimal(str(args[0])).quantize(Decimal(1).scaleb(-digits),
                                                        rounding=ROUND_HALF_UP))
        if name == "floor":
            return math.floor(args[0]) if _integral(args[0]) else float(math.floor(args[0]))
        if name in ("ceil", "ceiling"):
            return math.ceil(args[0]) if _integral(args[0]) else float(math.ceil(args[0]))
        if name == "greatest":
            return max(args)
        if name == "least":
            return min(args)
        if name == "sqrt":
            return math.sqrt(args[0])
        if name == "power":
            return float(args[0]) ** args[1]
        if name == "mod":
            return int(math.fmod(args[0], args[1])) if all(map(_integral, args)) \
                else math.fmod(args[0], args[1])
        if name == "sign":
            return (args[0] > 0) - (args[0] < 0)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise EvaluationError(f"{e.pos}: {name}({', '.join(map(repr, args))}): {exc}") from None
    raise TypeError(name)  # pragma: no cover


def _cast(v, type_name, e):
    if v is None:
        return None
    try:
        if type_name in ("VARCHAR", "CHAR"):
            return _text(v)
        if type_name in ("INTEGER", "INT", "BIGINT", "SMALLINT", "TINYINT"):
            if isinstance(v, str):
                return int(v.strip())
            return int(Decimal(str(v)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
        if type_name in ("DOUBLE", "REAL", "DECIMAL"):
            return float(v)
        if type_name == "BOOLEAN":
            if isinstance(v, str):
                if v.strip().lower() in ("true", "false"):
                    return v.strip().lower() == "true"
                raise ValueError("not a boolean")
            return bool(v)
    except (TypeError, ValueError, ArithmeticError):
        raise EvaluationError(f"{e.pos}: cannot cast {v!r} to {type_name}") from None
    raise TypeError(type_name)  # pragma: no cover
