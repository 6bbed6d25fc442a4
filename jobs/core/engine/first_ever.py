"""``first_ever`` on event columns (docs/semantics.md, "First ever"): the columns with one
more attribute per ``first_ever`` variable, 1 on its partition's first fitting event
among the columns (the whole history the caller passes, in processing order), 0 elsewhere.
The engine then runs the pattern's ``marked()`` form on them."""

from __future__ import annotations

import numpy as np

from jobs.core.engine.columns import NUMBER, EventColumns
from jobs.core.engine.compiled import CompiledPattern
from jobs.core.language.pattern import Pattern, first_ever_attribute


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


def with_first_ever(pattern: Pattern, cols: EventColumns) -> tuple[Pattern, EventColumns]:
    """(the pattern to run, the columns to run it on)."""
    if not pattern.first_ever:
        return pattern, cols
    names, values, kinds = list(cols.names), [cols.values], [cols.kinds]
    for v in pattern.first_ever:
        mark = np.zeros(cols.n)
        mark[first_rows(pattern, cols, v)] = 1.0
        names.append(first_ever_attribute(v))
        values.append(mark[None, :])
        kinds.append(np.full((1, cols.n), NUMBER, cols.kinds.dtype))
    marked = EventColumns(cols.ts, cols.ids, tuple(names), np.vstack(values), np.vstack(kinds),
                          cols.dictionary, cols.time_base, cols.time_unit)
    return pattern.marked(), marked
