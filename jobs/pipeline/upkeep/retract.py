"""``retract``: remove events from ``events/<source>`` by id or by landing file, logged.

Events are immutable once ingested; an event that should never have been (a wrong
timestamp, a test row, a corrected value) is retracted: the rows are deleted in one Delta
commit and a row per retraction goes to the ``retractions`` table (what, how many, their
time range, why, when). The delete commit carries the retraction's row as metadata
(``RETRACTION_KEY``), so a retract killed between its two commits is completed by the
next writer (``logged_retractions``): the events are never gone without a row saying so.
The delete rewrites the files that held the events (``jobs.lake.rewrite``), never delta-rs's
DELETE, whose files a filtered read cannot mix with the others. The next run of every pattern of the source re-matches the start
range that the retracted events could reach (from their earliest ``ts`` minus τ), so the
matches they took part in are replaced. A retracted file stays in the ingest log: it is not
ingested again unless its content changes.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.errors import InputError
from jobs.failpoints import reached
from jobs.lake import rewrite
from jobs.lake import store as lk
from jobs.lake.extent import RETRACTION_KEY  # the delete commit's metadata: the row

TS = pa.timestamp("us", tz="UTC")
RETRACTIONS_SCHEMA = pa.schema([
    ("retraction_id", pa.string()), ("source", pa.string()), ("event_ids", pa.list_(pa.string())),
    ("source_file", pa.string()), ("events", pa.int64()), ("ts_min", TS), ("ts_max", TS),
    ("reason", pa.string()), ("retracted_at", TS)])

HISTORY = 100  # commits of an events table looked at for a retraction not logged


def retract(lake: lk.Lake, source: str, event_ids: list[str] | None = None,
            source_file: str | None = None, reason: str = "") -> dict:
    """Delete the events; returns the retraction's log row. Raises ``ValueError`` when
    nothing matches (so a typo does not pass silently)."""
    if bool(event_ids) == bool(source_file):
        raise InputError("retract needs either event ids or a landing file, not both")
    path = lake.events(source)
    lake.table(path)  # a missing table: FileNotFoundError, one line
    if event_ids:
        where = pc.field("event_id").isin(pa.array(event_ids, pa.string()))
    else:
        where = pc.field("source_file") == source_file
    found = lake.read_arrow(path, columns=["event_id", "ts", "event_date"], filter=where)
    if found is None or found.num_rows == 0:
        before = _earlier(lake, source, event_ids, source_file)
        if before is not None:  # a rerun of a retract that was done (or completed since)
            return dict(before, already=True)
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
    dates = sorted(set(found.column("event_date").to_pylist()))
    files = rewrite.add_rows(lake, path, [("event_date", "in", dates)])
    rewrite.rewrite(lake, path, files, lambda t: t.filter(pc.invert(pc.fill_null(
        pc.is_in(t.column("event_id"), value_set=found.column("event_id")), False))),
        {RETRACTION_KEY: json.dumps(row, default=str)})
    reached("retract:after-delete")
    _log(lake, row)
    return row


def _earlier(lake: lk.Lake, source: str, event_ids, source_file) -> dict | None:
    """The logged retraction that already removed all of ``event_ids`` (or ``source_file``)."""
    t = lake.read_arrow(lake.retractions())
    for r in reversed(t.to_pylist() if t is not None else []):
        if r["source"] != source:
            continue
        if source_file and r["source_file"] == source_file:
            return r
        if event_ids and set(event_ids) <= set(r["event_ids"] or []):
            return r
    return None


def _log(lake: lk.Lake, row: dict) -> None:
    lake.append(lake.retractions(), pa.table({f.name: pa.array([row[f.name]], f.type)
                                            for f in RETRACTIONS_SCHEMA}))


def logged_retractions(lake: lk.Lake) -> list[str]:
    """Append the row of every retraction whose delete committed but whose row is not in the
    ``retractions`` table (a retract killed between its two commits); one line each."""
    t = lake.read_arrow(lake.retractions(), columns=["retraction_id"])
    known = set(t.column("retraction_id").to_pylist()) if t is not None else set()
    notes = []
    for source in lake.children(lk.join(lake.root, "events")):
        try:
            table = lake.snapshot(lake.events(source))
        except lk.BrokenTable:
            continue  # its source fails alone, saying so
        for h in table.history(HISTORY) if table is not None else []:
            if RETRACTION_KEY not in h:
                continue
            row = json.loads(h[RETRACTION_KEY])
            if row["retraction_id"] in known:
                continue
            for k in ("ts_min", "ts_max", "retracted_at"):
                row[k] = datetime.fromisoformat(row[k])
            _log(lake, row)
            known.add(row["retraction_id"])
            notes.append(f"reconciled: retraction {row['retraction_id']} of {row['events']} "
                         f"{source} event(s) had deleted them but was not logged; logged now")
    return notes
