"""Conditions of a pattern (the set Θ): a tokenizer and a recursive-descent parser.

Grammar (DESIGN.md section 4; match-window paper, Def. 1)::

    condition := operand OP operand
    operand   := ref | 'prev' '(' ref ')' | literal
    ref       := NAME '.' NAME
    literal   := 'single-quoted string' | number
    OP        := = | != | < | <= | > | >=

Three shapes are accepted, each may be written either way round:

* a *property* ``v.A φ C`` (or ``v.A φ v.B``: two attributes of the same event),
* a *relationship* ``v.A φ w.B`` between two different variables,
* a *prev relationship* ``prev(v.A) φ v.B``: consecutive events bound to ``v``.

The parser never evaluates anything: text becomes frozen dataclasses.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class ConditionSyntaxError(ValueError):
    """A condition that does not follow the grammar; ``column`` is 1-based."""

    def __init__(self, message: str, column: int | None = None):
        super().__init__(message)
        self.column = column


def compare(op: str, left: Any, right: Any) -> bool:
    """Evaluate ``left op right``; a missing value or a type clash is false (SQL-like)."""
    if left is None or right is None:
        return False
    try:
        return OPERATORS[op](left, right)
    except TypeError:
        return False


@dataclass(frozen=True)
class Ref:
    var: str
    attr: str

    def __str__(self) -> str:
        return f"{self.var}.{self.attr}"


@dataclass(frozen=True)
class Property:
    """``var.attr op value`` or ``var.attr op var.other_attr`` on one event."""

    var: str
    attr: str
    op: str
    value: Any = None
    other_attr: str | None = None

    def holds(self, attrs: dict) -> bool:
        right = attrs.get(self.other_attr) if self.other_attr is not None else self.value
        return compare(self.op, attrs.get(self.attr), right)

    def __str__(self) -> str:
        right = f"{self.var}.{self.other_attr}" if self.other_attr else _literal(self.value)
        return f"{self.var}.{self.attr} {self.op} {right}"


@dataclass(frozen=True)
class Relationship:
    """``left.attr op right.attr`` over every pair of events bound to two variables."""

    left: Ref
    op: str
    right: Ref

    @property
    def variables(self) -> tuple[str, str]:
        return (self.left.var, self.right.var)

    def is_equality_on_one_attribute(self) -> bool:
        return self.op == "=" and self.left.attr == self.right.attr

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class PrevRelationship:
    """``prev(var.attr) op var.other_attr``: each consecutive pair of events of a group variable."""

    var: str
    attr: str
    op: str
    other_attr: str

    def holds(self, previous: dict, current: dict) -> bool:
        return compare(self.op, previous.get(self.attr), current.get(self.other_attr))

    def __str__(self) -> str:
        return f"prev({self.var}.{self.attr}) {self.op} {self.var}.{self.other_attr}"


Condition = Property | Relationship | PrevRelationship


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<bad_op>==|<>|=>|=<)
  | (?P<op><=|>=|!=|=|<|>)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[().+])
  | (?P<bad>!|\S)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    column: int


def tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - the last alternative matches any character
            raise ConditionSyntaxError(f"cannot read {text[pos:]!r}", pos + 1)
        kind = m.lastgroup
        if kind in ("bad", "bad_op"):
            bad = m.group()
            if kind == "bad_op" or bad == "!":
                raise ConditionSyntaxError(
                    f"bad operator {bad!r}: use one of = != < <= > >=", pos + 1)
            if bad == '"':
                raise ConditionSyntaxError(
                    "string literals use single quotes, e.g. 'C'", pos + 1)
            raise ConditionSyntaxError(f"unexpected character {bad!r}", pos + 1)
        if kind != "ws":
            tokens.append(_Token(kind, m.group(), pos + 1))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str):
        if text.count("'") % 2:
            raise ConditionSyntaxError("unterminated string literal", text.index("'") + 1)
        self.tokens = tokenize(text)
        self.i = 0
        self.end = len(text) + 1

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, kind: str, text: str | None = None, what: str = "") -> _Token:
        tok = self.peek()
        if tok is None or tok.kind != kind or (text is not None and tok.text != text):
            where = tok.column if tok else self.end
            found = f"{tok.text!r}" if tok else "the end"
            raise ConditionSyntaxError(f"expected {what or text or kind}, found {found}", where)
        self.i += 1
        return tok

    def operand(self):
        tok = self.peek()
        if tok is None:
            raise ConditionSyntaxError("expected a value, found the end", self.end)
        if tok.kind == "string":
            self.i += 1
            return ("lit", tok.text[1:-1].replace("''", "'"))
        if tok.kind == "number":
            self.i += 1
            return ("lit", _number(tok))
        if tok.kind == "name" and tok.text == "prev":
            nxt = self.tokens[self.i + 1] if self.i + 1 < len(self.tokens) else None
            if nxt is not None and nxt.text == "(":
                self.i += 2
                ref = self.ref()
                self.take("punct", ")", "')' closing prev(")
                return ("prev", ref)
        if tok.kind == "name":
            return ("ref", self.ref())
        raise ConditionSyntaxError(f"expected a variable, prev(...) or a literal, found {tok.text!r}",
                                   tok.column)

    def ref(self) -> tuple[Ref, int]:
        name = self.take("name", what="a variable name")
        nxt = self.peek()
        if nxt is not None and nxt.text == "+":
            raise ConditionSyntaxError(
                f"write {name.text}.attr, not {name.text}+.attr: the + belongs in 'sets' only",
                nxt.column)
        self.take("punct", ".", "'.' after a variable name (write v.attr)")
        attr = self.take("name", what="an attribute name after '.'")
        return (Ref(name.text, attr.text), name.column)

    def condition(self):
        left = self.operand()
        op_tok = self.peek()
        if op_tok is None or op_tok.kind != "op":
            where = op_tok.column if op_tok else self.end
            found = repr(op_tok.text) if op_tok else "the end"
            raise ConditionSyntaxError(
                f"expected an operator (= != < <= > >=), found {found}", where)
        self.i += 1
        right = self.operand()
        if self.peek() is not None:
            tok = self.peek()
            raise ConditionSyntaxError(
                f"unexpected {tok.text!r} after the condition (one comparison per line)",
                tok.column)
        return left, op_tok.text, right


MAX_NUMBER_CHARS = 30


def _number(tok: _Token) -> int | float:
    """A numeric literal: at most 30 characters and finite as a double (the events'
    numbers are doubles: a longer literal would be compared after rounding anyway)."""
    if len(tok.text) > MAX_NUMBER_CHARS:
        raise ConditionSyntaxError(f"the number {tok.text[:12]}... has {len(tok.text)} "
                                   f"characters: at most {MAX_NUMBER_CHARS}", tok.column)
    num = float(tok.text)
    if not math.isfinite(num):
        raise ConditionSyntaxError(f"the number {tok.text} is out of range for a double",
                                   tok.column)
    return int(tok.text) if re.fullmatch(r"[-+]?\d+", tok.text) else num


def parse_condition(text: str) -> tuple[Condition, list[tuple[str, int]]]:
    """Parse one condition; returns it and the variables it names with their columns.

    Raises ``ConditionSyntaxError`` for text outside the grammar.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConditionSyntaxError("empty condition")
    parser = _Parser(text)
    (lk, lv), op, (rk, rv) = parser.condition()
    if lk == "lit" and rk != "lit":  # literal on the left: flip
        (lk, lv), (rk, rv), op = (rk, rv), (lk, lv), FLIPPED[op]
    if lk == "lit":
        raise ConditionSyntaxError("a condition must name a variable (v.attr)")
    if rk == "prev" and lk != "prev":
        (lk, lv), (rk, rv), op = (rk, rv), (lk, lv), FLIPPED[op]
    (lref, lcol) = lv
    used = [(lref.var, lcol)]
    if lk == "prev":
        if rk != "ref":
            raise ConditionSyntaxError(
                "prev(v.attr) must be compared with an attribute of the same variable, "
                "e.g. prev(p.value) < p.value")
        rref, rcol = rv
        if rref.var != lref.var:
            raise ConditionSyntaxError(
                f"prev({lref}) compares consecutive events of {lref.var}; "
                f"the other side must be {lref.var}.attr, not {rref}", rcol)
        return PrevRelationship(lref.var, lref.attr, op, rref.attr), used
    if rk == "lit":
        return Property(lref.var, lref.attr, op, value=rv), used
    rref, rcol = rv
    used.append((rref.var, rcol))
    if rref.var == lref.var:
        return Property(lref.var, lref.attr, op, other_attr=rref.attr), used
    return Relationship(lref, op, rref), used
