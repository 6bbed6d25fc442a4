"""Conditions and values of pattern-based windows (Kawashima, Kitagawa, Li, sections
4.2-4.3; docs/windows.md): the START, TERMINATION, ITERATION and FILTER conditions,
the ``select`` values and the ``where`` filter of a ``kind: window`` pattern file.

Same tokens, literals, operators and three-valued logic as the SES conditions
(``conditions.py``), but an attribute is written alone (``location``: the event being
tested) or under a sequence function::

    first(a)  the window's first event      prev(a)  its last buffered event, or the
    last(a)   its last event (select, where)          first while nothing is buffered
    iter()    events tested so far           num()    events in the window
    TRUE, FALSE                              ts       the event's time (seconds since
                                                      1970 in arithmetic)

The parser builds the frozen trees of ``conditions.py``: ``Seq`` is an ``Attr`` whose
``var`` is the role (``cur``, ``first``, ``prev``, ``last``), ``Counter`` one whose
``var`` is ``#``, so the reference evaluator (``conditions.truth``) reads them from an
environment keyed by role. Where a function may appear is checked per clause.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.language.conditions.evaluation import truth, value_of
from jobs.core.language.conditions.expressions import (
    Arith,
    Attr,
    BoolOp,
    Cmp,
    ConditionSyntaxError,
    Expr,
    In,
    Lit,
    Neg,
    Not,
    Truth,
    attributes_of,
)
from jobs.core.language.conditions.parser import _Parser
from jobs.core.language.conditions.typecheck import _check_types

FUNCTIONS = ("first", "prev", "last", "iter", "num")
TS = "ts"  # the event's time: seconds since 1970 in arithmetic, a timestamp when selected


@dataclass(frozen=True)
class Seq(Attr):
    """Attribute ``attr`` of the event in role ``var`` (cur, first, prev, last)."""

    def __str__(self) -> str:
        return self.attr if self.var == "cur" else f"{self.var}({self.attr})"


@dataclass(frozen=True)
class Counter(Attr):
    """``iter()`` or ``num()`` (``attr``); ``var`` is ``#``."""

    def __str__(self) -> str:
        return f"{self.attr}()"


def counter(name: str) -> Counter:
    return Counter("#", name)


class _WindowParser(_Parser):
    def predicate(self) -> Expr:
        tok = self.peek()
        if tok is not None and tok.word in ("true", "false"):
            nxt = self.peek(1)
            if nxt is None or nxt.word in ("and", "or") or nxt.text == ")":
                self.i += 1
                self.node(tok)
                return Truth(tok.word == "true")
        return super().predicate()

    def primary(self) -> Expr:
        tok = self.peek()
        if tok is None or tok.kind != "name":
            return super().primary()
        self.node(tok)
        nxt = self.peek(1)
        if nxt is not None and nxt.text == "(":
            if tok.word not in FUNCTIONS:
                raise ConditionSyntaxError(f"unknown function {tok.text!r}: use "
                                           f"{', '.join(f + '()' for f in FUNCTIONS)}",
                                           tok.column)
            self.i += 2
            if tok.word in ("iter", "num"):
                self.take("punct", ")", f"')': {tok.word}() takes no argument")
                return counter(tok.word)
            name = self.take("name", what=f"an attribute name inside {tok.word}(")
            self.take("punct", ")", f"')' closing {tok.word}(")
            return Seq(tok.word, name.text)
        if tok.word in ("and", "or", "not", "in", "true", "false"):
            raise ConditionSyntaxError(f"expected a value, found the keyword {tok.text!r}",
                                       tok.column)
        self.i += 1
        after = self.peek()
        if after is not None and after.text == ".":
            raise ConditionSyntaxError(f"write the attribute alone ({tok.text}) or under a "
                                       f"function (first({tok.text})): a window has no "
                                       "variables", after.column)
        return Seq("cur", tok.text)


def _functions(e: Expr) -> set[str]:
    return {a.attr + "()" if isinstance(a, Counter) else a.var for a in attributes_of(e)}


