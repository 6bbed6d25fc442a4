"""``ingest``: raw landing files -> ``events/<source>`` (Delta, typed, partitioned by
``event_date``) and ``quarantine/<source>`` (rows that did not parse, with the reason).

The driver lists the landing folder and plans the splits (``listing``); Spark's executors
read and type each split on columns (``reading``, ``typing``, ``ids``, ``tasks``); the
driver settles what needs the whole batch on integer columns (``staging``), runs the
events suite on the batch, and commits events, quarantine and ingest log, in that order
(``commit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from jobs.config import Source, TimeRange
from jobs.pipeline.ingest.commit import INGEST_LOG_SCHEMA, commit, describe, ingest
from jobs.pipeline.ingest.ids import numbered_in_files
from jobs.pipeline.ingest.listing import file_format, landing_files, splits_of
from jobs.pipeline.ingest.reading import IngestError, Refused, block_of_records, excerpt, read_raw
from jobs.pipeline.ingest.staging import (
    INGEST_FOLDER,
    Batch,
    IngestResult,
    stage,
    typed_in_memory,
)
from jobs.pipeline.ingest.tasks import raw_columns
from jobs.pipeline.ingest.typing import QUARANTINE_SCHEMA, events_schema, type_block

__all__ = ["INGEST_FOLDER", "INGEST_LOG_SCHEMA", "QUARANTINE_SCHEMA", "Batch", "IngestError",
           "IngestResult", "Refused", "Typed", "commit", "describe", "events_schema",
           "excerpt", "ingest", "landing_files", "read_raw", "stage", "type_rows",
           "typed_file"]


@dataclass
class Typed:
    """Typed rows as Python dicts (``type_rows``)."""

    events: list[dict] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)


def type_rows(source: Source, records, file_label: str, run_id: str, now: datetime | None,
              ts_range: TimeRange = TimeRange()) -> Typed:
    """Records of one file from ``read_raw`` typed as ingest types them (ids numbered over
    the records), as Python dicts: for callers that hold a few rows."""
    block = block_of_records(records, raw_columns(source))
    events, quarantine = type_block(source, block, file_label, run_id, now, ts_range)
    if not source.id_column:
        events = numbered_in_files(events)
    columns = [*events_schema(source).names, "_line"]
    return Typed(events.select(columns).to_pylist(), quarantine.to_pylist())


def typed_file(source: Source, path: Path) -> tuple[pa.Table, list[dict]]:
    """One raw file typed exactly as ingest types it (same columns, ids and times), without
    the lake: (events as Arrow, quarantined rows). For ``match`` on a landing file."""
    fmt = file_format(path, source.format)
    splits = splits_of(path, fmt, source.time_column, 0, path.name, 0, "match",
                       datetime.now(timezone.utc))
    events, quarantine = typed_in_memory(source, splits)
    return events.select(events_schema(source).names), quarantine.to_pylist()
