"""Kills at chosen points (a real subprocess, SIGKILL at a named failpoint) and two runs
at once: the lake stays consistent and the next run repairs and completes it."""

import signal
from pathlib import Path

from deltalake import DeltaTable

from jobs.lake.locks import lake_lock

from .conftest import P1
from .lakecheck import check

DATE = "2010-08-30"


def runs(lake):
    path = lake.root / "runs"
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist() if path.exists() else []


def two_patterns(tmp_path) -> Path:
    """A folder with two copies of P1: a.yaml (first_p1) and b.yaml (second_p1)."""
    folder = tmp_path / "patterns"
    folder.mkdir()
    text = Path(P1).read_text()
    for file, name in (("a.yaml", "first_p1"), ("b.yaml", "second_p1")):
        (folder / file).write_text(text.replace("name: mw_chemo_p1", f"name: {name}"))
    return folder


def test_kill_between_the_matches_merge_and_the_runs_row(lake, spark):
    killed = lake.jobs("run", "--logical-date", DATE, "--pattern", P1,
                       failpoint="publish:after-merge")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert DeltaTable(str(lake.root / "matches" / "mw_chemo_p1")).count() == 3
    assert not [r for r in runs(lake) if r["status"] == "success"]
    again = lake.here(spark, "run", "--logical-date", DATE, "--pattern", P1)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "was published but not logged; logged now" in again.stdout
    counts = check(str(lake.root))  # the log's inserted total equals the table again
    assert counts["matches/mw_chemo_p1"] == 3
    ok = [r for r in runs(lake) if r["status"] == "success"]
    assert len(ok) == 2 and sorted(r["inserted"] for r in ok) == [0, 3]
    assert not list((lake.root / "staging").rglob("_temporary"))
    assert not any((lake.root / "staging").rglob("*.parquet"))  # published runs cleaned


def test_kill_between_the_events_and_the_ingest_log(lake, spark):
    killed = lake.jobs("run", "--logical-date", DATE, "--pattern", P1,
                       failpoint="ingest:after-events")
    assert killed.returncode == -signal.SIGKILL
    assert DeltaTable(str(lake.root / "events" / "chemo_mw")).count() == 14
    again = lake.here(spark, "run", "--logical-date", DATE, "--pattern", P1)
    assert again.returncode == 0, again.stderr[-2000:]
    counts = check(str(lake.root))
    assert counts["events/chemo_mw"] == 14 and counts["ingest_log"] == 1
    assert counts["matches/mw_chemo_p1"] == 3


