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

from jobs.core.engine.columns import MISSING, EventColumns, dense_ranks
from jobs.core.engine.programs import TRUE, Programs, RelationRows, relation_rows, vector_truth
from jobs.core.errors import UserError
from jobs.core.language.conditions.expressions import FLIPPED, Attr
from jobs.core.language.pattern import Disjunction, Pattern

OPS = {"=": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
ONE, GROUP = "one", "group"
MAX_VARIABLES = 62  # one bit per variable in an int64 mask


class PatternTooLarge(UserError, ValueError):
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

    def __init__(self, pattern: Pattern, attributes: tuple[str, ...] | None = None):
        """``attributes``: the rows of the event columns when they are shared with other
        patterns (a disjunction's alternatives); a superset of what this one reads."""
        self.pattern = pattern
        self.name = pattern.name
        self.within = Within(pattern.tau, pattern.within)
        self.variables = tuple(CompiledVariable(v.name, v.index, v.set_index,
                                                GROUP if v.group else ONE)
                               for v in pattern.variables)
        self.negated = tuple(CompiledVariable(v.name, v.index, -1, ONE)
                             for v in pattern.negated)
        self.m = len(self.variables)
        big = np.iinfo(np.int64).max
        self.vmin = np.array([v.min for v in pattern.variables], np.int64)
        self.vmax = np.array([big if v.max is None else v.max for v in pattern.variables],
                             np.int64)
        self.min_events = int(self.vmin.sum())
        self.contiguity = pattern.contiguity
        if self.m > MAX_VARIABLES:
            raise PatternTooLarge(f"pattern {pattern.name!r} has {self.m} variables; the "
                                  f"engine supports at most {MAX_VARIABLES}")
        self.n_sets = len(pattern.sets)
        self.set_of = np.array([v.set_index for v in self.variables], dtype=np.int64)
        self.group = np.array([v.is_group for v in self.variables], dtype=np.bool_)
        self.first_set = sum(1 << v.index for v in self.variables if v.set_index == 0)
        self.partition_attributes = pattern.partition_attributes
        attrs = set(pattern.attributes) | set(self.partition_attributes)
        self.attributes = tuple(sorted(attrs)) if attributes is None else tuple(attributes)
        assert attrs <= set(self.attributes), "the shared columns miss attributes"
        self._row = {a: i for i, a in enumerate(self.attributes)}
        self.prev_mask = np.array(
            [sum(1 << w.index for w in self.variables if w.set_index == v.set_index - 1)
             for v in self.variables], dtype=np.int64)
        self.later_mask = np.array(
            [sum(1 << w.index for w in self.variables if w.set_index > v.set_index)
             for v in self.variables], dtype=np.int64)
        self.programs = Programs(self.row)
        self._index = {v.name: v.index for v in self.variables + self.negated}
        # program conditions, compiled once: (v, w, program with v's event in slot 0)
        self._xpairs: list[tuple[int, int, int]] = []
        for r in pattern.relationships + self._negation_relationships:
            if r.simple is None:
                x, y = r.variables
                i, j = self._index[x], self._index[y]
                self._xpairs.append((i, j, self.programs.add(r.expr, {(x, False): 0,
                                                                      (y, False): 1})))
                self._xpairs.append((j, i, self.programs.add(r.expr, {(y, False): 0,
                                                                      (x, False): 1})))
        # running conditions the automaton checks with a program (the monotone ones are
        # prev relationships): per variable, (program, [(slot, func, row)])
        self._running: list[list[tuple[int, list]]] = [[] for _ in range(self.m)]
        for v in self.variables:
            for c in pattern.running_conditions[v.name]:
                if not c.monotone:
                    aggs: list = []
                    k = self.programs.add(c.expr, {(v.name, False): 0}, aggs)
                    self._running[v.index].append((k, aggs))
        self._xprev: list[list[int]] = [[] for _ in range(self.m)]
        for v in self.variables:
            for c in pattern.prev_relationships[v.name]:
                if c.simple is None:
                    self._xprev[v.index].append(self.programs.add(
                        c.expr, {(v.name, False): 0, (v.name, True): 1}))

    @property
    def tau(self) -> int:
        return self.within.ns

    @property
    def alternatives(self) -> tuple[CompiledPattern, ...]:
        """The conjunctive patterns to run (see ``CompiledDisjunction``): itself."""
        return (self,)

    @property
    def _negation_relationships(self) -> tuple:
        return tuple(r for rels in self.pattern.negation_relationships.values() for r in rels)

    def partition_codes(self, cols: EventColumns, rows: np.ndarray | None = None,
                        attributes: tuple[str, ...] | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Per event (of ``rows``, default all), a code equal for equal values of the
        partition attributes X (or of ``attributes``) and ordered as they are, and whether
        all of them are present (a missing value equals nothing)."""
        n = cols.n if rows is None else len(rows)
        code = np.zeros(n, np.int64)
        present = np.ones(n, np.bool_)
        for a in self.partition_attributes if attributes is None else attributes:
            r = self._row[a]
            kinds, values = cols.kinds[r], cols.values[r]
            if rows is not None:
                kinds, values = kinds[rows], values[rows]
            present &= kinds != 0
            code = dense_ranks(code, dense_ranks(kinds, values))
        return code, present

    @cached_property
    def filter_key(self) -> tuple:
        """What ``masks`` and ``partition_codes`` read besides the events: each positive
        variable's properties, in variable order, X, and the attributes (the rows of the
        columns). Two patterns with equal keys filter and partition the same columns
        alike."""
        return (tuple(tuple(self.pattern.properties[v.name]) for v in self.variables),
                tuple(self.partition_attributes), self.attributes)

    # -- Theorem 1: property masks ---------------------------------------------------
    @cached_property
    def _fits_keys(self) -> dict[str, tuple]:
        """Per variable, what ``fits`` reads besides the events: its properties and the
        rows of the columns (``cols.memo`` keeps the answer for every pattern, expansion
        or engine step that asks again about the same events)."""
        return {name: ("fits", tuple(props), self.attributes)
                for name, props in self.pattern.properties.items()}

    def fits(self, name: str, cols: EventColumns) -> np.ndarray:
        """Whether each event satisfies every property of variable ``name`` (read-only:
        the same array answers every later question about these events)."""
        key = self._fits_keys[name]
        ok = cols.memo.get(key)
        if ok is None:
            ok = cols.memo[key] = self._fits(name, cols)
            ok.flags.writeable = False
        return ok

    def _fits(self, name: str, cols: EventColumns) -> np.ndarray:
        ok = np.ones(cols.n, dtype=np.bool_)
        for p in self.pattern.properties[name]:
            simple = p.simple
            if simple is None:
                ok &= vector_truth(p.expr, cols, self.row) == TRUE
                continue
            left, op, right = simple
            r = self._row[left.attr]
            lv, lk = cols.values[r], cols.kinds[r]
            if isinstance(right, Attr):
                r2 = self._row[right.attr]
                rv, rk = cols.values[r2], cols.kinds[r2]
            else:
                val, kind = cols.encode_literal(right.value)
                rv, rk = np.float64(val), np.int8(kind)
            ok &= compare_columns(OPS[op], lv, lk, rv, rk)
        return ok

    def masks(self, cols: EventColumns) -> np.ndarray:
        """ē of every event (bit v set iff the event satisfies every property of v), for
        the positive variables."""
        out = np.zeros(cols.n, dtype=np.int64)
        for v in self.variables:
            out |= self.fits(v.name, cols).astype(np.int64) << v.index
        return out

    # -- relationships ----------------------------------------------------------------
    def relationship_pairs(self, partitioned: bool) -> tuple[tuple[int, str, str, int, str], ...]:
        """Θr plus Θ+eq as (v, attr, op, w, other attr), without the equalities on X
        when partitioned (match-window paper, section 4.4); reflexive members of group
        variables are kept (docs/semantics.md), as "the event being bound φ' each event of
        the group bound before it"."""
        dropped = set(self.partition_attributes) if partitioned else set()
        index = {v.name: v.index for v in self.variables}
        out = []
        for r in dict.fromkeys(self.pattern.relationships + self.pattern.equality_closure):
            if r.simple is None:
                continue  # a program (program_rows)
            if r.is_equality_on_one_attribute() and r.left.attr in dropped:
                continue
            # a group with itself: the event being bound is the later one, so earlier φ
            # later reads "later φ' earlier" from its side
            op = FLIPPED[r.op] if r.reflexive else r.op
            out.append((index[r.left.var], r.left.attr, op, index[r.right.var], r.right.attr))
        return tuple(out)

    def relationship_table(self, partitioned: bool) -> ConditionTable:
        """Each relationship from both variables' sides: when v is bound, every row of v
        is checked against every event already bound to ``other``."""
        return self._pair_table(self.relationship_pairs(partitioned), self.m)

    def _pair_table(self, pairs, n_vars: int) -> ConditionTable:
        rows: list[list] = [[] for _ in range(n_vars)]
        for i, a, op, j, b in pairs:
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
                simple = p.simple
                if simple is None:
                    continue
                left, op, right = simple
                rows[v.index].append((self._row[right.attr], OPS[FLIPPED[op]], v.index,
                                      self._row[left.attr]))
        return _table(rows)

    # -- program conditions -------------------------------------------------------------
    def program_pairs(self, n_vars: int) -> list[tuple[int, int, int]]:
        """(v, w, program) of the program relationships among the first ``n_vars``
        variables (``m``: the positive ones), from both sides."""
        return [(i, j, p) for i, j, p in self._xpairs if i < n_vars and j < n_vars]

    def program_rows(self, n_vars: int) -> RelationRows:
        """The program relationships per variable (v's event in slot 0)."""
        rows: list[list] = [[] for _ in range(n_vars)]
        for i, j, p in self.program_pairs(n_vars):
            rows[i].append((j, p))
        return relation_rows(rows)

    @cached_property
    def program_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.programs.arrays()

    @cached_property
    def prev_program_rows(self) -> RelationRows:
        return relation_rows([[(v, p) for p in self._xprev[v]] for v in range(self.m)])

    @cached_property
    def running_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The kernels' running conditions: per variable the range of its conditions, each
        condition's program, the range of its aggregates, and the aggregates (constant
        slot, function code, attribute row or -1)."""
        ptr, prog, aptr, aggs = [0], [], [0], []
        for v in range(self.m):
            for k, found in self._running[v]:
                prog.append(k)
                aggs.extend(found)
                aptr.append(len(aggs))
            ptr.append(len(prog))
        return (np.array(ptr, np.int64), np.array(prog, np.int64), np.array(aptr, np.int64),
                np.array(aggs, np.int64).reshape(-1, 3))

    @property
    def has_running(self) -> bool:
        return any(self._running)

    def negation_table(self) -> ConditionTable:
        """The comparison relationships of the negated variables with the positive ones
        (the rows of a negated variable's index are its side)."""
        pairs = [(self._index[r.left.var], r.left.attr, r.op, self._index[r.right.var],
                  r.right.attr) for r in self._negation_relationships if r.simple is not None]
        return self._pair_table(pairs, self.m + len(self.negated))

    def positions(self, cols: EventColumns) -> np.ndarray:
        """Contiguity positions in processing order, numbered before any filter: over
        all events (strict) or within the partition values X (partition)."""
        n = cols.n
        if self.pattern.position_rule == "strict" or not self.partition_attributes:
            return np.arange(n, dtype=np.int64)
        code, keep = self.partition_codes(cols)
        out = np.full(n, -(1 << 40), np.int64)  # no partition: never next to anything
        order = np.argsort(code, kind="stable")
        sorted_code = code[order]
        starts = np.r_[0, np.flatnonzero(sorted_code[1:] != sorted_code[:-1]) + 1]
        rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
        out[order] = rank
        out[~keep] = -(1 << 40) - np.arange(int((~keep).sum())) * 2
        return out

    def row(self, attr: str) -> int:
        return self._row[attr]


class CompiledDisjunction:
    """A disjunction compiled once: one ``CompiledPattern`` per alternative, all reading
    the same event columns (the union of their attributes). The engine runs them one
    after the other on the same columns; each batch of matches names its alternative."""

    def __init__(self, disjunction: Disjunction, compile_one=None):
        """``compile_one(alternative, attributes)``: how an alternative is compiled
        (default ``CompiledPattern``; one with optional steps has its own class)."""
        compile_one = compile_one or CompiledPattern
        self.pattern = disjunction
        self.name = disjunction.name
        attrs = set(disjunction.attributes)
        for alt in disjunction.alternatives:
            attrs |= set(alt.partition_attributes)
        self.attributes = tuple(sorted(attrs))
        self.alternatives = tuple(compile_one(a, self.attributes)
                                  for a in disjunction.alternatives)
        self.partition_attributes = disjunction.partition_attributes
        self.tau = disjunction.tau

    def masks(self, cols: EventColumns) -> np.ndarray:
        """1 for every event that fits some variable of some alternative, else 0 (the
        union of the alternatives' filters, Theorem 1)."""
        keep = np.zeros(cols.n, dtype=np.bool_)
        for alt in self.alternatives:
            keep |= alt.masks(cols) != 0
        return keep.astype(np.int64)
