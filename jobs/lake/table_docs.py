"""What a match table is and what its columns mean, written into the Delta table itself
(name, description, properties ``ses.pattern.*``, a ``comment`` per column), so that any
Delta reader, the catalogue site and the views learn it from the table."""

from __future__ import annotations

import pyarrow as pa

from jobs.config import current_project
from jobs.lake.store import Lake
from jobs.lake.views import SOURCE_KEY

COLUMNS = {
    "match_id": "the match's id: a hash of the pattern version and the bound events",
    "pattern": "the pattern's name (the file's name:)",
    "pattern_version": "hash of the normalized pattern: changes when its meaning changes",
    "alternative": "which alternative of the pattern matched (1, 2, ...)",
    "start_ts": "time of the match's first event",
    "end_ts": "time of the match's last event",
    "n_events": "how many events the match binds",
    "bindings": "variable -> the ids of its events, in time order (events_<source>."
                "event_id); one row per event in the view match_events_<pattern>",
    "run_id": "the run that published the row (the runs table)",
}


def column_meanings(pattern, names: list[str]) -> dict[str, str]:
    """Column -> meaning, for the columns of a pattern's match table."""
    out = {}
    measures = {} if pattern.kind == "window" else {
        m.name: m.expr for alt in pattern.alternatives for m in alt.measures}
    for name in names:
        if name in COLUMNS:
            out[name] = COLUMNS[name]
        elif name in measures:
            only = "" if len(pattern.alternatives) == 1 or all(
                any(m.name == name for m in a.measures) for a in pattern.alternatives) \
                else " (null for the alternatives without it)"
            out[name] = f"measure {name}: {measures[name]}, computed over each match{only}"
        elif pattern.kind == "window":
            out[name] = f"value {name!r} of the pattern's select, one per window"
        else:
            out[name] = f"partition attribute {name!r}: the value every event of the match " \
                        "shares"
    return out


def table_properties(pattern) -> dict[str, str]:
    rel = current_project().relative(pattern.path) if pattern.path else ""
    return {"ses.pattern.path": rel, "ses.pattern.version": pattern.version,
            "ses.pattern.kind": pattern.kind, "ses.pattern.matcher": pattern.matcher,
            SOURCE_KEY: pattern.source or ""}


def description_of(pattern) -> str:
    return (pattern.description or f"matches of pattern {pattern.name}").strip()


def documented_schema(pattern, schema: pa.Schema) -> pa.Schema:
    """``schema`` with each column's meaning as its ``comment``: what a new match table
    is created with, so that its first commit documents it (``document_match_table``
    then only adds the properties, which Delta accepts only on an existing table)."""
    meanings = column_meanings(pattern, schema.names)
    return pa.schema([f.with_metadata({**(f.metadata or {}), b"comment": meanings[f.name]})
                      if f.name in meanings else f for f in schema], metadata=schema.metadata)


def document_match_table(lake: Lake, pattern) -> bool:
    """Write the pattern's description, file, version and the columns' meanings into the
    table's metadata where they differ (no commit when nothing changed); True if written.
    What differs is read from the kept snapshot (``Lake.snapshot``: most nights nothing
    does); the changes go through a table opened for them."""
    path = lake.matches(pattern.name)
    kept = lake.snapshot(path, required=True)
    meta, schema = kept.metadata(), pa.schema(kept.schema().to_arrow())
    description = description_of(pattern)
    props = table_properties(pattern)
    comments = {name: meaning for name, meaning in column_meanings(pattern, schema.names).items()
                if (schema.field(name).metadata or {}).get(b"comment", b"").decode() != meaning}
    alter = [meta.name != pattern.name, meta.description != description,
             any(meta.configuration.get(k) != v for k, v in props.items())]
    if not any(alter) and not comments:
        return False
    dt = lake.table(path)
    if alter[0]:
        dt.alter.set_table_name(pattern.name)
    if alter[1]:
        dt.alter.set_table_description(description)
    if alter[2]:
        dt.alter.set_table_properties(props, raise_if_not_exists=False)
    for name, meaning in comments.items():
        dt.alter.set_column_metadata(name, {"comment": meaning})
    return True
