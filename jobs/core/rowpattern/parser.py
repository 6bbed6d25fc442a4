"""A ``.sql`` row pattern file → ``RowPatternQuery``: a recursive-descent parser of one
``SELECT * FROM source MATCH_RECOGNIZE ( ... )`` in Trino's syntax, with Flink's ``WITHIN
INTERVAL 'n' UNIT`` after ``PATTERN``. It builds values only: nothing is executed.

Unquoted names are case-insensitive: pattern variables are kept in upper case (as
``CLASSIFIER()`` returns them), columns in lower case; a quoted name is kept as written."""

from __future__ import annotations

from jobs.core.rowpattern.checks import check
from jobs.core.rowpattern.expressions import ExpressionParser
from jobs.core.rowpattern.lexer import Token, tokens
from jobs.core.rowpattern.model import (
    ROWS_ALL,
    ROWS_ALL_OMIT,
    ROWS_ALL_UNMATCHED,
    ROWS_ONE,
    Alt,
    Anchor,
    Concat,
    Empty,
    Exclude,
    Label,
    Lit,
    Measure,
    OrderKey,
    Permute,
    Quant,
    RowPatternQuery,
    Skip,
)
from jobs.core.rowpattern.values import Interval

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


class _Parser(ExpressionParser):
    def __init__(self, toks: list[Token], path: str):
        super().__init__(toks, path)
        self.where: list = []

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
                cols = self.listed(self.column)
                out["partition_by"] = tuple(cols)
            elif self.accept("ORDER"):
                once("ORDER", t)
                self.expect("BY")
                keys = self.listed(self.order_key)
                out["order_by"] = tuple(keys)
            elif self.accept("MEASURES"):
                once("MEASURES", t)
                items = self.listed(self.measure)
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
                items = self.listed(self.subset)
                out["subsets"] = tuple(items)
            elif self.accept("DEFINE"):
                once("DEFINE", t)
                items = self.listed(self.define)
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
        members = self.listed(self.label)
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
            items = self.listed(self.alternation)
            self.expect_op(")")
            return Permute(tuple(items))
        if t.kind in ("ident", "qident"):
            return Label(self.label(), t.pos)
        self.error(f"expected a pattern variable, '(', PERMUTE, ^, $ or {{-, found "
                   f"{self._shown()}")


def _labels(node):
    """The pattern variables of a row pattern, in order of appearance."""
    if isinstance(node, Label):
        yield node.name
    elif isinstance(node, (Concat, Alt, Permute)):
        for item in node.items:
            yield from _labels(item)
    elif isinstance(node, (Quant, Exclude)):
        yield from _labels(node.item)