def test_kill_between_patterns_logs_the_rest_as_aborted(lake, spark, tmp_path):
    folder = two_patterns(tmp_path)
    args = ["run", "--logical-date", DATE, "--pattern", folder / "a.yaml",
            "--pattern", folder / "b.yaml"]
    killed = lake.jobs(*args, failpoint="run:after-pattern")
    assert killed.returncode == -signal.SIGKILL
    again = lake.here(spark, *args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "second_p1 of run" in again.stdout and "logged as aborted" in again.stdout
    rows = runs(lake)
    first_run = sorted({r["run_id"] for r in rows})[0]
    assert {(r["pattern"], r["status"]) for r in rows if r["run_id"] == first_run} == \
        {("first_p1", "success"), ("second_p1", "aborted")}
    counts = check(str(lake.root))
    assert counts["matches/first_p1"] == counts["matches/second_p1"] == 3
    assert not (lake.root / "_runs").exists() or not any((lake.root / "_runs").iterdir())


def test_a_second_run_is_refused_while_one_holds_the_lake(lake, spark):
    with lake_lock(str(lake.root), "a test standing in for a long run"):
        second = lake.jobs("run", "--logical-date", DATE, "--pattern", P1)
    assert second.returncode == 75  # transient: the DAG retries it
    assert "another run is in progress: a test standing in for a long run" in second.stderr
    assert "Traceback" not in second.stderr
    assert not (lake.root / "runs").exists() and not (lake.root / "events").exists()
    after = lake.here(spark, "run", "--logical-date", DATE, "--pattern", P1)  # the lock is gone
    assert after.returncode == 0, after.stderr[-2000:]
    check(str(lake.root))


def test_a_source_task_killed_midway_is_retried_for_the_patterns_it_did_not_publish(
        lake, spark, tmp_path):
    """The DAG's task per source (``run-patterns``) dies after its first pattern: the
    retry, with the same run id, skips what that run published and does the rest; a file
    that does not load fails alone, and the exit code says a retry would not mend it."""
    folder = two_patterns(tmp_path)
    (folder / "broken.yaml").write_text("name: broken\nsource: chemo_mw\nsets: [[\n")
    assert lake.here(spark, "ingest", "--logical-date", DATE, "--run-id", "r1",
                     "--source", "chemo_mw").returncode == 0
    args = ["run-patterns", folder / "a.yaml", folder / "b.yaml", folder / "broken.yaml",
            "--run-id", "r1", "--logical-date", DATE]
    killed = lake.jobs(*args, failpoint="run:after-pattern")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert {(r["pattern"], r["status"]) for r in runs(lake)} == {("broken", "failed"),
                                                                 ("first_p1", "success")}
    again = lake.here(spark, *args)
    assert again.returncode == 2, again.stdout[-2000:] + again.stderr[-2000:]
    assert "first_p1: already published by run r1, skipped" in again.stdout
    assert "error: 1 of 2 pattern(s) failed, the other 1 were published\nerror: broken: " \
        in again.stderr
    assert sorted((r["pattern"], r["status"]) for r in runs(lake)) == [
        ("broken", "failed"), ("broken", "failed"), ("first_p1", "success"),
        ("second_p1", "success")]
    counts = check(str(lake.root))
    assert counts["matches/first_p1"] == counts["matches/second_p1"] == 3


def test_a_kill_loses_only_the_rows_of_runs_that_committed_nothing(lake, spark, tmp_path):
    """A rerun's rows are held back and appended together at the end (their runs commit
    nothing): killed before that, the rows are lost but no work is; the next run logs the
    killed run's patterns as aborted and publishes nothing twice."""
    folder = two_patterns(tmp_path)
    args = ["run", "--logical-date", DATE, "--pattern", folder / "a.yaml",
            "--pattern", folder / "b.yaml"]
    assert lake.here(spark, *args).returncode == 0
    assert len(runs(lake)) == 2
    killed = lake.jobs(*args, failpoint="run:after-pattern")  # after first_p1's publish
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert len(runs(lake)) == 2  # first_p1's row of the rerun was held, not written
    again = lake.here(spark, *args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "first_p1 of run" in again.stdout and "logged as aborted" in again.stdout
    statuses = sorted((r["pattern"], r["status"]) for r in runs(lake))
    assert statuses == [("first_p1", "aborted"), ("first_p1", "success"),
                        ("first_p1", "success"), ("second_p1", "aborted"),
                        ("second_p1", "success"), ("second_p1", "success")]
    counts = check(str(lake.root))
    assert counts["matches/first_p1"] == counts["matches/second_p1"] == 3


def test_a_retract_killed_between_its_delete_and_its_row_is_completed(lake, spark):
    """The delete commit carries the retraction's row: killed before the row is appended,
    the next writer (here a run) logs it, re-matches the range the events reached (the
    match bound to the retracted event goes), and the retract rerun says it was done."""
    assert lake.here(spark, "run", "--logical-date", DATE, "--pattern", P1).returncode == 0
    args = ["retract", "--source", "chemo_mw", "--event-id", "e1", "--reason", "a test"]
    killed = lake.jobs(*args, failpoint="retract:after-delete")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert DeltaTable(str(lake.root / "events" / "chemo_mw")).count() == 13
    assert not (lake.root / "retractions").exists()
    night = lake.here(spark, "run", "--logical-date", "2010-08-31", "--pattern", P1)
    assert night.returncode == 0, night.stderr[-2000:]
    assert "reconciled: retraction" in night.stdout
    log = DeltaTable(str(lake.root / "retractions")).to_pyarrow_table().to_pylist()
    assert [(r["event_ids"], r["events"], r["reason"]) for r in log] == [(["e1"], 1, "a test")]
    last = [r for r in runs(lake) if r["logical_date"] == "2010-08-31"]
    assert [r["deleted"] for r in last] == [1]
    again = lake.here(spark, *args)
    assert again.returncode == 0 and "already retracted" in again.stdout, again.stderr
    assert len(DeltaTable(str(lake.root / "retractions")).to_pyarrow_table()) == 1
    check(str(lake.root))


def test_backfill_follows_the_rules_of_run(lake, spark, tmp_path):
    """A reversed range: one line, exit 2, nothing touched. A file that does not load gets
    a failed row and the others are published (any pattern's error is a failed row, as in
    ``run``: a budget, Spark); no staging is left; killed midway, the rerun logs the
    killed backfill's patterns as aborted and completes."""
    bad = lake.here(spark, "backfill", "--start", "2010-09-01", "--end", "2010-08-01")
    assert bad.returncode == 2 and "reversed" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and not lake.root.exists()
    folder = two_patterns(tmp_path)
    (folder / "broken.yaml").write_text("name: broken\nsource: chemo_mw\nsets: [[\n")
    assert lake.here(spark, "ingest", "--logical-date", DATE, "--source", "chemo_mw"
                     ).returncode == 0
    args = ["backfill", "--start", "2010-01-01", "--end", "2011-01-01"] + [
        a for f in ("a.yaml", "broken.yaml", "b.yaml") for a in ("--pattern", folder / f)]
    killed = lake.jobs(*args, failpoint="run:after-pattern")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    out = lake.here(spark, *args)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "Traceback" not in out.stdout + out.stderr and "logged as aborted" in out.stdout
    rows = runs(lake)
    last = max(r["run_id"] for r in rows)
    assert sorted((r["pattern"], r["status"]) for r in rows if r["run_id"] == last) == [
        ("broken", "failed"), ("first_p1", "success"), ("second_p1", "success")]
    assert {r["run_kind"] for r in rows if r["status"] == "aborted"} == {"backfill"}
    assert not any((lake.root / "staging").rglob("*.parquet"))
    counts = check(str(lake.root))
    assert counts["matches/first_p1"] == counts["matches/second_p1"] == 3
