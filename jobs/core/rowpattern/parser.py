"""A ``.sql`` row pattern file → ``RowPatternQuery``: a recursive-descent parser of one
``SELECT * FROM source MATCH_RECOGNIZE ( ... )`` in Trino's syntax, with Flink's ``WITHIN
INTERVAL 'n' UNIT`` after ``PATTERN``. It builds values only: nothing is executed.

Unquoted names are case-insensitive: pattern variables are kept in upper case (as
``CLASSIFIER()`` returns them), columns in lower case; a quoted name is kept as written."""

from __future__ import annotations

from datetime import date

from jobs.core.language.events import parse_ts
from jobs.core.rowpattern.checks import check
from jobs.core.rowpattern.lexer import RowPatternError, Token, tokens
from jobs.core.rowpattern.model import (
    ROWS_ALL,
    ROWS_ALL_OMIT,
    ROWS_ALL_UNMATCHED,
    ROWS_ONE,
    Agg,
    Alt,
    Anchor,
    Between,
    Binary,
    Case,
    Cast,
    Classifier,
    Col,
    Concat,
    Empty,
    Exclude,
    Func,
    InList,
    IsNull,
    Label,
    Like,
    Lit,
    MatchNumber,
    Measure,
    Nav,
    OrderKey,
    Permute,
    Quant,
    RowPatternQuery,
    Skip,
    Star,
    Unary,
)
from jobs.core.rowpattern.values import UNITS_NS, Interval, Ts

AGGREGATES = {"SUM", "COUNT", "AVG", "MIN", "MAX", "ARRAY_AGG"}
NAVIGATION = {"PREV", "NEXT", "FIRST", "LAST"}
SCALARS = {"COALESCE", "ABS", "LOWER", "UPPER", "ROUND", "FLOOR", "CEIL", "CEILING",
           "GREATEST", "LEAST", "LENGTH", "NULLIF", "SQRT", "POWER", "MOD", "SIGN",
           "SUBSTR", "SUBSTRING", "TRIM", "CONCAT", "IF"}
TYPES = {"VARCHAR", "CHAR", "INTEGER", "INT", "BIGINT", "SMALLINT", "TINYINT", "DOUBLE",
         "REAL", "DECIMAL", "BOOLEAN"}
MAX_BOUND = 10_000  # a quantifier's bound beyond this is refused: it could not be bounded
CLAUSES = ("PARTITION", "ORDER", "MEASURES", "ONE", "ALL", "AFTER", "PATTERN", "WITHIN",
           "SUBSET", "DEFINE")


def parse_row_pattern(text: str, path: str = "<sql>", name: str | None = None,
                      description: str = "") -> RowPatternQuery:
    """The checked statement of ``text``; raises ``RowPatternError`` naming path, line and
    column of the first problem."""
    query = _Parser(tokens(text, path), path).statement(name or "row_pattern", description)
    check(query)
    return query


