"""One compile step per pattern, shared by both matchers, the window scan and the planner.

``CompiledPattern`` turns a parsed ``Pattern`` into what the engine runs on: variables
with a kind, the window τ as a value, per-variable property masks (Theorem 1 of the
match-window paper) evaluated on whole columns at once, and the relationships (with
the transitive closure Θ+eq of Def. 6, less the equalities on the partition attributes
X when the caller partitions) and ``prev`` relationships as integer tables indexed by
variable, attribute row and operator code. Nothing here evaluates text from the file:
the tables come from the parsed condition tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .columns import MISSING, EventColumns
from .conditions import FLIPPED
from .pattern import Pattern

OPS = {"=": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
ONE, GROUP = "one", "group"
MAX_VARIABLES = 62  # one bit per variable in an int64 mask


class PatternTooLarge(ValueError):
    """A pattern the engine cannot compile (more variables than mask bits)."""


@dataclass(frozen=True)
class Within:
    """The window τ: a duration in nanoseconds, with the text it was written as."""

    ns: int
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class CompiledVariable:
    name: str
    index: int  # bit in masks, position in bindings
    set_index: int
    kind: str  # ONE or GROUP

    @property
    def is_group(self) -> bool:
        return self.kind == GROUP


@dataclass(frozen=True)
class ConditionTable:
    """Conditions per variable as CSR arrays: the rows of variable v are
    ``ptr[v]:ptr[v + 1]``; each row is ``attr op other.other_attr``."""

    ptr: np.ndarray
    attr: np.ndarray
    op: np.ndarray
    other: np.ndarray
    other_attr: np.ndarray


def _table(rows_per_var: list[list[tuple[int, int, int, int]]]) -> ConditionTable:
    ptr = np.zeros(len(rows_per_var) + 1, dtype=np.int64)
    flat: list[tuple[int, int, int, int]] = []
    for v, rows in enumerate(rows_per_var):
        flat.extend(rows)
        ptr[v + 1] = len(flat)
    arr = np.array(flat, dtype=np.int64).reshape(-1, 4)
    return ConditionTable(ptr, arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(),
                          arr[:, 3].copy())


def compare_columns(op: int, lv, lk, rv, rk) -> np.ndarray:
    """Vectorized ``left op right`` on encoded values: missing is false, a number and a
    string differ (only != holds)."""
    present = (lk != MISSING) & (rk != MISSING)
    same = lk == rk
    if op == 0:
        out = same & (lv == rv)
    elif op == 1:
        out = ~same | (lv != rv)
    elif op == 2:
        out = same & (lv < rv)
    elif op == 3:
        out = same & (lv <= rv)
    elif op == 4:
        out = same & (lv > rv)
    else:
        out = same & (lv >= rv)
    return present & out


class CompiledPattern:
    """A pattern compiled once; every run and every window reuses it."""

    def __init__(self, pattern: Pattern):
        self.pattern = pattern
        self.name = pattern.name
        self.within = Within(pattern.tau, pattern.within)
        self.variables = tuple(CompiledVariable(v.name, v.index, v.set_index,
                                                GROUP if v.group else ONE)
                               for v in pattern.variables)
        self.m = len(self.variables)
        if self.m > MAX_VARIABLES:
            raise PatternTooLarge(f"pattern {pattern.name!r} has {self.m} variables; the "
                                  f"engine supports at most {MAX_VARIABLES}")
        self.n_sets = len(pattern.sets)
        self.set_of = np.array([v.set_index for v in self.variables], dtype=np.int64)
        self.group = np.array([v.is_group for v in self.variables], dtype=np.bool_)
        self.first_set = sum(1 << v.index for v in self.variables if v.set_index == 0)
        self.partition_attributes = pattern.partition_attributes
        attrs = set(pattern.attributes) | set(self.partition_attributes)
        self.attributes = tuple(sorted(attrs))
        self._row = {a: i for i, a in enumerate(self.attributes)}
        self.prev_mask = np.array(
            [sum(1 << w.index for w in self.variables if w.set_index == v.set_index - 1)
             for v in self.variables], dtype=np.int64)
        self.later_mask = np.array(
            [sum(1 << w.index for w in self.variables if w.set_index > v.set_index)
             for v in self.variables], dtype=np.int64)

    @property
    def tau(self) -> int:
        return self.within.ns

    # -- Theorem 1: property masks ---------------------------------------------------
    def masks(self, cols: EventColumns) -> np.ndarray:
        """ē of every event (bit v set iff the event satisfies every property of v)."""
        out = np.zeros(cols.n, dtype=np.int64)
        for v in self.variables:
            ok = np.ones(cols.n, dtype=np.bool_)
            for p in self.pattern.properties[v.name]:
                r = self._row[p.attr]
                lv, lk = cols.values[r], cols.kinds[r]
                if p.other_attr is not None:
                    r2 = self._row[p.other_attr]
                    rv, rk = cols.values[r2], cols.kinds[r2]
                else:
                    val, kind = cols.encode_literal(p.value)
                    rv, rk = np.float64(val), np.int8(kind)
                ok &= compare_columns(OPS[p.op], lv, lk, rv, rk)
            out |= ok.astype(np.int64) << v.index
        return out

    # -- relationships ----------------------------------------------------------------
    def relationship_pairs(self, partitioned: bool) -> tuple[tuple[int, str, str, int, str], ...]:
        """Θr plus Θ+eq as (v, attr, op, w, other attr), without the equalities on X
        when partitioned (match-window paper, section 4.4); reflexive members of group
        variables are kept (DESIGN.md section 4)."""
        dropped = set(self.partition_attributes) if partitioned else set()
        index = {v.name: v.index for v in self.variables}
        out = []
        for r in dict.fromkeys(self.pattern.relationships + self.pattern.equality_closure):
            if r.is_equality_on_one_attribute() and r.left.attr in dropped:
                continue
            out.append((index[r.left.var], r.left.attr, r.op, index[r.right.var], r.right.attr))
        return tuple(out)

    def relationship_table(self, partitioned: bool) -> ConditionTable:
        """Each relationship from both variables' sides: when v is bound, every row of v
        is checked against every event already bound to ``other``."""
        rows: list[list] = [[] for _ in range(self.m)]
        for i, a, op, j, b in self.relationship_pairs(partitioned):
            rows[i].append((self._row[a], OPS[op], j, self._row[b]))
            if i != j:
                rows[j].append((self._row[b], OPS[FLIPPED[op]], i, self._row[a]))
        return _table(rows)

    @cached_property
    def prev_table(self) -> ConditionTable:
        """``prev(v.attr) op v.other_attr`` as rows (attr of e, flipped op, v, attr of prev)."""
        rows: list[list] = [[] for _ in range(self.m)]
        for v in self.variables:
            for p in self.pattern.prev_relationships[v.name]:
                rows[v.index].append((self._row[p.other_attr], OPS[FLIPPED[p.op]], v.index,
                                      self._row[p.attr]))
        return _table(rows)

    def row(self, attr: str) -> int:
        return self._row[attr]
