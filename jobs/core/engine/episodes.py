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
    first = np.asarray(batch.first, np.int64)
    part = np.where(present, code, -1)[first].astype(np.int64)
    starts = batch.offsets[:-1]
    last = np.maximum.reduceat(batch.rows, starts).astype(np.int64)
    size = np.diff(batch.offsets).astype(np.int64)
    target = [v.name for v in c.pattern.variables].index(words[1]) if len(words) == 2 else -1
    order = _preference(batch, part, first, size, last, len(c.pattern.variables))
    if begin is not None:
        order = order[first[order] >= begin[first[order]]]
    out = []
    partition, after, at_least = None, -1, -1
    for k, p, f, end in zip(order.tolist(), part[order].tolist(), first[order].tolist(),
                            last[order].tolist()):
        if p != partition:
            partition, after, at_least = p, -1, -1
        if not (f > after and f >= at_least):
            continue
        out.append(k)
        if rule == "past_last_event":
            after = end
        else:
            after = f
            if target >= 0:
                bound = _bound(batch, k, target)
                if bound:
                    at_least = bound[0] if words[0] == "to_first" else bound[-1]
    return np.array(out, np.int64)


def _bound(batch, k: int, var: int) -> tuple[int, ...]:
    """The rows match ``k`` binds to variable ``var``, in the batch's order."""
    a, b = batch.offsets[k], batch.offsets[k + 1]
    return tuple(batch.rows[a:b][batch.variables[a:b] == var].tolist())


def _preference(batch, part, first, size, last, variables: int) -> np.ndarray:
    """The matches in ``oracle.preference`` order within each partition: by first event,
    the longer first, then by last event, then by each variable's rows (``_rows_key``),
    then by their index."""
    k = np.arange(len(first))
    order = np.lexsort((k, last, -size, first, part))
    keys = np.stack([part, first, size, last])[:, order]
    same = np.all(keys[:, 1:] == keys[:, :-1], axis=0)  # a place equal to the one before
    if not same.any():
        return order
    run = np.cumsum(np.concatenate(([True], ~same)))  # the places of equal keys share a run
    tied = np.zeros(len(order), bool)
    tied[1:] |= same
    tied[:-1] |= same
    places = np.flatnonzero(tied)
    sizes = size[order[places]]
    for s in np.unique(sizes):  # a run's matches have one size
        at = places[sizes == s]
        m = order[at]
        key = _rows_key(batch, m, int(s), variables)
        order[at] = m[np.lexsort((m, *key.T[::-1], run[at]))]
    return order


def _rows_key(batch, m: np.ndarray, size: int, variables: int) -> np.ndarray:
    """Per match of ``m`` (each of ``size`` rows), one row of numbers that sorts as the
    tuple of each variable's rows does: the rows of variable 0 plus one, in the batch's
    order, a 0 (a shorter tuple sorts first), then those of variable 1, and so on."""
    at = batch.offsets[m][:, None] + np.arange(size)
    var = batch.variables[at].astype(np.int64)
    var = np.where((var >= 0) & (var < variables), var, variables)  # bound to none: last
    values = np.concatenate([batch.rows[at].astype(np.int64) + 1,
                             np.zeros((len(m), variables), np.int64)], axis=1)
    place = np.concatenate([var * (size + 1) + np.arange(size), np.broadcast_to(
        np.arange(variables) * (size + 1) + size, (len(m), variables))], axis=1)
    return np.take_along_axis(values, np.argsort(place, axis=1, kind="stable"), axis=1)
