"""``make new-pattern NAME=... SOURCE=...``: a new pattern file that validates as it is,
with an ``examples:`` block to edit: two variables of the source's event-type column
(``a`` then ``b``), linked on its partition column, and one example that matches."""

from __future__ import annotations

from pathlib import Path

from jobs.config import KEY_COLUMNS, current_project, load_sources, pick_column
from jobs.core.errors import InputError
from jobs.core.language.pattern import NAME


def scaffold(name: str, source: str, folder: Path | None = None) -> Path:
    """Write ``folder/<name>.yaml``; refuses a bad name, an unknown source, an existing file."""
    if not NAME.fullmatch(name):
        raise InputError(f"NAME {name!r}: use lower case letters, digits and _ (it names the "
                         "table matches_<name>)")
    sources = load_sources()
    if source not in sources:
        raise InputError(f"SOURCE {source!r} is not in conf/sources.yaml (sources: "
                         f"{', '.join(sorted(sources))})")
    path = (folder or current_project().patterns) / f"{name}.yaml"
    if path.exists():
        raise InputError(f"{path} exists already: pick another NAME or edit that file")
    src = sources[source]
    columns = src.attributes
    key = pick_column(columns, KEY_COLUMNS)
    kind = src.type_column
    if kind is None:
        raise InputError(f"source {source!r} has no text column to tell events apart: write "
                         "the file by hand (docs/patterns.md)")
    link = f"\n  - a.{key} = b.{key}       # the same {key}" if key else ""
    who = f", {key}: {1 if columns[key] == 'integer' else 'X'}" if key else ""
    text = f"""\
# {name}: what this pattern finds, in one or two sentences for the reviewer.
# The language: docs/patterns.md. Check it with `make validate`; try it on data with
# `ses match patterns/{name}.yaml <events file>` and `ses explain`.
name: {name}
source: {source}
description: an event of type FIRST, then one of type SECOND{' for the same ' + key if key else ''}, within 7 days
within: 7d
sets:
  - [a]
  - [b]
conditions:
  - a.{kind} = 'FIRST'       # replace FIRST and SECOND with the values of your events
  - b.{kind} = 'SECOND'{link}
matcher: ses
examples:                    # CI runs these: a few events and the matches they must give
  - name: FIRST then SECOND within the window
    events:
      - {{event_id: e1{who}, {kind}: FIRST, ts: 2024-01-01T08:00:00}}
      - {{event_id: e2{who}, {kind}: SECOND, ts: 2024-01-03T08:00:00}}
    expect:
      - {{a: [e1], b: [e2]}}
  - name: too late is no match
    events:
      - {{event_id: e1{who}, {kind}: FIRST, ts: 2024-01-01T08:00:00}}
      - {{event_id: e2{who}, {kind}: SECOND, ts: 2024-01-20T08:00:00}}
    expect: []
"""
    path.write_text(text, encoding="utf-8")
    return path
