"""Repairing the lake after a crash, at the start of the next run (under the lake lock).

Delta commits one table at a time, so a run that is killed can leave three kinds of
untidiness; each is repaired from what the lake itself records:

1. *published, not logged*: the matches MERGE committed but the runs row was not
   appended. The commit carries the run's row as metadata (``publish.RUN_KEY``) and the
   MERGE's own counts; the row is appended from them.
2. *planned, not finished*: ``run`` writes ``_runs/<run_id>.json`` (its patterns) when it
   starts and removes it when it ends; a file left behind names a run that died, and each
   of its patterns without a row gets an ``aborted`` row.
3. *staging left behind*: the staging folders of published or aborted runs are removed,
   and the ``_temporary`` folders of every run (a killed Spark write).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from . import lake as lk
from .publish import RUN_KEY, log_run
from .status import ABORTED, SUCCESS

HISTORY = 100  # commits per matches table looked at


def _local(root: str) -> bool:
    return "://" not in root


def plan_file(lake: lk.Lake, run_id: str) -> Path | None:
    if not _local(lake.root):
        return None
    return Path(lake.root) / "_runs" / f"{run_id}.json"


def start_run(lake: lk.Lake, run_id: str, logical_date: str, patterns: list[dict]) -> None:
    """Record what a run is about to do (removed by ``finish_run``)."""
    path = plan_file(lake, run_id)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"run_id": run_id, "logical_date": logical_date,
                                    "patterns": patterns}))


def finish_run(lake: lk.Lake, run_id: str) -> None:
    path = plan_file(lake, run_id)
    if path is not None and path.exists():
        path.unlink()


def _rows(lake: lk.Lake) -> list[dict]:
    t = lk.read_arrow(lake.runs())
    return t.to_pylist() if t is not None else []


def reconcile(lake: lk.Lake, echo=print) -> list[str]:
    """Repair what a killed run left; returns one line per repair. Call it holding the
    lake lock (no other run is in progress)."""
    notes: list[str] = []
    rows = _rows(lake)
    logged = {(r["run_id"], r["pattern"]) for r in rows}
    published = {(r["run_id"], r["pattern"]) for r in rows if r["status"] == SUCCESS}
    now = datetime.now(timezone.utc)
    # 1. published, not logged
    folder = Path(lake.root) / "matches"
    if _local(lake.root) and folder.is_dir():
        for name in sorted(os.listdir(folder)):
            path = str(folder / name)
            if not lk.exists(path):
                continue
            for h in lk.table(path).history(HISTORY):
                if RUN_KEY not in h:
                    continue
                row = json.loads(h[RUN_KEY])
                if (row.get("run_id"), name) in published or "pattern" not in row:
                    continue  # (a failed row does not count: the MERGE did commit)
                m = h.get("operationMetrics") or {}
                inserted = h.get("ses.inserted", m.get("num_target_rows_inserted",
                                                       m.get("num_added_rows", 0)))
                deleted = h.get("ses.deleted", m.get("num_target_rows_deleted", 0))
                row.update(inserted=int(inserted), deleted=int(deleted), status=SUCCESS,
                           finished_at=datetime.fromtimestamp(h["timestamp"] / 1000,
                                                              tz=timezone.utc),
                           message="logged by the next run: the run stopped after publishing")
                for k in ("started_at",):
                    if isinstance(row.get(k), str):
                        row[k] = datetime.fromisoformat(row[k])
                log_run(lake, row)
                logged.add((row["run_id"], name))
                published.add((row["run_id"], name))
                notes.append(f"reconciled: {name} of run {row['run_id']} was published but "
                             "not logged; logged now")
    # 2. planned, not finished
    runs_dir = Path(lake.root) / "_runs"
    if _local(lake.root) and runs_dir.is_dir():
        for f in sorted(runs_dir.glob("*.json")):
            try:
                plan = json.loads(f.read_text())
            except (OSError, ValueError):
                f.unlink(missing_ok=True)
                continue
            for p in plan["patterns"]:
                if (plan["run_id"], p["pattern"]) in logged:
                    continue
                log_run(lake, dict(p, run_id=plan["run_id"], logical_date=plan["logical_date"],
                                   status=ABORTED, started_at=now, finished_at=now,
                                   message="the run stopped before this pattern finished "
                                           "(killed?); nothing of it was published"))
                logged.add((plan["run_id"], p["pattern"]))
                notes.append(f"reconciled: {p['pattern']} of run {plan['run_id']} was "
                             "interrupted; logged as aborted")
            f.unlink()
    # 3. staging left behind
    status = {(r["run_id"], r["pattern"]): r["status"] for r in _rows(lake)}
    staging = Path(lake.root) / "staging"
    if _local(lake.root) and staging.is_dir():
        for pattern_dir in staging.iterdir():
            for run_dir in list(pattern_dir.iterdir()) if pattern_dir.is_dir() else []:
                state = status.get((run_dir.name, pattern_dir.name))
                if state in (SUCCESS, ABORTED):
                    shutil.rmtree(run_dir, ignore_errors=True)
                elif (run_dir / "_temporary").exists():
                    shutil.rmtree(run_dir / "_temporary", ignore_errors=True)
            if pattern_dir.is_dir() and not any(pattern_dir.iterdir()):
                pattern_dir.rmdir()
    for line in notes:
        echo(line)
    return notes
