"""The funnel of a pattern over a list of events, by brute force (docs/semantics.md,
"Funnels"; the steps and the order of the stops: ``language.funnel_steps``).

A window reached step k when Definition 2 has a match of P_k with the window's event as
its first: the oracle's ``all_matches`` of each step's pattern, read plainly.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.core.language.events import Event
from jobs.core.language.funnel_steps import (
    FunnelRow,
    FunnelStep,
    WindowOutcome,
    classify,
    funnel_rows,
    funnel_steps,
    negation_label,
)
from jobs.core.reference.matches import Match
from jobs.core.reference.oracle import (
    all_matches,
    negation_interval,
    next_event,
    positions,
    preference,
    ses_exec,
    witness,
)


def window_outcomes(pattern, events: list[Event]) -> list[WindowOutcome]:
    """Each window's outcome (``start``: the event's ``seq``), ``events`` in processing
    order. A window holds the events of its first event's partition (values of its
    alternative's X) only, also when a step is tried without a condition that relates X."""
    def starts(p):
        def key(e):
            return tuple(e.values.get(a) for a in p.partition_attributes)

        return {m.start.seq for m in all_matches(p, events)
                if all(key(x) == key(m.start) for x in m.events)}

    return classify(funnel_steps(pattern), starts, skipped=skipped(pattern, events))


def skipped(pattern, events: list[Event]) -> set[int]:
    """The windows (``seq`` of their first events) where the pattern's own matcher finds
    a match but ``after_match`` keeps none."""
    if pattern.after_match == "all":
        return set()
    run = ses_exec if pattern.matcher == "ses" else all_matches
    return {m.start.seq for m in run(replace(pattern, after_match="all"), events)} - \
        {m.start.seq for m in run(pattern, events)}


def funnel(pattern, events: list[Event]) -> list[FunnelRow]:
    """The funnel of ``pattern`` over ``events``: one row per step of each alternative."""
    by_seq = {e.seq: e for e in events}
    attrs = {alt.alternative: alt.partition_attributes for alt in pattern.alternatives}
    return funnel_rows(funnel_steps(pattern), window_outcomes(pattern, events),
                       lambda o: tuple(by_seq[o.start].values.get(a) for a in attrs[o.alternative]))


def negation_witnesses(step: FunnelStep, label: str, start: Event, events: list[Event]
                       ) -> tuple[Match, list[Event]] | None:
    """Why negated set ``label`` of ``step`` stopped the window of ``start``: the first
    binding of the step's positive pattern from ``start`` (the preferred one) and the events
    inside its interval that fit the negated variable (``events``: the window's partition,
    processing order). None when no such binding is found."""
    neg = next((n for n in step.pattern.negations if negation_label(n) == label), None)
    if neg is None:
        return None
    near = [e for e in events if abs(e.ts - start.ts) <= step.pattern.tau]
    found = sorted((m for m in all_matches(step.positive, near) if m.start.seq == start.seq),
                   key=preference)
    if not found:
        return None
    m, name = found[0], neg.var.name
    binding = dict(m.bindings)
    if neg.next:
        e = next_event(step.pattern, neg, m, events, positions(step.pattern, events))
        return m, [e] if e is not None and witness(step.pattern, name, e, binding) else []
    lo, lo_in, hi, hi_in = negation_interval(step.pattern, neg, m)
    inside = [e for e in events if (e.ts > lo or (lo_in and e.ts == lo))
              and (e.ts < hi or (hi_in and e.ts == hi))]
    return m, [e for e in inside if witness(step.pattern, name, e, binding)]
