"""Optional steps (docs/semantics.md, optional steps): ``t?``, ``p*``, ``p{0,n}`` and
``{optional: [a, b]}``.

Definition. Let U be a pattern's optional units (``Pattern.optional_units``: each optional
variable outside optional sets, each optional set as a whole). For every subset S of U,
the *expansion* P_S is the conjunctive pattern in which the units of S are present (each
optional variable with its minimum raised to 1) and the others are absent: removed with
every condition about them alone, every relationship they take part in (a relationship
with an unbound variable holds), and in the conditions on the whole match an aggregate of
an absent variable replaced by its value over no events (``count`` 0, the others missing)
and an attribute of one by a missing value. Sets left empty disappear, so the sets around
them become consecutive; a negated set keeps its place between the nearest present sets
(``[not next n]`` with no set left before it says nothing). Every expansion keeps the
pattern's partition attributes X as properties ``v.A = v.A`` (an event without A is in no
match, as for any pattern with X).

ZStream's matches of P are the union over S of the matches of P_S, each binding the
absent variables to no event; so a match with ``t`` unbound is a match of its own even
where an event could have been bound (Definition 2 read with the bound 0). SES's are the
union of SESExec over the P_S, keeping for each first event only the matches that no
other match with that first event strictly contains (the automaton's maximality across
the expansions). Each P_S is an ordinary pattern, so filtering, partitioning and the
necessary conditions stay exact for it; the union is what the engine runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jobs.core.language.conditions.evaluation import truth
from jobs.core.language.conditions.expressions import (
    Agg,
    Attr,
    Expr,
    Lit,
    aggregates_of,
    attributes_of,
    match_times_of,
    rebuilt,
)
from jobs.core.language.conditions.kinds import (
    AggregateCondition,
    Ref,
    Relationship,
    known,
)
from jobs.core.language.pattern import Negation, Pattern

MAX_UNITS = 6  # 2^6 expansions


@dataclass(frozen=True)
class Expansion:
    """P_S: ``pattern`` (conjunctive, every variable binds at least one event), the
    variables of S, and for each of its variables the index of the same variable in P."""

    pattern: Pattern
    present: frozenset[str]
    origin: tuple[int, ...]


def expansions(pattern: Pattern) -> tuple[Expansion, ...]:
    """Every P_S that can match (a condition on the whole match that is false once the
    absent variables are read as empty removes its expansion)."""
    units = pattern.optional_units
    out = []
    for mask in range(1 << len(units)):
        absent = {n for k, u in enumerate(units) if not mask >> k & 1 for n in u}
        e = _expand(pattern, frozenset(absent))
        if e is not None:
            out.append(e)
    return tuple(out)


def _expand(pattern: Pattern, absent: frozenset[str]) -> Expansion | None:
    kept = [(i, [v for v in s if v.name not in absent]) for i, s in enumerate(pattern.sets)]
    kept = [(i, vs) for i, vs in kept if vs]
    new_of = {old: k for k, (old, _) in enumerate(kept)}
    sets, origin = [], []
    for k, (_, vs) in enumerate(kept):
        row = []
        for v in vs:
            row.append(replace(v, set_index=k, index=len(origin), min=max(v.min, 1)))
            origin.append(v.index)
        sets.append(tuple(row))
    index = len(origin)
    negations = []
    for neg in pattern.negations:
        before = None if neg.before is None else max(
            (new_of[i] for i in new_of if i <= neg.before), default=None)
        after = None if neg.after is None else min(
            (new_of[i] for i in new_of if i >= neg.after), default=None)
        if neg.next and before is None:
            continue
        negations.append(Negation(replace(neg.var, index=index), before, after, neg.next))
        index += 1
    kept_negated = {n.var.name for n in negations}
    conditions = []
    for c in pattern.conditions:
        names = set(_names(c))
        if names & (absent | ({n.var.name for n in pattern.negations} - kept_negated)):
            if not isinstance(c, AggregateCondition):
                continue
            expr = without(c.expr, absent)
            left = [g.var for g in aggregates_of(expr)] + [a.var for a in attributes_of(expr)]
            if not left and not any(True for _ in match_times_of(expr)):
                if truth(expr, {}) is True:
                    continue
                return None  # never holds without these variables
            c = AggregateCondition(expr, tuple(dict.fromkeys(left)))
        conditions.append(c)
    present = {v.name for s in sets for v in s}
    for a in pattern.partition_attributes:  # an event without X is in no match
        conditions += [known(v, a) for v in sorted(present)]
        if len(present) == 1 and sets[0][0].group:  # its events agree on X (Θ+eq's p.A = p.A)
            v = sets[0][0].name
            conditions.append(Relationship.compare(Ref(v, a), "=", Ref(v, a)))
    out = replace(pattern, sets=tuple(sets), negations=tuple(negations),
                  conditions=tuple(dict.fromkeys(conditions)), condition_lines=(),
                  next_sets=tuple(new_of[i] for i in pattern.next_sets
                                  if i in new_of and new_of[i] > 0),
                  optional_sets=(), measures=(), examples=(), after_match="all",
                  partition_keys=pattern.partition_attributes)
    return Expansion(out, frozenset(present), tuple(origin))


def _names(c) -> tuple[str, ...]:
    if isinstance(c, Relationship):
        return c.variables
    if isinstance(c, AggregateCondition):
        return c.variables
    return (c.var,)


def without(e: Expr, absent: frozenset[str]) -> Expr:
    """``e`` with the absent variables read as empty: ``count`` 0, other aggregates and
    attributes missing."""
    def leaf(x: Expr) -> Expr:
        if isinstance(x, Agg) and x.var in absent:
            return Lit(0) if x.func == "count" else Lit(None)
        if isinstance(x, Attr) and x.var in absent:
            return Lit(None)
        return x

    return rebuilt(e, leaf)


def optional_problems(pattern: Pattern) -> list[str]:
    """Why a pattern's optional steps cannot run exactly: nothing required, too many
    units, or an optional variable that is the only link of the partition attributes."""
    if not pattern.optional_units:
        return []
    if not pattern.min_events:
        return ["every variable is optional, so the pattern could match no event at all: "
                "make one step required"]
    if len(pattern.optional_units) > MAX_UNITS:
        return [f"{len(pattern.optional_units)} optional steps: at most {MAX_UNITS}"]
    out = []
    for e in expansions(pattern):
        if len(e.present) < 2:
            continue  # one variable: X holds as the properties v.A = v.A
        own = replace(e.pattern, partition_keys=None).partition_attributes  # its own links
        lost = [a for a in pattern.partition_attributes if a not in own]
        if lost:
            gone = [v.name for v in pattern.variables if v.name not in e.present]
            out.append(f"{', '.join(gone)} may be absent, so it cannot be the only link on "
                       f"{', '.join(lost)}: relate the other variables directly (e.g. "
                       f"{_example(e, lost[0])})")
            break
    return out


def _example(e: Expansion, attr: str) -> str:
    names = [v.name for v in e.pattern.variables]
    return f"{names[0]}.{attr} = {names[-1]}.{attr}"
