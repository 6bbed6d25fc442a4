"""What the engine's steps hand each other: a group's events as columns (``GroupData``),
candidate windows, a matcher's result (``WindowResult``), the matches in batches of
columns (``MatchBatch``) and the counters of a run (``MatchStats``); the errors a run
stops with when a window's work passes its cap or budget."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

from jobs.core.engine.columns import EventColumns


class MatchCapExceeded(RuntimeError):
    """Too much work in one window: the message says which window and how to raise the cap."""


class MatchBudgetExceeded(MatchCapExceeded):
    """A matcher needs more memory than its budget: the message names the pattern, the
    window or partition, and the setting that raises the budget."""


@dataclass
class MatchStats:
    """The counters of one run (one typed record; ``arrow_schema`` is its Arrow form)."""

    events: int = 0
    events_after_filter: int = 0
    partitions: int = 0
    windows: int = 0
    candidate_windows: int = 0
    matcher_calls: int = 0
    matches: int = 0
    peak: int = 0  # the most work items (live instances / partial matches) in one window
    work: int = 0  # work items produced over all windows
    max_window: int = 0  # events in the largest window
    seconds: float = 0.0
    matcher: str = ""
    work_item: str = ""  # what peak and work count
    plan: str = ""
    plan_cost: float = 0.0

    MAXIMA: ClassVar[tuple[str, ...]] = ("peak", "max_window")
    TEXT: ClassVar[tuple[str, ...]] = ("matcher", "work_item", "plan")

    def as_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["seconds"] = round(out["seconds"], 6)
        if not self.plan:
            del out["plan"], out["plan_cost"]
        return out

    @classmethod
    def numeric_fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in cls.TEXT)

    @classmethod
    def arrow_schema(cls):
        import pyarrow as pa

        kinds = {int: pa.int64(), float: pa.float64(), str: pa.string()}
        return pa.schema([(f.name, kinds[type(f.default)]) for f in fields(cls)])


@dataclass
class GroupData:
    """The kept events of one run, grouped by partition, each partition in processing
    order; ``rows`` maps back to the caller's rows."""

    cols: EventColumns
    masks: np.ndarray
    rows: np.ndarray
    seg_start: np.ndarray
    seg_end: np.ndarray
    positions: np.ndarray | None = None  # contiguity positions of the kept events
    cache: dict = field(default_factory=dict)


@dataclass
class Windows:
    first: np.ndarray  # index (in GroupData) of each window's first event
    end: np.ndarray  # exclusive end


@dataclass
class MatchColumns:
    """Matches as columns: match k binds ``events[offsets[k]:offsets[k+1]]`` (GroupData
    indices), variable by variable in pattern order, each variable's events in order."""

    first: np.ndarray  # each match's window: the index of its first event
    offsets: np.ndarray
    events: np.ndarray
    variables: np.ndarray

    def __len__(self) -> int:
        return len(self.first)


@dataclass
class WindowResult:
    matches: MatchColumns
    peak: int
    work: int
    resume: int  # the next window to process (== number of windows when done)


@dataclass
class MatchBatch:
    """A batch of matches in the caller's rows, ordered by first event."""

    first: np.ndarray  # row of each match's first event
    start_ts: np.ndarray
    end_ts: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray  # bound rows, variable by variable
    variables: np.ndarray
    alternative: int = 0  # index into the compiled pattern's ``alternatives``

    def __len__(self) -> int:
        return len(self.first)


def concat_batches(batches: list[MatchBatch]) -> MatchBatch:
    """One batch of several (of one pattern)."""
    counts = np.concatenate([np.diff(b.offsets) for b in batches])
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return MatchBatch(np.concatenate([b.first for b in batches]),
                      np.concatenate([b.start_ts for b in batches]),
                      np.concatenate([b.end_ts for b in batches]), offsets,
                      np.concatenate([b.rows for b in batches]),
                      np.concatenate([b.variables for b in batches]), batches[0].alternative)


def batch_take(b: MatchBatch, order: np.ndarray) -> MatchBatch:
    counts = np.diff(b.offsets)[order]
    offsets = np.zeros(len(order) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    starts = b.offsets[:-1][order]
    idx = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])
    return MatchBatch(b.first[order], b.start_ts[order], b.end_ts[order], offsets,
                      b.rows[idx], b.variables[idx], b.alternative)
