"""``reconcile`` on hand-made lakes (no Spark): what a killed run leaves is repaired once."""

import json
from datetime import datetime, timezone

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from jobs.lake import store as lk
from jobs.lake.match_commits import RUN_KEY
from jobs.lake.runs import log_run
from jobs.pipeline.upkeep.reconcile import reconcile, start_run

NOW = datetime(2026, 11, 22, tzinfo=timezone.utc)


def _row(run_id, status="success", **kw):
    return dict({"run_id": run_id, "logical_date": "2026-11-21", "pattern": "p",
                 "pattern_version": "v1", "source": "s", "matcher": "ses", "status": status,
                 "matches": 2, "started_at": NOW, "finished_at": NOW}, **kw)


def _publish(lake, run_id):
    meta = json.dumps({k: v for k, v in _row(run_id).items() if k != "finished_at"},
                      default=str)
    write_deltalake(lake.matches("p"), pa.table({"match_id": ["a", "b"]}), mode="append",
                    commit_properties=CommitProperties(custom_metadata={RUN_KEY: meta}))


def test_a_published_run_with_only_a_failed_row_gets_its_success_row(tmp_path):
    lake = lk.Lake(str(tmp_path))
    _publish(lake, "r1")
    log_run(lake, _row("r1", "failed", message="the runs row could not be written"))
    notes = reconcile(lake, echo=lambda *_: None)
    assert notes == ["reconciled: p of run r1 was published but not logged; logged now"]
    rows = DeltaTable(lake.runs()).to_pyarrow_table().to_pylist()
    ok = [r for r in rows if r["status"] == "success"]
    assert [(r["run_id"], r["inserted"], r["deleted"]) for r in ok] == [("r1", 2, 0)]
    assert reconcile(lake, echo=lambda *_: None) == []  # once only


def test_an_unfinished_run_gets_aborted_rows_and_its_staging_goes(tmp_path):
    lake = lk.Lake(str(tmp_path))
    start_run(lake, "r2", "2026-11-21", [{"pattern": "p", "pattern_version": "v1",
                                          "source": "s", "matcher": "ses"},
                                         {"pattern": "q", "pattern_version": "v1",
                                          "source": "s", "matcher": "ses"}])
    log_run(lake, _row("r2", pattern="p"))
    for pattern in ("p", "q"):
        (tmp_path / "staging" / pattern / "r2" / "_temporary").mkdir(parents=True)
    (tmp_path / "staging" / "p" / "r3" / "_temporary").mkdir(parents=True)  # no row yet
    reconcile(lake, echo=lambda *_: None)
    rows = {(r["pattern"], r["status"]) for r in
            DeltaTable(lake.runs()).to_pyarrow_table().to_pylist()}
    assert rows == {("p", "success"), ("q", "aborted")}
    assert not (tmp_path / "staging" / "p" / "r2").exists()
    assert not (tmp_path / "staging" / "q").exists()
    assert (tmp_path / "staging" / "p" / "r3").exists()
    assert not (tmp_path / "staging" / "p" / "r3" / "_temporary").exists()
    assert not list((tmp_path / "_runs").glob("*.json"))
