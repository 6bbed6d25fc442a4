"""Conditions of a pattern (the set Θ): a tokenizer, a recursive-descent parser and the
three-valued evaluator that is the reference for every compiled form.

Grammar (docs/language.md; docs/language.md)::

    entry     := or ('and' or)*            -- a top-level 'and' splits the entry
    or        := and ('or' and)*
    and       := not ('and' not)*
    not       := 'not' not | predicate
    predicate := sum (OP sum | ['not'] 'in' '(' literal (',' literal)* ')')
               | '(' or ')'
    sum       := term (('+' | '-') term)*
    term      := unary (('*' | '/') unary)*
    unary     := '-' unary | primary
    primary   := literal | DURATION | NAME '.' NAME | 'prev' '(' NAME '.' NAME ')'
               | '(' sum ')' | 'count' '(' NAME ['.' NAME] ')' | AGG '(' NAME '.' NAME ')'
               | 'start_ts' | 'end_ts'
    AGG       := sum | avg | min | max | first | last
    DURATION  := INTEGER UNIT (no space between: 9d, 36h, 30min, 10s, 500ms)
    OP        := = | != | <> | < | <= | > | >=

Each conjunct of an entry becomes one condition, classified by the variables it names
(match-window paper, Def. 1): one variable, a *property*; two, a *relationship*; one
variable under ``prev()``, a *prev relationship* between consecutive events of a group
variable; a conjunct with an aggregate (``sum(p.value) > 300``, ``count(p) >= 3``) is an
*aggregate condition*, which holds or not for a whole match (docs/semantics.md). Keywords
are case-insensitive, attribute names are not.

Evaluation follows SQL's three-valued logic: a comparison with a missing value is
unknown, ``not`` of unknown is unknown, and a condition holds only when it is true. A
number and a string are never equal (``=`` false, ``!=`` true) and never ordered
(unknown). Arithmetic needs numbers; with a missing value, a division by zero or a
non-finite result it is missing.

The parser never evaluates anything: text becomes frozen dataclasses.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Union

from jobs.core.errors import UserError

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
ARITH = ("+", "-", "*", "/")
KEYWORDS = {"and", "or", "not", "in", "prev"}
TIME = "ts"  # the attribute that is each event's time
MATCH_TIMES = ("start_ts", "end_ts")  # the first and the last event time of a match
DURATION_UNITS = {"ms": 10**6, "s": 10**9, "min": 60 * 10**9, "h": 3600 * 10**9,
                  "d": 86400 * 10**9}
AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")
NUMERIC_AGGREGATES = ("sum", "avg")  # the others also take text


class ConditionSyntaxError(UserError, ValueError):
    """A condition that does not follow the grammar; ``column`` is 1-based."""

    def __init__(self, message: str, column: int | None = None):
        super().__init__(message)
        self.column = column


# --------------------------------------------------------------------------------------
# The expression tree
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lit:
    value: Any

    def __str__(self) -> str:
        return _literal(self.value)


@dataclass(frozen=True)
class Attr:
    var: str
    attr: str
    prev: bool = False

    def __str__(self) -> str:
        return f"prev({self.var}.{self.attr})" if self.prev else f"{self.var}.{self.attr}"


class Duration(int):
    """A duration in nanoseconds: the value of a literal such as ``9d`` and of the
    difference of two times (docs/semantics.md, time)."""

    def __repr__(self) -> str:
        for unit, ns in sorted(DURATION_UNITS.items(), key=lambda u: -u[1]):
            if self % ns == 0:
                return f"{int(self) // ns}{unit}"
        return f"{int(self)}ns"  # pragma: no cover - literals are whole milliseconds

    __str__ = __repr__


class Instant(int):
    """An event time in nanoseconds since the epoch (``v.ts``, ``first(p.ts)``,
    ``start_ts``) in the reference evaluator."""


@dataclass(frozen=True)
class MatchTime:
    """``start_ts`` or ``end_ts``: the time of a match's first or last event."""

    which: str

    def __str__(self) -> str:
        return self.which


