"""What a run tells people: its summary table and a range in words.
"""

from __future__ import annotations

import textwrap

from jobs.config import Profile
from jobs.core.language.events import format_ts
from jobs.pipeline.match.horizons import RunRange
from jobs.runrecord import RunRecord
from jobs.status import FAILED


def describe_range(rng: RunRange) -> str:
    """The range a run matched, in words: incremental or a full recompute, and from when
    to when its windows' first events lie."""
    low = "the beginning" if rng.low is None else format_ts(rng.low)
    kind = "full recompute" if rng.full else "incremental"
    return f"{kind}, first events from {low} to {format_ts(rng.high)}"


def summary(profile: Profile, rows: list[RunRecord], run_id: str, seconds: float | None) -> str:
    """The run's table: per pattern its counters, the wall time of match, validate and
    publish (seconds), and its status in the runs table's words (success, failed)."""
    def secs(v) -> str:
        return "-" if v is None else f"{v:.1f}"

    w = max([40, *(len(r["pattern"]) for r in rows)])  # a long name keeps its columns
    lines = [f"\nrun {run_id}" + (f" ({seconds:.1f} s)" if seconds is not None else ""),
             f"{'pattern':{w}} {'matches':>8} {'new':>6} {'events read':>12} {'kept':>8} "
             f"{'late':>5} {'match':>6} {'valid.':>6} {'publ.':>6}  status"]
    failures = []
    for r in rows:
        if r.get("status") == FAILED:
            lines.append(f"{r['pattern']:{w}} {'-':>8} {'-':>6} {'-':>12} {'-':>8} {'-':>5} "
                         f"{'-':>6} {'-':>6} {'-':>6}  {FAILED} (below)")
            failures.append(r)
            continue
        lines.append(f"{r['pattern']:{w}} {r['matches']:>8} {r['inserted']:>6} {r['events']:>12} "
                     f"{r['events_after_filter']:>8} {r.get('late_events', 0):>5} "
                     f"{secs(r.get('match_seconds')):>6} {secs(r.get('validate_seconds')):>6} "
                     f"{secs(r.get('publish_seconds')):>6}  {r['status']}"
                     + (" (nothing new: no Spark)" if r.get("idle") else ""))
    for r in failures:  # whole, wrapped: the file's line and the "did you mean" at its end
        lines.append("")
        lines.extend(textwrap.wrap(f"{r['pattern']} failed: {r['message'] or ''}", width=100,
                                   subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False))
    lake = profile.lake
    lines.append(f"\ntables: {lake}/matches/<pattern>, {lake}/runs, {lake}/events/<source>, "
                 f"{lake}/quarantine/<source> (Delta)")
    return "\n".join(lines)
