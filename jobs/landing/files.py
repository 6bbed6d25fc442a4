"""A landing file read and typed exactly as ingest types it, block by block, without a
lake or Spark: the tasks of ingest write what ``typed_blocks`` yields, and ``ses match``
on a landing file reads what ``typed_file`` returns (the same columns, ids and times as in
the lake).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from jobs.config import Source, TimeRange
from jobs.landing.ids import numbered_in_files
from jobs.landing.jsonlines import jsonl_blocks
from jobs.landing.reading import (
    NOT_READ,
    NotPlain,
    RawBlock,
    block_of_records,
    csv_blocks,
    parquet_batches,
    raw_text,
    row_blocks,
    unreadable,
)
from jobs.landing.splits import Split, file_format, splits_of, whole
from jobs.landing.typing import QUARANTINE_SCHEMA, events_schema, type_block, typed_schema


def raw_columns(source: Source) -> list[str]:
    extra = [source.id_column] if source.id_column and source.id_column not in source.columns \
        else []
    return [*source.columns, *extra]


def _parquet_blocks(split: Split, columns: list[str]) -> Iterator[RawBlock]:
    n = split.first_line
    for batch in parquet_batches(Path(split.path), list(range(split.start, split.end))):
        names = batch.schema.names
        lines = np.arange(n + 1, n + 1 + batch.num_rows, dtype=np.int64)
        n += batch.num_rows
        values = {c: (batch.column(names.index(c)) if c in names else None) for c in columns}

        def raw(i: int, batch=batch) -> str:
            return raw_text(batch.slice(i, 1).to_pylist()[0])

        yield RawBlock(lines, values, raw)


def blocks(split: Split, source: Source) -> Iterator[RawBlock]:
    """The raw blocks of a split, by the reader that can take it."""
    columns = raw_columns(source)
    path = Path(split.path)
    if split.fmt == "parquet":
        return _parquet_blocks(split, columns)
    if not split.columnar:
        return row_blocks(path, split.fmt, source.time_column, columns)
    if split.fmt == "csv":
        return csv_blocks(path, split.start, split.end, split.first_line, list(split.header),
                          columns, split.last)
    return jsonl_blocks(path, split.start, split.end, split.first_line, columns,
                        source.columns)


def typed_blocks(split: Split, source: Source, ts_range: TimeRange, clock: dict | None = None
                 ) -> Iterator[tuple[int, pa.Table, pa.Table]]:
    """(raw records, typed events, quarantined rows) per block of a split; raises
    ``IngestError`` for a file that cannot be read. ``clock``: seconds spent reading,
    typing and making ids are added to its ``read``, ``type`` and ``ids``."""
    clock = {} if clock is None else clock
    try:
        t0 = time.perf_counter()
        for block in blocks(split, source):
            t1 = time.perf_counter()
            ids = clock.get("ids", 0.0)
            events, quarantine = type_block(source, block, split.label, split.run_id,
                                            split.now, ts_range, split.file_index, clock)
            t2 = time.perf_counter()
            clock["read"] = clock.get("read", 0.0) + t1 - t0
            clock["type"] = clock.get("type", 0.0) + t2 - t1 - (clock["ids"] - ids)
            yield len(block) + len(block.refused), events, quarantine
            t0 = time.perf_counter()
    except (*NOT_READ, csv.Error, pa.ArrowInvalid) as exc:
        raise unreadable(split.path, split.fmt, exc) from None


def typed_in_memory(source: Source, splits, ts_range: TimeRange = TimeRange()
                    ) -> tuple[pa.Table, pa.Table]:
    """(typed events with the staging's extra columns, quarantined rows) of splits read
    here, content-hash ids numbered over each file: ingest's typing without a lake."""
    events, quarantine = [], []
    for s in splits:
        try:
            got = list(typed_blocks(s, source, ts_range))
        except NotPlain:  # a compressed file: Python's readers read it
            got = list(typed_blocks(whole(s, s.index), source, ts_range))
        for _, ev, q in got:
            events.append(ev)
            quarantine.append(q)
    table = pa.concat_tables(events) if events else typed_schema(source).empty_table()
    if not source.id_column:
        table = numbered_in_files(table)
    q = pa.concat_tables(quarantine) if quarantine else QUARANTINE_SCHEMA.empty_table()
    return table, q


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