@dataclass(frozen=True)
class Agg:
    """An aggregate over the events a match binds to group variable ``var``: ``count``
    (of events, or of present values of ``attr``), ``sum``, ``avg``, ``min``, ``max``
    (missing values skipped; over no values: missing), ``first`` and ``last`` (the value
    of the first or last event in processing order)."""

    func: str
    var: str
    attr: str | None  # None: count(v)
    running: bool = False  # func(prev(v.attr)): over the events bound to v before this one

    def __str__(self) -> str:
        if self.running:
            return f"{self.func}(prev({self.var}.{self.attr}))"
        return f"{self.func}({self.var})" if self.attr is None else \
            f"{self.func}({self.var}.{self.attr})"


@dataclass(frozen=True)
class Neg:
    item: "Expr"

    def __str__(self) -> str:
        return f"-{_wrap(self.item, 3)}"


@dataclass(frozen=True)
class Arith:
    op: str
    left: "Expr"
    right: "Expr"

    def __str__(self) -> str:
        level = 1 if self.op in "+-" else 2
        return f"{_wrap(self.left, level)} {self.op} {_wrap(self.right, level + 1)}"


@dataclass(frozen=True)
class Cmp:
    op: str
    left: "Expr"
    right: "Expr"

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class In:
    item: "Expr"
    values: tuple[Lit, ...]
    negated: bool = False

    def __str__(self) -> str:
        word = "not in" if self.negated else "in"
        return f"{self.item} {word} ({', '.join(map(str, self.values))})"


@dataclass(frozen=True)
class Not:
    item: "Expr"

    def __str__(self) -> str:
        return f"not {_wrap_bool(self.item, 'not')}"


@dataclass(frozen=True)
class BoolOp:
    op: str  # 'and' | 'or'
    items: tuple["Expr", ...]

    def __str__(self) -> str:
        return f" {self.op} ".join(_wrap_bool(x, self.op) for x in self.items)


@dataclass(frozen=True)
class Truth:
    """The constant conditions ``TRUE`` and ``FALSE`` (pattern-based windows)."""

    value: bool

    def __str__(self) -> str:
        return "TRUE" if self.value else "FALSE"


Expr = Union[Lit, Attr, Agg, MatchTime, Neg, Arith, Cmp, In, Not, BoolOp, Truth]


def _wrap(e: Expr, level: int) -> str:
    mine = 1 if isinstance(e, Arith) and e.op in "+-" else 2 if isinstance(e, Arith) else 3
    return f"({e})" if mine < level else str(e)


def _wrap_bool(e: Expr, context: str) -> str:
    if isinstance(e, BoolOp) and (context == "not" or (context == "and" and e.op == "or")):
        return f"({e})"
    return str(e)


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def nodes_of(e: Expr, kind: type):
    """Every node of type ``kind`` in an expression, in reading order."""
    if isinstance(e, kind):
        yield e
    elif isinstance(e, (Neg, Not)):
        yield from nodes_of(e.item, kind)
    elif isinstance(e, (Arith, Cmp)):
        yield from nodes_of(e.left, kind)
        yield from nodes_of(e.right, kind)
    elif isinstance(e, In):
        yield from nodes_of(e.item, kind)
    elif isinstance(e, BoolOp):
        for x in e.items:
            yield from nodes_of(x, kind)


def attributes_of(e: Expr):
    """Every ``Attr`` node of an expression."""
    return nodes_of(e, Attr)


def aggregates_of(e: Expr):
    """Every ``Agg`` node of an expression."""
    return nodes_of(e, Agg)


def match_times_of(e: Expr):
    """Every ``MatchTime`` node (``start_ts``, ``end_ts``) of an expression."""
    return nodes_of(e, MatchTime)


