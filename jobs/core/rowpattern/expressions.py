"""Tokens read one by one, and SQL expressions over them (DEFINE's conditions and
MEASURES): precedence from OR down to literals, ``RUNNING``/``FINAL``, navigation,
aggregates, ``CLASSIFIER()``, ``MATCH_NUMBER()``, ``CASE``, ``CAST``, ``INTERVAL``.
Unquoted names are case-insensitive: pattern variables are kept in upper case (as
``CLASSIFIER()`` returns them), columns in lower case; a quoted name is kept as written."""

from __future__ import annotations

from datetime import date

from jobs.core.language.events import parse_ts
from jobs.core.rowpattern.lexer import RowPatternError, Token
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
from jobs.core.rowpattern.values import UNITS_NS, Interval, Ts

AGGREGATES = {"SUM", "COUNT", "AVG", "MIN", "MAX", "ARRAY_AGG", "ARBITRARY", "ANY_VALUE",
              "MAX_BY", "MIN_BY", "COUNT_IF", "BOOL_AND", "BOOL_OR", "EVERY"}
NAVIGATION = {"PREV", "NEXT", "FIRST", "LAST"}
SCALARS = {"COALESCE", "ABS", "LOWER", "UPPER", "ROUND", "FLOOR", "CEIL", "CEILING",
           "GREATEST", "LEAST", "LENGTH", "NULLIF", "SQRT", "POWER", "MOD", "SIGN",
           "SUBSTR", "SUBSTRING", "TRIM", "CONCAT", "IF", "CONCAT_WS", "CARDINALITY"}
TYPES = {"VARCHAR", "CHAR", "INTEGER", "INT", "BIGINT", "SMALLINT", "TINYINT", "DOUBLE",
         "REAL", "DECIMAL", "BOOLEAN"}


