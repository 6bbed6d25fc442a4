"""Matches (substitutions) and the literal check of the match-window paper's Definition 2.

A match binds every variable to a non-empty sequence of distinct events in processing order
(one event for a singleton). Definition 2, conditions 1-3:

1. I(Θγ) holds: properties for every bound event, relationships for every pair of events of
   the two variables, ``prev`` relationships for every consecutive pair of a group;
2. every event bound to a variable of B_i is strictly before (on ``ts``) every event bound to
   a variable of B_{i+1};
3. the span between the first and the last event is at most τ.

Kleene bounds (docs/language.md): a variable ``p{lo,hi}`` binds lo to hi events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from jobs.core.language.events import Event, format_ts
from jobs.core.language.measures import reference_measures
from jobs.core.language.pattern import Pattern


@dataclass(frozen=True)
class Match:
    pattern: str
    bindings: tuple[tuple[str, tuple[Event, ...]], ...]  # in the pattern's variable order
    alternative: int | None = None  # which alternative of a disjunction matched
    # the pattern's measures ((name, value), ...; None: it has none): computed, not identity
    measures: tuple[tuple[str, Any], ...] | None = field(default=None, compare=False)

    @cached_property
    def events(self) -> tuple[Event, ...]:
        return tuple(sorted((e for _, es in self.bindings for e in es), key=lambda e: e.seq))

    @property
    def start(self) -> Event:
        return self.events[0]

    @property
    def end(self) -> Event:
        return self.events[-1]

    @cached_property
    def key(self) -> tuple:
        """Identity of a match: which event ids are bound to which variable."""
        return tuple((v, tuple(e.id for e in es)) for v, es in self.bindings)

    def sort_key(self) -> tuple:
        return (self.start.ts, self.start.id, self.end.ts, self.alternative or 0, self.key)

    def to_json(self) -> str:
        out = {"pattern": self.pattern}
        if self.alternative is not None:
            out["alternative"] = self.alternative
        out.update(start=format_ts(self.start.ts), end=format_ts(self.end.ts),
                   bindings={v: [e.id for e in es] for v, es in self.bindings})
        if self.measures is not None:
            out["measures"] = dict(self.measures)
        return json.dumps(out)

    def __hash__(self) -> int:
        return hash((self.alternative, self.key))

    def __eq__(self, other) -> bool:
        return isinstance(other, Match) and (self.alternative, self.key) == \
            (other.alternative, other.key)


def make_match(pattern: Pattern, binding: dict[str, list[Event]]) -> Match:
    """The match of ``binding``, with its measures by the reference evaluator."""
    bindings = tuple((v.name, tuple(sorted(binding[v.name], key=lambda e: e.seq)))
                     for v in pattern.variables)
    measures = None
    if pattern.measures:
        values = reference_measures(pattern, {v: [e.values for e in es] for v, es in bindings})
        measures = tuple(values.items())
    return Match(pattern.name, bindings, pattern.alternative, measures)


def with_measure_columns(m: Match, names: tuple[str, ...]) -> Match:
    """A disjunction's match with every measure column of the file (None where its
    alternative has no such measure)."""
    if not names:
        return m
    own = dict(m.measures or ())
    return replace(m, measures=tuple((n, own.get(n)) for n in names))


def sorted_matches(matches) -> list[Match]:
    return sorted(set(matches), key=Match.sort_key)


def aggregates_hold(pattern: Pattern, binding: dict[str, list[Event]]) -> bool:
    """Every aggregate condition of ``pattern`` holds for the match ``binding``
    (docs/semantics.md, aggregates): each reads the attributes of the events bound to its
    variables, in processing order."""
    if not pattern.aggregate_conditions:
        return True
    attrs = {v: [e.values for e in sorted(es, key=lambda e: e.seq)] for v, es in binding.items()}
    return all(c.holds(attrs) for c in pattern.aggregate_conditions)


def is_match(pattern: Pattern, binding: dict[str, list[Event]]) -> bool:
    """Definition 2 (conditions 1-3) of the match-window paper, checked literally."""
    variables = pattern.variables
    # a substitution: one binding per variable, non-empty, one event for a singleton,
    # every event used at most once
    if set(binding) != {v.name for v in variables}:
        return False
    used = []
    for v in variables:
        seq = binding[v.name]
        if not seq or len(seq) < v.min or (v.max is not None and len(seq) > v.max):
            return False
        used.extend(e.seq for e in seq)
    if len(used) != len(set(used)):
        return False
    ordered = {v: sorted(es, key=lambda e: e.seq) for v, es in binding.items()}
    # condition 1
    for v in variables:
        for prop in pattern.properties[v.name]:
            if not all(prop.holds(e.values) for e in ordered[v.name]):
                return False
        seq = ordered[v.name]
        for prev in pattern.declared_prev_relationships[v.name]:
            if not all(prev.holds(a.values, b.values) for a, b in zip(seq, seq[1:])):
                return False
        for r in pattern.running_conditions[v.name]:
            if not all(r.holds([x.values for x in seq[:i]], seq[i].values)
                       for i in range(1, len(seq))):
                return False
    if not relationships_hold(pattern, ordered):
        return False
    # condition 2
    if not set_order_holds(pattern, ordered):
        return False
    # condition 3
    stamps = [e.ts for es in ordered.values() for e in es]
    return max(stamps) - min(stamps) <= pattern.tau


def relationships_hold(pattern: Pattern, binding: dict[str, list[Event]]) -> bool:
    """Condition 1 for the relationships whose two variables are both in ``binding``:
    every pair of their events."""
    for rel in pattern.relationships:
        x, y = rel.variables
        if x in binding and y in binding:
            for a, b in rel.pairs(binding[x], binding[y]):
                if not rel.holds(a.values, b.values):
                    return False
    return True


def set_order_holds(pattern: Pattern, binding: dict[str, list[Event]]) -> bool:
    """Condition 2 for the variables in ``binding``: B_i strictly before B_{i+1}."""
    bound = [v for v in pattern.variables if v.name in binding]
    for v in bound:
        for w in bound:
            if w.set_index == v.set_index + 1:
                if not all(a.ts < b.ts for a in binding[v.name] for b in binding[w.name]):
                    return False
    return True