def expr_attributes(e: Expr) -> tuple[str, ...]:
    """The event attributes an expression reads (of attributes and aggregates)."""
    return tuple(dict.fromkeys([a.attr for a in attributes_of(e)]
                               + [g.attr for g in aggregates_of(e) if g.attr is not None]))


def comparisons_of(e: Expr):
    """Every comparison (``Cmp`` and ``In``) of a boolean expression."""
    if isinstance(e, (Cmp, In)):
        yield e
    elif isinstance(e, Not):
        yield from comparisons_of(e.item)
    elif isinstance(e, BoolOp):
        for x in e.items:
            yield from comparisons_of(x)


# --------------------------------------------------------------------------------------
# Evaluation (the reference: the oracle uses it, the compiled forms must agree)
# --------------------------------------------------------------------------------------
def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not (isinstance(v, float) and v != v)


def value_of(e: Expr, env: dict) -> Any:
    """The value of a value expression; ``env`` maps (variable, prev?) to an event's
    attributes. Missing (None) when an attribute is missing or arithmetic fails."""
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Attr):
        v = env[(e.var, e.prev)].get(e.attr)
        return None if isinstance(v, float) and v != v else v
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


def aggregate(func: str, attr: str | None, events: list[dict]) -> Any:
    """The value of ``func(v.attr)`` (``count(v)``: ``attr`` None) over the attributes of
    the events bound to v, in processing order: the reference for the engine's columns.
    ``sum`` and ``avg`` read numbers (other values are skipped, as missing ones are);
    ``min`` and ``max`` compare numbers when there is one, else text."""
    if attr is None:
        return len(events)
    values = [a.get(attr) for a in events]
    values = [None if isinstance(v, float) and v != v else v for v in values]
    if func in ("first", "last"):
        return (values[0] if func == "first" else values[-1]) if values else None
    present = [v for v in values if v is not None]
    if func == "count":
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


# --------------------------------------------------------------------------------------
# Conditions: properties, relationships, prev relationships
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ref:
    var: str
    attr: str

    def __str__(self) -> str:
        return f"{self.var}.{self.attr}"


def _simple(expr: Expr):
    """(left Attr, op, right Attr | Lit) when ``expr`` is one comparison of an attribute
    with an attribute or a literal, else None (the compiled fast path)."""
    if isinstance(expr, Cmp) and isinstance(expr.left, Attr) \
            and isinstance(expr.right, (Attr, Lit)):
        return expr.left, expr.op, expr.right
    return None


@dataclass(frozen=True)
class Property:
    """A condition on one event bound to ``var``."""

    var: str
    expr: Expr

    def holds(self, attrs: dict) -> bool:
        return truth(self.expr, {(self.var, False): attrs}) is True

    @property
    def simple(self):
        return _simple(self.expr)

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.attr for a in attributes_of(self.expr)))

    def __str__(self) -> str:
        return str(self.expr)


@dataclass(frozen=True)
class Relationship:
    """A condition over every pair of events bound to two different variables."""

    expr: Expr
    variables: tuple[str, str]

    @classmethod
    def compare(cls, left: Ref, op: str, right: Ref) -> "Relationship":
        return cls(Cmp(op, Attr(left.var, left.attr), Attr(right.var, right.attr)),
                   (left.var, right.var))

    def holds(self, a: dict, b: dict) -> bool:
        """``a``: an event of ``variables[0]``, ``b``: one of ``variables[1]``."""
        if self.variables[0] == self.variables[1]:  # a reflexive member of Θ+eq
            left, op, right = self.simple
            return compare(op, a.get(left.attr), b.get(right.attr))
        return truth(self.expr, {(self.variables[0], False): a,
                                 (self.variables[1], False): b}) is True

    @property
    def simple(self):
        s = _simple(self.expr)
        return s if s is not None and isinstance(s[2], Attr) else None

    def is_equality_on_one_attribute(self) -> bool:
        s = self.simple
        return s is not None and s[1] == "=" and s[0].attr == s[2].attr

    @property
    def left(self) -> Ref:
        return Ref(self.simple[0].var, self.simple[0].attr)

    @property
    def right(self) -> Ref:
        return Ref(self.simple[2].var, self.simple[2].attr)

    @property
    def op(self) -> str:
        return self.simple[1]

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.attr for a in attributes_of(self.expr)))

    def __str__(self) -> str:
        return str(self.expr)


