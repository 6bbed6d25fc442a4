"""Summary statistics of match windows (match-window paper, Def. 5, Theorem 3), in Python.

The engine runs these counters inside ``kernels.scan_windows``; this module is their
readable reference, tested against the paper's Fig. 5 and, on random inputs, against the
kernel (``reference_candidates``). A window is handed to the matcher only when it is
complete and the necessary match conditions hold (Theorem 2, conditions 4-7, with 6-7
tested through the counters kept as bit vectors).

Two deliberate departures from the paper's pseudo-code, both needed for exact results:

* a counter is decremented on dequeue only if the leaving event was counted for it (the
  paper decrements for every variable whose properties the event satisfies, which can
  zero a counter that a later event still supports); counts cleared by a reset carry an
  older epoch and are ignored;
* after the input ends every remaining window is tested, not only the leading run of
  windows that pass (Algorithm 1's final while-loop would stop at the first failing one).
"""

from __future__ import annotations

from jobs.core.language.pattern import Pattern


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


def reference_candidates(pattern: Pattern, ts: list[int], masks: list[int],
                         segments: list[tuple[int, int]], tau: int) -> list[int]:
    """The first events of the candidate windows, window by window with
    ``SummaryStatistics`` (each segment is one partition in processing order)."""
    m = len(pattern.variables)
    first_set = sum(1 << v.index for v in pattern.sets[0])
    out = []
    for a, b in segments:
        s = SummaryStatistics(pattern)
        counted: dict[int, tuple] = {}
        j = a
        for i in range(a, b):
            while j < b and ts[j] - ts[i] <= tau:
                counted[j] = s.add(masks[j])
                j += 1
            if j - i >= m and masks[i] & first_set and s.all_positive():
                out.append(i)
            s.remove(counted.pop(i))
    return out