class _Parser:
    def __init__(self, toks: list[Token], path: str):
        self.toks, self.i, self.path = toks, 0, path
        self.where: list = []

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

    # ---- the statement ----
    def statement(self, name: str, description: str) -> RowPatternQuery:
        if not self.at("SELECT"):
            self.error("a .sql pattern is one statement SELECT * FROM <source> "
                       f"MATCH_RECOGNIZE ( ... ); found {self._shown()}")
        self.next()
        self.expect_op("*")
        self.expect("FROM")
        source = self.name("the source's name")
        while self.accept_op("."):  # a qualified name: its last part is the source
            source = self.name("the source's name")
        self.expect("MATCH_RECOGNIZE")
        self.expect_op("(")
        parts = self.clauses()
        self.expect_op(")")
        if self.accept("AS") or self.tok.kind in ("ident", "qident"):
            self.name("an alias")
        self.accept_op(";")
        if self.tok.kind != "end":
            self.error(f"one statement only: unexpected {self._shown()} after it")
        return RowPatternQuery(name=name, source=source, path=self.path,
                               description=description, where=tuple(self.where), **parts)

    def clauses(self) -> dict:
        out = dict(partition_by=(), order_by=(), measures=(), rows_per_match=ROWS_ONE,
                   skip=Skip(), subsets=(), defines=(), within_ns=None)
        seen: list[str] = []

        def once(clause: str, tok: Token):
            if clause in seen:
                self.error(f"{clause} is given twice", tok)
            if seen and CLAUSES.index(clause) < CLAUSES.index(seen[-1]):
                self.error(f"{clause} must come before {seen[-1]}", tok)
            seen.append(clause)

        pattern = None
        while not self.at_op(")") and self.tok.kind != "end":
            t = self.tok
            if self.accept("PARTITION"):
                once("PARTITION", t)
                self.expect("BY")
                cols = [self.column()]
                while self.accept_op(","):
                    cols.append(self.column())
                out["partition_by"] = tuple(cols)
            elif self.accept("ORDER"):
                once("ORDER", t)
                self.expect("BY")
                keys = [self.order_key()]
                while self.accept_op(","):
                    keys.append(self.order_key())
                out["order_by"] = tuple(keys)
            elif self.accept("MEASURES"):
                once("MEASURES", t)
                items = [self.measure()]
                while self.accept_op(","):
                    items.append(self.measure())
                names = [m.name for m in items]
                for m in items:
                    if names.count(m.name) > 1:
                        self.error(f"measure {m.name} is named twice", Token("", "", m.pos))
                out["measures"] = tuple(items)
            elif self.at("ONE", "ALL"):
                once(t.upper, t)
                out["rows_per_match"] = self.rows_per_match()
            elif self.accept("AFTER"):
                once("AFTER", t)
                out["skip"] = self.skip()
            elif self.accept("PATTERN"):
                once("PATTERN", t)
                self.expect_op("(")
                pattern = self.alternation()
                self.expect_op(")")
            elif self.accept("WITHIN"):
                once("WITHIN", t)
                if pattern is None:
                    self.error("WITHIN comes right after PATTERN (...)", t)
                value = self.primary()
                if not isinstance(value, Lit) or not isinstance(value.value, Interval) \
                        or value.value <= 0:
                    self.error("WITHIN takes a positive INTERVAL 'n' UNIT", t)
                out["within_ns"] = int(value.value)
            elif self.accept("SUBSET"):
                once("SUBSET", t)
                items = [self.subset()]
                while self.accept_op(","):
                    items.append(self.subset())
                out["subsets"] = tuple(items)
            elif self.accept("DEFINE"):
                once("DEFINE", t)
                items = [self.define()]
                while self.accept_op(","):
                    items.append(self.define())
                out["defines"] = tuple(items)
            else:
                self.error(f"expected a clause of MATCH_RECOGNIZE ({', '.join(CLAUSES)}), "
                           f"found {self._shown()}")
        if pattern is None:
            self.error("MATCH_RECOGNIZE needs a PATTERN ( ... )")
        out["pattern"] = pattern
        out["variables"] = tuple(dict.fromkeys(_labels(pattern)))
        return out

    def order_key(self) -> OrderKey:
        column = self.column()
        ascending = True
        if self.accept("DESC"):
            ascending = False
        else:
            self.accept("ASC")
        nulls_first = not ascending  # SQL's default: nulls are larger
        if self.accept("NULLS"):
            if self.accept("FIRST"):
                nulls_first = True
            else:
                self.expect("LAST")
                nulls_first = False
        return OrderKey(column, ascending, nulls_first)

    def measure(self) -> Measure:
        pos = self.tok.pos
        expr = self.expression()
        self.expect("AS")
        return Measure(self.column(), expr, pos)

    def rows_per_match(self) -> str:
        if self.accept("ONE"):
            self.expect("ROW")
            self.expect("PER")
            self.expect("MATCH")
            return ROWS_ONE
        self.expect("ALL")
        self.expect("ROWS")
        self.expect("PER")
        self.expect("MATCH")
        if self.accept("SHOW"):
            self.expect("EMPTY")
            self.expect("MATCHES")
        elif self.accept("OMIT"):
            self.expect("EMPTY")
            self.expect("MATCHES")
            return ROWS_ALL_OMIT
        elif self.accept("WITH"):
            self.expect("UNMATCHED")
            self.expect("ROWS")
            return ROWS_ALL_UNMATCHED
        return ROWS_ALL

    def skip(self) -> Skip:
        self.where.append(("SKIP", self.tok.pos))
        self.expect("MATCH")
        self.expect("SKIP")
        if self.accept("PAST"):
            self.expect("LAST")
            self.expect("ROW")
            return Skip("past_last")
        self.expect("TO")
        if self.accept("NEXT"):
            self.expect("ROW")
            return Skip("next_row")
        if self.at("FIRST", "LAST") and self.peek().kind in ("ident", "qident"):
            kind = self.next().upper.lower()
            return Skip(kind, self.label())
        return Skip("last", self.label())

    def subset(self) -> tuple[str, tuple[str, ...]]:
        pos = self.tok.pos
        name = self.label()
        self.where.append((f"SUBSET {name}", pos))
        self.expect_op("=")
        self.expect_op("(")
        members = [self.label()]
        while self.accept_op(","):
            members.append(self.label())
        self.expect_op(")")
        return name, tuple(members)

    def define(self) -> tuple[str, object]:
        pos = self.tok.pos
        name = self.label()
        self.where.append((f"DEFINE {name}", pos))
        self.expect("AS")
        return name, self.expression()

    # ---- the row pattern ----
    def alternation(self):
        items = [self.concatenation()]
        while self.accept_op("|"):
            items.append(self.concatenation())
        return items[0] if len(items) == 1 else Alt(tuple(items))

    def concatenation(self):
        items = []
        while not (self.at_op(")", "|", "-}", ",") or self.tok.kind == "end"):
            items.append(self.quantified())
        if not items:
            self.error(f"expected a pattern term, found {self._shown()}")
        return items[0] if len(items) == 1 else Concat(tuple(items))

    def quantified(self):
        item = self.pattern_primary()
        t = self.tok
        if self.accept_op("*"):
            low, high = 0, None
        elif self.accept_op("+"):
            low, high = 1, None
        elif self.accept_op("?"):
            low, high = 0, 1
        elif self.at_op("{") and not self.at_op("{-"):
            self.next()
            low = self.integer("a bound") if self.tok.kind == "number" else None
            if self.accept_op(","):
                high = self.integer("a bound") if self.tok.kind == "number" else None
                low = low or 0
            else:
                if low is None:
                    self.error("a quantifier {n} needs n")
                high = low
            self.expect_op("}")
            if high is not None and low > high:
                self.error(f"quantifier {{{low},{high}}}: the lower bound is above the upper", t)
            if max(low, high or 0) > MAX_BOUND:
                self.error(f"quantifier bound above {MAX_BOUND:,}: write * or + instead", t)
        else:
            return item
        greedy = not self.accept_op("?")
        if self.at_op("*", "+", "?") or (self.at_op("{") and not self.at_op("{-")):
            self.error("one quantifier per term: put the term in parentheses to repeat it")
        return Quant(item, low, high, greedy)

    def pattern_primary(self):
        t = self.tok
        if self.accept_op("("):
            if self.accept_op(")"):
                return Empty()
            inner = self.alternation()
            self.expect_op(")")
            return inner
        if self.accept_op("{-"):
            inner = self.alternation()
            self.expect_op("-}")
            return Exclude(inner)
        if self.accept_op("^"):
            return Anchor("^")
        if self.accept_op("$"):
            return Anchor("$")
        if t.upper == "PERMUTE" and self.peek().kind == "op" and self.peek().text == "(":
            self.next()
            self.next()
            items = [self.alternation()]
            while self.accept_op(","):
                items.append(self.alternation())
            self.expect_op(")")
            return Permute(tuple(items))
        if t.kind in ("ident", "qident"):
            return Label(self.label(), t.pos)
        self.error(f"expected a pattern variable, '(', PERMUTE, ^, $ or {{-, found "
                   f"{self._shown()}")

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
            items = [self.expression()]
            while self.accept_op(","):
                items.append(self.expression())
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
            else:
                arg = self.expression()
            self.expect_op(")")
            return Agg(word.lower(), arg, False, distinct, t.pos)
        if word not in SCALARS:
            self.error(f"unknown function {t.text}: the functions are "
                       f"{', '.join(sorted(SCALARS | AGGREGATES | NAVIGATION))}, "
                       "CLASSIFIER and MATCH_NUMBER", t)
        args = [] if self.at_op(")") else [self.expression()]
        while self.accept_op(","):
            args.append(self.expression())
        self.expect_op(")")
        return Func(word.lower(), tuple(args), t.pos)


def _labels(node):
    """The pattern variables of a row pattern, in order of appearance."""
    if isinstance(node, Label):
        yield node.name
    elif isinstance(node, (Concat, Alt, Permute)):
        for item in node.items:
            yield from _labels(item)
    elif isinstance(node, (Quant, Exclude)):
        yield from _labels(node.item)
