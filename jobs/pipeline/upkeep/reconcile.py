"""Repairing the lake after a crash, at the start of the next run (under the lake lock).

Delta commits one table at a time, so a run that is killed can leave three kinds of
untidiness; each is repaired from what the lake itself records:

1. *published, not logged*: the matches MERGE committed but the runs row was not
   appended. The commit carries the run's row as metadata (``publish.RUN_KEY``) and the
   MERGE's own counts; the row is appended from them.
2. *planned, not finished*: ``run`` writes ``_runs/<run_id>.json`` (its patterns) when it
   starts and removes it when it ends; a file left behind names a run that died, and each
   of its patterns without a row gets an ``aborted`` row. That includes a pattern whose
   run had finished without committing anything: its row is held until the end of the
   batch (``publish.RunsLog``), and its range is planned again.
3. *deleted, not logged*: a retract's delete commit carries its row
   (``retract.RETRACTION_KEY``); a row missing from ``retractions`` is appended from it.
4. *files of the wrong types*: data files that store ``string_view`` (delta-rs's MERGE,
   DELETE or OPTIMIZE, from before the lake stopped calling them, or another tool) are
   rewritten with plain types (``jobs.lake.rewrite.retype``); only files added since the
   last check are looked at (``_state/retyped.json``).
5. *staging left behind*: the staging folders of published or aborted runs are removed
   (and the output of source passes, ``staging/_pass``),
   and the ``_temporary`` folders of every run (a killed Spark write).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from jobs.failpoints import reached
from jobs.lake import rewrite
from jobs.lake import store as lk
from jobs.lake.match_commits import RUN_KEY
from jobs.lake.runs import log_run, run_statuses
from jobs.pipeline.ingest import INGEST_FOLDER
from jobs.pipeline.match.source_pass import PASS_FOLDER
from jobs.pipeline.upkeep.retract import logged_retractions
from jobs.progress import say
from jobs.status import ABORTED, SUCCESS

HISTORY = 100  # commits per matches table looked at
STAGING_GRACE = 86400  # seconds a staged run without a row or a plan may wait for its step


def plan_file(lake: lk.Lake, run_id: str) -> str:
    return lk.join(lake.run_plans(), f"{run_id}.json")


def start_run(lake: lk.Lake, run_id: str, logical_date: str, patterns: list[dict]) -> None:
    """Record what a run is about to do (removed by ``finish_run``)."""
    lake.write_text(plan_file(lake, run_id), json.dumps(
        {"run_id": run_id, "logical_date": logical_date, "patterns": patterns}))


def finish_run(lake: lk.Lake, run_id: str) -> None:
    lake.remove(plan_file(lake, run_id))


def typed_tables(lake: lk.Lake) -> list[str]:
    """Every Delta table of the lake that ingest, retract and the logs write."""
    out = [lake.runs(), lake.ingest_log(), lake.retractions()]
    for kind in ("events", "quarantine", "stats"):
        out += [lk.join(lake.root, kind, n) for n in lake.children(lk.join(lake.root, kind))]
    return [p for p in out if lake.exists(p)]


def repair_types(lake: lk.Lake) -> list[str]:
    """Rewrite the view-typed data files added since the last check (all, the first time)
    with plain types; one line per table repaired."""
    state_file = lk.join(lake.root, "_state", "retyped.json")
    try:
        state = json.loads(lake.read_text(state_file))
    except (OSError, ValueError):
        state = {}
    notes = []
    for path in typed_tables(lake):
        name = lake.name_of(path)
        checked = int(datetime.now(timezone.utc).timestamp() * 1000) - 1000
        try:
            n = rewrite.retype(lake, path, since_ms=int(state.get(name, 0)))
        except (lk.BrokenTable, OSError):
            continue  # a broken table or a missing file is named by whatever reads it
        state[name] = checked
        if n:
            notes.append(f"repaired: {name} had {n} data file(s) stored as string_view "
                         "(unreadable with a filter beside string files); rewritten as string")
    lake.write_text(state_file, json.dumps(state, sort_keys=True))
    return notes


def orphan_staging(lake: lk.Lake, rows: list[dict], now: datetime | None = None
                   ) -> list[tuple[str, str]]:
    """(pattern, run id) of the staged runs no run owns: published or aborted ones, and
    those with neither a runs row nor a run plan that are older than ``STAGING_GRACE`` by
    their run id's time (the DAG's per-pattern steps stage a run before its row exists).
    A failed run's staging is kept (its validation result is there), and so is a folder
    whose name is no run id of ours (a step given its own ``--run-id``)."""
    status = {(r["run_id"], r["pattern"]): r["status"] for r in rows}
    planned = {n.rsplit(".json", 1)[0] for n in lake.children(lake.run_plans(), files=True)}
    now = now or datetime.now(timezone.utc)
    out = []
    for pattern in lake.children(lake.staging()):
        if pattern in (PASS_FOLDER, INGEST_FOLDER):
            continue
        for run_id in lake.children(lake.staging(pattern)):
            state = status.get((run_id, pattern))
            if state in (SUCCESS, ABORTED):
                out.append((pattern, run_id))
            elif state is None and run_id not in planned:
                try:
                    started = datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ").replace(
                        tzinfo=timezone.utc)
                except ValueError:
                    continue  # not a run id of ours (a step's own --run-id): kept
                if (now - started).total_seconds() > STAGING_GRACE:
                    out.append((pattern, run_id))
    return out


def reconcile(lake: lk.Lake, echo=say) -> list[str]:
    """Repair what a killed run left; returns one line per repair. Call it holding the
    lake lock (no other run is in progress)."""
    notes: list[str] = []
    rows = run_statuses(lake)
    logged = {(r["run_id"], r["pattern"]) for r in rows}
    published = {(r["run_id"], r["pattern"]) for r in rows if r["status"] == SUCCESS}
    now = datetime.now(timezone.utc)
    # 1. published, not logged
    for name in lake.children(lake.matches()):
        try:
            table = lake.snapshot(lake.matches(name))
        except lk.BrokenTable as exc:
            notes.append(f"warning: {exc}")  # its pattern fails alone, saying the same
            continue
        for h in table.history(HISTORY) if table is not None else []:
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
    for name in lake.children(lake.run_plans(), files=True):
        f = lk.join(lake.run_plans(), name)
        try:
            plan = json.loads(lake.read_text(f))
        except (OSError, ValueError):
            lake.remove(f)
            continue
        for p in plan["patterns"]:
            if (plan["run_id"], p["pattern"]) in logged:
                continue
            log_run(lake, dict(p, run_id=plan["run_id"], logical_date=plan["logical_date"] or None,
                               status=ABORTED, started_at=now, finished_at=now,
                               message="the run stopped before this pattern was logged "
                                       "(killed?); it published nothing"))
            logged.add((plan["run_id"], p["pattern"]))
            notes.append(f"reconciled: {p['pattern']} of run {plan['run_id']} was "
                         "interrupted; logged as aborted")
        lake.remove(f)
    reached("reconcile:after-runs")
    # 3. deleted, not logged; 4. files of the wrong types
    notes += logged_retractions(lake)
    notes += repair_types(lake)
    reached("reconcile:after-repairs")
    # 5. staging left behind (a source pass's output of a run that stopped: all of it)
    lake.remove(lake.staging(PASS_FOLDER))
    lake.remove(lake.staging(INGEST_FOLDER))  # an ingest's spooled batch (none runs now)
    gone = set(orphan_staging(lake, run_statuses(lake)))
    for pattern in lake.children(lake.staging()):
        for run_id in lake.children(lake.staging(pattern)):
            if (pattern, run_id) in gone:
                lake.remove(lake.staging(pattern, run_id))
            else:
                lake.remove(lk.join(lake.staging(pattern, run_id), "_temporary"))
        if not lake.children(lake.staging(pattern)) and \
                not lake.children(lake.staging(pattern), files=True):
            lake.remove(lake.staging(pattern))
    for line in notes:
        echo(line)
    return notes
