"""The lazy two-phase strategy: match windows (match-window paper, sections 4-5).

``match_windows`` is Algorithm 1, Match(P, E, A): events in processing order are filtered
(Theorem 1), routed to the window of their partition (Def. 6), and a window is handed to
the matching algorithm A only when it is complete (the next event is more than τ after its
first event) and the necessary match conditions hold (Theorem 2, conditions 4-7, with 6-7
tested through the summary statistics of Def. 5 / Theorem 3 kept as bit vectors).

Two deliberate departures from the paper's pseudo-code, both needed for exact results:

* a counter is decremented on dequeue only if the leaving event was counted for it (the
  paper decrements for every variable whose properties the event satisfies, which can
  zero a counter that a later event still supports); counts cleared by a reset carry an
  older epoch and are ignored;
* after the input ends every remaining window is tested, not only the leading run of
  windows that pass (Algorithm 1's final while-loop would stop at the first failing one).

Windows of all partitions are closed in time order as soon as the input passes first+τ,
so memory holds only the events of the last τ, never a whole partition.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from .events import Event
from .matches import Match
from .pattern import Pattern


class SummaryStatistics:
    """S = <(v1, cnt1), ..., (vm, cntm)> over a match window, with the bit vectors of
    section 5: ē per event, s̄ (bit i set iff cnt_i = 0), b̄_i (the variables of B_{i-1})."""

    def __init__(self, pattern: Pattern):
        self.m = len(pattern.variables)
        self.set_of = [v.set_index for v in pattern.variables]
        self.prev_mask = []  # b̄ of each variable's set
        self.later_mask = []  # variables of sets after each variable's set
        for v in pattern.variables:
            prev = [w.index for w in pattern.variables if w.set_index == v.set_index - 1]
            later = [w.index for w in pattern.variables if w.set_index > v.set_index]
            self.prev_mask.append(sum(1 << i for i in prev))
            self.later_mask.append(sum(1 << i for i in later))
        self.cnt = [0] * self.m
        self.epoch = [0] * self.m
        self.zero = (1 << self.m) - 1  # s̄

    def add(self, emask: int) -> tuple:
        """Count an entering event; returns what to undo when it leaves."""
        zero = self.zero
        counted = []
        for i in range(self.m):
            if emask >> i & 1 and not zero & self.prev_mask[i]:
                counted.append((i, self.epoch[i]))
        for i, _ in counted:
            self.cnt[i] += 1
            self.zero &= ~(1 << i)
        return tuple(counted)

    def remove(self, counted: tuple) -> None:
        """Uncount the leaving first event; a counter reaching 0 resets the later sets."""
        for i, epoch in counted:
            if epoch != self.epoch[i]:
                continue  # cleared by a reset since
            self.cnt[i] -= 1
            if self.cnt[i] == 0:
                self.zero |= 1 << i
                later = self.later_mask[i]
                for j in range(self.m):
                    if later >> j & 1 and self.cnt[j]:
                        self.cnt[j] = 0
                        self.epoch[j] += 1
                        self.zero |= 1 << j

    def all_positive(self) -> bool:
        """Theorem 3: cnt_1 > 0 ∧ ... ∧ cnt_m > 0 implies conditions 6 and 7."""
        return self.zero == 0

    def counters(self) -> tuple[int, ...]:
        return tuple(self.cnt)


@dataclass
class _Window:
    events: deque = field(default_factory=deque)  # (event, ē, counted)
    stats: SummaryStatistics | None = None


@dataclass(frozen=True)
class Pruning:
    filter: bool = True
    partition: bool = True
    conditions: bool = True


Algorithm = Callable[[list[Event], list[int]], tuple[list[Match], int]]


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def match_windows(pattern: Pattern, events: list[Event], algorithm: Algorithm,
                  masks: list[int], pruning: Pruning = Pruning(),
                  stats: dict | None = None, on_window=None,
                  peak_key: str = "max_instances") -> list[Match]:
    """Algorithm 1, Match(P, E, A), over ``events`` in processing order.

    ``masks`` holds ē of every event (Theorem 1). ``algorithm(window, masks)`` is A(P, W): it returns the matches that start at the
    window's first event and its peak of work items (live automaton instances, or partial
    matches for ZStream), reported as ``peak_key``. ``on_window`` (tests)
    sees every window considered: (events, counters, conditions 4-5, counters positive).
    """
    tau = pattern.tau
    m = len(pattern.variables)
    first_set = sum(1 << v.index for v in pattern.sets[0])
    attrs = pattern.partition_attributes if pruning.partition else ()
    windows: dict[tuple, _Window] = {}
    heap: list[tuple[int, int, tuple]] = []  # (first ts, tie, key) of non-empty windows
    tie = 0
    out: list[Match] = []
    st = {"events": len(events), "events_after_filter": 0, "partitions": 0, "windows": 0,
          "candidate_windows": 0, "matcher_calls": 0, peak_key: 0,
          "max_window": 0, "max_buffered": 0}
    buffered = 0

    def close_first(w: _Window) -> None:
        nonlocal buffered
        evs = w.events
        st["windows"] += 1
        first, first_mask, counted = evs[0]
        cond45 = len(evs) >= m and bool(first_mask & first_set)
        positive = w.stats.all_positive() if w.stats is not None else True
        if on_window is not None:
            on_window([x[0] for x in evs], w.stats.counters() if w.stats else None, cond45,
                      positive)
        if not pruning.conditions or (cond45 and positive):
            st["candidate_windows"] += 1
            st["matcher_calls"] += 1
            found, peak = algorithm([x[0] for x in evs], [x[1] for x in evs])
            out.extend(found)
            if peak > st[peak_key]:
                st[peak_key] = peak
        evs.popleft()
        buffered -= 1
        if w.stats is not None:
            w.stats.remove(counted)

    def close_until(w: _Window, now: int | None) -> None:
        while w.events and (now is None or now - w.events[0][0].ts > tau):
            close_first(w)

    filtering = pruning.filter
    single = attrs[0] if len(attrs) == 1 else None
    kept = 0
    for e, mask in zip(events, masks):
        if filtering and not mask:
            continue
        if single is not None:
            key = e.attrs.get(single)
            if key is None or key != key:  # missing or NaN equals nothing: no match has e
                continue
        elif attrs:
            key = tuple(e.attrs.get(a) for a in attrs)
            if any(_missing(k) for k in key):
                continue
        else:
            key = ()
        kept += 1
        # close every window (of any partition) that e shows to be complete
        while heap and e.ts - heap[0][0] > tau:
            _, _, k = heapq.heappop(heap)
            w = windows[k]
            close_until(w, e.ts)
            if w.events:
                tie += 1
                heapq.heappush(heap, (w.events[0][0].ts, tie, k))
        w = windows.get(key)
        if w is None:
            w = windows[key] = _Window(stats=SummaryStatistics(pattern) if pruning.conditions
                                       else None)
        if not w.events:
            tie += 1
            heapq.heappush(heap, (e.ts, tie, key))
        counted = w.stats.add(mask) if w.stats is not None else ()
        w.events.append((e, mask, counted))
        buffered += 1
        if len(w.events) > st["max_window"]:
            st["max_window"] = len(w.events)
        if buffered > st["max_buffered"]:
            st["max_buffered"] = buffered
    for w in windows.values():
        close_until(w, None)
    st["events_after_filter"] = kept
    st["partitions"] = len(windows)
    if stats is not None:
        for k, v in st.items():
            stats[k] = max(stats.get(k, 0), v) if k.startswith("max_") else v
    return out
