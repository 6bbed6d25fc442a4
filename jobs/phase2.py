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

import json
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from .core.columns import from_arrow
from .core.engine import MatchOptions, MatchStats, batch_take, compile_pattern, execute
from .core.loader import parse_pattern
from .core.output import bindings_json, match_id, match_ids  # noqa: F401 (match_id: API)

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


def output_columns(keys: tuple[str, ...]) -> list[str]:
    return ["kind", "match_id", *keys, "start_ts", "end_ts", "n_events", "bindings", "stats"]


def match_group(spec: Phase2Spec, table: pa.Table, a: int, b: int, slice_value, out: dict
                ) -> None:
    """Match one group (rows a..b of the batch); append its match rows and stats row to
    the column lists of ``out``."""
    pattern = _pattern(spec.pattern_text)
    compiled = compile_pattern(pattern)
    t0 = time.perf_counter()
    cols = from_arrow(table.slice(a, b - a), compiled.attributes)
    lo, hi = spec.low, spec.high
    s_lo = s_hi = None  # the group's own time slice
    if spec.slice_length is not None and slice_value is not None:
        j = int(slice_value)
        if j != NOT_SLICED:  # only large partitions are sliced when X exists
            s_lo = spec.slice_origin + j * spec.slice_length
            s_hi = s_lo + spec.slice_length
            lo = s_lo if lo is None else max(lo, s_lo)
            hi = s_hi if hi is None else min(hi, s_hi)
    options = MatchOptions(max_matches_per_window=spec.max_matches_per_window)
    st = MatchStats()
    names = [v.name for v in compiled.variables]
    keys = {k: table.column(k)[a].as_py() for k in spec.keys}
    kept = 0
    for batch in execute(compiled, cols, options, st):
        inside = np.ones(len(batch), np.bool_)
        if lo is not None:
            inside &= batch.start_ts >= lo
        if hi is not None:
            inside &= batch.start_ts < hi
        if not inside.all():
            batch = batch_take(batch, np.flatnonzero(inside))
        n = len(batch)
        if not n:
            continue
        kept += n
        out["kind"].extend(["match"] * n)
        out["match_id"].extend(match_ids(pattern.version, names, batch, cols))
        for k in spec.keys:
            out[k].extend([keys[k]] * n)
        out["start_ts"].extend(batch.start_ts.tolist())
        out["end_ts"].extend(batch.end_ts.tolist())
        out["n_events"].extend(np.diff(batch.offsets).tolist())
        out["bindings"].extend(bindings_json(names, batch, cols))
        out["stats"].extend([None] * n)
    # events that passed the filter, each counted in one group only (the slice holding its
    # ts; copies in earlier, overlapping slices do not count), so the sum is exact
    if s_lo is not None:
        kept_ts = cols.ts[compiled.masks(cols) != 0]
        st.events_after_filter = int(((kept_ts >= s_lo) & (kept_ts < s_hi)).sum())
    st.matches = kept
    st.seconds = time.perf_counter() - t0
    record = st.as_dict()
    for k in MatchStats.TEXT + ("plan_cost",):
        record.pop(k, None)
    out["kind"].append("stats")
    out["match_id"].append(None)
    for k in spec.keys:
        out[k].append(keys[k])
    out["start_ts"].append(None)
    out["end_ts"].append(None)
    out["n_events"].append(0)
    out["bindings"].append(None)
    out["stats"].append(json.dumps(record))


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
    group_cols = list(spec.keys) + ([SLICE] if spec.slice_length is not None else [])
    carry: pd.DataFrame | None = None

    def process(pdf: pd.DataFrame, last_is_complete: bool):
        table = pa.Table.from_pandas(pdf, preserve_index=False)
        slices = pdf[SLICE].to_numpy() if SLICE in pdf.columns else None
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
            match_group(spec, table, a, b, None if slices is None else slices[a], out)
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
