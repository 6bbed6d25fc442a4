"""A pattern with optional steps, compiled: one ``CompiledPattern`` per expansion
(``language.optional``), all reading the same event columns; their matches put back in
the pattern's own variables (an absent variable binds no row), and for SES only the
matches no other one with the same first event strictly contains. The reference is
``oracle.optional_matches``."""

from __future__ import annotations

import numpy as np

from jobs.core.engine.columns import EventColumns
from jobs.core.engine.compiled import GROUP, ONE, CompiledPattern, CompiledVariable
from jobs.core.language.optional import expansions
from jobs.core.language.pattern import Pattern


class CompiledOptional:
    """What ``execute`` runs for a pattern with optional steps."""

    def __init__(self, pattern: Pattern, attributes: tuple[str, ...] | None = None):
        self.pattern = pattern
        self.name = pattern.name
        self.tau = pattern.tau
        self.partition_attributes = pattern.partition_attributes
        found = expansions(pattern)
        attrs = set(pattern.attributes) | set(pattern.partition_attributes)
        for e in found:
            attrs |= set(e.pattern.attributes)
        self.attributes = tuple(sorted(attrs)) if attributes is None else tuple(attributes)
        self.expansions = tuple((CompiledPattern(e.pattern, self.attributes),
                                 np.array(e.origin, np.int64)) for e in found)
        self.variables = tuple(CompiledVariable(v.name, v.index, v.set_index,
                                                GROUP if v.group else ONE)
                               for v in pattern.variables)
        self.m = len(self.variables)
        self.alternatives = (self,)
        # the expansion with every unit present: properties, positions, partition codes
        self.full = max((c for c, _ in self.expansions), key=lambda c: c.m)

    def masks(self, cols: EventColumns) -> np.ndarray:
        """1 for every event some variable of some expansion can bind (Theorem 1)."""
        keep = np.zeros(cols.n, dtype=np.bool_)
        for c, _ in self.expansions:
            keep |= c.masks(cols) != 0
        return keep.astype(np.int64)

    def fits(self, name: str, cols: EventColumns) -> np.ndarray:
        return self.full.fits(name, cols)

    def positions(self, cols: EventColumns) -> np.ndarray:
        return self.full.positions(cols)

    def partition_codes(self, cols: EventColumns, rows: np.ndarray | None = None):
        return self.full.partition_codes(cols, rows)


def maximal(batch) -> np.ndarray:
    """Per match of ``batch``, whether no other match with the same first event binds a
    strict superset of its (variable, row) pairs."""
    n = len(batch)
    keep = np.ones(n, np.bool_)
    pairs = [frozenset(zip(batch.variables[batch.offsets[k]:batch.offsets[k + 1]].tolist(),
                           batch.rows[batch.offsets[k]:batch.offsets[k + 1]].tolist()))
             for k in range(n)]
    by_first: dict[int, list[int]] = {}
    for k, f in enumerate(batch.first.tolist()):
        by_first.setdefault(f, []).append(k)
    for group in by_first.values():
        if len(group) < 2:
            continue
        for k in group:
            if any(pairs[k] < pairs[o] for o in group if o != k):
                keep[k] = False
    return keep