def _check_clause(e: Expr, clause: str) -> Expr:
    """Refuse the functions a clause cannot use (docs/windows.md); in ``start``,
    ``first(a)`` is the event itself."""
    used = _functions(e)
    refused = {
        "start": {"prev": "prev() in start: the first event has no previous one",
                  "last": "last() is only for select and where",
                  "iter()": "iter() in start: nothing was tested yet",
                  "num()": "num() in start: the window does not exist yet"},
        "select": {"prev": "prev() is only for the conditions, not select",
                   "cur": "an attribute alone in select: write first(a) or last(a)"},
        "where": {"prev": "prev() is only for the conditions, not where",
                  "cur": "an attribute alone in where: write first(a) or last(a)"},
    }.get(clause, {"last": "last() is only for select and where: the window has no last "
                           "event before it closes"})
    for name, why in refused.items():
        if name in used:
            raise ConditionSyntaxError(why)
    return _as_current(e) if clause == "start" else e


def _as_current(e: Expr) -> Expr:
    """``first(a)`` -> ``a`` (in start the tested event is the first event)."""
    if isinstance(e, Seq):
        return Seq("cur", e.attr)
    if isinstance(e, (Neg, Not)):
        return type(e)(_as_current(e.item))
    if isinstance(e, (Arith, Cmp)):
        return type(e)(e.op, _as_current(e.left), _as_current(e.right))
    if isinstance(e, In):
        return In(_as_current(e.item), e.values, e.negated)
    if isinstance(e, BoolOp):
        return BoolOp(e.op, tuple(_as_current(x) for x in e.items))
    return e


def _text(value) -> str:
    if isinstance(value, bool):  # YAML reads TRUE / FALSE as booleans
        return "TRUE" if value else "FALSE"
    if not isinstance(value, str) or not value.strip():
        raise ConditionSyntaxError("empty condition")
    return value


def parse_window_condition(value, clause: str) -> Expr:
    """One of start, termination, iteration, filter or where, as a tree."""
    parser = _WindowParser(_text(value))
    expr = parser.disjunction()
    tok = parser.peek()
    if tok is not None:
        raise ConditionSyntaxError(f"unexpected {tok.text!r}: join conditions with and / or",
                                   tok.column)
    _check_types(expr)
    return _check_clause(expr, clause)


def parse_window_value(value, clause: str = "select") -> Expr:
    """One ``select`` value: first(a), last(a), iter(), num(), literals, arithmetic."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return Lit(value)
    parser = _WindowParser(_text(value))
    expr = parser.value()
    tok = parser.peek()
    if tok is not None:
        raise ConditionSyntaxError(f"unexpected {tok.text!r}: a select value is one "
                                   "expression, e.g. last(ts) - first(ts)", tok.column)
    _check_types(expr)
    return _check_clause(expr, clause)


def read_attributes(e: Expr) -> set[str]:
    """The source attributes an expression reads (``ts`` is the event time)."""
    return {a.attr for a in attributes_of(e) if isinstance(a, Seq) and a.attr != TS}


def uses(e: Expr, *names: str) -> bool:
    """Whether ``e`` uses any of the roles / counters ``names`` (e.g. 'prev', 'iter()')."""
    return bool(_functions(e) & set(names))


# -- the reference evaluation (the oracle's) ----------------------------------------------
def event_values(event) -> dict:
    """An event's attributes as a window condition reads them (``ts`` in seconds)."""
    return {**event.attrs, TS: event.ts / 1e9}


def holds(e: Expr, env: dict) -> bool:
    """Whether a window condition holds; ``env`` maps a role (cur, first, prev, last) to
    an event's values and ``#`` to {'iter': n, 'num': n}. Unknown does not hold."""
    return truth(e, {(k, False): v for k, v in env.items()}) is True


def value(e: Expr, env: dict):
    """A select value (None: missing)."""
    return value_of(e, {(k, False): v for k, v in env.items()})
