"""Conditions that are not a single comparison, compiled for the engine.

A condition such as ``b.value > 2 * a.value or b.type = 'ICU'`` becomes a short postfix
*program* (integer rows: opcode, argument, argument) that ``kernels.run_program``
evaluates on a stack of encoded values, for one event in slot 0 and one in slot 1 (the
other variable's event, or the previous event of the same group variable). Properties
are evaluated on whole columns at once by ``vector_truth``. Both follow the reference
evaluator ``conditions.truth`` (SQL's three-valued logic); the property tests compare
them on random data. Nothing here evaluates text: programs come from the parsed tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jobs.core.engine.columns import MISSING, NUMBER, EventColumns
from jobs.core.language.conditions.expressions import (
    OPERATORS,
    Agg,
    Arith,
    Attr,
    BoolOp,
    Cmp,
    Expr,
    In,
    Lit,
    MatchTime,
    Neg,
    Not,
    Truth,
)

LOAD, CONST, ARITH, NEG, CMP, NOT, AND, OR = range(8)
ARITH_CODES = {"+": 0, "-": 1, "*": 2, "/": 3}
CMP_CODES = {"=": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
TRUTH = 3  # the kind of a truth value on the stack (value 1.0 true, 0.0 false)
FALSE, TRUE, UNKNOWN = 0, 1, 2


AGG_FUNCS = {"count": 0, "sum": 1, "avg": 2, "min": 3, "max": 4, "first": 5, "last": 6}


def _compile(e: Expr, slot_of, row_of, literals: list, out: list, aggs=None) -> None:
    if isinstance(e, Agg) and aggs is not None:  # a running aggregate: a constant slot the
        literals.append(None)                    # kernel fills before it runs the program
        aggs.append((len(literals) - 1, AGG_FUNCS[e.func],
                     -1 if e.attr is None else row_of(e.attr)))
        out.append((CONST, len(literals) - 1, 0))
    elif isinstance(e, Lit):
        literals.append(e.value)
        out.append((CONST, len(literals) - 1, 0))
    elif isinstance(e, Attr):
        out.append((LOAD, slot_of(e), row_of(e.attr)))
    elif isinstance(e, Neg):
        _compile(e.item, slot_of, row_of, literals, out, aggs)
        out.append((NEG, 0, 0))
    elif isinstance(e, Arith):
        _compile(e.left, slot_of, row_of, literals, out, aggs)
        _compile(e.right, slot_of, row_of, literals, out, aggs)
        out.append((ARITH, ARITH_CODES[e.op], 0))
    elif isinstance(e, Cmp):
        _compile(e.left, slot_of, row_of, literals, out, aggs)
        _compile(e.right, slot_of, row_of, literals, out, aggs)
        out.append((CMP, CMP_CODES[e.op], 0))
    elif isinstance(e, In):
        for k, lit in enumerate(e.values):
            _compile(e.item, slot_of, row_of, literals, out, aggs)
            _compile(lit, slot_of, row_of, literals, out, aggs)
            out.append((CMP, CMP_CODES["="], 0))
            if k:
                out.append((OR, 0, 0))
        if e.negated:
            out.append((NOT, 0, 0))
    elif isinstance(e, Not):
        _compile(e.item, slot_of, row_of, literals, out, aggs)
        out.append((NOT, 0, 0))
    elif isinstance(e, BoolOp):
        for k, x in enumerate(e.items):
            _compile(x, slot_of, row_of, literals, out, aggs)
            if k:
                out.append((AND if e.op == "and" else OR, 0, 0))
    else:  # pragma: no cover - the parser builds nothing else
        raise TypeError(f"cannot compile {e!r}")


def _depth(code: list[tuple[int, int, int]]) -> int:
    depth = top = 0
    for op, _, _ in code:
        top += 1 if op in (LOAD, CONST) else 0 if op in (NEG, NOT) else -1
        depth = max(depth, top)
    return depth


class Programs:
    """The programs of one compiled pattern, concatenated: program k is
    ``code[ptr[k]:ptr[k + 1]]``; literals are encoded per group (``constants``)."""

    def __init__(self, row_of):
        self._row_of = row_of
        self._code: list[tuple[int, int, int]] = []
        self._ptr = [0]
        self.literals: list = []
        self.depth = 1

    def add(self, expr: Expr, slots: dict[tuple[str, bool], int], aggs: list | None = None
            ) -> int:
        """Compile ``expr`` with its (variable, prev?) references mapped to slots 0/1;
        with ``aggs``, each aggregate becomes a constant slot, listed there as (slot, func
        code, attribute row or -1) for the kernel to fill (running conditions)."""
        code: list = []
        _compile(expr, lambda a: slots[(a.var, a.prev)], self._row_of, self.literals, code,
                 aggs)
        self._code.extend(code)
        self._ptr.append(len(self._code))
        self.depth = max(self.depth, _depth(code))
        return len(self._ptr) - 2

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        code = np.array(self._code, np.int64).reshape(-1, 3)
        return code, np.array(self._ptr, np.int64)

    def constants(self, cols: EventColumns) -> tuple[np.ndarray, np.ndarray]:
        enc = [cols.encode_literal(v) for v in self.literals]
        return (np.array([v for v, _ in enc], np.float64),
                np.array([k for _, k in enc], np.int8))


# --------------------------------------------------------------------------------------
# Whole columns: properties (Theorem 1's masks)
# --------------------------------------------------------------------------------------
def vector_value(e: Expr, n: int, read, literal):
    """(values, kinds) of a value expression for ``n`` events: ``read(attr_node)`` gives
    an attribute's (or an aggregate's, for ``n`` matches) encoded arrays,
    ``literal(value)`` a literal's encoding."""
    if isinstance(e, Lit):
        v, k = literal(e.value)
        return np.full(n, v), np.full(n, k, np.int8)
    if isinstance(e, (Attr, Agg, MatchTime)):
        return read(e)
    if isinstance(e, Neg):
        v, k = vector_value(e.item, n, read, literal)
        ok = k == NUMBER
        return np.where(ok, -v, np.nan), np.where(ok, NUMBER, MISSING).astype(np.int8)
    lv, lk = vector_value(e.left, n, read, literal)
    rv, rk = vector_value(e.right, n, read, literal)
    ok = (lk == NUMBER) & (rk == NUMBER)
    with np.errstate(all="ignore"):
        if e.op == "+":
            out = lv + rv
        elif e.op == "-":
            out = lv - rv
        elif e.op == "*":
            out = lv * rv
        else:
            ok &= rv != 0
            out = lv / np.where(rv != 0, rv, 1.0)
    ok &= np.isfinite(out)
    return np.where(ok, out, np.nan), np.where(ok, NUMBER, MISSING).astype(np.int8)


