"""The runs table's one typed record: its Arrow schema is the table's, a row survives the
trip through Arrow and through a commit's JSON metadata, and a backfill is told apart by
its kind, not by a string in ``logical_date`` (it never moves a nightly horizon)."""

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from jobs import runrecord
from jobs.pipeline.match.horizons import horizon, plan_range
from jobs.runrecord import BACKFILL, COUNTERS, NIGHTLY, SCHEMA, RunRecord
from jobs.status import FAILED, SUCCESS

DAY = 86400 * 10**9
T = datetime(2010, 7, 10, tzinfo=timezone.utc)


def test_the_schema_is_the_records_columns_and_the_counters_are_among_them():
    # a column the runs table gained later comes after the older ones (a table written
    # before it gets it at its end)
    assert SCHEMA.names[-3:] == ["run_kind", "first_ever_replaced", "first_ever_promoted"]
    assert "match_detail" not in SCHEMA.names
    assert set(COUNTERS) <= set(SCHEMA.names)
    assert SCHEMA.field("started_at").type == pa.timestamp("us", tz="UTC")


def test_a_record_through_arrow_and_through_json():
    r = RunRecord.of_match({"events": 5, "matches": 2, "work": 9, "warnings": ["w"]},
                           run_id="r1", pattern="p", status=SUCCESS, started_at=T,
                           horizon_low=10**18, logical_date="2010-07-10")
    assert r.match_detail == {"work": 9, "warnings": ["w"]}
    assert r["work"] == 9 and r.get("peak") is None and r["events"] == 5
    assert r.horizon_low == datetime.fromtimestamp(1e9, tz=timezone.utc)
    back = runrecord.from_arrow(runrecord.to_arrow([r]))[0]
    assert back.as_row() == r.as_row() and back.match_detail == {}
    again = RunRecord.from_row(json.loads(json.dumps(r.as_row(), default=str)))
    assert again.as_row() == r.as_row()
    with pytest.raises(KeyError):
        r["no_such_column"]


def test_rows_written_before_run_kinds_are_nightly():
    old = pa.table({"run_id": ["r0"], "pattern": ["p"], "status": [FAILED]})
    assert runrecord.from_arrow(old)[0].kind == NIGHTLY
    assert RunRecord.from_row({"run_id": "r", "run_kind": None}).kind == NIGHTLY


def test_a_backfill_never_moves_the_nightly_horizon():
    tau = 2 * DAY
    night = RunRecord("n1", logical_date="2010-07-10", pattern="p", pattern_version="v",
                      status=SUCCESS, horizon_high=horizon("2010-07-10", tau, 0))
    fill = RunRecord("b1", run_kind=BACKFILL, pattern="p", pattern_version="v",
                     status=SUCCESS, horizon_low=horizon("2010-07-01", tau, 0),
                     horizon_high=horizon("2010-08-30", tau, 0))
    rng = plan_range("2010-07-20", tau, 0, "v", [night, fill])
    assert rng.low == horizon("2010-07-10", tau, 0) and not rng.full
    # as plain table rows too (the runs table read with delta-rs)
    assert plan_range("2010-07-20", tau, 0, "v", [night.as_row(), fill.as_row()]) == rng
    assert plan_range("2010-07-20", tau, 0, "v", [fill]).full
