"""The rows of the runs table a night's planning needs, in time that does not grow with the
nights: the runs table gains a row per pattern per night, and a night needs of each
pattern version only three of its successful runs.

``plan_range`` takes the largest ``horizon_high`` of the version's earlier nightly runs;
the last success (the retraction reach, idle patterns, late events) is the one started
last; ``needs_replan`` reads the last one started that has an estimate. Every other row
leaves those answers unchanged, so only these three rows per version are converted to
records (the table's other rows are filtered in Arrow, on a few columns).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake import store as lk
from jobs.runrecord import NIGHTLY, RunRecord, from_arrow
from jobs.status import SUCCESS

KEYS = ["pattern", "pattern_version", "run_kind", "logical_date", "horizon_high", "started_at",
        "estimated_pm"]


def planning_runs(lake: lk.Lake, names: set[str], logical_date: str
                  ) -> dict[str, list[RunRecord]]:
    """Per pattern of ``names``: the successful runs, per version, that ``plan_range``,
    the last success and ``needs_replan`` read (night of ``logical_date``)."""
    out: dict[str, list[RunRecord]] = {name: [] for name in names}
    if not names:
        return out
    t = lake.read_arrow(lake.runs(), filter=(pc.field("status") == SUCCESS)
                        & pc.field("pattern").isin(pa.array(sorted(names), pa.string())))
    if t is None or t.num_rows == 0:
        return out
    rows = t.select([k for k in KEYS if k in t.column_names]).to_pylist()
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


def published_by(lake: lk.Lake, run_id: str) -> set[str]:
    """The patterns run ``run_id`` published already (a retried task skips them)."""
    t = lake.read_arrow(lake.runs(), columns=["pattern"],
                        filter=(pc.field("run_id") == run_id) & (pc.field("status") == SUCCESS))
    return set() if t is None else set(t.column("pattern").to_pylist())
