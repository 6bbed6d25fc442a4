"""Table maintenance, part of every lake's rhythm (docs/operations.md, maintenance): each
night adds a file to every table it writes (a match table per publish, the runs table, the
ingest log) and a commit to each table's log, so after a year a table is hundreds of small
files and a log of hundreds of commits that every reader lists. Per table, ``maintain``:

* compacts small files (delta-rs ``optimize.compact``: OPTIMIZE, bin-packing within each
  partition; the events and statistics tables, one file per day partition, rarely need it);
* writes a log checkpoint and removes log entries older than the table's log retention
  (``create_checkpoint``, ``cleanup_metadata``): a reader starts from the checkpoint;
* VACUUMs the data files no snapshot of the last ``retention`` names (the files compaction
  and rewrites replaced, a killed write's leftovers). The retention is at least a day and
  7 days by default: longer than any run, query or ``--as-of`` reader holds a snapshot.

Run by ``ses maintain``, by ``ses run`` when the last maintenance is ``maintenance.every``
old (by logical date), and by the DAG's weekly task. It holds the lake lock (the caller's):
a compaction is a commit like a publish. Results are the same before and after: only files
are rewritten, never rows (tests/lake/test_maintenance.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from jobs.lake import store as lk
from jobs.progress import say

STATE = "_maintenance.json"  # the last maintenance: when, for which logical date, what it did
SMALL = 64 * 1024 * 1024  # compaction target: files up to this size are packed together


@dataclass
class TableUpkeep:
    table: str
    files_before: int
    files_after: int
    commits: int  # the table's version: commits its log holds
    vacuumed: int  # data files deleted
    seconds: float


def all_tables(lake: lk.Lake) -> dict[str, str]:
    """Every Delta table of the lake: {name: path} (events/x, matches/y, runs, ...)."""
    out = {}
    for kind in ("events", "quarantine", "matches", "stats", "models", "changes", "first_ever",
                 "partition_state"):
        for name in lake.children(lk.join(lake.root, kind)):
            out[f"{kind}/{name}"] = lk.join(lake.root, kind, name)
    for name in lk.SINGLE_TABLES:
        out[name] = lk.join(lake.root, name)
    return out


def maintain_table(lake: lk.Lake, name: str, path: str, retention_hours: int
                   ) -> TableUpkeep | None:
    """Compact, checkpoint and vacuum one table (None: no such table)."""
    dt = lake.read_table(path)
    if dt is None:
        return None
    t0 = time.perf_counter()
    before = len(dt.file_uris())
    if before > len(dt.partitions() or [None]):  # some partition holds more than one file
        dt.optimize.compact(target_size=SMALL)
    dt = lake.read_table(path)
    dt.create_checkpoint()
    dt.cleanup_metadata()
    gone = dt.vacuum(retention_hours=retention_hours, dry_run=False, full=True,
                     enforce_retention_duration=False)
    return TableUpkeep(name, before, len(dt.file_uris()), dt.version(), len(gone),
                       round(time.perf_counter() - t0, 3))


LOGS = ("runs", "ingest_log", "health", "funnels")  # a commit per pattern, source or night
LOG_FILES = 64  # a log with more data files than this is compacted the same night


def compact_logs(lake: lk.Lake, most: int = LOG_FILES) -> list[str]:
    """Compact the run logs that hold more than ``most`` data files (a night adds one per
    pattern: every reader of the runs table would list and open a week of them between two
    maintenances). No checkpoint, no VACUUM: the weekly maintenance does those. Returns
    the tables compacted."""
    done = []
    for name in LOGS:
        path = lk.join(lake.root, name)
        dt = lake.snapshot(path)  # counted on the kept snapshot, compacted on a fresh open
        if dt is not None and len(dt.file_uris()) > most:
            lake.table(path).optimize.compact(target_size=SMALL)
            done.append(name)
    return done


GX_RESULTS = ("gx/uncommitted/validations", "gx/uncommitted/data_docs/local_site/validations")
RESULTS_KEPT = 14  # the newest results of each suite kept, however recent the rest


def prune_results(home: Path, retention: int, now: float | None = None,
                  kept: int = RESULTS_KEPT) -> int:
    """Delete the Great Expectations results (JSON and their Data Docs pages) older than
    ``retention`` ns under the lake's home, and all but the newest ``kept`` of each
    suite (reruns and backfills add results faster than nights do), keeping the newest of
    each suite however old: they grow by one per pattern per night, and every Data Docs
    build lists them all. Returns the files deleted."""
    cut = (now or time.time()) - retention / 1e9
    gone = 0
    for sub in GX_RESULTS:
        folder = home / sub
        if not folder.is_dir():
            continue
        for suite in folder.iterdir():
            files = sorted((f for f in suite.rglob("*.*") if f.is_file()),
                           key=lambda f: f.stat().st_mtime)
            for k, f in enumerate(files[:-1]):  # the newest stays, however old
                if f.stat().st_mtime < cut or k < len(files) - kept:
                    f.unlink()
                    gone += 1
            for d in sorted((d for d in suite.rglob("*") if d.is_dir()), reverse=True):
                if not any(d.iterdir()):
                    d.rmdir()
    return gone


def maintain(lake: lk.Lake, retention: int, logical_date: str | None = None, echo=say
             ) -> list[TableUpkeep]:
    """``maintain_table`` for every table of the lake, and the old quality results pruned
    (``prune_results``); the last maintenance is recorded (``STATE``) for ``due``.
    ``retention`` in ns."""
    hours = max(1, retention // (3600 * 10**9))
    t0 = time.perf_counter()
    done = [u for name, path in all_tables(lake).items()
            if (u := maintain_table(lake, name, path, hours)) is not None]
    pruned = prune_results(lake.local_home(), retention) if lake.local else 0
    seconds = round(time.perf_counter() - t0, 1)
    lake.write_text(lk.join(lake.root, STATE), json.dumps({
        "at": datetime.now(timezone.utc).isoformat(), "logical_date": logical_date,
        "seconds": seconds, "quality_results_deleted": pruned,
        "tables": [asdict(u) for u in done]}))
    before, after = sum(u.files_before for u in done), sum(u.files_after for u in done)
    echo(f"maintenance: {len(done)} tables, {before} -> {after} data files, "
         f"{sum(u.vacuumed for u in done)} vacuumed, {pruned} old quality results deleted, "
         f"{seconds} s")
    return done


def last_maintenance(lake: lk.Lake) -> dict | None:
    try:
        return json.loads(lake.read_text(lk.join(lake.root, STATE)))
    except (FileNotFoundError, OSError, ValueError):
        return None


def due(lake: lk.Lake, every: int, logical_date: str) -> bool:
    """Whether a run for ``logical_date`` maintains the lake: ``every`` (ns, 0: never)
    has passed since the logical date of the last maintenance (none: now)."""
    if every <= 0:
        return False
    last = last_maintenance(lake)
    if not last or not last.get("logical_date"):
        return True
    days = (datetime.fromisoformat(logical_date[:10])
            - datetime.fromisoformat(last["logical_date"][:10])).days
    return days * 86400 * 10**9 >= every
