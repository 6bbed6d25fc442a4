"""Which matches a phase-2 group keeps (docs/pipeline.md, "Incremental nights"): the
start range of a night, per partition where phase 1 gave each event its partition's own
start (``LOW``: a history-wide pattern's partitions matched from before the night's
range), an episode walk's first match (``BEGIN``), and the partitions that can start a
match at all."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

LOW = "__low"  # phase 1's column: the earliest start of its partition's matches tonight
BEGIN = "__begin"  # phase 1's column: the ids of the kept match an episode walk resumes from
STATE_FACTS = {"first_ts": "__state_first_ts", "last_ts": "__state_last_ts",
               "count": "__state_count"}  # phase 1's columns: the partition's facts (ns)
_NS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}  # a timestamp unit in nanoseconds


def begin_rows(table: pa.Table) -> np.ndarray:
    """Per row, the row its partition's episode walk starts at: the first of the kept
    match's events that ``BEGIN`` names (0: a fresh walk)."""
    out = np.zeros(table.num_rows, np.int64)
    ids = table.column("event_id").cast(pa.string()).to_pylist()
    rows: dict[str, list[int]] = {}
    for r, v in enumerate(table.column(BEGIN).to_pylist()):
        if v:
            rows.setdefault(v, []).append(r)
    for v, mine in rows.items():
        want = set(json.loads(v))
        hit = [r for r in mine if ids[r] in want]
        if hit:
            out[mine] = min(hit)
    return out


def inside(batch, lo, hi, lows: np.ndarray | None = None) -> np.ndarray:
    """The matches of a batch whose first event starts in [lo, hi) (None: open); with
    ``lows`` (each row's partition's own start, ns: ``partition_state.LOW``), in [its
    first event's low, hi) instead."""
    inside = np.ones(len(batch), np.bool_)
    if lows is not None:
        inside &= batch.start_ts >= lows[batch.first]
    elif lo is not None:
        inside &= batch.start_ts >= lo
    if hi is not None:
        inside &= batch.start_ts < hi
    return np.flatnonzero(inside)


def ts_ns(table: pa.Table) -> np.ndarray:
    """The ``ts`` column of ``table`` as int64 nanoseconds."""
    column = table.column("ts")
    return column.cast(pa.int64()).to_numpy() * _NS[column.type.unit]


def starting(ts: np.ndarray, lengths, mask: np.ndarray | None, low: int | None,
             high: int | None) -> np.ndarray:
    """The rows (a mask) of the partitions that hold an event able to start a match of
    the range: a row of ``mask`` (None: every row) with ``ts`` in [low, high) (None:
    open). ``lengths``: the partitions' row counts, in order, covering ``ts``. A match
    starts at one of its partition's events, so the other partitions cannot give one:
    a night reads τ before its start range, but matches only the partitions that start
    something in it (docs/pipeline.md, "Incremental nights")."""
    inside = np.ones(len(ts), np.bool_) if mask is None else mask.copy()
    if low is not None:
        inside &= ts >= low
    if high is not None:
        inside &= ts < high
    lengths = np.asarray(lengths, np.int64)
    if not len(lengths):
        return inside
    hit = np.add.reduceat(inside.astype(np.int64), np.r_[0, np.cumsum(lengths)[:-1]]) > 0
    keep = np.repeat(hit, lengths)
    return keep if mask is None else keep & mask
