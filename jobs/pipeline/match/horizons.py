"""Incremental nights (docs/pipeline.md): which first events a run may match.

A match starting at ``s`` is final once every event with ``ts <= s + τ`` has arrived,
with an allowed lateness on top. The run for logical date D has data up to the end of D
(its data interval ends at D + 1 day), so its *horizon* is

    high = D + 1 day - τ - lateness,

and it matches first events in [low, high), where ``low`` is the horizon of the latest
successful run of the same pattern version for an earlier logical date (none: the whole
history, a *full* recompute). A rerun of the same logical date gets the same range, hence
the same matches (with nothing written since, it is idle: ``match_steps.repeats_last_run``).
Pure functions: no Spark, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, timezone

from jobs.config import NS_MIN
from jobs.core.errors import InputError
from jobs.core.language.events import parse_ts
from jobs.lake import store as lk
from jobs.runrecord import NIGHTLY, RunRecord
from jobs.status import SUCCESS

DAY = 86400 * 10**9
WHOLE = -(2 ** 62)  # the start (ns) of a partition matched again from its first event


@dataclass(frozen=True)
class RunRange:
    low: int | None  # None: from the beginning of the history
    high: int
    full: bool  # a new or changed pattern version: everything up to high
    # whole partitions (episodes, history conditions, partition facts): only those with an
    # event ingested after ``since`` (ns; None: every partition), which the match job
    # found (``touched``: (the partition attributes, their values per partition))
    since: int | None = None
    touched: tuple | None = None
    # a night with a partition state: the partitions whose state changed, matched again
    # from an earlier start than ``low`` ((the partition attributes, ((values, start ns),
    # ...))), and, for whole partitions, the start range of every other partition
    lows: tuple | None = None
    opened: int | None = None

    @property
    def read_low(self) -> int | None:
        """The earliest start any partition of the run may match (None: unbounded)."""
        return earliest_start(self.low, self.lows)

    @property
    def empty(self) -> bool:
        return self.low is not None and self.low >= self.high


def earliest_start(low: int | None, lows: tuple | None) -> int | None:
    """The earliest of a night's ``low`` and its partitions' own starts (``RunRange.lows``);
    None: unbounded (no low, or a partition taken whole)."""
    if low is None:
        return None
    low = min([low, *[x for _, x in (lows[1] if lows else ())]])
    return None if low <= WHOLE else low


def partition_key(values) -> str:
    """A partition's values (of X, or of a condition's ``same``) as one text: the key of
    the per-partition states and of the starts below."""
    return json.dumps(list(values), default=str)


@dataclass
class PartitionStarts:
    """The partitions a night matches from before its range's ``low`` (a history-wide
    pattern's state or episodes say which): per key (``partition_key``), the earliest
    start (ns; ``WHOLE``: all of it) and the partition's values."""

    lows: dict[str, int] = field(default_factory=dict)
    values: dict[str, list] = field(default_factory=dict)

    def lower(self, values: list, low: int) -> None:
        """Start the partition with these values at ``low`` or before."""
        k = partition_key(values)
        self.values[k] = values
        self.lows[k] = min(self.lows.get(k, low), low)

    def range_from(self, rng: RunRange, attributes: tuple[str, ...]) -> RunRange:
        """The night's range with these starts: per partition of ``attributes`` (X) in
        ``RunRange.lows``; without X the whole source is one partition, whose start is
        the range's ``low``."""
        if not attributes:
            return RunRange(min([rng.low, *self.lows.values()]), rng.high, False)
        return RunRange(rng.low, rng.high, False, lows=(tuple(attributes), tuple(
            (tuple(self.values[k]), x) for k, x in self.lows.items() if x < rng.low)))


def day_start(d: date | str) -> int:
    if isinstance(d, str):
        d = date.fromisoformat(d[:10])
    return parse_ts(datetime(d.year, d.month, d.day, tzinfo=timezone.utc))


def horizon(logical_date: date | str, tau: int, lateness: int) -> int:
    return day_start(logical_date) + DAY - tau - lateness


def plan_range(logical_date: date | str, tau: int, lateness: int, version: str,
               previous_runs: list[RunRecord]) -> RunRange:
    """``previous_runs``: the runs table's records of this pattern (any version). A
    nightly run starts where the last earlier nightly run of the same version ended; a
    backfill recomputes a range and moves no horizon."""
    high = horizon(logical_date, tau, lateness)
    ld = str(logical_date)[:10]
    records = [r if isinstance(r, RunRecord) else RunRecord.from_row(r) for r in previous_runs]
    earlier = [r for r in records
               if r.kind == NIGHTLY and r.pattern_version == version and r.status == SUCCESS
               and r.logical_date and r.logical_date[:10] < ld and r.horizon_high is not None]
    if not earlier:
        return RunRange(None, high, True)
    low = max(as_ns(r.horizon_high) for r in earlier)
    return RunRange(low, max(high, low), False)


def check_logical_date(profile, text: str | None, now: datetime | None = None) -> str:
    """A run's logical date (default: today, UTC), checked: YYYY-MM-DD, not after today
    plus the profile's ``ingest.max_future`` (a later date would move every pattern's
    horizon past events that do not exist yet, and no later night would match them) and
    not before ``ingest.earliest`` (no event can be that old). ``InputError`` otherwise."""
    now = now or datetime.now(timezone.utc)
    if not text:
        return now.date().isoformat()
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise InputError(f"logical date {text[:40]!r} is not a date (YYYY-MM-DD)") from None
    latest = datetime.fromtimestamp(now.timestamp() + profile.max_future / 1e9, timezone.utc)
    if day > latest.date():
        raise InputError(f"logical date {day} is after today ({now.date()}) plus the allowed "
                         f"future (ingest.max_future of profile {profile.name}): it would move "
                         "every pattern's horizon past events that do not exist yet; nothing "
                         "was run")
    if day.isoformat() < profile.earliest[:10]:
        raise InputError(f"logical date {day} is before ingest.earliest ({profile.earliest}) "
                         f"of profile {profile.name}: no event can be that old; nothing was "
                         "run (to recompute a past range, use `ses backfill`)")
    return day.isoformat()


def backfill_range(start: date | str, end: date | str) -> RunRange:
    """Recompute the matches whose first event lies in [start, end); ``InputError`` for a
    date that is not YYYY-MM-DD or a range that is empty or reversed."""
    try:
        low, high = day_start(start), day_start(end)
    except ValueError as exc:
        raise InputError(f"backfill: a date must be YYYY-MM-DD ({exc})") from None
    if high <= low:
        raise InputError(f"backfill: the range [{start}, {end}) is "
                         f"{'empty' if high == low else 'reversed'}: --end (exclusive) must "
                         "be after --start; nothing was run")
    return RunRange(low, high, False)


def as_ns(value) -> int:
    """A horizon as the runs table keeps it (a time) or as a range holds it: nanoseconds."""
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):
        return parse_ts(value)
    return parse_ts(str(value))


def reopened_low(lake: lk.Lake, source: str, since, tau: int) -> int | None:
    """The earliest first event a pattern with window ``tau`` must re-match because of
    retractions of ``source`` after ``since`` (None: none)."""
    t = lake.read_arrow(lake.retractions())
    if t is None:
        return None
    lows = [parse_ts(r["ts_min"]) - tau for r in t.to_pylist()
            if r["source"] == source and (since is None or r["retracted_at"] > since)]
    lows = [x for x in lows if x > NS_MIN]  # an event the engine could never read: no match
    return min(lows) if lows else None
