"""The night's checks without Spark: a source's freshness from its newest landing file and
its newest event (the Delta log's statistics), the volume rule (median and MAD of a
subject's earlier nights), and the alerts a night's outcomes and checks make."""

import os
from datetime import datetime, timedelta, timezone

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from jobs.config.profiles import AlertSettings
from jobs.config.sources import Freshness, Source
from jobs.lake import store as lk
from jobs.lake.health import ERROR, NEW, OK, VOLUME, WARN, Check, append_checks, read_checks
from jobs.pipeline.upkeep.health_checks import (
    alerts_of,
    freshness_check,
    judge,
    reference_time,
    volume_band,
    volume_checks,
)

SETTINGS = AlertSettings()
DAY = 86400 * 10**9


def _source(tmp_path, newest_event: datetime, file_age_days: float | None,
            fresh=Freshness(warn_after=2 * DAY, error_after=7 * DAY)):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    stamp = pa.timestamp("us", tz="UTC")
    lake.append(lake.events("s"), pa.table({
        "event_id": ["a", "b"], "ts": pa.array([newest_event - timedelta(days=30), newest_event],
                                               stamp)}))
    folder = tmp_path / "landing" / "s"
    folder.mkdir(parents=True, exist_ok=True)
    if file_age_days is not None:
        f = folder / "day.csv"
        f.write_text("event_id,ts\n")
        when = (datetime.now(timezone.utc) - timedelta(days=file_age_days)).timestamp()
        os.utime(f, (when, when))
    source = Source("s", {"event_id": "string", "ts": "timestamp"}, landing="s",
                    freshness=fresh)
    return lake, source


def test_freshness_is_the_worse_of_the_newest_file_and_the_newest_event(tmp_path):
    now = datetime.now(timezone.utc)
    lake, source = _source(tmp_path, now - timedelta(hours=5), file_age_days=0.2)
    ok = freshness_check(lake, source, str(tmp_path / "landing"), "r1", "")
    assert ok.status == OK and ok.check == "freshness" and not ok.flagged
    lake, source = _source(tmp_path / "b", now - timedelta(days=3), file_age_days=0.2)
    warn = freshness_check(lake, source, str(tmp_path / "b" / "landing"), "r1", "")
    assert warn.status == WARN and "newest event" in warn.message
    assert "newest landing file" not in warn.message
    lake, source = _source(tmp_path / "c", now - timedelta(days=1), file_age_days=9)
    error = freshness_check(lake, source, str(tmp_path / "c" / "landing"), "r1", "")
    assert error.status == ERROR and error.flagged
    since = (now - timedelta(days=9))
    assert abs((error.since - since).total_seconds()) < 5  # since the newest file arrived
    assert f"nothing new since {since:%Y-%m-%d %H:}" in error.message
    assert "error_after 7.0 d" in error.message and "newest landing file" in error.message


def test_no_freshness_set_no_check_and_nothing_at_all_is_an_error(tmp_path):
    now = datetime.now(timezone.utc)
    lake, source = _source(tmp_path, now, None, fresh=None)
    assert freshness_check(lake, source, str(tmp_path / "landing"), "r", "") is None
    empty = Source("t", {"ts": "timestamp"}, landing="t", freshness=Freshness(error_after=DAY))
    check = freshness_check(lake, empty, str(tmp_path / "landing"), "r", "")
    assert check.status == ERROR and "no landing file and no event" in check.message


def test_freshness_is_judged_at_the_end_of_the_logical_date():
    now = datetime(2026, 11, 27, 7, 0, tzinfo=timezone.utc)
    assert reference_time("2026-11-20", now) == datetime(2026, 11, 21, tzinfo=timezone.utc)
    assert reference_time("2026-11-27", now) == now  # tonight's run: now
    assert reference_time("", now) == now


counts = st.lists(st.integers(0, 10_000), min_size=0, max_size=40)


