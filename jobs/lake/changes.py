"""A table as it was, and what changed since: the lake's time travel for people and for
downstream jobs (``ses query --as-of``, ``ses changes``).

A point in the lake's past is a *run id* (the table as that run left it), a *time* (ISO:
each table's last version committed at or before it) or a *version* (of the one table a
question reads). What changed in a match table since a point is the difference of two
snapshots of it, keyed by ``match_id``: the matches inserted, deleted, or updated (the
same ``match_id`` with other values). This is exact however the commits between wrote
their files (a publish rewrites the files it touches: Delta's change feed of such commits
would report their kept rows as deleted and inserted again), and needs no write of its
own. It reaches back as far as the table's files are kept: ``maintenance.retention``
(VACUUM) bounds it, and a point before that is refused in one line that says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from jobs.core.errors import InputError
from jobs.lake.runs import read_runs
from jobs.lake.store import Lake

INSERT, DELETE, UPDATE = "insert", "delete", "update"
_DIGITS = re.compile(r"^\d{1,12}$")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}([T ][0-9:.]+)?([+-]\d{2}:?\d{2}|Z)?$")


@dataclass(frozen=True)
class Point:
    """A point in the lake's past: ``kind`` is ``run``, ``time`` or ``version``."""

    kind: str
    run_id: str | None = None
    time: datetime | None = None
    version: int | None = None

    def describe(self) -> str:
        if self.kind == "run":
            return f"run {self.run_id}"
        if self.kind == "time":
            return self.time.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"version {self.version}"


def parse_point(text: str) -> Point:
    """``RUN_ID``, ``TIME`` (``2026-11-20``, ``2026-11-20T06:00:00``, UTC unless it says
    otherwise) or ``VERSION`` (a whole number)."""
    text = str(text).strip()
    if _DIGITS.match(text):
        return Point("version", version=int(text))
    if _TIME.match(text):
        try:
            t = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{text!r} is not a time: write e.g. 2026-11-20T06:00:00") from None
        return Point("time", time=t if t.tzinfo else t.replace(tzinfo=timezone.utc))
    if not text:
        raise InputError("give a run id, a time (2026-11-20T06:00:00) or a version")
    return Point("run", run_id=text)


def _commits(dt: DeltaTable) -> list[dict]:
    """(version, time, run id of the commit) of every commit the log still holds, oldest
    first."""
    out = []
    for c in dt.history():
        run = c.get("ses.run")
        try:
            run_id = json.loads(run).get("run_id") if run else None
        except (ValueError, AttributeError):
            run_id = None
        out.append({"version": int(c["version"]), "run_id": run_id,
                    "time": datetime.fromtimestamp(int(c["timestamp"]) / 1000, tz=timezone.utc)})
    return sorted(out, key=lambda c: c["version"])


def run_finished(lake: Lake, run_id: str) -> datetime:
    """When run ``run_id`` finished its last pattern (the runs log); ``InputError`` when
    the log has no such run."""
    t = read_runs(lake, columns=["finished_at", "started_at"],
                        filter=pc.field("run_id") == run_id)
    if t is None or t.num_rows == 0:
        raise InputError(f"no run {run_id!r} in the runs log (ses runs lists them; or give a "
                         "time, e.g. 2026-11-20T06:00:00, or a version)")
    end = pc.max(t.column("finished_at")).as_py() or pc.max(t.column("started_at")).as_py()
    return end if end.tzinfo else end.replace(tzinfo=timezone.utc)


def version_at(lake: Lake, path: str, point: Point, dt: DeltaTable | None = None) -> int | None:
    """The version of the table at ``path`` at ``point`` (None: the table did not exist
    yet). A run: the last commit that run made to the table, else the table's version when
    the run finished; a time: the last commit at or before it."""
    dt = dt or lake.table(path)
    if point.kind == "version":
        if point.version > dt.version():
            raise InputError(f"{lake.name_of(path)} has no version {point.version} (its "
                             f"latest is {dt.version()})")
        return point.version
    commits = _commits(dt)
    if point.kind == "run":
        mine = [c["version"] for c in commits if c["run_id"] == point.run_id]
        if mine:
            return mine[-1]
        at = run_finished(lake, point.run_id)
    else:
        at = point.time
    before = [c["version"] for c in commits if c["time"] <= at]
    if before:
        return before[-1]
    if commits and commits[0]["version"] > 0:  # the log's oldest entries were cleaned up
        raise InputError(f"{lake.name_of(path)}: {point.describe()} is older than the oldest "
                         f"version the table still has (version {commits[0]['version']}, "
                         f"{commits[0]['time']:%Y-%m-%d %H:%M} UTC; maintenance.retention "
                         "bounds how far back it reaches)")
    return None


