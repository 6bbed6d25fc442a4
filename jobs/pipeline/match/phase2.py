"""Phase 2 of the match job, run on the executors (``mapInPandas``): the match-window
matcher over the events of each group (partition values X, and time slice), in order.

Pure pandas in, pandas out (no Spark import), so it is tested on small frames. Input rows
arrive sorted by (group keys, ts, event_id) within a Spark partition; a group may span
several Arrow batches, so the last group of a batch is carried over to the next. Only one
group's events are held at a time.

Whole partitions of a batch are matched by one engine call (the engine partitions by X
itself); each time slice of a large partition by one call of its own. Each call yields
its match rows (those whose first event starts inside its start range: the run's range,
cut to the slice) and one stats row.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd

from jobs.core.engine.batches import MatchCapExceeded, MatchStats, batch_take
from jobs.core.engine.columns import EventColumns, from_arrow, processing_order
from jobs.core.engine.funnel import funnel_counts
from jobs.core.engine.marks import marked_compiled, with_given_facts
from jobs.core.engine.measures import measure_columns
from jobs.core.engine.options import DEFAULT_MAX_MATCHES, DEFAULT_MEMORY_BUDGET, MatchOptions
from jobs.core.engine.output import bindings_json, bindings_of, match_ids
from jobs.core.engine.runtime import compile_pattern, execute
from jobs.core.engine.window_matcher import Evaluator, execute_windows, relevant_rows
from jobs.core.language.pattern import Disjunction
from jobs.core.language.patternfile import parse_pattern
from jobs.core.language.window import BINDINGS
from jobs.core.plans.json_form import plans_from_json
from jobs.pipeline.match.start_ranges import (
    BEGIN,
    LOW,
    STATE_FACTS,
    begin_rows,
    inside,
    starting,
    ts_ns,
)

SLICE = "__slice"
POSITION = "__pos"  # contiguity positions numbered in phase 1 (__pos1, __pos2: per alternative)
NOT_SLICED = -(1 << 62)  # the slice value of a partition that was not cut into slices


@dataclass(frozen=True)
class Phase2Spec:
    pattern_text: str
    keys: tuple[str, ...]  # partition attributes X (Spark column names)
    low: int | None  # run range of start timestamps [low, high), ns
    high: int | None
    group_by_keys: bool = True  # False: groups are time slices over all partitions
    slice_origin: int = 0
    slice_length: int | None = None  # None: no time slices
    max_matches_per_window: int = DEFAULT_MAX_MATCHES
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    limits: str = "match.max_matches_per_window and match.memory_budget in conf/pipeline.yaml"
    plan: str | None = None  # the driver's trees (planning.PlanChoice.to_json), zstream
    funnel: bool = True  # count the funnel of the windows (docs/semantics.md, "Funnels")
    marks_given: bool = False  # phase 1 marked the events from the partition state


@lru_cache(maxsize=16)
def _pattern(text: str, marks_given: bool = False):
    """The pattern phase 2 runs: a ``first_ever`` pattern's marked form, and a history or
    facts pattern's when phase 1 marked its events from a state (``marks_given``);
    otherwise a pattern read over the whole history (history conditions, partition
    facts) as written: ``_compiled`` marks its events."""
    pattern = parse_pattern(text, "<phase 2>")
    if pattern.first_ever and not pattern.whole_history or marks_given:
        return pattern.marked()
    return pattern


def _compiled(pattern, rows: RowSet, marks_given: bool = False):
    """(the pattern to run, it compiled, its columns): a pattern read over the whole
    history gets its marks here, from the group's events (whole partitions); with
    ``marks_given``, its partition facts come from phase 1's state columns."""
    if marks_given:
        cols = rows.columns(pattern.stored_attributes)
        table = rows.table
        cols = with_given_facts(pattern, cols, *[
            table.column(STATE_FACTS[f]).to_numpy(zero_copy_only=False).astype(np.float64)
            for f in ("first_ts", "last_ts", "count")])
        return pattern, compile_pattern(pattern, cols.names), cols
    return marked_compiled(pattern, rows.columns, pattern.whole_history)