@dataclass(frozen=True)
class PrevRelationship:
    """A condition over each consecutive pair of events of group variable ``var``:
    ``prev(var.A)`` reads the earlier event, ``var.A`` the later one."""

    var: str
    expr: Expr

    def holds(self, previous: dict, current: dict) -> bool:
        return truth(self.expr, {(self.var, True): previous,
                                 (self.var, False): current}) is True

    @property
    def simple(self):
        s = _simple(self.expr)
        if s is not None and isinstance(s[2], Attr) and s[0].prev and not s[2].prev:
            return s
        return None

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.attr for a in attributes_of(self.expr)))

    def __str__(self) -> str:
        return str(self.expr)


@dataclass(frozen=True)
class AggregateCondition:
    """A condition with aggregates (``sum(p.value) > 300``, ``avg(p.value) < c.value``):
    it holds or not for a whole match, read from every event the match binds
    (docs/semantics.md, aggregates); ``variables``: the variables it names."""

    expr: Expr
    variables: tuple[str, ...]

    def holds(self, binding: dict[str, list[dict]]) -> bool:
        """``binding``: each variable's events (attribute dicts, with the time under
        ``ts``) in processing order."""
        return truth(self.expr, match_env(self.expr, binding)) is True

    @property
    def attributes(self) -> tuple[str, ...]:
        return expr_attributes(self.expr)

    def __str__(self) -> str:
        return str(self.expr)


RUNNING = {("max", ">"), ("max", ">="), ("min", "<"), ("min", "<=")}  # the supported forms


@dataclass(frozen=True)
class RunningCondition:
    """A condition on each event bound to group variable ``var`` (but its first) against
    an aggregate of the events bound to ``var`` before it (docs/semantics.md, running
    aggregates): ``p.value > max(prev(p.value))``."""

    var: str
    expr: Expr

    def holds(self, earlier: list[dict], current: dict) -> bool:
        """``earlier``: the attributes of the events bound to ``var`` before ``current``."""
        env: dict = {(self.var, False): current}
        for g in aggregates_of(self.expr):
            env[g] = aggregate(g.func, g.attr, earlier)
        return truth(self.expr, env) is True

    def as_prev(self) -> PrevRelationship:
        """The equivalent prev relationship (``prev(p.a) < p.a`` for ``p.a >
        max(prev(p.a))``): over a sequence, each event above every earlier one is each
        event above the one before it (docs/semantics.md proves it)."""
        attr, op = self.expr.left, self.expr.op
        return PrevRelationship(self.var, Cmp(FLIPPED[op], Attr(self.var, attr.attr, prev=True),
                                              Attr(self.var, attr.attr)))

    @property
    def attributes(self) -> tuple[str, ...]:
        return expr_attributes(self.expr)

    def __str__(self) -> str:
        return str(self.expr)


def _running(expr: Expr, refs: list, aggs: list) -> RunningCondition:
    """A condition with a running aggregate, in one of the forms the engine runs exactly:
    ``p.a > max(prev(p.a))`` (or >=), ``p.a < min(prev(p.a))`` (or <=)."""
    running = [g for g in aggs if isinstance(g, Agg) and g.running]
    if len(running) != len(aggs):
        raise ConditionSyntaxError("a running aggregate (max(prev(p.a))) cannot be mixed with "
                                   "aggregates of the whole match in one condition")
    if isinstance(expr, Cmp) and isinstance(expr.right, Attr) and isinstance(expr.left, Agg):
        expr = Cmp(FLIPPED[expr.op], expr.right, expr.left)
    ok = (isinstance(expr, Cmp) and isinstance(expr.left, Attr) and not expr.left.prev
          and isinstance(expr.right, Agg) and (expr.right.func, expr.op) in RUNNING
          and expr.left.var == expr.right.var and expr.left.attr == expr.right.attr)
    if not ok:
        raise ConditionSyntaxError(
            f"running aggregates are supported as p.a > max(prev(p.a)) (or >=) and p.a < "
            f"min(prev(p.a)) (or <=): each event above (below) every earlier one of its "
            f"group; {expr} is not one of them yet")
    return RunningCondition(expr.left.var, expr)


