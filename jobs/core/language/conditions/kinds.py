"""The kinds of conditions (match-window paper, Def. 1): a conjunct naming one variable is
a property, two a relationship, one under ``prev()`` a prev relationship; with an
aggregate, an aggregate (or running) condition over the whole match."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.language.conditions.evaluation import aggregate, compare, match_env, truth
from jobs.core.language.conditions.expressions import (
    FLIPPED,
    Agg,
    Attr,
    Cmp,
    ConditionSyntaxError,
    Expr,
    Lit,
    aggregates_of,
    attributes_of,
    expr_attributes,
    match_times_of,
)


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
    """A condition over every pair of events bound to two different variables; or, with
    both ``variables`` the same group variable (``w.a = w.a``, ``w.a < w.a``), over every
    pair of that group's events, the earlier on the left (docs/semantics.md)."""

    expr: Expr
    variables: tuple[str, str]

    @classmethod
    def compare(cls, left: Ref, op: str, right: Ref) -> "Relationship":
        return cls(Cmp(op, Attr(left.var, left.attr), Attr(right.var, right.attr)),
                   (left.var, right.var))

    @property
    def reflexive(self) -> bool:
        """A relationship of a group variable with itself (a reflexive member of Θ+eq)."""
        return self.variables[0] == self.variables[1]

    def pairs(self, xs: list, ys: list):
        """The pairs it holds over: every (event of ``variables[0]``, event of
        ``variables[1]``); for a reflexive one, every two events of the group, the earlier
        first (``xs``, ``ys``: the same list, in processing order)."""
        if self.reflexive:
            return ((xs[i], xs[j]) for i in range(len(xs)) for j in range(i + 1, len(xs)))
        return ((a, b) for a in xs for b in ys)

    def holds(self, a: dict, b: dict) -> bool:
        """``a``: an event of ``variables[0]``, ``b``: one of ``variables[1]`` (reflexive:
        ``a`` the earlier)."""
        if self.reflexive:
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

    @property
    def monotone(self) -> bool:
        """One of the forms equivalent to a prev relationship (``p.a > max(prev(p.a))``)."""
        e = self.expr
        return (isinstance(e, Cmp) and isinstance(e.left, Attr) and isinstance(e.right, Agg)
                and e.right.running and (e.right.func, e.op) in RUNNING
                and e.left.attr == e.right.attr)

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
    if ok:
        return RunningCondition(expr.left.var, expr)
    return running_condition(expr, running[0].var)


def running_condition(expr: Expr, var: str) -> RunningCondition:
    """A condition of each event of group ``var`` against an aggregate of the events bound
    to it before: ``p.a op k * agg(p.b) + c`` in any linear arrangement."""
    refs = list(attributes_of(expr))
    if any(a.var != var or a.prev for a in refs) or any(
            g.var != var or g.distinct for g in aggregates_of(expr)) or any(
            True for _ in match_times_of(expr)):
        raise ConditionSyntaxError(
            f"a running condition reads the current event of one group and aggregates of "
            f"the events bound to it before (e.g. p.value >= 1.5 * first(p.value), p.value > "
            f"avg(p.value) + 10, p.ts - first(p.ts) <= 2d), without distinct, prev() or "
            f"start_ts/end_ts; {expr} is not of that form")
    return RunningCondition(var, expr)


Condition = Property | Relationship | PrevRelationship | AggregateCondition | RunningCondition


def pairwise(cond: Condition) -> Relationship | None:
    """``w.a φ w.a`` (one variable, one attribute, no prev) as a relationship of ``w`` with
    itself, or None; the caller decides (a group variable: every pair of its events)."""
    if isinstance(cond, Property):
        s = _simple(cond.expr)
        if s is not None and isinstance(s[2], Attr) and not s[0].prev and not s[2].prev \
                and s[0].var == s[2].var and s[0].attr == s[2].attr:
            return Relationship(cond.expr, (cond.var, cond.var))
    return None


def known(var: str, attr: str) -> Property:
    """``v.a = v.a`` on one event: true iff the attribute is known (three-valued logic)."""
    return Property(var, Cmp("=", Attr(var, attr), Attr(var, attr)))



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
