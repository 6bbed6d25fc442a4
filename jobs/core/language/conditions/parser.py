"""The tokenizer and the recursive-descent parser of conditions and measures (the grammar
is in this package's docstring). Text becomes frozen expression trees; nothing is
evaluated."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from jobs.core.language.conditions.affine import aggregate_of
from jobs.core.language.conditions.evaluation import _is_number
from jobs.core.language.conditions.expressions import (
    AGGREGATES,
    ARITH,
    DURATION_UNITS,
    KEYWORDS,
    MATCH_TIMES,
    PARTITION,
    PARTITION_FACTS,
    TIME,
    TIME_FUNCTIONS,
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
    aggregates_of,
    attributes_of,
)
from jobs.core.language.conditions.kinds import Condition, Ref, _canonical, classify
from jobs.core.language.conditions.typecheck import _check_types

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<bad_op>==|=>|=<)
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[().,+\-*/])
  | (?P<bad>!|\S)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    column: int

    @property
    def word(self) -> str:
        return self.text.lower() if self.kind == "name" else ""


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
            text_ = "!=" if m.group() == "<>" else m.group()
            tokens.append(_Token(kind, text_, pos + 1))
        pos = m.end()
    return tokens


MAX_NUMBER_CHARS = 30
MAX_NODES = 500  # an entry larger than this is refused (checking stays cheap)


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
    return int(tok.text) if re.fullmatch(r"\d+", tok.text) else num


class _Parser:
    def __init__(self, text: str, groups: frozenset[str] = frozenset()):
        self.groups = groups  # the group variables, when the caller knows them
        if text.count("'") % 2:
            raise ConditionSyntaxError("unterminated string literal", text.index("'") + 1)
        self.tokens = tokenize(text)
        self.i = 0
        self.end = len(text) + 1
        self.used: list[tuple[str, int]] = []
        self.nodes = 0
        self.depth = 0

    def peek(self, ahead: int = 0) -> _Token | None:
        k = self.i + ahead
        return self.tokens[k] if k < len(self.tokens) else None

    def found(self, tok: _Token | None) -> tuple[str, int]:
        return (repr(tok.text), tok.column) if tok else ("the end", self.end)

    def take(self, kind: str, text: str | None = None, what: str = "") -> _Token:
        tok = self.peek()
        if tok is None or tok.kind != kind or (text is not None and tok.text != text):
            found, where = self.found(tok)
            raise ConditionSyntaxError(f"expected {what or text or kind}, found {found}", where)
        self.i += 1
        return tok

    def node(self, tok: _Token | None = None) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ConditionSyntaxError(f"the condition has more than {MAX_NODES} parts: "
                                       "split it into several entries",
                                       tok.column if tok else None)

    def is_word(self, word: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok is not None and tok.word == word

    # -- boolean level ----------------------------------------------------------------
    def entry(self) -> list[Expr]:
        """Top-level conjuncts."""
        expr = self.disjunction()
        items = list(expr.items) if isinstance(expr, BoolOp) and expr.op == "and" else [expr]
        tok = self.peek()
        if tok is not None:
            raise ConditionSyntaxError(f"unexpected {tok.text!r}: join conditions with "
                                       "and / or", tok.column)
        return items

    def disjunction(self) -> Expr:
        items = [self.conjunction()]
        while self.is_word("or"):
            self.i += 1
            items.append(self.conjunction())
        return items[0] if len(items) == 1 else BoolOp("or", tuple(items))

    def conjunction(self) -> Expr:
        items = [self.negation()]
        while self.is_word("and"):
            self.i += 1
            items.append(self.negation())
        return items[0] if len(items) == 1 else BoolOp("and", tuple(items))

    def negation(self) -> Expr:
        if self.is_word("not"):
            tok = self.take("name")
            self.node(tok)
            return Not(self.negation())
        return self.predicate()

    def predicate(self) -> Expr:
        self.depth += 1
        if self.depth > 50:
            raise ConditionSyntaxError("parentheses nested too deeply", self.peek().column
                                       if self.peek() else None)
        try:
            start = self.i
            tok = self.peek()
            if tok is not None and tok.text == "(" and not self.value_follows(start):
                self.i += 1  # a parenthesized condition
                inner = self.disjunction()
                self.take("punct", ")", "')'")
                return inner
            left = self.value()
            return self.comparison(left)
        finally:
            self.depth -= 1

    def value_follows(self, start: int) -> bool:
        """Whether the parenthesis at ``start`` encloses a value: what follows its
        closing parenthesis is an operator, arithmetic or ``in``."""
        depth = 0
        for k in range(start, len(self.tokens)):
            t = self.tokens[k].text
            if t == "(":
                depth += 1
            elif t == ")":
                depth -= 1
                if depth == 0:
                    nxt = self.tokens[k + 1] if k + 1 < len(self.tokens) else None
                    return nxt is not None and (nxt.kind == "op" or nxt.text in ARITH
                                                or nxt.word in ("in", "not") and
                                                (nxt.word == "in" or (
                                                    k + 2 < len(self.tokens)
                                                    and self.tokens[k + 2].word == "in")))
        return False

    def comparison(self, left: Expr) -> Expr:
        tok = self.peek()
        negated = False
        if tok is not None and tok.word == "not" and self.is_word("in", 1):
            self.i += 1
            negated = True
            tok = self.peek()
        if tok is not None and tok.word == "in":
            self.i += 1
            self.take("punct", "(", "'(' after in")
            values = [self.literal()]
            while self.peek() is not None and self.peek().text == ",":
                self.i += 1
                values.append(self.literal())
            self.take("punct", ")", "')' closing the list after in")
            self.node(tok)
            return In(left, tuple(values), negated)
        if tok is None or tok.kind != "op":
            found, where = self.found(tok)
            raise ConditionSyntaxError(f"expected an operator (= != < <= > >= in), found "
                                       f"{found}", where)
        self.i += 1
        right = self.value()
        self.node(tok)
        return Cmp(tok.text, left, right)

    def literal(self) -> Lit:
        tok = self.peek()
        sign = 1
        if tok is not None and tok.text == "-":
            self.i += 1
            sign = -1
            tok = self.peek()
        if tok is not None and tok.kind == "string" and sign == 1:
            self.i += 1
            return Lit(tok.text[1:-1].replace("''", "'"))
        if tok is not None and tok.kind == "number":
            self.i += 1
            return Lit(sign * _number(tok))
        found, where = self.found(tok)
        raise ConditionSyntaxError(f"expected a literal in the list, found {found}", where)

    # -- value level ------------------------------------------------------------------
    def value(self) -> Expr:
        left = self.term()
        while self.peek() is not None and self.peek().text in ("+", "-"):
            tok = self.take("punct")
            self.node(tok)
            left = Arith(tok.text, left, self.term())
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.peek() is not None and self.peek().text in ("*", "/"):
            tok = self.take("punct")
            self.node(tok)
            left = Arith(tok.text, left, self.unary())
        return left

    def unary(self) -> Expr:
        tok = self.peek()
        if tok is not None and tok.text == "-":
            self.i += 1
            self.node(tok)
            inner = self.unary()
            if isinstance(inner, Lit) and isinstance(inner.value, Duration):
                return Lit(Duration(-inner.value))
            if isinstance(inner, Lit) and _is_number(inner.value):
                return Lit(-inner.value)
            return Neg(inner)
        return self.primary()

    def primary(self) -> Expr:
        tok = self.peek()
        if tok is None:
            raise ConditionSyntaxError("expected a value, found the end", self.end)
        self.node(tok)
        if tok.kind == "string":
            self.i += 1
            return Lit(tok.text[1:-1].replace("''", "'"))
        if tok.kind == "number":
            self.i += 1
            unit = self.peek()
            if unit is not None and unit.kind == "name" and \
                    unit.column == tok.column + len(tok.text):
                return self.duration(tok, unit)
            return Lit(_number(tok))
        if tok.text == "(":
            self.i += 1
            inner = self.value()
            self.take("punct", ")", "')'")
            return inner
        if tok.kind == "name":
            nxt = self.peek(1)
            if nxt is not None and nxt.text == "(":
                if tok.word in AGGREGATES:
                    return self.aggregate(tok)
                if tok.word in TIME_FUNCTIONS:
                    return self.time_function(tok)
                if tok.word != "prev":
                    raise ConditionSyntaxError(
                        f"unknown function {tok.text!r}: the functions are prev(v.attr), "
                        f"the aggregates {', '.join(AGGREGATES)} and the time functions "
                        f"{', '.join(f'{f}(v.ts)' for f in TIME_FUNCTIONS)}", tok.column)
                self.i += 2
                inner = self.peek()
                if inner is not None and inner.word in AGGREGATES and self.peek(1) is not None \
                        and self.peek(1).text == "(":
                    raise ConditionSyntaxError(
                        f"prev() reads one attribute of the previous event; an aggregate "
                        f"({inner.text}(...)) cannot be inside it", inner.column)
                ref = self.ref()
                self.take("punct", ")", "')' closing prev(")
                return Attr(ref.var, ref.attr, prev=True)
            if tok.word in KEYWORDS - {"prev"}:
                raise ConditionSyntaxError(f"expected a value, found the keyword "
                                           f"{tok.text!r}", tok.column)
            if tok.text in MATCH_TIMES and (nxt is None or nxt.text != "."):
                self.i += 1
                return MatchTime(tok.text)
            ref = self.ref()
            return Attr(ref.var, ref.attr)
        raise ConditionSyntaxError(f"expected a variable, prev(...) or a literal, found "
                                   f"{tok.text!r}", tok.column)

    def duration(self, number: _Token, unit: _Token) -> Lit:
        """A duration literal: an integer written right before its unit (``9d``)."""
        if unit.text not in DURATION_UNITS:
            raise ConditionSyntaxError(f"bad unit {unit.text!r} in {number.text}{unit.text}: "
                                       f"use one of {', '.join(DURATION_UNITS)}", unit.column)
        if not re.fullmatch(r"\d+", number.text) or len(number.text) > 12:
            raise ConditionSyntaxError(f"the duration {number.text}{unit.text} must be a whole "
                                       f"number (of at most 12 digits) of {unit.text}: use a "
                                       "smaller unit, e.g. 90min instead of 1.5h",
                                       number.column)
        self.i += 1
        return Lit(Duration(int(number.text) * DURATION_UNITS[unit.text]))

    def time_function(self, tok: _Token) -> Attr:
        """``date(v.ts)``, ``hour(prev(v.ts))``... at ``tok``: the derived column."""
        func = tok.word
        self.i += 2
        prev = self.is_word("prev") and self.peek(1) is not None and self.peek(1).text == "("
        if prev:
            self.i += 2
        at = self.peek()
        ref = self.ref()
        if ref.attr != TIME:
            raise ConditionSyntaxError(f"{func}() takes an event's time: write {func}("
                                       f"{ref.var}.{TIME}), not {func}({ref})",
                                       at.column if at else None)
        if prev:
            self.take("punct", ")", "')' closing prev(")
        self.take("punct", ")", f"')' closing {func}(")
        return Attr(ref.var, f"{func}({TIME})", prev=prev)

    def aggregate(self, tok: _Token) -> Agg:
        """``count(v)``, ``count(v.attr)``, ``count(distinct v.attr)`` or ``func(v.attr)``
        at ``tok``; the attribute may be a time function (``count(distinct date(p.ts))``)."""
        func = tok.word
        self.i += 2
        distinct = self.is_word("distinct")
        if distinct:
            if func != "count":
                raise ConditionSyntaxError(f"distinct is for count only: count(distinct "
                                           f"v.attr); {func} of the distinct values is "
                                           f"{func} of the values", self.peek().column)
            self.i += 1
        inner = self.peek()
        if inner is not None and inner.word in TIME_FUNCTIONS and self.peek(1) is not None \
                and self.peek(1).text == "(":
            attr = self.time_function(inner)
            if attr.prev:
                raise ConditionSyntaxError(f"write {func}(prev(...)) around the attribute "
                                           f"only: {func}(prev(v.ts))", inner.column)
            self.take("punct", ")", f"')' closing {func}(")
            return Agg(func, attr.var, attr.attr, distinct=distinct)
        if inner is not None and inner.word == "prev":
            if distinct:
                raise ConditionSyntaxError("count(distinct ...) counts over a whole match: "
                                           "write distinct without prev()", inner.column)
            self.i += 1
            self.take("punct", "(", "'(' after prev")
            ref = self.ref()
            self.take("punct", ")", "')' closing prev(")
            self.take("punct", ")", f"')' closing {func}(")
            return Agg(func, ref.var, ref.attr, running=True)
        if inner is not None and inner.word in AGGREGATES:
            raise ConditionSyntaxError(f"an aggregate inside {func}(): aggregates do not "
                                       "nest", inner.column)
        if not distinct and self._expression_inside(func):
            return self.aggregate_of_expression(func, tok)
        name = self.take("name", what="a variable name")
        attr = None
        if distinct and (self.peek() is None or self.peek().text != "."):
            raise ConditionSyntaxError(f"count(distinct {name.text}) counts nothing: write "
                                       f"count(distinct {name.text}.attr), e.g. count(distinct "
                                       f"date({name.text}.ts))", name.column)
        if func != "count" or (self.peek() is not None and self.peek().text == "."):
            self.take("punct", ".", f"'.' after {name.text} (write {func}({name.text}.attr))")
            attr = self.take("name", what="an attribute name after '.'").text
        self.take("punct", ")", f"')' closing {func}(")
        self.used.append((name.text, name.column))
        return Agg(func, name.text, attr, distinct=distinct)

    def _expression_inside(self, func: str) -> bool:
        """Whether ``func(`` holds more than ``v`` or ``v.attr`` (``sum(b.value + a.value)``)."""
        first = self.peek()
        if first is None or first.kind != "name":
            return first is not None and first.text not in (")",)
        after = 1 if self.peek(1) is None or self.peek(1).text != "." else 3
        closing = self.peek(after)
        return closing is not None and closing.text != ")"

    def aggregate_of_expression(self, func: str, tok: _Token) -> Expr:
        """``func(E)``: ``affine.aggregate_of`` rewrites it with the aggregates of the
        group's attribute it reads (the group variable ``self.groups`` names)."""
        start = self.peek()
        expr = self.value()
        self.take("punct", ")", f"')' closing {func}(")
        try:
            return aggregate_of(func, expr, self.groups)
        except ValueError as exc:
            raise ConditionSyntaxError(str(exc), start.column) from None

    def ref(self) -> Ref:
        name = self.take("name", what="a variable name")
        nxt = self.peek()
        if nxt is not None and nxt.text == "+":
            after = self.peek(1)
            if after is not None and after.text == ".":
                raise ConditionSyntaxError(
                    f"write {name.text}.attr, not {name.text}+.attr: the + belongs in "
                    "'sets' only", nxt.column)
        self.take("punct", ".", "'.' after a variable name (write v.attr)")
        attr = self.take("name", what="an attribute name after '.'")
        self.used.append((name.text, name.column))
        if name.text == PARTITION:  # a fact of the partition as a whole
            if attr.text not in PARTITION_FACTS:
                raise ConditionSyntaxError(
                    f"partition.{attr.text}: the partition's facts are "
                    f"{', '.join('partition.' + f for f in PARTITION_FACTS)}", attr.column)
            return Ref(name.text, PARTITION_FACTS[attr.text])
        return Ref(name.text, attr.text)


def parse_conditions(text: str, groups=frozenset()
                     ) -> list[tuple[Condition, list[tuple[str, int]]]]:
    """Parse one entry of ``conditions``: its conjuncts, each with the variables it names
    (and their columns). Raises ``ConditionSyntaxError`` for text outside the grammar."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionSyntaxError("empty condition")
    parser = _Parser(text, frozenset(groups))
    out = []
    for item in parser.entry():
        _check_types(item)
        item = _canonical(item)
        cond = classify(item)
        names = {a.var for a in attributes_of(item)} | {g.var for g in aggregates_of(item)}
        out.append((cond, [(v, c) for v, c in parser.used if v in names]))
    return out


def parse_value(text: str, groups=frozenset()) -> tuple[Expr, list[tuple[str, int]]]:
    """A value expression (a measure: aggregates, attributes, literals, arithmetic) with
    the variables it names and their columns. Raises ``ConditionSyntaxError``."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionSyntaxError("empty expression")
    parser = _Parser(text, frozenset(groups))
    expr = parser.value()
    tok = parser.peek()
    if tok is not None:
        raise ConditionSyntaxError(f"unexpected {tok.text!r}: a measure is one value such as "
                                   "sum(p.value) or c.value, not a condition", tok.column)
    _check_types(expr)
    return expr, parser.used


def parse_condition(text: str) -> tuple[Condition, list[tuple[str, int]]]:
    """One condition (an entry without a top-level ``and``)."""
    found = parse_conditions(text)
    if len(found) != 1:
        raise ConditionSyntaxError(f"{len(found)} conditions joined by 'and': parse them "
                                   "with parse_conditions")
    return found[0]