def snapshot(lake: Lake, path: str, version: int) -> DeltaTable:
    """The table at ``version``; a version whose files VACUUM removed is refused."""
    dt = DeltaTable(path, version=version, storage_options=lake.storage_options)
    missing = [u for u in dt.file_uris()[:1] if lake.local and not _exists(u)]
    if missing:
        raise InputError(f"{lake.name_of(path)} at version {version}: its files were removed "
                         "by VACUUM (maintenance.retention in conf/pipeline.yaml bounds how far "
                         "back a table can be read)")
    return dt


def _exists(uri: str) -> bool:
    u = urlparse(uri)
    return Path(unquote(u.path) if u.scheme == "file" else uri).exists()


def _key(schema: pa.Schema) -> list[str]:
    return ["match_id"] if "match_id" in schema.names else list(schema.names)


def changes(lake: Lake, path: str, since: Point) -> tuple[pa.Table, dict]:
    """What changed in the table at ``path`` since ``since``, as rows (``change``:
    insert, delete or update; the key (``match_id``; a table without one, such as a
    model, is keyed by its whole row: inserts and deletes only); ``start_ts``/``end_ts``
    and ``run_id`` where the table has them: the run that published the row, for a delete
    the deleted row's) and a summary {from_version, to_version, inserted, deleted,
    updated}."""
    import duckdb

    now = lake.table(path)
    old_version = version_at(lake, path, since, now)
    new = now.to_pyarrow_table()
    if old_version is None:
        old = new.schema.empty_table()
    else:
        old_dt = snapshot(lake, path, old_version)
        old = old_dt.to_pyarrow_table()
    key = _key(new.schema)
    shown = [c for c in ("start_ts", "end_ts", "run_id") if c in new.schema.names
             and c in old.schema.names and c not in key]
    common = [c for c in new.schema.names if c in old.schema.names]
    con = duckdb.connect()
    con.register("old_rows", old.select(common))
    con.register("new_rows", new.select(common))
    keys = ", ".join(f'"{k}"' for k in key)
    cols = ", ".join([f'x."{k}"' for k in key] + [f'x."{c}"' for c in shown])
    same = same_id = " AND ".join(f'x."{k}" IS NOT DISTINCT FROM y."{k}"' for k in key)
    versions = _versions(old, new) if {"bindings", "pattern_version"} <= set(common) else None
    if versions is not None:  # a match's id carries the version: pair them by bindings
        same = f"({same} OR {_same_bindings(common)})"
    parts = [f"SELECT '{INSERT}' AS change, {cols} FROM new_rows x ANTI JOIN old_rows y ON {same}",
             f"SELECT '{DELETE}' AS change, {cols} FROM old_rows x ANTI JOIN new_rows y ON {same}"]
    differs = " OR ".join(f'x."{c}" IS DISTINCT FROM y."{c}"' for c in common if c not in key)
    if differs and key == ["match_id"]:
        parts.append(f"SELECT '{UPDATE}' AS change, {cols} FROM new_rows x JOIN old_rows y "
                     f"ON {same_id} WHERE {differs}")
    order = "start_ts, change" if "start_ts" in shown else "change, " + keys
    sql = " UNION ALL ".join(f"({p})" for p in parts) + f" ORDER BY {order}"
    rows = con.sql(sql).to_arrow_table()
    counts = {k: 0 for k in (INSERT, DELETE, UPDATE)}
    for v in rows.column("change").to_pylist():
        counts[v] += 1
    out = {"from_version": old_version, "to_version": now.version(),
           "inserted": counts[INSERT], "deleted": counts[DELETE], "updated": counts[UPDATE]}
    if versions is not None:
        out["pattern_versions"] = versions
        out["unchanged"] = con.sql(
            f"SELECT count(*) FROM new_rows x SEMI JOIN old_rows y ON "
            f"{_same_bindings(common)} AND x.match_id IS DISTINCT FROM y.match_id").fetchall()[0][0]
    return rows, out


def _versions(old: pa.Table, new: pa.Table) -> tuple[list[str], list[str]] | None:
    """The pattern versions of the two snapshots, when they differ (a changed pattern):
    (old's, new's); else None."""
    a = sorted(v for v in pc.unique(old.column("pattern_version")).to_pylist() if v)
    b = sorted(v for v in pc.unique(new.column("pattern_version")).to_pylist() if v)
    return (a, b) if a and b and a != b else None


def _same_bindings(common: list[str]) -> str:
    """Two rows of two versions of a pattern are one match when they bind the same events
    to the same variables (of the same alternative)."""
    alt = ' AND x."alternative" IS NOT DISTINCT FROM y."alternative"' \
        if "alternative" in common else ""
    return ('(x.pattern_version IS DISTINCT FROM y.pattern_version AND '
            'CAST(x."bindings" AS VARCHAR) = CAST(y."bindings" AS VARCHAR)' + alt + ")")
