"""After-match skip (``after_match:``, docs/semantics.md) on a call's matches: per partition,
in the order of ``oracle.preference``, a match is kept when its first event comes after
the previous kept match's last event (``past_last_event``), its first event
(``to_next_event``), or not before its first/last event bound to v (``to_first v``,
``to_last v``). Rows of the event columns are in processing order, so an event's row is
its place in that order. The reference is ``oracle.select_episodes``."""

from __future__ import annotations

import numpy as np


def kept_episodes(c, cols, batch, begin: np.ndarray | None = None) -> np.ndarray:
    """The indices of ``batch``'s matches that ``after_match`` keeps, in the order taken.
    ``begin``: per row, the row its partition's walk starts at (a night resuming from a
    kept match, ``pipeline.match.episode_seeds``); earlier first events are skipped."""
    rule = c.pattern.after_match
    words = rule.split()
    n = len(batch)
    if not n:
        return np.zeros(0, np.int64)
    code, present = c.partition_codes(cols)
    code = np.where(present, code, -1)
    starts = batch.offsets[:-1]
    last = np.maximum.reduceat(batch.rows, starts)
    names = [v.name for v in c.pattern.variables]
    target = names.index(words[1]) if len(words) == 2 else -1
    keys = []
    for k in range(n):
        a, b = batch.offsets[k], batch.offsets[k + 1]
        rows, variables = batch.rows[a:b], batch.variables[a:b]
        per_var = tuple(tuple(rows[variables == v].tolist()) for v in range(len(names)))
        keys.append((int(code[batch.first[k]]), int(batch.first[k]), -(b - a), int(last[k]),
                     per_var, k))
    keys.sort()
    out = []
    partition, after, at_least = None, -1, -1
    for part, first, _, end, per_var, k in keys:
        if begin is not None and first < begin[first]:
            continue
        if part != partition:
            partition, after, at_least = part, -1, -1
        if not (first > after and first >= at_least):
            continue
        out.append(k)
        if rule == "past_last_event":
            after = end
        else:
            after = first
            if target >= 0 and per_var[target]:
                bound = per_var[target]
                at_least = bound[0] if words[0] == "to_first" else bound[-1]
    return np.array(out, np.int64)
