"""``runs``: the run log (the lake's ``runs`` table) read with delta-rs, as text."""

from __future__ import annotations

from jobs.lake.store import Lake
from jobs.status import SUCCESS

HEADER = (f"{'run_id':34} {'pattern':36} {'status':8} {'matches':>8} {'new':>6} {'del':>5} "
          f"{'late':>5} {'seconds':>8}  message")


def run_rows(lake: Lake, run_id: str | None = None, last: int = 20) -> list[dict]:
    """The last ``last`` rows of the run log (of one run with ``run_id``), oldest first."""
    t = lake.read_arrow(lake.runs())
    rows = t.to_pylist() if t is not None else []
    if run_id:
        rows = [r for r in rows if r["run_id"] == run_id]
    return sorted(rows, key=lambda r: (str(r["started_at"]), r["pattern"]))[-last:]


def run_line(r: dict) -> str:
    def n(k):
        return "-" if r.get(k) is None else r[k]

    secs = "-" if r.get("seconds") is None else f"{r['seconds']:.1f}"
    return (f"{r['run_id'][:34]:34} {r['pattern'][:36]:36} {r['status']:8} {n('matches'):>8} "
            f"{n('inserted'):>6} {n('deleted'):>5} {n('late_events'):>5} {secs:>8}  "
            f"{(r.get('message') or '')[:200]}")


def published(rows: list[dict]) -> set[str]:
    """The patterns with a successful row (a retried step's failed attempt does not count)."""
    return {r["pattern"] for r in rows if r["status"] == SUCCESS}


def all_succeeded(rows: list[dict]) -> bool:
    return all(r["status"] == SUCCESS for r in rows)
