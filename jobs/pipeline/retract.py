"""``retract``: remove events from ``events/<source>`` by id or by landing file, logged.

Events are immutable once ingested; an event that should never have been (a wrong
timestamp, a test row, a corrected value) is retracted: the rows are deleted in one Delta
commit and a row per retraction goes to the ``retractions`` table (what, how many, their
time range, why, when). The next run of every pattern of the source re-matches the start
range that the retracted events could reach (from their earliest ``ts`` minus τ), so the
matches they took part in are replaced. A retracted file stays in the ingest log: it is not
ingested again unless its content changes.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import NS_MIN
from jobs.core.errors import InputError
from jobs.core.events import parse_ts
from jobs.lake import store as lk

TS = pa.timestamp("us", tz="UTC")
RETRACTIONS_SCHEMA = pa.schema([
    ("retraction_id", pa.string()), ("source", pa.string()), ("event_ids", pa.list_(pa.string())),
    ("source_file", pa.string()), ("events", pa.int64()), ("ts_min", TS), ("ts_max", TS),
    ("reason", pa.string()), ("retracted_at", TS)])


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def retract(lake: lk.Lake, source: str, event_ids: list[str] | None = None,
            source_file: str | None = None, reason: str = "") -> dict:
    """Delete the events; returns the retraction's log row. Raises ``ValueError`` when
    nothing matches (so a typo does not pass silently)."""
    if bool(event_ids) == bool(source_file):
        raise InputError("retract needs either event ids or a landing file, not both")
    path = lake.events(source)
    dt = lake.table(path)
    if event_ids:
        where = pc.field("event_id").isin(pa.array(event_ids, pa.string()))
        predicate = "event_id IN (" + ", ".join(map(_quote, event_ids)) + ")"
    else:
        where = pc.field("source_file") == source_file
        predicate = f"source_file = {_quote(source_file)}"
    found = dt.to_pyarrow_dataset().to_table(columns=["event_id", "ts"], filter=where)
    if found.num_rows == 0:
        what = f"event id(s) {', '.join(event_ids[:5])}" if event_ids else f"file {source_file}"
        raise InputError(f"no events of source {source!r} match {what}: nothing retracted")
    if event_ids:
        missing = sorted(set(event_ids) - set(found.column("event_id").to_pylist()))
        if missing:
            raise InputError(f"source {source!r} has no event(s) {', '.join(missing[:5])}: "
                             "nothing retracted (check the ids)")
    ts = found.column("ts")
    row = {"retraction_id": uuid.uuid4().hex[:12], "source": source,
           "event_ids": sorted(found.column("event_id").to_pylist()) if event_ids else None,
           "source_file": source_file, "events": found.num_rows,
           "ts_min": pc.min(ts).as_py(), "ts_max": pc.max(ts).as_py(), "reason": reason,
           "retracted_at": datetime.now(timezone.utc)}
    dt.delete(predicate)
    lake.append(lake.retractions(), pa.table({f.name: pa.array([row[f.name]], f.type)
                                            for f in RETRACTIONS_SCHEMA}))
    return row


def reopened_low(lake: lk.Lake, source: str, since, tau: int) -> int | None:
    """The earliest first event a pattern with window ``tau`` must re-match because of
    retractions of ``source`` after ``since`` (None: none)."""
    t = lake.read_arrow(lake.retractions())
    if t is None:
        return None
    lows = [parse_ts(r["ts_min"]) - tau for r in t.to_pylist()
            if r["source"] == source and (since is None or r["retracted_at"] > since)]
    lows = [x for x in lows if x > NS_MIN]  # an event the engine could never read: no match
    return min(lows) if lows else None
