"""One pattern in one run, as the runs table keeps it: the typed record the match job's
counters fill, ``publish`` and the failure paths write, and the summary, ``runs``,
pr-check, ``reconcile`` and the catalogue read. Its Arrow schema is the runs table's.

A run is of a kind: ``nightly`` (a logical date's incremental range, the default) or
``backfill`` (a recomputed range, with no logical date). Only nightly runs move a pattern's
horizon (docs/pipeline.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone

import pyarrow as pa

NIGHTLY, BACKFILL = "nightly", "backfill"
RUN_KINDS = (NIGHTLY, BACKFILL)
# the matcher's counters of a run (the match job sums them over its groups)
COUNTERS = ("events", "events_after_filter", "partitions", "windows", "candidate_windows",
            "matcher_calls", "matches")
TS = pa.timestamp("us", tz="UTC")


@dataclass
class RunRecord(Mapping):
    """A row of the runs table. Read it as a record (``r.status``) or, where rows of
    other shapes travel along (the models' rows in ``run``), as a mapping (``r["status"]``,
    ``r.get("late_events")``)."""

    run_id: str
    logical_date: str | None = None
    pattern: str | None = None
    pattern_version: str | None = None
    source: str | None = None
    matcher: str | None = None
    horizon_low: datetime | None = None
    horizon_high: datetime | None = None
    full_recompute: bool | None = None
    events: int | None = None
    events_after_filter: int | None = None
    partitions: int | None = None
    windows: int | None = None
    candidate_windows: int | None = None
    matcher_calls: int | None = None
    matches: int | None = None
    inserted: int | None = None
    deleted: int | None = None
    late_events: int | None = None
    seconds: float | None = None
    status: str | None = None
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    plan: str | None = None
    plan_generator: str | None = None
    estimated_pm: float | None = None
    actual_pm: float | None = None
    replanned: str | None = None
    match_seconds: float | None = None
    validate_seconds: float | None = None
    publish_seconds: float | None = None
    # the columns the runs table gained later, after the older ones (a table written before
    # gets them at its end): run_kind; for first_ever patterns, the firsts a late event
    # replaced and those a retraction promoted
    run_kind: str | None = NIGHTLY
    first_ever_replaced: int | None = None
    first_ever_promoted: int | None = None
    # what the match job counted that the runs table does not keep (work, peak, work_item,
    # warnings): the summary and pr-check read it from the record the step returns
    match_detail: dict = field(default_factory=dict, metadata={"column": False})

    def __post_init__(self) -> None:
        for k in TIMES:
            setattr(self, k, _time(getattr(self, k)))

    @classmethod
    def from_row(cls, row: Mapping) -> RunRecord:
        """A record from a mapping (a table row, a commit's metadata, a step's counters):
        its keys that are columns, timestamps as datetimes (from datetimes, ISO text or
        int nanoseconds)."""
        return cls(**{k: v for k, v in row.items() if k in _NAMES})

    @classmethod
    def of_match(cls, stats: Mapping, **values) -> RunRecord:
        """The record of a staged match job: its counters (``stats``, as a ``StagedRun``
        holds them) and ``values``; what is not a column goes to ``match_detail``."""
        merged = {**stats, **values}
        return cls(**{k: v for k, v in merged.items() if k in _NAMES},
                   match_detail={k: v for k, v in stats.items() if k not in _NAMES})

    def as_row(self) -> dict:
        """The runs table's columns as a dict."""
        return {k: getattr(self, k) for k in _NAMES}

    @property
    def kind(self) -> str:
        return self.run_kind or NIGHTLY  # rows written before run kinds were nightly

    def __getitem__(self, key: str):
        if key in _NAMES:
            return getattr(self, key)
        return self.match_detail[key]

    def __iter__(self) -> Iterator[str]:
        return iter(_NAMES)

    def __len__(self) -> int:
        return len(_NAMES)


_NAMES = tuple(f.name for f in fields(RunRecord) if f.metadata.get("column", True))
TIMES = ("horizon_low", "horizon_high", "started_at", "finished_at")
_ARROW = {"str": pa.string(), "str | None": pa.string(), "int | None": pa.int64(),
          "float | None": pa.float64(), "bool | None": pa.bool_(), "datetime | None": TS}
SCHEMA = pa.schema([(f.name, _ARROW[f.type]) for f in fields(RunRecord)
                    if f.name in _NAMES])  # the runs table


def _time(v):
    if v is None or isinstance(v, datetime):
        return v
    if isinstance(v, int):
        return datetime.fromtimestamp(v / 1e9, tz=timezone.utc)
    if isinstance(v, str):
        return datetime.fromisoformat(v)
    raise TypeError(f"not a time: {v!r}")


def to_arrow(records: list[RunRecord]) -> pa.Table:
    """Records as rows of the runs table."""
    return pa.Table.from_pylist([r.as_row() for r in records], schema=SCHEMA)


def from_arrow(table: pa.Table | None) -> list[RunRecord]:
    return [] if table is None else [RunRecord.from_row(r) for r in table.to_pylist()]