def position_column(pattern) -> str:
    """The phase-1 column with the contiguity positions of a conjunctive pattern (one
    per alternative of a disjunction: they may partition differently)."""
    return POSITION if pattern.alternative is None else f"{POSITION}{pattern.alternative}"


@lru_cache(maxsize=16)
def _driver_plan(plan: str | None, text: str, marks_given: bool = False):
    if plan is None:
        return None

    return plans_from_json(plan, _pattern(text, marks_given))


def output_columns(keys: tuple[str, ...], disjunctive: bool = False, valued: bool = False
                   ) -> list[str]:
    """The staged rows; a disjunction's also say which alternative matched, a window
    pattern's carry its select values and a sequence pattern's its measures (``valued``:
    ``values``, JSON)."""
    return ["kind", "match_id", *(["alternative"] if disjunctive else []), *keys,
            "start_ts", "end_ts", "n_events", "bindings", *(["values"] if valued else []),
            "stats"]


class RowSet:
    """The rows a group gives a pattern, prepared once for every pattern of a source
    pass that gets the same rows: in processing order (the engine's rows), and as engine
    columns per attribute set, whose memo keeps the filtered partitions for the next
    pattern that filters alike (``engine.group_events``)."""

    def __init__(self, table: pa.Table):
        self._raw = table
        self._table: pa.Table | None = None
        self._columns: dict[tuple[str, ...], EventColumns] = {}

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            self._table = self._raw.take(pa.array(processing_order(self._raw)))
        return self._table

    def columns(self, attributes) -> EventColumns:
        key = tuple(attributes)
        if key not in self._columns:
            self._columns[key] = from_arrow(self.table, key, ordered=True)
        return self._columns[key]


def match_rows(spec: Phase2Spec, table: pa.Table | RowSet, slice_value: int | None = None
               ) -> Iterator[_Piece | _StatsRow]:
    """Match the events of ``table`` (one time slice of one partition when
    ``slice_value`` is a slice, else any number of whole partitions: the engine partitions
    by X itself); yields their match rows batch by batch, then one stats row
    (``_joined`` makes frames of them)."""
    pattern = _pattern(spec.pattern_text, spec.marks_given)
    t0 = time.perf_counter()
    rows = table if isinstance(table, RowSet) else RowSet(table)
    table = rows.table
    lo, hi, s_lo, s_hi = _start_range(spec, slice_value)
    if pattern.kind == "window":
        yield from window_rows(spec, pattern, rows, lo, hi, s_lo, s_hi, t0)
        return
    pattern, compiled, cols = _compiled(pattern, rows, spec.marks_given)
    lows = table.column(LOW).to_numpy() if LOW in table.column_names else None
    options = MatchOptions(max_matches_per_window=spec.max_matches_per_window,
                           memory_budget=spec.memory_budget, limits=spec.limits,
                           plan=_driver_plan(spec.plan, spec.pattern_text, spec.marks_given),
                           describe_plan=False)  # a stats row keeps neither plan nor cost
    st = MatchStats()
    kept = 0
    positions = [table.column(position_column(a)).to_numpy().astype(np.int64)
                 if position_column(a) in table.column_names else None
                 for a in pattern.alternatives]
    disjunctive = isinstance(pattern, Disjunction)
    columns = pattern.measure_names
    for batch in execute(compiled, cols, options, st,
                         positions=positions if disjunctive else positions[0],
                         begin=begin_rows(table) if BEGIN in table.column_names else None):
        idx = inside(batch, lo, hi, lows)
        if len(idx) < len(batch):
            batch = batch_take(batch, idx)
        if not len(batch):
            continue
        kept += len(batch)
        alt = compiled.alternatives[batch.alternative]
        extra = {"alternative": np.full(len(batch), alt.pattern.alternative, np.int32)} \
            if disjunctive else {}
        after = {"values": _measures_json(alt.pattern, batch, cols, columns)} if columns \
            else None
        yield _frame(spec, table, cols, batch, alt.pattern.version,
                     [v.name for v in alt.variables], extra, after)
    # events that passed the filter, each counted in one group only (the slice holding its
    # ts; copies in earlier, overlapping slices do not count), so the sum is exact
    if s_lo is not None:
        kept_ts = cols.ts[compiled.masks(cols) != 0]
        st.events_after_filter = int(((kept_ts >= s_lo) & (kept_ts < s_hi)).sum())
    funnel = _funnel(spec, pattern, table, cols, options,
                     positions if disjunctive else positions[0], lo, hi, s_lo is not None)
    yield _stats_row(spec, st, kept, t0, s_lo, table, disjunctive=disjunctive,
                     valued=bool(columns), funnel=funnel)


