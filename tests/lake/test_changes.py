"""Time travel without Spark: a point as a run, a time or a version; what changed in a
table since (inserted, deleted, updated, keyed by match_id; a model by its whole row);
the tables as they were (``query --as-of``)."""

import json
import time
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from jobs.core.errors import InputError
from jobs.lake import store as lk
from jobs.lake.changes import changes, parse_point, version_at
from jobs.tools.query import run_duckdb


def _commit(path, rows, run_id, mode="append"):
    write_deltalake(path, pa.Table.from_pylist(rows), mode=mode,
                    commit_properties=_props(run_id))


def _props(run_id):
    from deltalake import CommitProperties

    return CommitProperties(custom_metadata={"ses.run": json.dumps({"run_id": run_id})})


def test_points_are_runs_times_or_versions():
    assert parse_point("12").kind == "version" and parse_point("12").version == 12
    t = parse_point("2026-11-20T06:00:00")
    assert t.kind == "time" and t.time == datetime(2026, 11, 20, 6, tzinfo=timezone.utc)
    assert parse_point("2026-11-20").time == datetime(2026, 11, 20, tzinfo=timezone.utc)
    assert parse_point("20261120T020312Z-4be1c2").kind == "run"


def test_what_changed_since_a_run_a_time_and_a_version(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    path = lake.matches("p")
    _commit(path, [{"match_id": "a", "n": 1, "run_id": "r1"},
                   {"match_id": "b", "n": 1, "run_id": "r1"}], "r1")
    time.sleep(0.02)
    between = datetime.now(timezone.utc)
    time.sleep(0.02)
    # r2 rewrites the table: b goes, c comes, a is updated (another value)
    _commit(path, [{"match_id": "a", "n": 2, "run_id": "r2"},
                   {"match_id": "c", "n": 1, "run_id": "r2"}], "r2", mode="overwrite")
    for since in ("r1", between.isoformat(), "0"):
        rows, summary = changes(lake, path, parse_point(since))
        got = sorted((r["change"], r["match_id"]) for r in rows.to_pylist())
        assert got == [("delete", "b"), ("insert", "c"), ("update", "a")], since
        assert (summary["from_version"], summary["to_version"]) == (0, 1)
    assert changes(lake, path, parse_point("r2"))[1]["inserted"] == 0  # nothing since r2
    everything = changes(lake, path, parse_point("2000-01-01"))[0]  # before the table
    assert sorted(everything.column("change").to_pylist()) == ["insert", "insert"]
    with pytest.raises(InputError, match="no run 'r9' in the runs log"):
        version_at(lake, path, parse_point("r9"))
    with pytest.raises(InputError, match="has no version 7"):
        version_at(lake, path, parse_point("7"))


def test_a_model_s_changes_are_whole_rows(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    path = lake.model("m")
    _commit(path, [{"patient": "1", "matches": 2}, {"patient": "2", "matches": 1}], "r1")
    _commit(path, [{"patient": "1", "matches": 3}, {"patient": "2", "matches": 1}], "r2",
            mode="overwrite")
    rows, summary = changes(lake, path, parse_point("r1"))
    assert sorted((r["change"], r["patient"], r["matches"]) for r in rows.to_pylist()) == \
        [("delete", "1", 2), ("insert", "1", 3)]
    assert summary["updated"] == 0


def test_the_tables_as_they_were(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    _commit(lake.matches("p"), [{"match_id": "a", "run_id": "r1"}], "r1")
    _commit(lake.matches("p"), [{"match_id": "b", "run_id": "r2"}], "r2")
    now = datetime.now(timezone.utc)
    lake.append(lake.runs(), pa.table({"run_id": ["r1"], "pattern": ["p"],
                                       "source": pa.array([None], pa.string()),
                                       "started_at": [now], "finished_at": [now]}))
    # (r1 finished before q was written)
    _commit(lake.matches("q"), [{"match_id": "y", "run_id": "r3"}], "r3")
    sql = "SELECT match_id FROM matches_p ORDER BY 1"
    assert run_duckdb(lake, sql, None, parse_point("r1")).column(0).to_pylist() == ["a"]
    assert run_duckdb(lake, sql, None, parse_point("0")).column(0).to_pylist() == ["a"]
    assert run_duckdb(lake, sql, None).column(0).to_pylist() == ["a", "b"]
    with pytest.raises(InputError, match="did not exist yet at run r1"):
        run_duckdb(lake, "SELECT * FROM matches_q", None, parse_point("r1"))
    with pytest.raises(InputError, match="a version is one table's"):
        run_duckdb(lake, "SELECT * FROM matches_p, matches_q", None, parse_point("0"))
