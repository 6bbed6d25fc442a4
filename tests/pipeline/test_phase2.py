"""Phase 2 of the match job on small pandas frames (no Spark): groups split across Arrow
batches, the start range of a run and of a time slice, the stats rows."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobs.core.engine.output import match_id
from jobs.core.language.patternfile import parse_pattern
from jobs.core.reference import oracle
from jobs.pipeline.match.phase2 import (
    NOT_SLICED,
    PATTERNS_COLUMN,
    SLICE,
    Phase2Spec,
    SharedSpec,
    run_partition,
    run_shared_partition,
    starting,
)

from ..helpers import EXAMPLES, ROOT, chemo_mw, pattern_file
from ..strategies import event_tables, language_patterns

TEXT = (ROOT / "patterns" / "mw_chemo_p1.yaml").read_text()
DAY = 86400 * 10**9


def frame():
    df = pd.read_csv(EXAMPLES / "chemo_mw" / "chemo_match_windows.csv")
    df["ts"] = pd.to_datetime(df.ts)
    return df.sort_values(["patient", "ts", "event_id"]).reset_index(drop=True)


def run_batches(spec, df, size):
    batches = [df.iloc[i:i + size] for i in range(0, len(df), size)]
    return _frames(run_partition(spec, iter(batches)))


def _frames(out) -> pd.DataFrame:
    """The frames phase 2 yields, as one (none: no rows)."""
    frames = list(out)
    return pd.concat(frames, ignore_index=True) if frames else \
        pd.DataFrame(columns=["kind", "match_id", "start_ts", "stats"])


@pytest.mark.parametrize("size", [1, 3, 5, 100])
def test_groups_across_batches_equal_the_oracle(size):
    out = run_batches(Phase2Spec(TEXT, ("patient",), None, None), frame(), size)
    p = pattern_file("mw_chemo_p1")
    expected = {match_id(p.version, m.key) for m in oracle.ses_exec(p, chemo_mw())}
    assert set(out[out.kind == "match"].match_id) == expected
    stats = [json.loads(s) for s in out[out.kind == "stats"].stats]
    assert sum(s["partitions"] for s in stats) == 2  # whole partitions: counted by the engine
    assert sum(s["matches"] for s in stats) == 3
    assert out.start_ts.dtype == "datetime64[ns]"


def test_run_range_keeps_only_matches_starting_inside():
    low = int(pd.Timestamp("2010-07-05").value)
    high = int(pd.Timestamp("2010-07-09").value)
    out = run_batches(Phase2Spec(TEXT, ("patient",), low, high), frame(), 4)
    m = out[out.kind == "match"]
    assert list(m.start_ts) == [pd.Timestamp("2010-07-08")]


def test_time_slices():
    df = frame()
    origin, length = int(pd.Timestamp("2010-07-01").value), 7 * DAY
    tau = 15 * DAY
    rows = []
    for _, r in df.iterrows():  # an event goes to every slice whose range it can complete
        ts = int(r.ts.value)
        first, own = (ts - tau - origin) // length, (ts - origin) // length
        for j in range(first, own + 1):
            rows.append({**r.to_dict(), SLICE: j})
    sliced = pd.DataFrame(rows).sort_values(["patient", SLICE, "ts", "event_id"])
    spec = Phase2Spec(TEXT, ("patient",), None, None, slice_origin=origin, slice_length=length)
    out = run_batches(spec, sliced.reset_index(drop=True), 4)
    whole = run_batches(Phase2Spec(TEXT, ("patient",), None, None), df, 4)
    assert sorted(out[out.kind == "match"].match_id) == sorted(whole[whole.kind == "match"].match_id)
    assert (out.kind == "stats").sum() > 2  # several slices per patient
    # a partition that was not sliced keeps its whole range
    unsliced = df.assign(**{SLICE: NOT_SLICED})
    out2 = run_batches(spec, unsliced, 4)
    assert sorted(out2[out2.kind == "match"].match_id) == sorted(whole[whole.kind == "match"].match_id)


def test_starting_keeps_the_partitions_with_an_event_in_the_range():
    ts = np.array([1, 5, 9, 2, 3, 7, 8], np.int64)  # partitions of 3, 2 and 2 rows
    assert starting(ts, [3, 2, 2], None, 4, 8).tolist() == [True] * 3 + [False] * 2 + [True] * 2
    mask = np.array([True, False, True, True, True, True, True])  # 5 is not the pattern's
    assert starting(ts, [3, 2, 2], mask, 4, 6).tolist() == [False] * 7
    assert starting(ts, [3, 2, 2], None, None, 2).tolist() == [True] * 3 + [False] * 4


def _frame_of(events) -> pd.DataFrame:
    rows = [{"event_id": e.id, "ts": pd.Timestamp(e.ts, unit="ns"), **e.attrs} for e in events]
    df = pd.DataFrame(rows, columns=["event_id", "ts", "type", "value", "patient"])
    df["ts"] = df.ts.astype("datetime64[ns]")
    return df.sort_values(["patient", "ts", "event_id"]).reset_index(drop=True)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), size=st.sampled_from([1, 3, 50]))
def test_pruned_partitions_leave_a_night_s_matches_and_counters_unchanged(data, size):
    """A night matches only the partitions holding an event in its start range (the
    others are read for the τ before it): its matches are those of the whole history that
    start in the range, in one pattern's job and in a source pass alike."""
    body = data.draw(language_patterns(negation=data.draw(st.booleans()), bounds=True,
                                       as_body=True))
    text = (f"name: random\nsource: random\nwithin: {data.draw(st.integers(1, 4))}d\n"
            + body + f"matcher: {data.draw(st.sampled_from(['ses', 'zstream']))}\n")
    pattern = parse_pattern(text, "<random>")
    assume(pattern.partition_attributes == ("patient",) and pattern.position_rule is None)
    events = data.draw(event_tables(max_events=12, max_day=10))
    assume(events)
    df = _frame_of(events)
    low = data.draw(st.integers(0, 10)) * DAY
    high = low + data.draw(st.integers(1, 4)) * DAY
    whole = run_batches(Phase2Spec(text, ("patient",), None, None), df, size)
    expected = set(whole[(whole.kind == "match") & (whole.start_ts >= pd.Timestamp(low))
                         & (whole.start_ts < pd.Timestamp(high))].match_id)
    night = run_batches(Phase2Spec(text, ("patient",), low, high), df, size)
    assert set(night[night.kind == "match"].match_id) == expected
    in_range = {e.attrs["patient"] for e in events if low <= e.ts < high}
    stats = [json.loads(x) for x in night[night.kind == "stats"].stats]
    assert sum(x["partitions"] for x in stats) <= len(in_range)
    shared = SharedSpec("p", Phase2Spec(text, ("patient",), low, high), None, None)
    tagged = df.assign(**{PATTERNS_COLUMN: 1})
    out = _frames(run_shared_partition((shared,), iter(
        [tagged.iloc[i:i + size] for i in range(0, len(tagged), size)])))
    assert set(out[out.kind == "match"].match_id) == expected
    passed = [json.loads(x) for x in out[out.kind == "stats"].stats]
    assert sum(x["partitions"] for x in passed) == sum(x["partitions"] for x in stats)
