"""Partition facts (docs/semantics.md, "Partition facts"): ``partition.first_ts``,
``partition.last_ts`` and ``partition.count``, the first and last time and the number of
events of the partition (the events with the match's values of X; without X, the whole
source), as of the events the run reads: the whole history.

In a pattern file they are written as attributes of ``partition``; the loader reads them
as attributes of a bound variable (``anchored``: the condition's own variable, else the
pattern's first required one), since every event of a match has the same partition. The
reference marks each event with its partition's facts (times as ``Instant``).
"""

from __future__ import annotations

from jobs.core.language.conditions.expressions import (
    PARTITION,
    PARTITION_FACTS,
    Agg,
    Attr,
    Expr,
    Instant,
    is_fact,
    rebuilt,
)
from jobs.core.language.events import Event
from jobs.core.language.first_ever import key_of


def anchored(e: Expr, anchor: str) -> Expr:
    """``e`` with ``partition.x`` read as ``anchor``'s attribute of that fact."""
    def leaf(x: Expr) -> Expr:
        if isinstance(x, Attr) and x.var == PARTITION:
            return Attr(anchor, x.attr, x.prev)
        if isinstance(x, Agg) and x.var == PARTITION:
            return Agg(x.func, anchor, x.attr, running=x.running, distinct=x.distinct)
        return x

    return rebuilt(e, leaf)


def facts_of(pattern) -> set[str]:
    """The partition facts a pattern reads (their attribute names)."""
    return {a for a in pattern.attributes if is_fact(a)}


def mark_facts(pattern, events: list[Event]) -> list[Event]:
    """The events with their partition's facts (the events given are the whole history;
    an event without a value of X is in no partition and gets none)."""
    used = facts_of(pattern)
    if not used:
        return events
    attrs = pattern.partition_attributes
    parts: dict[tuple, list[int]] = {}
    for e in events:
        key = key_of(e, attrs)
        if key is not None:
            parts.setdefault(key, []).append(e.ts)
    out = []
    for e in events:
        got = dict(e.attrs)
        ts = parts.get(key_of(e, attrs))
        if ts is not None:
            got.update({PARTITION_FACTS["first_ts"]: Instant(min(ts)),
                        PARTITION_FACTS["last_ts"]: Instant(max(ts)),
                        PARTITION_FACTS["count"]: len(ts)})
        out.append(Event(e.id, e.ts, {k: v for k, v in got.items()
                                      if not is_fact(k) or k in used}, e.seq))
    return out
