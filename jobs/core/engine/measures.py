"""Every measure of a batch of matches on the engine's columns (``batch_measures``), with
the same per-match aggregates as aggregate conditions (``engine.aggregates``); equal to
the reference (``language.measures.reference_measures``) value for value."""

from __future__ import annotations

from typing import Any

import numpy as np

from jobs.core.engine.aggregates import BatchValues
from jobs.core.engine.columns import NUMBER, STRING, EventColumns
from jobs.core.engine.programs import vector_value
from jobs.core.language.measures import measure_type, plain


def batch_measures(pattern, batch, cols: EventColumns) -> dict[str, list[Any]]:
    """Every measure of ``pattern`` (one alternative) for each match of ``batch``."""
    values = BatchValues(batch, cols, {v.name: k for k, v in enumerate(pattern.variables)},
                         cols.row)
    words = cols.dictionary.to_pylist() if pattern.measures else []
    out = {}
    for m in pattern.measures:
        v, k = vector_value(m.expr, len(batch), values.read, cols.encode_literal)
        kind = measure_type(m.expr)
        column: list[Any] = [None] * len(batch)
        number = np.flatnonzero(k == NUMBER)
        if kind in ("timestamp", "duration"):  # encoded in the unit of ``ts`` (exact)
            ns = cols.time_ns(v[number]) if kind == "timestamp" else \
                np.rint(v[number]).astype(np.int64) * cols.time_unit
            for i, x in zip(number.tolist(), ns.tolist()):
                column[i] = plain(x, kind)
            number = number[:0]
        for i in number.tolist():
            column[i] = plain(v[i], kind)
        for i in np.flatnonzero(k == STRING).tolist():
            code = v[i]
            column[i] = words[int(code)] if code == int(code) else None
        out[m.name] = column
    return out


def measure_columns(pattern, batch, cols: EventColumns, columns: tuple[str, ...]
                    ) -> dict[str, list[Any]]:
    """Every measure column of a file (``columns``: a disjunction's are all its
    alternatives') for the matches of one alternative ``pattern``: None where it has no
    such measure."""
    own = batch_measures(pattern, batch, cols)
    return {c: own.get(c, [None] * len(batch)) for c in columns}
