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
    max_matches_per_window: int = 1_000_000


@lru_cache(maxsize=16)
def _pattern(text: str):
    return parse_pattern(text, "<phase 2>")


def match_id(version: str, key: tuple) -> str:
    """Deterministic from the pattern version and the bindings (DESIGN.md section 4)."""
    blob = json.dumps([version, [[v, list(ids)] for v, ids in key]], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def output_columns(keys: tuple[str, ...]) -> list[str]:
    return ["kind", "match_id", *keys, "start_ts", "end_ts", "n_events", "bindings", "stats"]


class _Batch:
    """One Arrow batch as Python lists (converted once, sliced per group)."""

    def __init__(self, pdf: pd.DataFrame, attrs: list[str], keys: tuple[str, ...]):
        ts = pdf["ts"].to_numpy()
        if np.issubdtype(ts.dtype, np.datetime64):
            ts = ts.astype("datetime64[ns]").astype(np.int64)
        self.ts = ts.tolist()
        self.ids = pdf["event_id"].astype(str).tolist()
        self.attrs = {a: [None if isinstance(v, float) and v != v else v for v in pdf[a].tolist()]
                      for a in attrs}
        self.keys = {k: pdf[k].tolist() for k in keys}
        self.slices = pdf[SLICE].tolist() if SLICE in pdf.columns else None

    def events(self, a: int, b: int) -> list[Event]:
        names = list(self.attrs)
        cols = [self.attrs[n][a:b] for n in names]
        out = [Event(self.ids[i], self.ts[i], dict(zip(names, [c[i - a] for c in cols])))
               for i in range(a, b)]
        out.sort(key=lambda e: (e.ts, e.id))  # processing order; Spark sorted the same way
        for i, e in enumerate(out):
            e.seq = i
        return out


def match_group(spec: Phase2Spec, batch: _Batch, a: int, b: int, out: dict) -> None:
    """Match one group (rows a..b of the batch); append its match rows and stats row to
    the column lists of ``out``."""
    pattern = _pattern(spec.pattern_text)
    t0 = time.perf_counter()
    events = batch.events(a, b)
    lo, hi = spec.low, spec.high
    s_lo = s_hi = None  # the group's own time slice
    if spec.slice_length is not None and batch.slices is not None:
        j = int(batch.slices[a])
        if j != NOT_SLICED:  # only large partitions are sliced when X exists
            s_lo = spec.slice_origin + j * spec.slice_length
            s_hi = s_lo + spec.slice_length
            lo = s_lo if lo is None else max(lo, s_lo)
            hi = s_hi if hi is None else min(hi, s_hi)
    options = MatchOptions(max_matches_per_window=spec.max_matches_per_window)
    matches, stats = run(pattern, events, options)
    # events that passed the filter, each counted in one group only (the slice holding its
    # ts; copies in earlier, overlapping slices do not count), so the sum is exact
    stats["events_after_filter"] = len(events) if s_lo is None else \
        sum(1 for e in events if s_lo <= e.ts < s_hi)
    kept = 0

    def add(kind, mid, start, end, n, bindings, st):
        out["kind"].append(kind)
        out["match_id"].append(mid)
        for k in spec.keys:
            out[k].append(batch.keys[k][a])
        out["start_ts"].append(start)
        out["end_ts"].append(end)
        out["n_events"].append(n)
        out["bindings"].append(bindings)
        out["stats"].append(st)

    for m in matches:
        if (lo is not None and m.start.ts < lo) or (hi is not None and m.start.ts >= hi):
            continue
        kept += 1
        add("match", match_id(pattern.version, m.key), m.start.ts, m.end.ts, len(m.events),
            json.dumps({v: list(ids) for v, ids in m.key}), None)
    stats["matches"] = kept
    stats["seconds"] = time.perf_counter() - t0
    stats.pop("plan", None)
    add("stats", None, None, None, 0, None, json.dumps(stats))


def _frame(spec: Phase2Spec, out: dict) -> pd.DataFrame:
    df = pd.DataFrame(out, columns=output_columns(spec.keys))
    nat = np.iinfo(np.int64).min  # NaT as int64
    for c in ("start_ts", "end_ts"):
        ns = np.array([nat if v is None else v for v in out[c]], dtype=np.int64)
        df[c] = ns.view("datetime64[ns]")
    df["n_events"] = df["n_events"].astype("int64")
    return df


def run_partition(spec: Phase2Spec, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """mapInPandas body: split the sorted stream of rows into groups and match each."""
    pattern = _pattern(spec.pattern_text)
    group_cols = list(spec.keys) + ([SLICE] if spec.slice_length is not None else [])
    carry: pd.DataFrame | None = None

    def process(pdf: pd.DataFrame, last_is_complete: bool):
        attrs = [a for a in sorted(pattern.attributes | set(spec.keys)) if a in pdf.columns]
        batch = _Batch(pdf, attrs, spec.keys)
        if group_cols:
            key = pdf[group_cols[0]].astype(str).to_numpy() if len(group_cols) == 1 else \
                pdf[group_cols].astype(str).agg("\x1f".join, axis=1).to_numpy()
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]).tolist()
        else:
            starts = [0]
        bounds = starts + [len(pdf)]
        out = {c: [] for c in output_columns(spec.keys)}
        groups = list(zip(bounds[:-1], bounds[1:]))
        if not last_is_complete:
            groups = groups[:-1]
        for a, b in groups:
            match_group(spec, batch, a, b, out)
        rest = None if last_is_complete else pdf.iloc[bounds[-2]:].reset_index(drop=True)
        return (_frame(spec, out) if out["kind"] else None), rest

    for pdf in batches:
        if carry is not None and len(carry):
            pdf = pd.concat([carry, pdf], ignore_index=True)
        if not len(pdf):
            continue
        if not group_cols:
            carry = pdf
            continue
        frame, carry = process(pdf, last_is_complete=False)
        if frame is not None:
            yield frame
    if carry is not None and len(carry):
        frame, _ = process(carry, last_is_complete=True)
        if frame is not None:
            yield frame
