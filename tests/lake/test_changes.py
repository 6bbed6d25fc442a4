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


def test_as_of_a_run_the_runs_table_has_every_row_of_that_run(tmp_path):
    """A run logs a row per pattern, each after its pattern finished (a commit later than
    the row's finished_at): the runs table as the run left it holds all of them, and none
    of a later run's."""
    from jobs.lake.runs import RunsLog, log_run
    from jobs.runrecord import RunRecord

    lake = lk.Lake.of(str(tmp_path / "lake"))
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    log_run(lake, RunRecord(run_id="r1", pattern="a", status="success", started_at=t,
                            finished_at=t))
    log = RunsLog(lake)
    log.append(RunRecord(run_id="r1", pattern="b", status="success", started_at=t,
                         finished_at=t))
    log.append(RunRecord(run_id="r2", pattern="a", status="success", started_at=t,
                         finished_at=t))
    sql = "SELECT run_id, pattern FROM runs ORDER BY 1, 2"
    assert run_duckdb(lake, sql, None, parse_point("r1")).to_pylist() == [
        {"run_id": "r1", "pattern": "a"}, {"run_id": "r1", "pattern": "b"}]
    assert len(run_duckdb(lake, sql, None, parse_point("r2"))) == 3


def _matches(version, run_id, bound):
    bindings = pa.array([[("c", ids)] for ids in bound],
                        pa.map_(pa.string(), pa.list_(pa.string())))
    return pa.table({"match_id": [f"{version}-{'-'.join(ids)}" for ids in bound],
                     "pattern_version": [version] * len(bound), "bindings": bindings,
                     "run_id": [run_id] * len(bound)})


def test_across_a_version_change_matches_pair_by_their_bindings(tmp_path):
    """A new version gives every match a new match_id: the episodes that bind the same
    events are unchanged (counted, not listed), only the others inserted or deleted."""
    lake = lk.Lake.of(str(tmp_path / "lake"))
    path = lake.matches("p")
    write_deltalake(path, _matches("v1", "r1", [["e1", "e2"], ["e3", "e4"], ["e5"]]),
                    commit_properties=_props("r1"))
    write_deltalake(path, _matches("v2", "r2", [["e1", "e2"], ["e3", "e4"], ["e6"]]),
                    mode="overwrite", commit_properties=_props("r2"))
    rows, summary = changes(lake, path, parse_point("r1"))
    assert sorted((r["change"], r["match_id"]) for r in rows.to_pylist()) == [
        ("delete", "v1-e5"), ("insert", "v2-e6")]
    assert summary["unchanged"] == 2 and summary["pattern_versions"] == (["v1"], ["v2"])


def test_a_limit_is_a_limit_and_says_what_it_left_out():
    import io

    from jobs.tools.output_formats import write_rows

    table = pa.table({"n": list(range(30))})
    for fmt, lines in (("table", 8 + 3), ("csv", 8 + 1), ("json", 8)):
        out = io.StringIO()
        write_rows(table, fmt, out, limit=8)
        assert len(out.getvalue().splitlines()) == lines, fmt
    out = io.StringIO()
    write_rows(table, "table", out, limit=8)
    assert out.getvalue().splitlines()[-1].startswith("(8 rows of 30")