Condition = Property | Relationship | PrevRelationship | AggregateCondition | RunningCondition


# --------------------------------------------------------------------------------------
# Tokenizer and parser
# --------------------------------------------------------------------------------------
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
    def __init__(self, text: str):
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
                if tok.word != "prev":
                    raise ConditionSyntaxError(
                        f"unknown function {tok.text!r}: the functions are prev(v.attr) "
                        f"and the aggregates {', '.join(AGGREGATES)}", tok.column)
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

    def aggregate(self, tok: _Token) -> Agg:
        """``count(v)``, ``count(v.attr)`` or ``func(v.attr)`` at ``tok``."""
        func = tok.word
        self.i += 2
        inner = self.peek()
        if inner is not None and inner.word == "prev":
            self.i += 1
            self.take("punct", "(", "'(' after prev")
            ref = self.ref()
            self.take("punct", ")", "')' closing prev(")
            self.take("punct", ")", f"')' closing {func}(")
            return Agg(func, ref.var, ref.attr, running=True)
        if inner is not None and inner.word in AGGREGATES:
            raise ConditionSyntaxError(f"an aggregate inside {func}(): aggregates do not "
                                       "nest", inner.column)
        name = self.take("name", what="a variable name")
        attr = None
        if func != "count" or (self.peek() is not None and self.peek().text == "."):
            self.take("punct", ".", f"'.' after {name.text} (write {func}({name.text}.attr))")
            attr = self.take("name", what="an attribute name after '.'").text
        self.take("punct", ")", f"')' closing {func}(")
        self.used.append((name.text, name.column))
        return Agg(func, name.text, attr)

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
        return Ref(name.text, attr.text)


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
            if x.attr != TIME or x.func == "count":
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
        return "time" if e.attr == TIME else "value"
    return None


def value_kind(e: Expr) -> str:
    """'time', 'duration' or 'value' for a well-typed value expression (``time_problems``
    found nothing)."""
    leaf = _leaf_kind(e)
    if leaf is not None:
        return leaf
    if isinstance(e, Agg):
        return "time" if e.attr == TIME and e.func not in ("count",) else "value"
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


def _canonical(e: Expr) -> Expr:
    """A comparison written literal-first or prev-second is flipped (one form per
    condition: the pattern version does not depend on how it was written)."""
    if isinstance(e, Cmp):
        left_attr = any(True for _ in attributes_of(e.left)) or \
            any(True for _ in aggregates_of(e.left)) or any(True for _ in match_times_of(e.left))
        right_attr = any(True for _ in attributes_of(e.right)) or \
            any(True for _ in aggregates_of(e.right)) or \
            any(True for _ in match_times_of(e.right))
        if right_attr and not left_attr:
            return Cmp(FLIPPED[e.op], e.right, e.left)
        if isinstance(e.right, Attr) and e.right.prev and not (
                isinstance(e.left, Attr) and e.left.prev):
            return Cmp(FLIPPED[e.op], e.right, e.left)
    return e