class ExpressionParser:
    """A cursor over a statement's tokens that parses expressions."""

    def __init__(self, toks: list[Token], path: str):
        self.toks, self.i, self.path = toks, 0, path

    # ---- tokens ----
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def error(self, message: str, tok: Token | None = None):
        raise RowPatternError(self.path, (tok or self.tok).pos, message)

    def next(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def at(self, *words: str) -> bool:
        return self.tok.upper in words

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += 1
            return True
        return False

    def listed(self, item) -> list:
        """``item`` once, then again after each comma."""
        items = [item()]
        while self.accept_op(","):
            items.append(item())
        return items

    def accept_op(self, op: str) -> bool:
        if self.at_op(op):
            self.i += 1
            return True
        return False

    def expect(self, word: str) -> Token:
        if not self.at(word):
            self.error(f"expected {word}, found {self._shown()}")
        return self.next()

    def expect_op(self, op: str) -> Token:
        if not self.at_op(op):
            self.error(f"expected '{op}', found {self._shown()}")
        return self.next()

    def _shown(self) -> str:
        t = self.tok
        return "the end of the file" if t.kind == "end" else repr(t.text)

    def name(self, what: str) -> str:
        t = self.tok
        if t.kind == "ident":
            self.i += 1
            return t.text
        if t.kind == "qident":
            self.i += 1
            return t.text
        self.error(f"expected {what}, found {self._shown()}")

    def label(self) -> str:
        """A pattern variable's name: unquoted upper-cased, quoted as written."""
        t = self.tok
        if t.kind not in ("ident", "qident"):
            self.error(f"expected a pattern variable, found {self._shown()}")
        self.i += 1
        return t.text.upper() if t.kind == "ident" else t.text

    def column(self) -> str:
        t = self.tok
        if t.kind not in ("ident", "qident"):
            self.error(f"expected a column, found {self._shown()}")
        self.i += 1
        return t.text.lower() if t.kind == "ident" else t.text

    def integer(self, what: str) -> int:
        t = self.tok
        if t.kind != "number" or not t.text.isdigit():
            self.error(f"expected {what} (a whole number), found {self._shown()}")
        self.i += 1
        return int(t.text)

    # ---- expressions ----
    def expression(self):
        return self.disjunction()

    def disjunction(self):
        left = self.conjunction()
        while self.at("OR"):
            t = self.next()
            left = Binary("OR", left, self.conjunction(), t.pos)
        return left

    def conjunction(self):
        left = self.negation()
        while self.at("AND"):
            t = self.next()
            left = Binary("AND", left, self.negation(), t.pos)
        return left

    def negation(self):
        if self.at("NOT"):
            t = self.next()
            return Unary("NOT", self.negation(), t.pos)
        return self.predicate()

    def predicate(self):
        left = self.concat_expr()
        t = self.tok
        if self.at_op("=", "<>", "!=", "<", "<=", ">", ">="):
            op = self.next().text
            return Binary("<>" if op == "!=" else op, left, self.concat_expr(), t.pos)
        if self.accept("IS"):
            negated = self.accept("NOT")
            self.expect("NULL")
            return IsNull(left, negated, t.pos)
        negated = self.at("NOT") and self.peek().upper in ("BETWEEN", "IN", "LIKE")
        if negated:
            self.next()
        if self.accept("BETWEEN"):
            low = self.concat_expr()
            self.expect("AND")
            return Between(left, low, self.concat_expr(), negated, t.pos)
        if self.accept("IN"):
            self.expect_op("(")
            items = self.listed(self.expression)
            self.expect_op(")")
            return InList(left, tuple(items), negated, t.pos)
        if self.accept("LIKE"):
            return Like(left, self.concat_expr(), negated, t.pos)
        return left

    def concat_expr(self):
        left = self.additive()
        while self.at_op("||"):
            t = self.next()
            left = Binary("||", left, self.additive(), t.pos)
        return left

    def additive(self):
        left = self.multiplicative()
        while self.at_op("+", "-"):
            t = self.next()
            left = Binary(t.text, left, self.multiplicative(), t.pos)
        return left

    def multiplicative(self):
        left = self.unary()
        while self.at_op("*", "/", "%"):
            t = self.next()
            left = Binary(t.text, left, self.unary(), t.pos)
        return left

    def unary(self):
        if self.at_op("-", "+"):
            t = self.next()
            arg = self.unary()
            if t.text == "-" and isinstance(arg, Lit) and isinstance(arg.value, (int, float)) \
                    and not isinstance(arg.value, bool):
                return Lit(-arg.value, t.pos)
            return Unary(t.text, arg, t.pos)
        return self.primary()

    def primary(self):
        t = self.tok
        if t.kind == "number":
            self.next()
            text = t.text
            return Lit(int(text) if text.isdigit() else float(text), t.pos)
        if t.kind == "string":
            self.next()
            return Lit(t.text, t.pos)
        if self.accept_op("("):
            inner = self.expression()
            self.expect_op(")")
            return inner
        if t.kind == "qident":
            return self.reference()
        if t.kind != "ident":
            self.error(f"expected an expression, found {self._shown()}")
        word = t.upper
        if word in ("TRUE", "FALSE"):
            self.next()
            return Lit(word == "TRUE", t.pos)
        if word == "NULL":
            self.next()
            return Lit(None, t.pos)
        if word == "INTERVAL":
            return self.interval()
        if word in ("TIMESTAMP", "DATE") and self.peek().kind == "string":
            self.next()
            text = self.next()
            try:
                ns = parse_ts(text.text) if word == "TIMESTAMP" else \
                    parse_ts(date.fromisoformat(text.text))
            except ValueError:
                self.error(f"not a {word.lower()}: {text.text!r}", text)
            return Lit(Ts(ns), t.pos)
        if word == "ARRAY" and self.peek().text == "[":
            self.next()
            self.next()
            items = [] if self.at_op("]") else self.listed(self.expression)
            self.expect_op("]")
            return Func("array", tuple(items), t.pos)
        if word == "CASE":
            return self.case()
        if word == "CAST" and self.peek().text == "(":
            return self.cast()
        if word in ("RUNNING", "FINAL") and self.peek().kind == "ident":
            self.next()
            inner = self.primary()
            if not isinstance(inner, (Nav, Agg)) or (isinstance(inner, Nav) and
                                                     inner.kind in ("PREV", "NEXT")):
                self.error(f"{word} applies to FIRST, LAST or an aggregate", t)
            if word == "FINAL":
                inner = type(inner)(**{**inner.__dict__, "final": True})
            return inner
        if self.peek().kind == "op" and self.peek().text == "(":
            return self.call()
        return self.reference()

    def reference(self):
        t = self.tok
        if self.peek().kind == "op" and self.peek().text == ".":
            var = self.label()
            self.next()
            if self.accept_op("*"):
                return Star(var, t.pos)
            return Col(var, self.column(), t.pos)
        return Col(None, self.column(), t.pos)

    def interval(self):
        t = self.next()
        sign = -1 if self.accept_op("-") else 1
        value = self.tok
        if value.kind != "string":
            self.error("INTERVAL takes a quoted number: INTERVAL '15' DAY")
        self.next()
        unit = self.tok.upper.rstrip("S") if self.tok.kind == "ident" else ""
        if unit not in UNITS_NS:
            self.error(f"INTERVAL's unit is one of {', '.join(UNITS_NS)}, found "
                       f"{self._shown()}")
        self.next()
        try:
            amount = float(value.text)
        except ValueError:
            self.error(f"INTERVAL takes a number, found {value.text!r}", value)
        return Lit(Interval(round(sign * amount * UNITS_NS[unit])), t.pos)

    def case(self):
        t = self.next()
        operand = None if self.at("WHEN") else self.expression()
        whens = []
        while self.accept("WHEN"):
            cond = self.expression()
            self.expect("THEN")
            whens.append((cond, self.expression()))
        if not whens:
            self.error("CASE needs at least one WHEN ... THEN ...")
        default = self.expression() if self.accept("ELSE") else None
        self.expect("END")
        return Case(operand, tuple(whens), default, t.pos)

    def cast(self):
        t = self.next()
        self.expect_op("(")
        arg = self.expression()
        self.expect("AS")
        type_tok = self.tok
        type_name = self.name("a type").upper()
        if type_name not in TYPES:
            self.error(f"CAST to {type_name}: the types are {', '.join(sorted(TYPES))}",
                       type_tok)
        if self.accept_op("("):  # varchar(7), decimal(10, 2): the length is not enforced
            self.integer("a length")
            if self.accept_op(","):
                self.integer("a scale")
            self.expect_op(")")
        self.expect_op(")")
        return Cast(arg, type_name, t.pos)

    def call(self):
        t = self.next()
        word = t.upper
        self.expect_op("(")
        if word == "MATCH_NUMBER":
            self.expect_op(")")
            return MatchNumber(t.pos)
        if word == "CLASSIFIER":
            var = None if self.at_op(")") else self.label()
            self.expect_op(")")
            return Classifier(var, t.pos)
        if word in NAVIGATION:
            arg = self.expression()
            offset = 1 if word in ("PREV", "NEXT") else 0
            if self.accept_op(","):
                offset = self.integer("an offset")
            self.expect_op(")")
            return Nav(word, arg, offset, False, t.pos)
        if word in AGGREGATES:
            distinct = self.accept("DISTINCT")
            if word == "COUNT" and self.at_op("*"):
                self.next()
                arg = Star(None, t.pos)
            elif word == "COUNT" and self.at_op(")"):  # count(): the rows
                arg = Star(None, t.pos)
            else:
                arg = self.expression()
            by = None
            if word in ("MAX_BY", "MIN_BY"):
                self.expect_op(",")
                by = self.expression()
            self.expect_op(")")
            return Agg(word.lower(), arg, False, distinct, t.pos, by)
        if word not in SCALARS:
            self.error(f"unknown function {t.text}: the functions are "
                       f"{', '.join(sorted(SCALARS | AGGREGATES | NAVIGATION))}, "
                       "CLASSIFIER and MATCH_NUMBER", t)
        args = [] if self.at_op(")") else self.listed(self.expression)
        self.expect_op(")")
        return Func(word.lower(), tuple(args), t.pos)
