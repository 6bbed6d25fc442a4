"""The marks of ``first_ever`` and ``history:`` on event columns (docs/semantics.md, "First
ever", "History conditions"): the columns with one more attribute per ``first_ever``
variable (1 on its partition's first fitting event among the columns: the whole history
the caller passes, in processing order) and per history condition (1 where it holds with
its anchor bound to the event). The engine then runs the pattern's ``marked()`` form."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jobs.core.engine.columns import NUMBER, EventColumns
from jobs.core.engine.compiled import CompiledPattern
from jobs.core.engine.programs import TRUE, vector_truth
from jobs.core.engine.runtime import compile_pattern
from jobs.core.language.conditions.expressions import PARTITION_FACTS, is_fact
from jobs.core.language.pattern import Pattern, first_ever_attribute, history_attribute


def first_rows(pattern: Pattern, cols: EventColumns, variable: str) -> np.ndarray:
    """The rows of each partition's first event that fits ``variable``'s properties."""
    c = CompiledPattern(pattern, tuple(cols.names))
    fits = np.flatnonzero(c.fits(variable, cols))
    if not len(fits):
        return fits
    code, present = c.partition_codes(cols, fits)
    fits, code = fits[present], code[present]
    _, first = np.unique(code, return_index=True)  # rows are in processing order
    return np.sort(fits[first])


def where_fits(h, cols: EventColumns, c: CompiledPattern) -> np.ndarray:
    """The rows that fit history condition ``h``'s ``where`` (all of them without one)."""
    fits = np.ones(cols.n, np.bool_)
    for p in h.where:
        fits &= vector_truth(p.expr, cols, c.row) == TRUE
    return fits


def history_marks(pattern: Pattern, cols: EventColumns, k: int) -> np.ndarray:
    """1 where history condition ``k`` holds with its anchor bound to the row (the
    columns are the partitions' whole history, in processing order), else 0."""
    h = pattern.history[k]
    c = CompiledPattern(pattern, tuple(cols.names))
    code, present = c.partition_codes(cols, attributes=h.same or None)
    fits = where_fits(h, cols, c)
    out = np.zeros(cols.n)
    for part in np.unique(code[present]):
        rows = np.flatnonzero(present & (code == part))
        times = np.sort(cols.ts[rows[fits[rows]]])
        t = cols.ts[rows]
        if h.direction == "before":
            n = np.searchsorted(times, t, "left") if not h.by \
                else np.searchsorted(times, t - h.by, "right")
        else:
            n = len(times) - (np.searchsorted(times, t, "right") if not h.by
                              else np.searchsorted(times, t + h.by, "left"))
        ok = np.ones(len(rows), np.bool_)
        if h.at_least is not None:
            ok &= n >= h.at_least
        if h.at_most is not None:
            ok &= n <= h.at_most
        out[rows] = ok
    return out


def fact_columns(pattern: Pattern, cols: EventColumns) -> list[tuple[str, np.ndarray]]:
    """The partition facts the pattern reads, per row (times in the columns' time
    encoding; NaN for an event without X, which is in no partition)."""
    used = sorted(a for a in pattern.attributes if is_fact(a))
    if not used:
        return []
    c = CompiledPattern(pattern, tuple(cols.names))
    code, present = c.partition_codes(cols)
    out = {a: np.full(cols.n, np.nan) for a in used}
    rows = np.flatnonzero(present)
    if len(rows):
        keys, inverse, counts = np.unique(code[rows], return_inverse=True, return_counts=True)
        first = np.full(len(keys), np.iinfo(np.int64).max)
        last = np.full(len(keys), np.iinfo(np.int64).min)
        np.minimum.at(first, inverse, cols.ts[rows])
        np.maximum.at(last, inverse, cols.ts[rows])
        values = {PARTITION_FACTS["first_ts"]: (first - cols.time_base) // cols.time_unit,
                  PARTITION_FACTS["last_ts"]: (last - cols.time_base) // cols.time_unit,
                  PARTITION_FACTS["count"]: counts}
        for a in used:
            out[a][rows] = values[a][inverse]
    return list(out.items())


def with_given_facts(pattern: Pattern, cols: EventColumns, first_ns: np.ndarray,
                     last_ns: np.ndarray, count: np.ndarray) -> EventColumns:
    """``cols`` with the partition facts the pattern reads, given per row (first and last
    time in ns, count; NaN: none) by a state of the whole history, not computed from
    the rows (which are then only part of it)."""
    used = sorted(a for a in pattern.attributes if is_fact(a))
    values = {PARTITION_FACTS["first_ts"]: (first_ns - cols.time_base) // cols.time_unit,
              PARTITION_FACTS["last_ts"]: (last_ns - cols.time_base) // cols.time_unit,
              PARTITION_FACTS["count"]: count}
    return _with_columns(cols, [(a, np.asarray(values[a], np.float64)) for a in used])


def _with_columns(cols: EventColumns, items: list[tuple[str, np.ndarray]]) -> EventColumns:
    """``cols`` with these numeric columns (NaN: missing), replacing those of the same name."""
    if not items:
        return cols
    names, values, kinds = list(cols.names), cols.values.copy(), cols.kinds.copy()
    extra_v, extra_k = [], []
    for name, mark in items:
        kind = np.where(np.isnan(mark), 0, NUMBER).astype(cols.kinds.dtype)
        if name in names:
            r = names.index(name)
            values[r], kinds[r] = mark, kind
            continue
        names.append(name)
        extra_v.append(mark[None, :])
        extra_k.append(kind[None, :])
    return EventColumns(cols.ts, cols.ids, tuple(names), np.vstack([values, *extra_v]),
                        np.vstack([kinds, *extra_k]), cols.dictionary, cols.time_base,
                        cols.time_unit)


def with_marks(pattern: Pattern, cols: EventColumns) -> tuple[Pattern, EventColumns]:
    """(the pattern to run, the columns to run it on): the columns with the partition
    facts, and the marks of ``first_ever`` and of the ``history`` conditions (the columns
    are the whole history)."""
    if not pattern.marks_needed:
        return pattern, cols
    facts = [a for a in pattern.attributes if is_fact(a) and a not in cols.names]
    cols = _with_columns(cols, [(a, np.full(cols.n, np.nan)) for a in facts])
    cols = _with_columns(cols, fact_columns(pattern, cols))
    marks = []
    for v in pattern.first_ever:
        mark = np.zeros(cols.n)
        mark[first_rows(pattern, cols, v)] = 1.0
        marks.append((first_ever_attribute(v), mark))
    marks += [(history_attribute(k), history_marks(pattern, cols, k))
              for k in range(len(pattern.history))]
    return pattern.marked(), _with_columns(cols, marks)


def marked_compiled(pattern, columns_of: Callable[[tuple[str, ...]], EventColumns],
                    needs_marks: bool | None = None):
    """Marks, then compile: (the pattern to run, it compiled, its columns). A pattern that
    needs marks (``needs_marks``, by default ``pattern.marks_needed``: the events
    ``columns_of`` gives are its whole history) reads its stored attributes, gets its marks
    from them and is compiled over the marked columns; any other is compiled first and
    reads the attributes it needs."""
    if pattern.marks_needed if needs_marks is None else needs_marks:
        marked, cols = with_marks(pattern, columns_of(pattern.stored_attributes))
        return marked, compile_pattern(marked, cols.names), cols
    compiled = compile_pattern(pattern)
    return pattern, compiled, columns_of(compiled.attributes)
