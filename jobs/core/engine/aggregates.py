"""Aggregate conditions on whole matches, on the engine's columns (docs/semantics.md,
aggregates).

A condition such as ``sum(p.value) > 300`` or ``avg(p.value) < c.value`` holds or not
for a match as a whole, so the engine tests it on the matches the other conditions gave:
a batch of n matches becomes, per aggregate, one value per match (numpy reductions over
the bound rows), and the condition is evaluated for all n at once by the same
three-valued evaluator as properties (``programs.vector_truth3``). The reference is
``conditions.aggregate`` and ``AggregateCondition.holds``; the property tests compare.
"""

from __future__ import annotations

import numpy as np

from jobs.core.engine.columns import MISSING, NUMBER, STRING, EventColumns
from jobs.core.engine.programs import TRUE, vector_truth3
from jobs.core.language.conditions.expressions import Agg, Attr, MatchTime
from jobs.core.language.conditions.kinds import AggregateCondition


class BatchValues:
    """Per-match values of attributes and aggregates over one batch of matches."""

    def __init__(self, batch, cols: EventColumns, index_of: dict[str, int], row_of):
        self.batch, self.cols, self.index_of, self.row_of = batch, cols, index_of, row_of
        self.n = len(batch)
        self.match_of = np.repeat(np.arange(self.n), np.diff(batch.offsets))

    def _bound(self, var: str):
        """(match of each bound row, the rows) of variable ``var``, in match order."""
        sel = self.batch.variables == self.index_of[var]
        return self.match_of[sel], self.batch.rows[sel]

    def read(self, node) -> tuple[np.ndarray, np.ndarray]:
        """(values, kinds) of a singleton's attribute, an aggregate or the match's first or
        last event time (encoded as the columns encode ``ts``), per match."""
        if isinstance(node, MatchTime):
            ns = self.batch.start_ts if node.which == "start_ts" else self.batch.end_ts
            return ((ns - self.cols.time_base) // self.cols.time_unit).astype(np.float64), \
                np.full(self.n, NUMBER, np.int8)
        if isinstance(node, Attr):  # a positive singleton: one row per match (or none: t?)
            match, rows = self._bound(node.var)
            r = self.row_of(node.attr)
            if len(rows) == self.n:
                return self.cols.values[r][rows], self.cols.kinds[r][rows]
            values, kinds = np.full(self.n, np.nan), np.full(self.n, MISSING, np.int8)
            values[match], kinds[match] = self.cols.values[r][rows], self.cols.kinds[r][rows]
            return values, kinds
        return self.aggregate(node)

    def aggregate(self, g: Agg) -> tuple[np.ndarray, np.ndarray]:
        n = self.n
        match, rows = self._bound(g.var)
        if g.attr is None:  # count(v)
            return np.bincount(match, minlength=n).astype(np.float64), np.full(n, NUMBER,
                                                                                np.int8)
        r = self.row_of(g.attr)
        v, k = self.cols.values[r][rows], self.cols.kinds[r][rows]
        values = np.full(n, np.nan)
        kinds = np.full(n, MISSING, np.int8)
        if g.func in ("first", "last"):
            if len(match):
                pick = np.flatnonzero(np.r_[True, match[1:] != match[:-1]]) if g.func == "first" \
                    else np.flatnonzero(np.r_[match[1:] != match[:-1], True])
                values[match[pick]], kinds[match[pick]] = v[pick], k[pick]
            return values, kinds
        if g.func == "count":
            present = k != MISSING
            if g.distinct:  # one per distinct (match, kind, value)
                triples = np.unique(np.stack([match[present].astype(np.float64),
                                              k[present].astype(np.float64), v[present]]),
                                    axis=1)
                counted = triples[0].astype(np.int64)
            else:
                counted = match[present]
            return (np.bincount(counted, minlength=n).astype(np.float64),
                    np.full(n, NUMBER, np.int8))
        num = k == NUMBER
        counts = np.bincount(match[num], minlength=n)
        if g.func in ("sum", "avg"):
            total = np.zeros(n)
            np.add.at(total, match[num], v[num])  # in order, as the reference adds
            ok = counts > 0
            values[ok] = total[ok] if g.func == "sum" else total[ok] / counts[ok]
            kinds[ok] = NUMBER
            return values, kinds
        # min / max: numbers when the match has one, else text (sorted codes compare as
        # the strings do)
        reduce = np.minimum if g.func == "min" else np.maximum
        for kind, sel in ((STRING, k == STRING), (NUMBER, num)):
            out = np.full(n, np.inf if g.func == "min" else -np.inf)
            reduce.at(out, match[sel], v[sel])
            have = np.bincount(match[sel], minlength=n) > 0
            values[have], kinds[have] = out[have], kind
        return values, kinds


class AggregateFilter:
    """Keeps the matches of a batch for which every aggregate condition holds."""

    def __init__(self, conditions: tuple[AggregateCondition, ...], cols: EventColumns,
                 index_of: dict[str, int], row_of):
        self.conditions, self.cols, self.index_of, self.row_of = \
            conditions, cols, index_of, row_of

    def keep(self, batch) -> np.ndarray:
        """A boolean per match of ``batch`` (a ``MatchBatch``)."""
        values = BatchValues(batch, self.cols, self.index_of, self.row_of)
        keep = np.ones(len(batch), np.bool_)
        for c in self.conditions:
            keep &= vector_truth3(c.expr, len(batch), values.read,
                                  self.cols.encode_literal) == TRUE
        return keep
