"""Steps that must come next (docs/language.md, next steps), on a batch of matches.

``[next b]``: the set's first event sits at the position right after the last event of the
sets before it. The SES automaton checks it when it fires the transition into the set (a
``tr_new`` of 2 in its tables); for ZStream's matches, which are every binding, it is a
filter: ``NextFilter.keep`` drops a binding whose positions leave a gap.

``[not next n]``: the event right after the last event of the sets up to the negation (in
the match's partition, numbered before any filter) must not fit ``n``: its properties and
its relationships with every event bound to a related variable; trailing, only an event up
to ``start_ts + τ`` counts. A filter of the matches of P⁺ for both matchers, as negation is.
An event the Theorem-1 filter dropped fits no variable, so it is never a witness.
The reference is ``oracle.next_steps_hold`` and ``oracle.next_event``.
"""

from __future__ import annotations

import numpy as np

from jobs.core.engine.columns import EventColumns
from jobs.core.engine.compiled import CompiledPattern
from jobs.core.engine.programs import TRUE, vector_truth3
from jobs.core.language.conditions.expressions import Attr

NONE = np.iinfo(np.int64).min // 4  # no position: next to nothing


def consecutive_ranks(c: CompiledPattern, cols: EventColumns, masks: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(ranks, row of each variable) for the ``consecutive`` groups: each event's rank among
    the events of its partition that fit the group's properties (``masks``: the property
    bits; default ``c.masks(cols)``), in processing order; -1 rows for the other variables.
    Any run of events that holds every event between its first and last gives the same
    differences of ranks, so a time slice or a filtered group ranks exactly."""
    groups = [v for v in c.pattern.variables if v.consecutive]
    rank_of = np.full(c.m, -1, np.int64)
    ranks = np.zeros((len(groups), cols.n if groups else 0), np.int64)
    if not groups:
        return ranks, rank_of
    masks = c.masks(cols) if masks is None else masks
    code, present = c.partition_codes(cols)
    code = np.where(present, code, -1)
    order = np.argsort(code, kind="stable")
    start = np.r_[True, code[order][1:] != code[order][:-1]]
    for k, v in enumerate(groups):
        rank_of[v.index] = k
        fit = ((masks[order] >> v.index) & 1).astype(np.int64)
        total = np.cumsum(fit)
        base = np.maximum.accumulate(np.where(start, total - fit, 0))
        ranks[k, order] = total - base - 1
        ranks[k, order[~present[order]]] = -(1 << 40)  # no partition: next to nothing
    return ranks, rank_of


class NextFilter:
    """Keeps the matches of a batch whose ``next`` steps and ``consecutive`` groups hold;
    ``automaton``: the SES automaton checked ``[next b]`` and the consecutive groups as it
    bound the events, so only ``[not next n]`` is left to check."""

    def __init__(self, c: CompiledPattern, cols: EventColumns, positions: np.ndarray | None,
                 automaton: bool = False):
        self.c, self.cols = c, cols
        self.pos = positions if positions is not None else np.zeros(cols.n, np.int64)
        self.sets = () if automaton else c.pattern.next_sets
        # one next event is never k >= 2 witnesses (explain relaxes a negation so)
        self.negations = tuple(n for n in c.pattern.next_negations if n.var.min <= 1)
        self.ranks, self.rank_of = (np.zeros((0, 0), np.int64), np.full(c.m, -1, np.int64)) \
            if automaton else consecutive_ranks(c, cols, None)
        code, present = c.partition_codes(cols)
        partitioned = c.pattern.position_rule == "partition" and bool(c.partition_attributes)
        self.code = np.where(present, code, -1) if partitioned else np.zeros(cols.n, np.int64)
        ok = self.pos > NONE
        self.key_rows = np.flatnonzero(ok)
        keys = self._key(self.code[self.key_rows], self.pos[self.key_rows])
        order = np.argsort(keys, kind="stable")
        self.key_rows, self.keys = self.key_rows[order], keys[order]
        self.fits = {n.var.name: c.fits(n.var.name, cols) for n in self.negations}
        self.index = {v.name: v.index for v in c.pattern.variables + c.pattern.negated}

    @staticmethod
    def _key(code: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return code.astype(np.int64) * (1 << 40) + pos

    def keep(self, batch) -> np.ndarray:
        n = len(batch)
        keep = np.ones(n, np.bool_)
        if not n:
            return keep
        match = np.repeat(np.arange(n), np.diff(batch.offsets))
        sets = self.c.set_of[batch.variables]
        pos = self.pos[batch.rows]
        for k in self.sets:
            before = np.full(n, NONE)
            np.maximum.at(before, match[sets < k], pos[sets < k])
            first = np.full(n, np.iinfo(np.int64).max)
            np.minimum.at(first, match[sets == k], pos[sets == k])
            keep &= first == before + 1
        for neg in self.negations:
            keep &= ~self._witnessed(neg, batch, match, sets, pos)
        for v, k in enumerate(self.rank_of):
            if k < 0:
                continue
            sel = batch.variables == v  # a group's rows are in processing order
            r, mm = self.ranks[k][batch.rows[sel]], match[sel]
            gap = (mm[1:] == mm[:-1]) & (r[1:] != r[:-1] + 1)
            keep[mm[1:][gap]] = False
        return keep

    def _witnessed(self, neg, batch, match, sets, pos) -> np.ndarray:
        """Per match, whether the event right after its last event of the sets up to
        ``neg.before`` fits the negated variable."""
        n = len(batch)
        upto = sets <= neg.before
        last_pos = np.full(n, NONE)
        np.maximum.at(last_pos, match[upto], pos[upto])
        last_row = np.full(n, -1)
        at_last = upto & (pos == last_pos[match])
        last_row[match[at_last]] = batch.rows[at_last]
        target = self._key(self.code[last_row], last_pos + 1)
        i = np.searchsorted(self.keys, target)
        found = (last_row >= 0) & (last_pos > NONE) & (i < len(self.keys))
        found[found] = self.keys[i[found]] == target[found]
        row = np.where(found, self.key_rows[np.minimum(i, len(self.keys) - 1)], -1)
        hit = found & self.fits[neg.var.name][np.maximum(row, 0)]
        if neg.after is None:  # trailing: only up to start_ts + τ
            hit &= self.cols.ts[np.maximum(row, 0)] <= batch.start_ts + self.c.tau
        for rel in self.c.pattern.negation_relationships[neg.var.name]:
            hit &= self._holds(rel, neg.var.name, batch, match, row, hit)
        return hit

    def _holds(self, rel, name: str, batch, match, row, hit) -> np.ndarray:
        """Per match, whether the relationship holds between the candidate ``row`` and
        every event bound to the other variable (vacuously where there is no candidate)."""
        other = next(v for v in rel.variables if v != name)
        sel = (batch.variables == self.index[other]) & hit[match]
        pairs_match, bound = match[sel], batch.rows[sel]
        cand = row[pairs_match]
        cols = self.cols

        def read(a: Attr):
            r = cols.row(a.attr)
            rows = cand if a.var == name else bound
            return cols.values[r][rows], cols.kinds[r][rows]

        truth = vector_truth3(rel.expr, len(bound), read, cols.encode_literal)
        failed = np.bincount(pairs_match[truth != TRUE], minlength=len(row))
        return failed == 0
