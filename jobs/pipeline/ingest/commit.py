"""Loading a staged batch, and what an ingest says it did.

``commit`` loads the events, then the quarantine, then the ingest log: the log comes last,
so a crash before it leaves the files pending and their rerun adds nothing twice.
``ingest`` is the whole: stage, the caller's gate (the events suite) on the typed batch
before anything is committed, commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

import pyarrow as pa

from jobs.config import Source, TimeRange
from jobs.failpoints import reached
from jobs.lake import store as lk
from jobs.landing.typing import ARROW, events_schema
from jobs.pipeline.ingest import load
from jobs.pipeline.ingest.staging import Batch, IngestResult, batches, stage, staged_files

INGEST_LOG_SCHEMA = pa.schema([
    ("source", pa.string()), ("file", pa.string()), ("sha256", pa.string()),
    ("rows", pa.int64()), ("events", pa.int64()), ("quarantined", pa.int64()),
    ("ingest_run", pa.string()), ("ingested_at", ARROW["timestamp"])])
SHOWN_REASONS = 3  # quarantined rows an ingest's lines show


def commit(lake: lk.Lake, batch: Batch, spark=None) -> IngestResult:
    """Load a staged batch: events, then quarantine, then the ingest log (the log comes
    last: a crash before it leaves the files pending, and their rerun adds nothing twice).
    The events' data files are written from the staged files by Spark's executors (here
    without ``spark``), or were written by the tasks (``Batch.direct``: moved in place),
    and committed at once (``load``); the staging is removed after."""
    result = batch.result
    quarantine = pa.concat_tables(batch.quarantine) if batch.quarantine else None
    result.quarantined = quarantine.num_rows if quarantine is not None else 0
    if quarantine is not None:
        result.reasons = [f"{r['source_file']}:{r['line']}: {r['reason']}" if r["line"] >= 0
                          else f"{r['source_file']}: {r['reason']}" for r in
                          quarantine.select(["source_file", "line", "reason"]).slice(
                              0, SHOWN_REASONS).to_pylist()]
    if batch.num_events:
        path, schema = lake.events(batch.source.name), events_schema(batch.source)
        if load.loadable(lake, path, schema):  # data files by the executors, one commit
            files = batch.load_files if batch.load_files is not None \
                else staged_files(lake, batch.events_path)
            result.new_events = load.load(spark, lake, path, files, schema, batch.direct)
        else:  # a source whose columns changed: delta-rs merges the schemas
            result.new_events = lake.insert_new_stream(
                path, lambda: batches(lake, batch.events_path), schema, key="event_id",
                partition_by=["event_date"], same_partition=True)
    reached("ingest:after-events")
    if quarantine is not None:
        lake.insert_new(lake.quarantine(batch.source.name), quarantine,
                        key=("source_file", "line", "reason"))
    reached("ingest:after-quarantine")
    if batch.log:
        lake.insert_new(lake.ingest_log(), pa.Table.from_pylist(batch.log,
                                                                schema=INGEST_LOG_SCHEMA),
                        key=("source", "file", "sha256"))
    batch.discard()
    return result


Gate = Callable[[Source, Batch], None]


def ingest(source: Source, landing_root: str, lake: lk.Lake, run_id: str,
           now: datetime | None = None, ts_range: TimeRange = TimeRange(),
           gate: Gate | None = None, spark=None, echo=None,
           before_tasks: Callable[[int], None] | None = None) -> IngestResult:
    """Stage (on Spark's executors when ``spark`` is given), check with ``gate`` (raises
    to refuse the batch), commit. ``before_tasks``: called when there are files to read,
    before the tasks start, with a guess of their rows (``listing.estimated_rows``)."""
    batch = stage(source, landing_root, lake, run_id, now, ts_range, spark, echo,
                  before_tasks)
    try:
        t0 = time.perf_counter()
        if gate is not None and batch.num_events:
            gate(source, batch)
        t1 = time.perf_counter()
        result = commit(lake, batch, spark)
        result.seconds.update(suite=t1 - t0, commit=time.perf_counter() - t1)
        return result
    finally:
        batch.discard()


def timings(result: IngestResult) -> str:
    """Where an ingest's time went, one line: the driver's steps, and the tasks' time
    (summed over the tasks, which run side by side)."""
    s = result.seconds
    tasks = ", ".join(f"{k.split(': ')[1]} {v:.1f} s" for k, v in s.items()
                      if k.startswith("tasks: "))
    steps = [f"{k} {v:.1f} s" for k, v in s.items() if not k.startswith("tasks: ")]
    return f"{result.source}: {', '.join(steps)} (in the tasks: {tasks})"


def describe(result: IngestResult, run_id: str = "<run id>") -> str:
    """What an ingest did, for people: counts; with quarantined rows, the first of them
    (file, line, reason) and the query that lists every one."""
    dup = f", {result.duplicates} already there" if result.duplicates else ""
    text = (f"{result.source}: {result.files} new file(s), {result.skipped_files} already "
            f"ingested; {result.rows} rows -> {result.new_events} new events, "
            f"{result.quarantined} quarantined{dup}")
    if result.changed:
        shown = ", ".join(result.changed[:5]) + (" …" if len(result.changed) > 5 else "")
        text += (f"\n  changed since ingested: {shown} (read again: its rows already there "
                 "are counted, a row that differs is quarantined as a correction)")
    if result.quarantined:
        text += "".join(f"\n  quarantined {r}" for r in result.reasons)
        more = result.quarantined - len(result.reasons)
        text += (f"\n  {'and ' + str(more) + ' more; ' if more > 0 else ''}every one: ses query "
                 f"\"SELECT source_file, line, reason FROM quarantine_{result.source} WHERE "
                 f"ingest_run = '{run_id}'\"")
    if result.rebuilt is None:
        return text
    back = len(result.rebuilt) - len(result.gone)
    text = (f"{result.source}: events/{result.source} was missing though the ingest log "
            f"lists {len(result.rebuilt)} file(s): re-ingested the {back} still in the "
            f"landing folder; " + text.split(": ", 1)[1])
    if result.gone:
        text += (f"; gone from the landing folder: {', '.join(result.gone)} (their events are "
                 "lost until the files are put back; docs/operations.md)")
    return text
