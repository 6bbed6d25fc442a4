"""Query results for people and for other tools: an aligned text table, CSV with a header,
or JSON lines. Nested values (a match's bindings) are written as JSON text in CSV and as
JSON in JSON lines; times as ISO 8601."""

from __future__ import annotations

import csv
import json
from datetime import date, datetime

import pyarrow as pa

WIDTH = 60  # a table cell longer than this is cut (csv and json are never cut)


def _plain(value):
    if isinstance(value, list) and value and isinstance(value[0], tuple):  # an Arrow map
        return {k: _plain(v) for k, v in value}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def _text(value) -> str:
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def write_rows(table: pa.Table, fmt: str, out, shown: int | None = None,
               limit: int | None = None) -> None:
    """``table`` to ``out`` as ``fmt`` (table, csv, json); ``shown``: the limit the query
    applied, to say so under a table that reached it; ``limit``: at most that many rows of
    ``table`` are written, and a table says how many it left out."""
    total = table.num_rows
    if limit is not None and total > limit:
        table = table.slice(0, max(limit, 0))
    rows = table.to_pylist()
    names = table.column_names
    if fmt == "json":
        for r in rows:
            out.write(json.dumps({k: _plain(v) for k, v in r.items()}, ensure_ascii=False,
                                 default=str) + "\n")
        return
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        for r in rows:
            writer.writerow([_text(r[k]) for k in names])
        return
    cells = [[_text(r[k]) for k in names] for r in rows]
    cells = [[c if len(c) <= WIDTH else c[:WIDTH - 1] + "…" for c in row] for row in cells]
    widths = [max([len(n)] + [len(row[i]) for row in cells]) for i, n in enumerate(names)]
    out.write("  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    more = " (the limit: --limit N for more, --format csv|json for every row)" \
        if shown is not None and len(rows) == shown else ""
    if len(rows) < total:
        more = f" of {total} (--limit N for more, --format csv|json for every row)"
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''}{more})\n")
