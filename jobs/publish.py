"""``publish``: staging matches -> ``matches/<pattern>`` (Delta), and the ``runs`` log.

The staged match rows of a run replace the published matches of the same pattern version
whose first event lies in the run's range, in one Delta MERGE on ``match_id``: rows that
are new are inserted, rows that no longer match are deleted, rows that stay are untouched.
A rerun of the same logical date therefore changes nothing (no commit at all). A full
recompute (new or changed pattern version) also deletes the old version's rows in the same
commit; when the new version's columns differ (other partition attributes), it overwrites
the table in one commit instead. Matches reach the table from the staging Parquet files written by the
executors; the driver streams them into the MERGE, bounded by the run's matches, never by
the events.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from . import lake as lk
from .core.pattern import Disjunction, Pattern
from .horizons import RunRange

BINDINGS = pa.map_(pa.string(), pa.list_(pa.string()))
TS = pa.timestamp("us", tz="UTC")


def staged_matches(staging: str, pattern: Pattern | Disjunction, run_id: str) -> pa.Table:
    """The match rows of a run, in the published schema (DESIGN.md section 4)."""
    ds = pads.dataset(staging, format="parquet")
    t = ds.to_table(filter=pc.field("kind") == "match")
    n = t.num_rows
    bindings = [list(json.loads(b).items()) for b in t.column("bindings").to_pylist()]
    cols = {
        "match_id": t.column("match_id"),
        "pattern": pa.array([pattern.name] * n, pa.string()),
        "pattern_version": pa.array([pattern.version] * n, pa.string()),
    }
    if isinstance(pattern, Disjunction):  # which alternative matched (1, 2, ...)
        cols["alternative"] = t.column("alternative").cast(pa.int32())
    window = pattern.kind == "window"
    for k in () if window else pattern.partition_attributes:
        cols[k] = t.column(k)
    cols.update({
        "start_ts": t.column("start_ts").cast(TS),
        "end_ts": t.column("end_ts").cast(TS),
        "n_events": t.column("n_events").cast(pa.int64()),
        "bindings": pa.array(bindings, BINDINGS),
    })
    if window:  # the select values, one typed column each
        cols.update(select_columns(pattern, t.column("values").to_pylist()))
    cols["run_id"] = pa.array([run_id] * n, pa.string())
    return pa.table(cols)


SELECT_TYPES = {"string": pa.string(), "double": pa.float64(), "integer": pa.int64(),
                "timestamp": TS}


def select_columns(pattern, values_json: list[str | None]) -> dict[str, pa.Array]:
    """A window pattern's select values (JSON per window) as typed Arrow columns."""
    from .config import load_sources
    from .core.events import parse_ts
    from .core.window import select_types

    source = load_sources().get(pattern.source)
    types = select_types(pattern, dict(source.columns) if source else {})
    rows = [json.loads(v) if v else {} for v in values_json]
    out = {}
    for name, kind in types.items():
        column = [r.get(name) for r in rows]
        if kind == "timestamp":
            column = [None if v is None else datetime.fromtimestamp(parse_ts(v) / 1e9,
                                                                     tz=timezone.utc)
                      for v in column]
        elif kind == "integer":
            column = [None if v is None else int(v) for v in column]
        elif kind == "string":
            column = [None if v is None else str(v) for v in column]
        out[name] = pa.array(column, SELECT_TYPES[kind])
    return out


RUN_KEY = "ses.run"  # commit metadata: the runs row of the run that made the commit


def publish(lake: lk.Lake, pattern: Pattern | Disjunction, run_id: str, staging: str,
            rng: RunRange, run_row: dict | None = None) -> dict:
    """Publish a run's staged matches; returns {'inserted', 'deleted', 'published'}.

    The commit carries ``run_row`` (the run's log row without its counts) as custom
    metadata, so that a crash between this commit and the runs row is repaired by the next
    run (``jobs.reconcile``) from the table's own history."""
    from deltalake import CommitProperties

    data = staged_matches(staging, pattern, run_id)
    path = lake.matches(pattern.name)
    meta = json.dumps(run_row or {"run_id": run_id}, default=str)
    if not lk.exists(path) or (rng.full and _schema_changed(path, data.schema)):
        before = lk.table(path).count() if lk.exists(path) else 0
        props = CommitProperties(custom_metadata={RUN_KEY: meta, "ses.deleted": str(before)})
        lk.write_deltalake(path, data, mode="overwrite", schema_mode="overwrite",
                           commit_properties=props)
        return {"inserted": data.num_rows, "deleted": before, "published": data.num_rows}
    # the rows this run is the truth for: its version's matches starting in the range,
    # and, on a full recompute, every row of another version
    scope = [f"t.start_ts < '{_iso(rng.high)}'"]
    if rng.low is not None:
        scope.append(f"t.start_ts >= '{_iso(rng.low)}'")
    mine = f"t.pattern_version = '{pattern.version}' AND " + " AND ".join(scope)
    delete_when = f"({mine}) OR t.pattern_version != '{pattern.version}'" if rng.full else mine
    metrics = (lk.table(path).merge(data, predicate="t.match_id = s.match_id",
                                    source_alias="s", target_alias="t",
                                    commit_properties=CommitProperties(
                                        custom_metadata={RUN_KEY: meta}))
               .when_not_matched_insert_all()
               .when_not_matched_by_source_delete(predicate=delete_when)
               .execute())
    return {"inserted": int(metrics.get("num_target_rows_inserted", 0)),
            "deleted": int(metrics.get("num_target_rows_deleted", 0)),
            "published": lk.table(path).count()}


def _schema_changed(path: str, schema: pa.Schema) -> bool:
    current = pa.schema(lk.table(path).schema().to_arrow())
    return [f.name for f in current] != [f.name for f in schema]


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


RUNS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("logical_date", pa.string()), ("pattern", pa.string()),
    ("pattern_version", pa.string()), ("source", pa.string()), ("matcher", pa.string()),
    ("horizon_low", TS), ("horizon_high", TS), ("full_recompute", pa.bool_()),
    ("events", pa.int64()), ("events_after_filter", pa.int64()), ("partitions", pa.int64()),
    ("windows", pa.int64()), ("candidate_windows", pa.int64()), ("matcher_calls", pa.int64()),
    ("matches", pa.int64()), ("inserted", pa.int64()), ("deleted", pa.int64()),
    ("late_events", pa.int64()), ("seconds", pa.float64()), ("status", pa.string()),
    ("message", pa.string()), ("started_at", TS), ("finished_at", TS),
    ("plan", pa.string()), ("plan_generator", pa.string()), ("estimated_pm", pa.float64()),
    ("actual_pm", pa.float64()), ("replanned", pa.string()),
    ("match_seconds", pa.float64()), ("validate_seconds", pa.float64()),
    ("publish_seconds", pa.float64())])


def log_run(lake: lk.Lake, row: dict) -> None:
    """Append one row (one pattern, one run) to the runs table."""
    values = {}
    for f in RUNS_SCHEMA:
        v = row.get(f.name)
        if f.type == TS and isinstance(v, int):
            v = datetime.fromtimestamp(v / 1e9, tz=timezone.utc)
        values[f.name] = pa.array([v], f.type)
    lk.append(lake.runs(), pa.table(values, schema=RUNS_SCHEMA))


def previous_runs(lake: lk.Lake, pattern: str) -> list[dict]:
    t = lk.read_arrow(lake.runs())
    if t is None:
        return []
    return [r for r in t.to_pylist() if r["pattern"] == pattern]