def _funnel(spec: Phase2Spec, pattern, table: pa.Table, cols, options, positions, lo, hi,
            sliced: bool) -> list | None:
    """The group's funnel (docs/semantics.md, "Funnels") for the windows of its start
    range, with the partitions' keys when another group may hold the same partition (a
    time slice); None when a step needs more than the matcher's limits (the run's funnel
    is then marked incomplete; the matches are not affected)."""
    if not spec.funnel:
        return None
    key_of = None
    if sliced or not (spec.keys and spec.group_by_keys):
        attrs = {a.alternative: [table.column(x) for x in a.partition_attributes]
                 for a in pattern.alternatives}

        def key_of(alternative, row):
            return json.dumps([c[row].as_py() for c in attrs[alternative]], default=str)
    started = time.perf_counter()
    try:
        rows = funnel_counts(pattern, cols, options, positions, lo, hi, key_of)
    except MatchCapExceeded:
        return None
    return [rows, round(time.perf_counter() - started, 4)]


def _measures_json(pattern, batch, cols, columns: tuple[str, ...]) -> list[str]:
    """Each match's measures as JSON (null for a column its alternative does not have)."""
    values = measure_columns(pattern, batch, cols, columns)
    return [json.dumps({c: values[c][k] for c in columns}) for k in range(len(batch))]


def _start_range(spec: Phase2Spec, slice_value):
    """The start range of a group's matches: the run's range, cut to the group's time
    slice (only large partitions are sliced when X exists); and the slice itself."""
    lo, hi = spec.low, spec.high
    s_lo = s_hi = None
    if spec.slice_length is not None and slice_value is not None \
            and int(slice_value) != NOT_SLICED:
        s_lo = spec.slice_origin + int(slice_value) * spec.slice_length
        s_hi = s_lo + spec.slice_length
        lo = s_lo if lo is None else max(lo, s_lo)
        hi = s_hi if hi is None else min(hi, s_hi)
    return lo, hi, s_lo, s_hi


@dataclass(frozen=True)
class _StatsRow:
    """A group's stats row, turned into a frame together with the other groups of its
    input batch (``_stats_frame``): a frame per group cost more than most groups' matching."""
    record: str  # the group's MatchStats (JSON)
    keys: pa.Table  # the group's first event's partition values (one row)
    disjunctive: bool
    valued: bool  # the staged rows have ``values`` (window select values, measures)


def _stats_row(spec: Phase2Spec, st: MatchStats, kept: int, t0: float, s_lo, table,
               disjunctive: bool = False, valued: bool = False, funnel=False) -> _StatsRow:
    st.matches = kept
    st.seconds = time.perf_counter() - t0
    if s_lo is not None:
        st.partitions = 0  # a slice's partition is counted once, by its key (match job)
    record = {k: v for k, v in st.as_dict().items()
              if k not in MatchStats.TEXT + ("plan_cost",)}
    if funnel is not False:  # a sequence pattern's: its steps, or None (incomplete)
        record["funnel"] = funnel
    # the first event's partition (sliced: the slice's partition)
    return _StatsRow(json.dumps(record), table.select(list(spec.keys)).slice(0, 1),
                     disjunctive, valued)


def _stats_frame(spec: Phase2Spec, rows: list[_StatsRow]) -> pd.DataFrame:
    """The stats rows of several groups as one staged frame."""
    import pandas as pd

    n = len(rows)
    frame = {"kind": np.full(n, "stats", dtype=object), "match_id": np.full(n, None, object)}
    if rows[0].disjunctive:
        frame["alternative"] = np.zeros(n, np.int32)
    if spec.keys:
        keys = pa.concat_tables([r.keys for r in rows])
        for k in spec.keys:
            frame[k] = keys.column(k).to_pandas()
    nat = np.full(n, np.iinfo(np.int64).min).view("datetime64[ns]")
    frame.update(start_ts=nat, end_ts=nat.copy(), n_events=np.zeros(n, np.int64),
                 bindings=np.full(n, None, object), stats=[r.record for r in rows])
    if rows[0].valued:
        frame["values"] = np.full(n, None, object)
    return _typed(spec, pd.DataFrame(frame))


