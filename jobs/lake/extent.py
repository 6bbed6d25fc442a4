"""What the Delta log of ``events/<source>`` says without reading a row: when the table was
last written, and the time range of each data file (its ``ts`` statistics). A night uses it
to see, with no Spark, that a pattern has nothing new to match (``match_steps.idle``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake.store import Lake, file_name

UPKEEP = {"OPTIMIZE", "VACUUM START", "VACUUM END"}  # commits that change no row


@dataclass(frozen=True)
class EventsExtent:
    written_at: datetime  # the newest commit that changed rows (of the last ten; else the oldest)
    lows: np.ndarray  # per data file: its smallest and largest ts, nanoseconds
    highs: np.ndarray
    complete: bool  # every file has its ts statistics (else nothing can be ruled out)

    def holds_between(self, low: int | None, high: int) -> bool:
        """Whether some event may have ``low <= ts < high`` (None: from the beginning);
        True when a file has no statistics."""
        if not self.complete:
            return True
        hit = self.lows < high
        if low is not None:
            hit &= self.highs >= low
        return bool(hit.any())


def _ns(column: pa.ChunkedArray) -> np.ndarray:
    return pc.cast(column, pa.timestamp("ns", tz="UTC")).cast(pa.int64()) \
        .to_numpy(zero_copy_only=False)


def events_extent(lake: Lake, source: str) -> EventsExtent | None:
    """The extent of ``events/<source>`` (None: no such table)."""
    dt = lake.snapshot(lake.events(source))
    if dt is None:
        return None
    history = dt.history(10)  # newest first
    data = [c for c in history if c.get("operation") not in UPKEEP] or history[-1:]
    written = datetime.fromtimestamp(data[0]["timestamp"] / 1000, tz=timezone.utc)
    files = pa.table(dt.get_add_actions(flatten=True))
    none = np.zeros(0, np.int64)
    if files.num_rows == 0:
        return EventsExtent(written, none, none, True)
    if "min.ts" not in files.column_names:
        return EventsExtent(written, none, none, False)
    lows, highs = files.column("min.ts"), files.column("max.ts")
    if lows.null_count or highs.null_count:
        return EventsExtent(written, none, none, False)
    return EventsExtent(written, _ns(lows), _ns(highs), True)


def ingested_bounds(files: pa.Table) -> np.ndarray | None:
    """Per data file of a Delta table's add actions (``get_add_actions(flatten=True)``):
    a bound, in microseconds, that no event of the file was ingested after. Delta truncates
    timestamp statistics to milliseconds, so the bound is the file's ``max.ingested_at``
    plus one millisecond (at worst a file is read that need not be, never the reverse).
    None: a file without the statistic."""
    column = "max.ingested_at"
    if column not in files.column_names or files.column(column).null_count:
        return None
    return _ns(files.column(column)) // 1000 + 1000


def files_ingested_after(lake: Lake, source: str, since: datetime) -> set[str] | None:
    """The data files of ``events/<source>`` that may hold an event ingested after
    ``since`` (naive: UTC), by their ``ingested_at`` statistics (``ingested_bounds``): a
    night's late-event count then reads what arrived since the last run, not the history.
    None: a file without statistics (every file must be read)."""
    files = pa.table(lake.snapshot(lake.events(source), required=True)
                     .get_add_actions(flatten=True))
    if files.num_rows == 0:
        return set()
    bounds = ingested_bounds(files)
    if bounds is None:
        return None
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    cut = int(since.timestamp() * 1_000_000)
    paths = files.column("path").to_pylist()
    return {file_name(p) for p, b in zip(paths, bounds) if b > cut}


APPENDS = {"WRITE", "CREATE TABLE"}  # ingest's commits: rows added, none changed
RETRACTION_KEY = "ses.retraction"  # a retraction's delete commit's metadata: its row


def only_appends_since(lake: Lake, source: str, since: datetime) -> bool:
    """Whether every commit of ``events/<source>`` after ``since`` only added rows (no
    retraction, whose commit carries ``RETRACTION_KEY``, no rewrite or overwrite), as far
    as its last 100 commits tell."""
    dt = lake.snapshot(lake.events(source))
    if dt is None:
        return False
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    for commit in dt.history(100):
        if datetime.fromtimestamp(commit["timestamp"] / 1000, tz=timezone.utc) <= since:
            return True
        operation = commit.get("operation")
        mode = str((commit.get("operationParameters") or {}).get("mode", "Append")).lower()
        removed = (commit.get("operationMetrics") or {}).get("num_removed_files") or 0
        if operation in UPKEEP:
            continue
        if operation not in APPENDS or mode != "append" and operation == "WRITE" \
                or RETRACTION_KEY in commit or removed:
            return False
    return False  # older than the commits looked at: not known