@given(counts, st.integers(0, 100_000))
def test_the_volume_rule(past, value):
    status, band = judge(value, past, SETTINGS)
    if len(past) < SETTINGS.min_nights:
        assert status == NEW and band is None  # no flag during a subject's first nights
        return
    low, high = band
    median = sorted(past)[len(past) // 2] if len(past) % 2 else \
        (sorted(past)[len(past) // 2 - 1] + sorted(past)[len(past) // 2]) / 2
    assert low <= median <= high
    if value == 0 and median >= 1:
        assert status == WARN  # zero where there usually are some: always flagged
    elif low <= value <= high:
        assert status == OK
    else:
        assert status == WARN


def test_a_drop_to_zero_and_a_tenfold_jump_are_flagged_a_wobble_is_not():
    nights = [38, 41, 40, 44, 39, 40, 42, 37, 40, 43]
    assert judge(40, nights, SETTINGS)[0] == OK
    assert judge(47, nights, SETTINGS)[0] == OK
    assert judge(80, nights, SETTINGS)[0] == OK  # a busy night: within 5 quarters of it
    assert judge(95, nights, SETTINGS)[0] == WARN
    assert judge(0, nights, SETTINGS)[0] == WARN
    assert judge(400, nights, SETTINGS)[0] == WARN
    assert judge(0, [0] * 10, SETTINGS)[0] == OK  # a pattern that rarely matches
    assert judge(1, [0, 0, 1, 0, 0, 0, 0, 2], SETTINGS)[0] == OK
    steady = volume_band([40] * 10, SETTINGS)
    assert steady == (0.0, 90.0)  # the scale's floor: a quarter of the median


def test_volume_checks_read_each_subject_s_earlier_nights(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    days = [f"2026-11-{d:02d}" for d in range(1, 12)]
    for n, day in enumerate(days[:-1]):
        append_checks(lake, [Check(f"r{n}", day, VOLUME, "pattern", "p", OK, value=40.0 + n % 3),
                             Check(f"r{n}", day, VOLUME, "pattern", "q", OK, value=5.0)])
    # a rerun of an earlier date: the day's latest run counts once
    append_checks(lake, [Check("again", days[3], VOLUME, "pattern", "p", OK, value=41.0)])
    out = volume_checks(lake, SETTINGS, "r10", days[-1], "pattern", {"p": 0, "q": 5, "new": 3})
    by = {c.subject: c for c in out}
    assert by["p"].status == WARN and "0 new matches tonight" in by["p"].message
    assert "the last 10 nights' median is 41" in by["p"].message
    assert by["q"].status == OK and by["new"].status == NEW
    append_checks(lake, out)
    assert {c.subject for c in read_checks(lake, VOLUME, {"r10"})} == {"p", "q", "new"}


class _Outcome:
    def __init__(self, pattern, ok, message=None, kind=None, error_type=None):
        self.pattern, self.ok, self.message = pattern, ok, message
        self.kind, self.error_type = kind, error_type


def test_the_night_s_alerts():
    checks = [Check("r", "2026-11-20", "freshness", "source", "s", ERROR,
                    since=datetime(2026, 11, 10, tzinfo=timezone.utc), message="stale"),
              Check("r", "2026-11-20", VOLUME, "pattern", "p", WARN, value=0, low=20, high=60,
                    message="0 new"),
              Check("r", "2026-11-20", VOLUME, "pattern", "q", OK, value=40)]
    outcomes = [_Outcome("a", True),
                _Outcome("b", False, "new version v2 of b not published", "final", "HeldChange"),
                _Outcome("c", False, "executor lost", "retryable", "Py4JError")]
    alerts = alerts_of(checks, outcomes, "r", "2026-11-20")
    kinds = [(a.kind, a.subject, a.severity) for a in alerts]
    assert kinds == [("held_change", "b", "error"), ("failure", "c", "error"),
                     ("freshness", "s", "error"), ("anomaly", "p", "warning")]
    assert alerts[0].action == "ses run --accept-changes b (if intended)"
    assert alerts[1].action == "ses run --logical-date 2026-11-20"
    assert alerts[2].since == "2026-11-10T00:00:00+00:00"
    assert alerts_of([checks[2]], [outcomes[0]], "r", "2026-11-20") == []
