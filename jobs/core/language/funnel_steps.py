"""The steps of a pattern's funnel (docs/semantics.md, "Funnels"): how far a window got.

Definition. For a conjunctive pattern P with positive sets B1..BK, step k's pattern P_k has
the sets B1..Bk, the conditions among their variables (properties, relationships, prev
and running conditions, aggregate conditions over them only), the ``[next b]`` marks and
consecutive groups of those sets, the negated sets whose interval closes by Bk (between
Bi and Bj with j ≤ k) and, at the last step only, the leading and trailing negated sets
(their intervals depend on the whole match: its last event, its first event + τ). P_K
is P without its after-match rule. P_k keeps P's window τ and partition attributes X.

A window (match-window paper, Def. 3: an event e and the events of its partition after
it within τ) *reached step k* when some binding of P_k satisfies P_k (Definition 2)
with e as its first event. Every condition of P_k is one of P_{k+1}, so a window that
reached step k+1 reached step k: the counts of a funnel never grow.

What *stopped* a window at step k (reached k, not k+1) is named once, and always by
something whose removal alone lets P_{k+1} bind from e, in this order: a negated set of
step k+1 (several together when the rest of P_{k+1} binds but no one of them left out is
enough); else, for a variable v of step k+1 that has no event (``no v``, or too few:
``fewer than n v``) after a binding of P_k within τ fitting its own conditions, the first
of those conditions that, left out, lets P_{k+1} bind (``no v (c)``; v then binds any
event of the pattern, ``among``); else the first
condition of step k+1 that relates its variables to others (file order; then
``[next]``, consecutive); else the window's length and the sets' order (``WITHIN``: no
single condition). At the last step, a window with a match that ``after_match`` did not
keep is ``AFTER_MATCH``. Conditions are named as the file writes them: a history
condition, ``first ever v``, ``partition.count`` (``shown``), never a mark's attribute.
Each of these reads only events that fit some variable, so the nightly pass (filtered
events) and ``explain`` (every event) name the same stop.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

from jobs.core.language.conditions.expressions import (
    FACT_NAMES,
    Attr,
    BoolOp,
    conjoined,
    rebuilt,
)
from jobs.core.language.conditions.kinds import (
    AggregateCondition,
    Property,
    Ref,
    Relationship,
    known,
)
from jobs.core.language.pattern import Negation, Pattern, reads_marks

WITHIN = "within/order"  # the stop that no single condition explains
AFTER_MATCH = "skipped by after_match"  # a match the after-match rule did not keep
_MARK = re.compile(r"\b\w+\.(__\w+?) = True\b")
_FACT = re.compile(r"\b\w+\.(__partition_\w+)\b")


def shown(cond, pattern: Pattern) -> str:
    """A condition (or its text) as the pattern file says it: a mark of ``first_ever`` or
    of a history condition by what it stands for, a partition fact as ``partition.NAME``."""
    text = str(cond)
    marks = dict(pattern.marks)
    text = _MARK.sub(lambda m: marks.get(m.group(1), m.group(0)), text)
    return _FACT.sub(lambda m: f"partition.{FACT_NAMES.get(m.group(1), m.group(1))}", text)


@dataclass(frozen=True)
class Requirement:
    """What a step asks of one variable v of its set: ``lone`` (P_{k-1} followed by v
    alone, with the conditions on v only) binds from a window that has events fitting v;
    ``own``: v's own conditions in P_k, ``label`` names them all; ``without``: (``no v
    (c)``, P_k without c and with ``guard``) for each c of them; ``guard``: what v may
    still bind without them (``among``)."""

    variable: str
    label: str  # "no v (its conditions)" or "fewer than n v (...)"
    lone: Pattern
    own: tuple
    guard: tuple[Property, ...]
    without: tuple[tuple[str, Pattern], ...]


@dataclass(frozen=True)
class FunnelStep:
    """Step ``step`` (1, 2, ...) of ``alternative`` (None: a conjunctive pattern):
    ``variables`` (the positive set it adds), ``negations`` (the negated sets it checks),
    ``pattern`` (P_k), ``positive`` (P_k without those negated sets) and ``relaxations``
    ((label, P_k without that one condition) for each condition the step adds)."""

    step: int
    alternative: int | None
    variables: tuple[str, ...]
    negations: tuple[str, ...]
    pattern: Pattern
    positive: Pattern
    relaxations: tuple[tuple[str, Pattern], ...]  # (label, P_k without that condition)
    negation_checks: tuple[tuple[str, Pattern], ...] = ()  # (label, P_k without it)
    requirements: tuple[Requirement, ...] = ()
    # (variables, (label, P_k without every condition of their own)) for 2+ variables
    together: tuple[tuple[frozenset[str], tuple[str, Pattern]], ...] = ()

    @property
    def label(self) -> str:
        return ", ".join(self.variables)


def _names(c) -> tuple[str, ...]:
    return c.variables if isinstance(c, (Relationship, AggregateCondition)) else (c.var,)


def negation_label(neg: Negation) -> str:
    return str(neg.var).replace("not ", "not next " if neg.next else "not ", 1)


def _prefix(alt: Pattern, k: int, with_negations: bool) -> tuple[Pattern, tuple[Negation, ...]]:
    """P_k (``with_negations`` False: without the negated sets step k adds) and the
    negated sets step k adds."""
    last = k == len(alt.sets)
    sets, index = [], 0
    for s in alt.sets[:k]:
        row = []
        for v in s:
            row.append(replace(v, index=index))
            index += 1
        sets.append(tuple(row))
    kept, new = [], []
    for neg in alt.negations:
        closes = neg.after if neg.after is not None and neg.before is not None else None
        if closes is None and not last:
            continue  # leading and trailing: the whole match decides their interval
        if closes is not None and closes >= k:
            continue
        if closes is None or closes == k - 1:
            new.append(neg)
            if not with_negations:
                continue
        kept.append(Negation(replace(neg.var, index=index), neg.before, neg.after, neg.next))
        index += 1
    present = {v.name for s in sets for v in s} | {n.var.name for n in kept}
    conditions = [c for c in alt.conditions if set(_names(c)) <= present]
    for a in alt.partition_attributes:  # an event without X is in no window
        conditions += [known(v.name, a) for s in sets for v in s]
        if sum(map(len, sets)) == 1 and sets[0][0].group:
            v = sets[0][0].name
            conditions.append(Relationship.compare(Ref(v, a), "=", Ref(v, a)))
    out = replace(alt, sets=tuple(sets), negations=tuple(kept),
                  conditions=tuple(dict.fromkeys(conditions)), condition_lines=(),
                  next_sets=tuple(i for i in alt.next_sets if i < k),
                  optional_sets=tuple(i for i in alt.optional_sets if i < k),
                  measures=(), examples=(), after_match="all",
                  partition_keys=alt.partition_attributes)
    return out, tuple(new)


def _relaxations(step_pattern: Pattern, before: Pattern, k: int, names: Pattern):
    """(label, P_k without it) for each condition step k adds to P_{k-1} that relates
    its variables to others (a variable's own conditions are its requirement); labels
    as ``names`` (the pattern) writes them."""
    old = set(before.conditions) if before is not None else set()
    mine = {v.name for v in step_pattern.sets[k - 1]}
    added = [c for c in step_pattern.conditions if c not in old]
    related = [c for c in added if len(set(_names(c))) > 1 and set(_names(c)) & mine]
    for cond in related:
        rest = tuple(x for x in step_pattern.conditions if x != cond)
        try:
            yield shown(cond, names), replace(step_pattern, conditions=rest)
        except (TypeError, ValueError):
            continue
    if k - 1 in step_pattern.next_sets:
        yield f"next {', '.join(v.name for v in step_pattern.sets[k - 1])}", replace(
            step_pattern, next_sets=tuple(x for x in step_pattern.next_sets if x != k - 1))
    for v in step_pattern.sets[k - 1]:
        if v.consecutive:
            yield str(v), replace(step_pattern, sets=tuple(tuple(
                replace(w, consecutive=False) if w.name == v.name else w for w in s)
                for s in step_pattern.sets))


def _requirements(alt: Pattern, k: int, full: Pattern):
    """(``no v`` or ``fewer than n v``, P_{k-1} followed by v alone with the conditions on
    v only, and (``no v (c)``, P_k without c) for each such condition c) for each variable
    v of step k's set: a window from which the lone pattern has no binding lacks events
    that fit v after the earlier steps within τ; the stop names the condition of v whose
    removal lets P_k bind."""
    for v in alt.sets[k - 1]:
        own = tuple(c for c in alt.conditions if v.name not in _names(c)
                    or set(_names(c)) == {v.name})
        lone = replace(alt, sets=alt.sets[:k - 1] + ((replace(v, consecutive=False),),),
                       conditions=own, next_sets=tuple(i for i in alt.next_sets if i < k - 1),
                       optional_sets=tuple(i for i in alt.optional_sets if i < k - 1),
                       partition_keys=alt.partition_attributes)
        pattern, _ = _prefix(lone, k, with_negations=False)
        head = f"no {v.name}" if v.min <= 1 else f"fewer than {v.min} {v.name}"
        mine = tuple(c for c in full.conditions if set(_names(c)) == {v.name}
                     and c in alt.conditions)
        guard = among(alt, v.name)
        without = tuple((f"{head} ({shown(c, alt)})", replace(full, conditions=tuple(
            x for x in full.conditions if x != c) + guard)) for c in mine)
        label = f"{head} ({conjoined(shown(c, alt) for c in mine)})" if mine else head
        yield Requirement(v.name, label, pattern, mine, guard, without)


def among(alt: Pattern, name: str) -> tuple[Property, ...]:
    """What variable ``name`` may still bind when one of its own conditions is left out:
    an event of the pattern, one that fits some variable's conditions on one event (the
    marks of whole-history conditions aside): the events the nightly pass filters to
    (Theorem 1), so that its funnel and one over every event name the same stops. Empty
    when some variable fits every event."""
    options = []
    for w in alt.variables + alt.negated:
        props = [p.expr for p in alt.properties[w.name] if not reads_marks(p)]
        if not props:
            return ()

        def renamed(x, w=w.name):
            return Attr(name, x.attr, x.prev) if isinstance(x, Attr) and x.var == w else x

        options.append(rebuilt(props[0] if len(props) == 1 else BoolOp("and", tuple(props)),
                               renamed))
    return (Property(name, options[0] if len(options) == 1 else BoolOp("or", tuple(options))),)


def _together(requirements: tuple[Requirement, ...], full: Pattern):
    """For each two or more variables of a step (a set of at most four), the label and P_k
    without every condition of their own: what stops a window that lacks events for
    several of them at once."""
    if not 2 <= len(requirements) <= 4:
        return
    for size in range(2, len(requirements) + 1):
        for group in itertools.combinations(requirements, size):
            gone = {c for r in group for c in r.own}
            guards = tuple(dict.fromkeys(g for r in group for g in r.guard))
            yield frozenset(r.variable for r in group), (
                " and ".join(r.label for r in group),
                replace(full, conditions=tuple(c for c in full.conditions if c not in gone)
                        + guards))


def _without_negation(full: Pattern, neg: Negation) -> Pattern:
    """P_k without negated set ``neg`` and its conditions."""
    name = neg.var.name
    index = len(full.variables)
    kept = [Negation(replace(n.var, index=index + i), n.before, n.after, n.next)
            for i, n in enumerate(n for n in full.negations if n.var.name != name)]
    return replace(full, negations=tuple(kept),
                   conditions=tuple(c for c in full.conditions if name not in _names(c)))


def funnel_steps(pattern) -> tuple[FunnelStep, ...]:
    """Every step of every alternative of ``pattern`` (a sequence pattern), in order."""
    out = []
    for alt in pattern.alternatives:
        before = None
        for k in range(1, len(alt.sets) + 1):
            full, new = _prefix(alt, k, with_negations=True)
            positive, _ = _prefix(alt, k, with_negations=False)
            relaxed = tuple(_relaxations(full, before, k, alt))
            alone = tuple((negation_label(n), _without_negation(full, n)) for n in new) \
                if len(new) > 1 else tuple((negation_label(n), positive) for n in new)
            needs = tuple(_requirements(alt, k, full))
            out.append(FunnelStep(k, alt.alternative, tuple(v.name for v in alt.sets[k - 1]),
                                  tuple(negation_label(n) for n in new), full, positive,
                                  relaxed, alone, needs, tuple(_together(needs, full))))
            before = full
    return tuple(out)


@dataclass(frozen=True)
class WindowOutcome:
    """How far the window of first event ``start`` (an event's ``seq`` or row) got in
    ``alternative``: the last step it ``reached`` (≥ 1), and what ``stopped`` it at the
    next step (None: it reached the last)."""

    start: int
    alternative: int | None
    reached: int
    stopped: str | None


def classify(steps: tuple[FunnelStep, ...], starts, candidates=(),
             skipped=frozenset()) -> list[WindowOutcome]:
    """Each window's outcome, given ``starts(P)``: the first events (``seq``s or rows) of
    the windows in which P has a binding (Definition 2). Every window that reached step 1
    of an alternative gets one outcome for it, and so does each window of ``candidates``
    that did not (``reached`` 0, with what stopped it at step 1); ``skipped``: the windows
    whose matches ``after_match`` did not keep (stopped at the last step)."""
    out = []
    by_alt: dict[int | None, list[FunnelStep]] = {}
    for s in steps:
        by_alt.setdefault(s.alternative, []).append(s)
    memo: dict[int, set] = {}

    def got(p: Pattern) -> set:
        if id(p) not in memo:
            memo[id(p)] = set(starts(p))
        return memo[id(p)]

    for alt, chain in by_alt.items():
        reached = {e: 1 for e in got(chain[0].pattern)}
        for s in chain[1:]:
            for e in got(s.pattern):
                if reached.get(e) == s.step - 1:
                    reached[e] = s.step
        for e in candidates:
            reached.setdefault(e, 0)
        for e in sorted(reached):
            k = reached[e]
            if k == len(chain):
                out.append(WindowOutcome(e, alt, k, AFTER_MATCH if e in skipped else None))
            else:
                out.append(WindowOutcome(e, alt, k, stop_of(chain[k], e, got)))
    return out


def stop_of(step: FunnelStep, e: int, got) -> str:
    """The label of what stopped window ``e`` at ``step`` (the module's order): always
    something whose removal alone lets the step's pattern bind from ``e``, else WITHIN."""
    if e in got(step.positive):
        for label, without in step.negation_checks:
            if e in got(without):
                return label
        return " and ".join(step.negations)  # together (their removal: the positive)
    lacking = [r for r in step.requirements if e not in got(r.lone)]
    for r in lacking:
        for label, relaxed in r.without:
            if e in got(relaxed):
                return label
    if len(lacking) > 1:
        names = frozenset(r.variable for r in lacking)
        for label, relaxed in (x for group, x in step.together if group == names):
            if e in got(relaxed):
                return label
    for label, relaxed in step.relaxations:
        if e in got(relaxed):
            return label
    return WITHIN


@dataclass(frozen=True)
class FunnelRow:
    """One step of a funnel: the partitions and windows that reached it, and of its
    windows that did not reach the next step, how many each condition stopped."""

    alternative: int | None
    step: int
    variables: tuple[str, ...]
    negations: tuple[str, ...]
    partitions: int
    windows: int
    stopped: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict:
        return {"step": self.step, "alternative": self.alternative,
                "variables": list(self.variables), "negations": list(self.negations),
                "partitions": self.partitions, "windows": self.windows,
                "stopped": dict(self.stopped)}


def funnel_rows(steps: tuple[FunnelStep, ...], outcomes: list[WindowOutcome],
                partition_of) -> list[FunnelRow]:
    """The funnel of ``outcomes`` (``partition_of(outcome)``: its window's partition)."""
    rows = []
    for s in steps:
        mine = [o for o in outcomes if o.alternative == s.alternative and o.reached >= s.step]
        stopped: dict[str, int] = {}
        for o in mine:
            if o.reached == s.step and o.stopped is not None:
                stopped[o.stopped] = stopped.get(o.stopped, 0) + 1
        rows.append(FunnelRow(s.alternative, s.step, s.variables, s.negations,
                              len({partition_of(o) for o in mine}), len(mine),
                              tuple(sorted(stopped.items(), key=lambda kv: (-kv[1], kv[0])))))
    return rows