def _cmp3(op: str, lv, lk, rv, rk) -> np.ndarray:
    present = (lk != MISSING) & (rk != MISSING)
    same = lk == rk
    with np.errstate(invalid="ignore"):
        result = OPERATORS[op](lv, rv)
    differ = FALSE if op == "=" else TRUE if op == "!=" else UNKNOWN
    out = np.where(same, result.astype(np.int8), np.int8(differ))
    return np.where(present, out, np.int8(UNKNOWN)).astype(np.int8)


def _and3(a, b):
    # without a FALSE, both are TRUE (1) or UNKNOWN (2): the larger code is the answer
    return np.where((a == FALSE) | (b == FALSE), np.int8(FALSE), np.maximum(a, b))


def _or3(a, b):
    # without a TRUE, both are FALSE (0) or UNKNOWN (2): the larger code is the answer
    return np.where((a == TRUE) | (b == TRUE), np.int8(TRUE), np.maximum(a, b))


def vector_truth(e: Expr, cols: EventColumns, row_of) -> np.ndarray:
    """0 false, 1 true, 2 unknown for every event, for an expression on one event."""
    def read(a: Attr):
        r = row_of(a.attr)
        return cols.values[r], cols.kinds[r]

    return vector_truth3(e, cols.n, read, cols.encode_literal)


def vector_truth3(e: Expr, n: int, read, literal) -> np.ndarray:
    """0 false, 1 true, 2 unknown for ``n`` events; ``read`` and ``literal`` as for
    ``vector_value`` (a window pattern reads several roles of events, and counters)."""
    if isinstance(e, Truth):
        return np.full(n, TRUE if e.value else FALSE, np.int8)
    if isinstance(e, Cmp):
        return _cmp3(e.op, *vector_value(e.left, n, read, literal),
                     *vector_value(e.right, n, read, literal))
    if isinstance(e, In):
        item = vector_value(e.item, n, read, literal)
        out = np.full(n, FALSE, np.int8)
        for lit in e.values:
            out = _or3(out, _cmp3("=", *item, *vector_value(lit, n, read, literal)))
        return _not3(out) if e.negated else out
    if isinstance(e, Not):
        return _not3(vector_truth3(e.item, n, read, literal))
    if isinstance(e, BoolOp):
        parts = [vector_truth3(x, n, read, literal) for x in e.items]
        out = parts[0]
        for p in parts[1:]:
            out = _and3(out, p) if e.op == "and" else _or3(out, p)
        return out
    raise TypeError(f"not a condition: {e}")  # pragma: no cover


def _not3(a):
    return np.where(a == UNKNOWN, UNKNOWN, 1 - a).astype(np.int8)


@dataclass(frozen=True)
class RelationRows:
    """Conditions per variable as CSR arrays of (other variable, program)."""

    ptr: np.ndarray
    other: np.ndarray
    program: np.ndarray


def relation_rows(rows_per_var: list[list[tuple[int, int]]]) -> RelationRows:
    ptr = np.zeros(len(rows_per_var) + 1, np.int64)
    flat: list[tuple[int, int]] = []
    for v, rows in enumerate(rows_per_var):
        flat.extend(rows)
        ptr[v + 1] = len(flat)
    arr = np.array(flat, np.int64).reshape(-1, 2)
    return RelationRows(ptr, arr[:, 0].copy(), arr[:, 1].copy())
