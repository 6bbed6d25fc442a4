"""``first_ever: [a]`` (docs/semantics.md, "First ever"): variable a binds only the first
event of its partition (values of X; processing order: ts, then event id) that fits a's
own properties Θp_a, in the whole history the caller passes.

The reference form: the events given are the whole history; each one gets the attribute
``first_ever_attribute(a)`` (True on the first, False elsewhere) and the pattern's
``marked()`` form tests it as one more property of a. Spark's runs get the same attribute
from the per-partition state instead (``jobs.pipeline.match.first_ever``).
"""

from __future__ import annotations

from jobs.core.language.events import Event
from jobs.core.language.pattern import Pattern, first_ever_attribute


def key_of(e: Event, attributes) -> tuple | None:
    """The event's values of ``attributes`` (None: one is missing, so the event is in no
    partition of them)."""
    key = tuple(e.values.get(a) for a in attributes)
    return None if any(v is None or v != v for v in key) else key


def first_events(pattern: Pattern, events: list[Event]) -> dict[str, dict[tuple, Event]]:
    """Per ``first_ever`` variable, each partition's first event fitting its properties."""
    out: dict[str, dict[tuple, Event]] = {}
    for v in pattern.first_ever:
        props = pattern.properties[v]
        firsts: dict[tuple, Event] = {}
        for e in sorted(events, key=lambda x: (x.ts, x.id)):
            key = key_of(e, pattern.partition_attributes)
            if key is not None and key not in firsts and all(p.holds(e.values) for p in props):
                firsts[key] = e
        out[v] = firsts
    return out


def mark(pattern: Pattern, events: list[Event]) -> list[Event]:
    """The events with each ``first_ever`` variable's attribute set (new objects, same
    ids, times and ``seq``)."""
    if not pattern.first_ever:
        return events
    firsts = {v: {id(e) for e in f.values()} for v, f in first_events(pattern, events).items()}
    out = []
    for e in events:
        attrs = dict(e.attrs)
        for v, chosen in firsts.items():
            attrs[first_ever_attribute(v)] = id(e) in chosen
        out.append(Event(e.id, e.ts, attrs, e.seq))
    return out
