"""Phase 2 of the match job, run on the executors (``mapInPandas``): the match-window
matcher over the events of each group (partition values X, and time slice), in order.

Pure pandas in, pandas out (no Spark import), so it is tested on small frames. Input rows
arrive sorted by (group keys, ts, event_id) within a Spark partition; a group may span
several Arrow batches, so the last group of a batch is carried over to the next. Only one
group's events are held at a time.

Each group yields its match rows (those whose first event starts inside the group's own
start range: the run's range, cut to the group's time slice) and one stats row.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import numpy as np
import pandas as pd

from .core.events import Event
from .core.loader import parse_pattern
from .core.runner import MatchOptions, run

SLICE = "__slice"
NOT_SLICED = -(1 << 62)  # the slice value of a partition that was not cut into slices


@dataclass(frozen=True)
class Phase2Spec:
    pattern_text: str
    keys: tuple[str, ...]  # partition attributes X (Spark column names)
    low: int | None  # run range of start timestamps [low, high), ns
    high: int | None
    slice_origin: int = 0
    slice_length: int | None = None  # None: no time slices
    max_matches_per_window: int = 100_000


@lru_cache(maxsize=16)
def _pattern(text: str):
    return parse_pattern(text, "<phase 2>")


def match_id(version: str, key: tuple) -> str:
    """Deterministic from the pattern version and the bindings (DESIGN.md section 4)."""
    blob = json.dumps([version, [[v, list(ids)] for v, ids in key]], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def output_columns(keys: tuple[str, ...]) -> list[str]:
    return ["kind", "match_id", *keys, "start_ts", "end_ts", "n_events", "bindings", "stats"]


def _events(pdf: pd.DataFrame, attrs: list[str]) -> list[Event]:
    ts = pdf["ts"].to_numpy()
    if np.issubdtype(ts.dtype, np.datetime64):
        ts = ts.astype("datetime64[ns]").astype(np.int64)
    ids = pdf["event_id"].astype(str).tolist()
    cols = {a: pdf[a].tolist() for a in attrs}
    out = []
    for i in range(len(ids)):
        attrs_i = {}
        for a, values in cols.items():
            v = values[i]
            if v is not None and isinstance(v, float) and v != v:
                v = None
            attrs_i[a] = v
        out.append(Event(ids[i], int(ts[i]), attrs_i, i))
    # the processing order (ts, id as strings); Spark sorted by the same keys
    out.sort(key=lambda e: (e.ts, e.id))
    for i, e in enumerate(out):
        e.seq = i
    return out


def match_group(spec: Phase2Spec, pdf: pd.DataFrame) -> pd.DataFrame:
    """The match rows and the stats row of one group."""
    pattern = _pattern(spec.pattern_text)
    t0 = time.perf_counter()
    attrs = sorted(pattern.attributes | set(spec.keys))
    events = _events(pdf, [a for a in attrs if a in pdf.columns])
    lo, hi = spec.low, spec.high
    if spec.slice_length is not None and SLICE in pdf.columns:
        j = int(pdf[SLICE].iloc[0])
        if j != NOT_SLICED:  # only large partitions are sliced when X exists
            s_lo = spec.slice_origin + j * spec.slice_length
            s_hi = s_lo + spec.slice_length
            lo = s_lo if lo is None else max(lo, s_lo)
            hi = s_hi if hi is None else min(hi, s_hi)
    options = MatchOptions(max_matches_per_window=spec.max_matches_per_window)
    matches, stats = run(pattern, events, options)
    keyvals = {k: pdf[k].iloc[0] for k in spec.keys}
    rows = []
    for m in matches:
        if (lo is not None and m.start.ts < lo) or (hi is not None and m.start.ts >= hi):
            continue
        rows.append({
            "kind": "match", "match_id": match_id(pattern.version, m.key), **keyvals,
            "start_ts": pd.Timestamp(m.start.ts, unit="ns"),
            "end_ts": pd.Timestamp(m.end.ts, unit="ns"),
            "n_events": len(m.events),
            "bindings": json.dumps({v: list(ids) for v, ids in m.key}),
            "stats": None,
        })
    stats["matches"] = len(rows)
    stats["seconds"] = time.perf_counter() - t0
    stats.pop("plan", None)
    rows.append({"kind": "stats", "match_id": None, **keyvals, "start_ts": pd.NaT,
                 "end_ts": pd.NaT, "n_events": 0, "bindings": None,
                 "stats": json.dumps(stats)})
    out = pd.DataFrame(rows, columns=output_columns(spec.keys))
    out["start_ts"] = pd.to_datetime(out["start_ts"])
    out["end_ts"] = pd.to_datetime(out["end_ts"])
    out["n_events"] = out["n_events"].astype("int64")
    return out


def run_partition(spec: Phase2Spec, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """mapInPandas body: split the sorted stream of rows into groups and match each."""
    group_cols = list(spec.keys) + ([SLICE] if spec.slice_length is not None else [])
    carry: pd.DataFrame | None = None
    for pdf in batches:
        if carry is not None and len(carry):
            pdf = pd.concat([carry, pdf], ignore_index=True)
        if not len(pdf):
            continue
        if not group_cols:
            carry = pdf
            continue
        keys = pdf[group_cols].astype(str).agg("\x1f".join, axis=1).to_numpy() \
            if len(group_cols) > 1 else pdf[group_cols[0]].astype(str).to_numpy()
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        bounds = list(starts) + [len(pdf)]
        for a, b in zip(bounds[:-2], bounds[1:-1]):
            yield match_group(spec, pdf.iloc[a:b].reset_index(drop=True))
        carry = pdf.iloc[bounds[-2]:].reset_index(drop=True)
    if carry is not None and len(carry):
        yield match_group(spec, carry)
