"""Phase 2 of the match job on small pandas frames (no Spark): groups split across Arrow
batches, the start range of a run and of a time slice, the stats rows."""

import json

import pandas as pd
import pytest

from jobs.core.engine.output import match_id
from jobs.core.reference import oracle
from jobs.pipeline.phase2 import NOT_SLICED, SLICE, Phase2Spec, run_partition

from ..helpers import EXAMPLES, ROOT, chemo_mw, pattern_file

TEXT = (ROOT / "patterns" / "mw_chemo_p1.yaml").read_text()
DAY = 86400 * 10**9


def frame():
    df = pd.read_csv(EXAMPLES / "chemo_mw" / "chemo_match_windows.csv")
    df["ts"] = pd.to_datetime(df.ts)
    return df.sort_values(["patient", "ts", "event_id"]).reset_index(drop=True)


def run_batches(spec, df, size):
    batches = [df.iloc[i:i + size] for i in range(0, len(df), size)]
    return pd.concat(list(run_partition(spec, iter(batches))), ignore_index=True)


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
