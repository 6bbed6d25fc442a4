"""The runs table (``_runs``'s Delta table, one row per pattern per run), read and written
here only: the night appends its rows (``log_run``, or a batch's ``RunsLog``), planning
reads the few rows a night needs (``planning_runs``), a retried task the patterns its run
published (``published_by``), the repair after a crash every row's status
(``run_statuses``), and the reports their own columns (``read_runs``). The rows are
``jobs.runrecord.RunRecord``; its Arrow schema is the table's.

Planning's read takes time that does not grow with the nights: the table gains a row per
pattern per night, and a night needs of each pattern version only three of its successful
runs. ``plan_range`` takes the largest ``horizon_high`` of the version's earlier nightly
runs; the last success (the retraction reach, idle patterns, late events) is the one
started last; ``needs_replan`` reads the last one started that has an estimate. Every
other row leaves those answers unchanged, so only these three rows per version are
converted to records (the other rows are filtered in Arrow, on a few columns).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from jobs import runrecord
from jobs.lake import store as lk
from jobs.lake.match_commits import RUN_KEY
from jobs.runrecord import NIGHTLY, RunRecord, from_arrow
from jobs.status import SUCCESS

PLANNING_KEYS = ["pattern", "pattern_version", "run_kind", "logical_date", "horizon_high",
                 "started_at", "estimated_pm"]


def read_runs(lake: lk.Lake, columns: list[str] | None = None, filter=None) -> pa.Table | None:
    """The runs table's rows that pass ``filter`` (a ``pyarrow.compute`` expression),
    only ``columns``; None when no run was logged yet."""
    return lake.read_arrow(lake.runs(), columns=columns, filter=filter)


def all_runs(lake: lk.Lake) -> list[RunRecord]:
    """Every record of the runs table."""
    return from_arrow(read_runs(lake))


def previous_runs(lake: lk.Lake, pattern: str) -> list[RunRecord]:
    """Every record of one pattern (any version, any status)."""
    return from_arrow(read_runs(lake, filter=pc.field("pattern") == pattern))


def run_statuses(lake: lk.Lake) -> list[dict]:
    """(run_id, pattern, status) of every row: three columns of a table that grows every
    night."""
    t = read_runs(lake, columns=["run_id", "pattern", "status"])
    return t.to_pylist() if t is not None else []


def published_by(lake: lk.Lake, run_id: str) -> set[str]:
    """The patterns run ``run_id`` published already (a retried task skips them)."""
    t = read_runs(lake, columns=["pattern"],
                  filter=(pc.field("run_id") == run_id) & (pc.field("status") == SUCCESS))
    return set() if t is None else set(t.column("pattern").to_pylist())


def planning_runs(lake: lk.Lake, names: set[str], logical_date: str
                  ) -> dict[str, list[RunRecord]]:
    """Per pattern of ``names``: the successful runs, per version, that ``plan_range``,
    the last success and ``needs_replan`` read (night of ``logical_date``)."""
    out: dict[str, list[RunRecord]] = {name: [] for name in names}
    if not names:
        return out
    t = read_runs(lake, filter=(pc.field("status") == SUCCESS)
                  & pc.field("pattern").isin(pa.array(sorted(names), pa.string())))
    if t is None or t.num_rows == 0:
        return out
    rows = t.select([k for k in PLANNING_KEYS if k in t.column_names]).to_pylist()
    best: dict[tuple, dict[str, tuple]] = {}  # (pattern, version) -> role -> (key, row index)
    ld = str(logical_date)[:10]
    for i, r in enumerate(rows):
        roles = best.setdefault((r["pattern"], r.get("pattern_version")), {})
        started = r.get("started_at")
        if started is not None:
            _keep(roles, "last", (started,), i)
            if r.get("estimated_pm"):
                _keep(roles, "estimated", (started,), i)
        if ((r.get("run_kind") or NIGHTLY) == NIGHTLY and r.get("horizon_high") is not None
                and (r.get("logical_date") or "")[:10] < ld and r.get("logical_date")):
            _keep(roles, "horizon", (r["horizon_high"],), i)
    chosen = sorted({i for roles in best.values() for _, i in roles.values()})
    for record in from_arrow(t.take(pa.array(chosen, pa.int64()))):
        out[record.pattern].append(record)
    return out


def _keep(roles: dict, role: str, key: tuple, i: int) -> None:
    if role not in roles or key > roles[role][0]:
        roles[role] = (key, i)


def log_run(lake: lk.Lake, record: RunRecord | Mapping) -> None:
    """Append one record (one pattern, one run) to the runs table; a mapping (a commit's
    metadata, a run plan's entry) is read as a record."""
    if not isinstance(record, RunRecord):
        record = RunRecord.from_row(record)
    lake.append(lake.runs(), runrecord.to_arrow([record]), metadata=_commit_metadata([record]))


def _commit_metadata(records: list[RunRecord]) -> dict[str, str]:
    """The metadata of a commit to the runs table: the run whose rows it appends (so that
    ``--as-of RUN`` reads the table as that run left it, every row of it)."""
    ids = {r.run_id for r in records}
    return {RUN_KEY: json.dumps({"run_id": ids.pop()})} if len(ids) == 1 else {}


class RunsLog:
    """The runs table of one batch of runs (``run_patterns``): kept open between appends
    (opening it re-reads its log, which costs as much as the append), and with the rows
    of runs that committed nothing held back until ``flush`` (one append for all of
    them). Losing held rows in a crash loses no work: their runs changed nothing, so the
    next run plans the same range again (and ``reconcile`` logs them as aborted). A run
    that committed is logged at once: its row is what a retry checks first."""

    def __init__(self, lake: lk.Lake):
        self.lake, self.table, self.held = lake, None, []

    def append(self, record: RunRecord, hold: bool = False) -> None:
        if hold:
            self.held.append(record)
        else:
            self._write([record])

    def flush(self) -> None:
        rows, self.held = self.held, []
        if rows:
            self._write(rows)

    def _write(self, records: list[RunRecord]) -> None:
        from deltalake import CommitProperties, write_deltalake

        data = runrecord.to_arrow(records)
        meta = _commit_metadata(records)
        if self.table is None:
            self.table = self.lake.read_table(self.lake.runs())
        if self.table is None:  # the first row of the lake: the table is created
            self.lake.append(self.lake.runs(), data, metadata=meta)
            return
        # a commit after another process's is retried by delta-rs (appends never conflict)
        write_deltalake(self.table, data, mode="append", schema_mode="merge",
                        commit_properties=CommitProperties(custom_metadata=meta))
