"""``history:`` conditions (docs/semantics.md, "History conditions"): how many events of
the partition's whole history, fitting a condition, lie before or after the event bound to
an anchor variable, compared with a bound.

The reference form, like ``first_ever``'s: the events given are the whole history; each
gets the attribute ``history_attribute(k)`` (does condition k hold with the anchor bound
to it?) and the pattern's ``marked()`` form tests it as a property of the anchor.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from jobs.core.language.events import Event
from jobs.core.language.first_ever import key_of
from jobs.core.language.first_ever import mark as mark_first_ever
from jobs.core.language.partition_facts import mark_facts
from jobs.core.language.pattern import HistoryCondition, Pattern, history_attribute


def count_in_range(h: HistoryCondition, times: list[int], t: int) -> int:
    """How many of ``times`` (sorted) lie in ``h``'s range around time ``t``."""
    if h.direction == "before":
        return bisect_left(times, t) if not h.by else bisect_right(times, t - h.by)
    return len(times) - (bisect_right(times, t) if not h.by else bisect_left(times, t + h.by))


def mark(pattern: Pattern, events: list[Event]) -> list[Event]:
    """The events with every mark the pattern's ``marked()`` form reads: ``first_ever``'s
    and each history condition's (new objects, same ids, times and ``seq``)."""
    events = mark_facts(pattern, mark_first_ever(pattern, events))
    if not pattern.history:
        return events
    times = []
    for h in pattern.history:
        by_key: dict[tuple, list[int]] = {}
        for e in events:
            key = key_of(e, h.same or pattern.partition_attributes)
            if key is not None and all(p.holds(e.values) for p in h.where):
                by_key.setdefault(key, []).append(e.ts)
        times.append({key: sorted(ts) for key, ts in by_key.items()})
    out = []
    for e in events:
        attrs = dict(e.attrs)
        for k, h in enumerate(pattern.history):
            key = key_of(e, h.same or pattern.partition_attributes)
            attrs[history_attribute(k)] = key is not None and h.holds(
                count_in_range(h, times[k].get(key, []), e.ts))
        out.append(Event(e.id, e.ts, attrs, e.seq))
    return out

