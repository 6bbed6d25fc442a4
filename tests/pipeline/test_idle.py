"""When a night has nothing to do for a pattern (match_steps.is_idle), from the Delta log
alone (lake/extent.py): no Spark needed."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

from jobs.lake import store as lk
from jobs.lake.extent import EventsExtent, events_extent
from jobs.pipeline.match.horizons import RunRange
from jobs.pipeline.match.steps import is_idle

NS = 10**9
NOW = datetime(2026, 1, 10, tzinfo=timezone.utc)


def extent(files, written=NOW - timedelta(hours=1), complete=True) -> EventsExtent:
    lows = np.array([a for a, _ in files], np.int64)
    highs = np.array([b for _, b in files], np.int64)
    return EventsExtent(written, lows, highs, complete)


def test_a_range_holds_an_event_when_some_file_s_time_range_meets_it():
    e = extent([(10, 20), (40, 50)])
    assert e.holds_between(15, 16) and e.holds_between(0, 11) and e.holds_between(50, 60)
    assert not e.holds_between(21, 40) and not e.holds_between(51, 100)
    assert e.holds_between(None, 11) and not e.holds_between(None, 10)
    assert extent([], complete=False).holds_between(0, 1)  # no statistics: cannot rule out


def test_idle_needs_an_incremental_range_no_write_since_and_no_event_in_it():
    e = extent([(10, 20)])
    assert is_idle(RunRange(30, 40, False), NOW, e)
    assert not is_idle(RunRange(15, 40, False), NOW, e)  # an event in the range
    assert not is_idle(RunRange(None, 40, True), NOW, e)  # a full recompute
    assert not is_idle(RunRange(30, 40, False), NOW - timedelta(hours=2), e)  # written since
    assert not is_idle(RunRange(30, 40, False), None, e)  # never succeeded
    assert not is_idle(RunRange(30, 40, False), NOW, None)  # no events table


def test_the_extent_comes_from_the_delta_log(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    assert events_extent(lake, "s") is None
    ts = pa.array([datetime(2026, 1, 1, tzinfo=timezone.utc),
                   datetime(2026, 1, 3, tzinfo=timezone.utc)], pa.timestamp("us", tz="UTC"))
    lake.append(lake.events("s"), pa.table({"event_id": ["a", "b"], "ts": ts,
                                            "event_date": ["2026-01-01", "2026-01-03"]}),
                partition_by=["event_date"])
    e = events_extent(lake, "s")
    day = 86400 * NS
    jan1 = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()) * NS
    assert e.complete and sorted(e.lows.tolist()) == [jan1, jan1 + 2 * day]
    assert e.holds_between(jan1, jan1 + 1) and not e.holds_between(jan1 + 1, jan1 + 2 * day)
    assert abs((e.written_at - datetime.now(timezone.utc)).total_seconds()) < 60


def test_late_events_are_counted_in_the_files_ingested_since_the_last_run(tmp_path):
    """The files a night's late-event count reads: those whose ``ingested_at`` statistics
    may exceed the last run's start (Delta truncates them to milliseconds: a file within
    that millisecond is read too)."""
    from jobs.lake.extent import files_ingested_after

    lake = lk.Lake.of(str(tmp_path / "lake"))
    at = datetime(2026, 1, 5, 10, 0, 0, 700, tzinfo=timezone.utc)  # 0.7 ms after the second
    stamp = pa.timestamp("us", tz="UTC")
    for n, ingested in enumerate([at - timedelta(days=1), at]):
        lake.append(lake.events("s"), pa.table({
            "event_id": [f"e{n}"], "ts": pa.array([ingested], stamp),
            "ingested_at": pa.array([ingested], stamp)}))
    names = {lk.file_name(f) for f in lake.table(lake.events("s")).file_uris()}
    assert files_ingested_after(lake, "s", at - timedelta(days=2)) == names
    newest = files_ingested_after(lake, "s", at - timedelta(microseconds=500))
    assert len(newest) == 1 and newest < names  # the 0.7 ms one, despite its stats' .000
    assert files_ingested_after(lake, "s", at + timedelta(seconds=1)) == set()
    # a naive time is taken for UTC
    assert files_ingested_after(lake, "s", (at - timedelta(microseconds=500)).replace(
        tzinfo=None)) == newest