FLUSH_ROWS = 10_000  # match rows of one input batch held before they are handed on


def _joined(spec: Phase2Spec, pieces) -> Iterator[pd.DataFrame]:
    """The match frames and stats rows of one input batch as few frames (Spark converts
    each frame it gets to Arrow at a fixed cost): match frames joined up to ``FLUSH_ROWS``
    rows, the stats rows in one frame at the end."""
    import pandas as pd

    held, stats, rows = [], [], 0
    for piece in pieces:
        if isinstance(piece, _StatsRow):
            stats.append(piece)
            continue
        held.append(piece)
        rows += piece.rows
        if rows >= FLUSH_ROWS:
            yield _pieces_frame(spec, held)
            held, rows = [], 0
    frames = [_pieces_frame(spec, held)] if held else []
    if stats:
        frames.append(_stats_frame(spec, stats))
    if frames:
        yield frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def window_rows(spec: Phase2Spec, pattern, rows: RowSet, lo, hi, s_lo, s_hi, t0
                ) -> Iterator[_Piece | _StatsRow]:
    """A window pattern's rows for one group: its output windows starting in [lo, hi),
    bindings {first, buffer, last} and the select values as JSON, then a stats row."""
    table = rows.table
    cols = rows.columns(sorted(pattern.attributes))
    st = MatchStats()
    kept = 0
    names = [k for k, _ in pattern.select]
    for batch in execute_windows(pattern, cols, MatchOptions(), st):
        idx = inside(batch, lo, hi)
        if not len(idx):
            continue
        values = [[v[i] for i in idx.tolist()] for v in batch.values]
        batch = batch_take(batch, idx)
        kept += len(batch)
        rows = [json.dumps(dict(zip(names, row))) for row in zip(*values)] if names \
            else [None] * len(batch)
        yield _frame(spec, table, cols, batch, pattern.version, list(BINDINGS),
                     {}, {"values": rows})
    if s_lo is not None:
        kept_ts = cols.ts[relevant_rows(pattern, Evaluator(cols))] if cols.n else cols.ts
        st.events_after_filter = int(((kept_ts >= s_lo) & (kept_ts < s_hi)).sum())
    yield _stats_row(spec, st, kept, t0, s_lo, table, valued=True)


def _frame(spec: Phase2Spec, table: pa.Table, cols, batch, version: str, names: list[str],
           before: dict, after: dict | None = None) -> _Piece:
    """The staged match rows of a batch, as columns: ``before`` columns go after match_id
    (a disjunction's alternative), ``after`` ones after the bindings (a window's values).
    ``_joined`` makes one frame of many pieces (a frame per piece cost more than the
    matching of a small slice group)."""
    bindings = bindings_of(batch, cols, names)
    n = len(batch)
    frame = {"kind": np.full(n, "match", dtype=object),
             "match_id": _objects(match_ids(version, bindings)), **before}
    first = pa.array(batch.first)
    for k in spec.keys:
        frame[k] = table.column(k).take(first)
    frame["start_ts"] = batch.start_ts.view("datetime64[ns]")
    frame["end_ts"] = batch.end_ts.view("datetime64[ns]")
    frame["n_events"] = np.diff(batch.offsets)  # int64 in _typed
    frame["bindings"] = _objects(bindings_json(bindings))
    frame.update({k: _objects(v) for k, v in (after or {}).items()})
    frame["stats"] = np.full(n, None, dtype=object)
    return _Piece(frame, n)


@dataclass(frozen=True)
class _Piece:
    """One batch's match rows, column by column (numpy arrays; the partition keys as the
    Arrow arrays of ``table``)."""
    columns: dict
    rows: int