def classify(expr: Expr) -> Condition:
    """A conjunct as a property, relationship or prev relationship."""
    refs = list(attributes_of(expr))
    aggs = list(aggregates_of(expr)) + list(match_times_of(expr))
    if any(isinstance(g, Agg) and g.running for g in aggs):
        return _running(expr, refs, aggs)
    if aggs:
        if any(a.prev for a in refs):
            raise ConditionSyntaxError("prev() and an aggregate in one condition: prev() "
                                       "compares consecutive events, an aggregate reads the "
                                       "whole match; write them as two conditions")
        return AggregateCondition(expr, tuple(dict.fromkeys(
            [g.var for g in aggs if isinstance(g, Agg)] + [a.var for a in refs])))
    names = list(dict.fromkeys(a.var for a in refs))
    if not names:
        raise ConditionSyntaxError("a condition must name a variable (v.attr)")
    if len(names) > 2:
        raise ConditionSyntaxError(f"a condition relates at most two variables; this one "
                                   f"names {', '.join(names)}: split it")
    if any(a.prev for a in refs):
        if len(names) > 1:
            prevs = {a.var for a in refs if a.prev}
            v = sorted(prevs)[0]
            other = next(n for n in names if n != v)
            raise ConditionSyntaxError(f"prev({v}.attr) compares consecutive events of {v}; "
                                       f"the other side must be {v}.attr, not {other}.attr")
        if all(a.prev for a in refs) and isinstance(expr, Cmp):
            raise ConditionSyntaxError("prev(v.attr) must be compared with an attribute of "
                                       "the same variable, e.g. prev(p.value) < p.value")
        return PrevRelationship(names[0], expr)
    if len(names) == 1:
        return Property(names[0], expr)
    return Relationship(expr, (names[0], names[1]))


def parse_conditions(text: str) -> list[tuple[Condition, list[tuple[str, int]]]]:
    """Parse one entry of ``conditions``: its conjuncts, each with the variables it names
    (and their columns). Raises ``ConditionSyntaxError`` for text outside the grammar."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionSyntaxError("empty condition")
    parser = _Parser(text)
    out = []
    for item in parser.entry():
        _check_types(item)
        item = _canonical(item)
        cond = classify(item)
        names = {a.var for a in attributes_of(item)} | {g.var for g in aggregates_of(item)}
        out.append((cond, [(v, c) for v, c in parser.used if v in names]))
    return out


def parse_value(text: str) -> tuple[Expr, list[tuple[str, int]]]:
    """A value expression (a measure: aggregates, attributes, literals, arithmetic) with
    the variables it names and their columns. Raises ``ConditionSyntaxError``."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionSyntaxError("empty expression")
    parser = _Parser(text)
    expr = parser.value()
    tok = parser.peek()
    if tok is not None:
        raise ConditionSyntaxError(f"unexpected {tok.text!r}: a measure is one value such as "
                                   "sum(p.value) or c.value, not a condition", tok.column)
    _check_types(expr)
    return expr, parser.used


def measure_value(expr: Expr, binding: dict[str, list[dict]]) -> Any:
    """The value of a measure for a match (the reference): ``binding`` maps each variable
    to its events' attributes in processing order."""
    return value_of(expr, match_env(expr, binding))


def match_env(expr: Expr, binding: dict[str, list[dict]]) -> dict:
    """The values ``expr`` reads of a whole match: singletons' attributes, aggregates and
    the match's first and last event times."""
    env: dict = {}
    for a in attributes_of(expr):
        env[(a.var, False)] = binding[a.var][0]
    for g in aggregates_of(expr):
        env[g] = aggregate(g.func, g.attr, binding[g.var])
    wanted = list(match_times_of(expr))
    times = [e[TIME] for es in binding.values() for e in es] if wanted else []
    for t in wanted:
        env[t] = (min(times) if t.which == "start_ts" else max(times)) if times else None
    return env


def parse_condition(text: str) -> tuple[Condition, list[tuple[str, int]]]:
    """One condition (an entry without a top-level ``and``)."""
    found = parse_conditions(text)
    if len(found) != 1:
        raise ConditionSyntaxError(f"{len(found)} conditions joined by 'and': parse them "
                                   "with parse_conditions")
    return found[0]
