"""``runs``: the run log (the lake's ``runs`` table) read with delta-rs, as text."""

from __future__ import annotations

from jobs import runrecord
from jobs.lake.health import FRESHNESS, read_checks
from jobs.lake.runs import read_runs
from jobs.lake.store import Lake
from jobs.runrecord import RunRecord
from jobs.status import SUCCESS


def header(rows: list[RunRecord]) -> str:
    """The table's header, its pattern column as wide as the longest name shown."""
    return (f"{'run_id':34} {'pattern':{_width(rows)}} {'status':8} {'matches':>8} {'new':>6} "
            f"{'del':>5} {'late':>5} {'seconds':>8}  message")


def _width(rows: list[RunRecord]) -> int:
    return max([36, *(len(r.pattern or "") for r in rows)])


def run_rows(lake: Lake, run_id: str | None = None, last: int = 20
             ) -> tuple[list[RunRecord], int]:
    """The last ``last`` records of the run log (of one run with ``run_id``), oldest first,
    and how many records there are in all; the rows are chosen in Arrow (the log grows
    every night) and only those converted."""
    import pyarrow.compute as pc

    t = read_runs(lake, filter=(pc.field("run_id") == run_id) if run_id else None)
    total = 0 if t is None else t.num_rows
    if t is not None and t.num_rows > last and t.column("started_at").null_count < last:
        # the newest ``last`` start times, every row that shares one, and the rows
        # without a start (sorted as the newest below)
        times = pc.drop_null(t.column("started_at")).sort("descending")
        cut = times[min(last, len(times)) - 1]
        t = t.filter(pc.or_kleene(pc.is_null(t.column("started_at")),
                                  pc.greater_equal(t.column("started_at"), cut)))
    rows = runrecord.from_arrow(t)
    return sorted(rows, key=lambda r: (str(r.started_at), r.pattern or ""))[-last:], total


def run_line(r: RunRecord, width: int = 36) -> str:
    """One record as a line of the table (``width``: the pattern column's, ``header``'s);
    the message whole."""
    def n(v):
        return "-" if v is None else v

    secs = "-" if r.seconds is None else f"{r.seconds:.1f}"
    return (f"{r.run_id[:34]:34} {(r.pattern or ''):{width}} {r.status:8} {n(r.matches):>8} "
            f"{n(r.inserted):>6} {n(r.deleted):>5} {n(r.late_events):>5} {secs:>8}  "
            f"{r.message or ''}")


def lines(rows: list[RunRecord], total: int) -> list[str]:
    """The table of ``rows`` (of ``total`` records), saying how many it left out."""
    width = _width(rows)
    out = [header(rows), *(run_line(r, width) for r in rows)]
    if total > len(rows):
        out.append(f"({len(rows)} of {total} records, the newest; --last N for more, "
                   "--run-id RUN for one run)")
    return out


def published(rows: list[RunRecord]) -> set[str]:
    """The patterns with a successful record (a retried step's failed attempt does not
    count)."""
    return {r.pattern for r in rows if r.status == SUCCESS}


def all_succeeded(rows: list[RunRecord]) -> bool:
    return all(r.status == SUCCESS for r in rows)


def check_lines(lake: Lake, run_ids: set[str]) -> list[str]:
    """The night's checks of these runs, for people: every freshness check, and each
    volume check or held change that was flagged (a quiet night shows only freshness)."""
    if not run_ids:
        return []
    return [f"{c.run_id[:34]:34} {c.check:10} {c.subject:36} {c.status:6} {c.message}"
            for c in read_checks(lake, run_ids=run_ids)
            if c.check == FRESHNESS or c.flagged]