def _objects(values) -> np.ndarray:
    """A list of strings (or None) as a numpy object array, as pandas holds text."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _pieces_frame(spec: Phase2Spec, pieces: list[_Piece]) -> pd.DataFrame:
    """One frame of the pieces' rows (all of one spec: the same columns)."""
    import pandas as pd

    frame = {}
    for name, first in pieces[0].columns.items():
        parts = [p.columns[name] for p in pieces]
        if isinstance(first, (pa.Array, pa.ChunkedArray)):
            chunks = [c for part in parts for c in getattr(part, "chunks", [part])]
            frame[name] = pa.chunked_array(chunks, type=first.type).to_pandas()
        else:
            frame[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return _typed(spec, pd.DataFrame(frame))


def _typed(spec: Phase2Spec, frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[output_columns(spec.keys, "alternative" in frame, "values" in frame)]
    return out.assign(n_events=out["n_events"].astype("int64"))


def _group_starts(pdf: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The first row of each run of equal values of ``columns`` (rows sorted by them)."""
    key = pdf[columns[0]].astype(str).to_numpy() if len(columns) == 1 else \
        pdf[columns].astype(str).agg("\x1f".join, axis=1).to_numpy()
    return np.flatnonzero(np.r_[True, key[1:] != key[:-1]])


def run_partition(spec: Phase2Spec, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """mapInPandas body: split the sorted stream of rows into groups and match each."""
    group_cols = (list(spec.keys) if spec.group_by_keys else []) + \
        ([SLICE] if spec.slice_length is not None else [])
    carry: pd.DataFrame | None = None

    def split(pdf: pd.DataFrame, last_is_complete: bool):
        """The complete groups of a batch (row ranges) and the rows to carry over."""
        starts = _group_starts(pdf, group_cols).tolist() if group_cols else [0]
        bounds = starts + [len(pdf)]
        groups = list(zip(bounds[:-1], bounds[1:]))
        if last_is_complete:
            return groups, None
        return groups[:-1], pdf.iloc[bounds[-2]:].reset_index(drop=True)

    def process(pdf: pd.DataFrame, groups) -> Iterator[pd.DataFrame]:
        table = pa.Table.from_pandas(pdf, preserve_index=False)
        slices = pdf[SLICE].to_numpy() if SLICE in pdf.columns else None
        whole = []
        for a, b in groups:
            if spec.keys and spec.group_by_keys and (slices is None or slices[a] == NOT_SLICED):
                whole.append((a, b))  # whole partitions: matched together
            else:
                yield from match_rows(spec, table.slice(a, b - a),
                                      None if slices is None else slices[a])
        if whole:
            rows = np.concatenate([np.arange(a, b) for a, b in whole])
            low = spec.low if LOW not in table.column_names \
                else table.column(LOW).to_numpy()[rows]
            keep = starting(ts_ns(table)[rows], [b - a for a, b in whole], None,
                            low, spec.high)
            if keep.any():
                yield from match_rows(spec, table.take(pa.array(rows[keep])))

    for pdf in batches:
        if carry is not None and len(carry):
            import pandas as pd

            pdf = pd.concat([carry, pdf], ignore_index=True)
        if not len(pdf):
            continue
        if not group_cols:
            carry = pdf
            continue
        groups, carry = split(pdf, last_is_complete=False)
        yield from _joined(spec, process(pdf, groups))
    if carry is not None and len(carry):
        groups, _ = split(carry, last_is_complete=True)
        yield from _joined(spec, process(carry, groups))


PATTERNS_COLUMN = "__patterns"  # a source pass: bit i set when the event serves pattern i
MAX_SHARED = 63  # patterns per source pass (bits of the tag)
PATTERN = "__pattern"  # a source pass's output: the pattern a row belongs to



@dataclass(frozen=True)
class SharedSpec:
    """One pattern of a source pass (``jobs.pipeline.match.source_pass``): its phase-2 spec and
    the events it reads alone, ts in [read_low, read_high] (None: open), so that its
    matcher sees exactly the events of its own match job; in a pass by time slices (its
    spec has a ``slice_length``), the reach of its events into earlier slices (τ) and
    later ones (τ after a leading negated set), as its own job explodes them."""
    name: str
    spec: Phase2Spec
    read_low: int | None
    read_high: int | None
    reach_back: int = 0
    reach_ahead: int = 0
    bit: int = 0  # its bit of the pass's tags

    def in_slice(self, ts: np.ndarray, slices: np.ndarray) -> np.ndarray:
        """Whether each event (ns) belongs to the slice of its row in this pattern's own
        job: the slices from ⌊(ts − τ − origin) / L⌋ to ⌊(ts + ahead − origin) / L⌋, in
        the floating-point division phase 1 computes them with."""
        spec = self.spec
        first = np.floor((ts - self.reach_back - spec.slice_origin) / spec.slice_length)
        last = np.floor((ts + self.reach_ahead - spec.slice_origin) / spec.slice_length)
        return (first <= slices) & (slices <= last)


def run_shared_partition(specs: tuple[SharedSpec, ...], batches: Iterator[pd.DataFrame]
                         ) -> Iterator[pd.DataFrame]:
    """mapInPandas body of a source pass: rows sorted by (X, ts, event_id), each tagged
    with the patterns it serves; the complete partitions of each batch are matched once
    per pattern, on the rows of its tag and its own read range (as ``run_partition``
    does for one pattern, whose partitions are never sliced here). A pass of patterns
    without X has rows sorted by (time slice, ts, event_id): each slice is matched once
    per pattern, on the rows its own job puts in that slice."""
    import pandas as pd

    sliced = specs[0].spec.slice_length is not None
    group = [SLICE] if sliced else list(specs[0].spec.keys)
    carry: pd.DataFrame | None = None

    def complete(pdf: pd.DataFrame) -> int:
        """Rows of the batch up to its last (possibly incomplete) group."""
        return int(_group_starts(pdf, group)[-1])

    def process(pdf: pd.DataFrame) -> Iterator[pd.DataFrame]:
        tags = pdf[PATTERNS_COLUMN].to_numpy().astype(np.int64)
        table = pa.Table.from_pandas(pdf.drop(columns=[PATTERNS_COLUMN]), preserve_index=False)
        ts = ts_ns(table)
        slices = pdf[SLICE].to_numpy().astype(np.int64) if sliced else None
        starts = _group_starts(pdf, group).tolist()
        bounds = (starts if sliced else [0]) + [len(pdf)]
        lengths = np.diff(starts + [len(pdf)])
        masks = []
        for s in specs:
            mask = ((tags >> s.bit) & 1).astype(np.bool_)
            if s.read_low is not None:
                mask &= ts >= s.read_low
            if s.read_high is not None:
                mask &= ts <= s.read_high
            if sliced:
                mask &= s.in_slice(ts, slices)
            else:  # the partitions its own job matches (run_partition)
                mask = starting(ts, lengths, mask, s.spec.low, s.spec.high)
            masks.append(mask)
        for a, b in zip(bounds[:-1], bounds[1:]):
            one = None if slices is None else slices[a]
            for members in _same_rows([m[a:b] for m in masks]):
                # one row set for the patterns that get the same rows (same filter and
                # range, say other windows): their order, columns and filtered
                # partitions are prepared once
                shared = RowSet(table.take(pa.array(np.flatnonzero(masks[members[0]][a:b]) + a)))
                for i in members:
                    for out in _joined(specs[i].spec, match_rows(specs[i].spec, shared, one)):
                        yield out.assign(**{PATTERN: specs[i].name})

    for pdf in batches:
        if carry is not None and len(carry):
            pdf = pd.concat([carry, pdf], ignore_index=True)
        if not len(pdf):
            continue
        cut = complete(pdf)
        carry = pdf.iloc[cut:].reset_index(drop=True)
        if cut:
            yield from process(pdf.iloc[:cut].reset_index(drop=True))
    if carry is not None and len(carry):
        yield from process(carry)


def _same_rows(masks: list[np.ndarray]) -> list[list[int]]:
    """The indices of ``masks`` (of one length) grouped by equal masks, empty ones left
    out, groups in the order of their first member."""
    groups: dict[bytes, list[int]] = {}
    for i, mask in enumerate(masks):
        if mask.any():
            groups.setdefault(np.packbits(mask).tobytes(), []).append(i)
    return list(groups.values())
