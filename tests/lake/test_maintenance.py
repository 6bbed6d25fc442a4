"""Table maintenance (jobs.lake.maintenance) on real Delta tables (delta-rs): small files
compacted, logs checkpointed, replaced files vacuumed, and not a row changed; when it is
due; ``ses maintain``; the idle check ignores its commits."""

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from jobs.lake import store as lk
from jobs.lake.extent import events_extent
from jobs.lake.maintenance import due, last_maintenance, maintain

DAY = 86400 * 10**9
ROOT = Path(__file__).resolve().parents[2]


def nights(lake: lk.Lake, n: int) -> None:
    """``n`` nights of appends: a runs row, a match file, a day partition of events."""
    for k in range(n):
        day = f"2026-01-{k + 1:02d}"
        ts = pa.array([datetime.fromisoformat(day).replace(tzinfo=timezone.utc)],
                      pa.timestamp("us", tz="UTC"))
        lake.append(lake.runs(), pa.table({"run_id": [f"r{k}"], "pattern": ["p"],
                                           "matches": pa.array([k], pa.int64())}))
        lake.append(lake.matches("p"), pa.table({"match_id": [f"m{k}"], "start_ts": ts}))
        lake.append(lake.events("s"), pa.table({"event_id": [f"e{k}"], "ts": ts,
                                                "event_date": [day]}),
                    partition_by=["event_date"])


def rows(lake: lk.Lake, path: str, key: str) -> list[dict]:
    return sorted(lake.read_arrow(path).to_pylist(), key=lambda r: r[key])


def test_maintenance_compacts_checkpoints_and_vacuums_without_changing_a_row(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    nights(lake, 12)
    before = {p: rows(lake, p, k) for p, k in [(lake.runs(), "run_id"),
                                                (lake.matches("p"), "match_id"),
                                                (lake.events("s"), "event_id")]}
    assert len(DeltaTable(lake.runs()).file_uris()) == 12
    log = []
    done = {u.table: u for u in maintain(lake, retention=DAY, logical_date="2026-01-12",
                                         echo=log.append)}
    assert done["runs"].files_before == 12 and done["runs"].files_after == 1
    assert done["matches/p"].files_after == 1
    # one file per day partition already: nothing to compact there
    assert done["events/s"].files_before == done["events/s"].files_after == 12
    assert {p: rows(lake, p, k) for p, k in [(lake.runs(), "run_id"),
                                             (lake.matches("p"), "match_id"),
                                             (lake.events("s"), "event_id")]} == before
    assert list((tmp_path / "lake" / "runs" / "_delta_log").glob("*.checkpoint.parquet"))
    # the replaced files are younger than the retention: they stay for old snapshots
    assert done["runs"].vacuumed == 0
    assert DeltaTable(lake.runs(), version=0).to_pyarrow_table().num_rows == 1
    assert log[-1].startswith("maintenance: ")
    state = last_maintenance(lake)
    assert state["logical_date"] == "2026-01-12" and len(state["tables"]) == len(done)
    # the idle check sees the last commit that changed rows, not the compaction
    written = events_extent(lake, "s").written_at
    assert written <= datetime.now(timezone.utc)
    history = DeltaTable(lake.events("s")).history(1)[0]
    assert datetime.fromtimestamp(history["timestamp"] / 1000, tz=timezone.utc) >= written


def test_vacuum_deletes_the_replaced_files_once_the_retention_has_passed(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    nights(lake, 4)
    maintain(lake, retention=DAY, logical_date="2026-01-04", echo=lambda *_: None)
    files = set((tmp_path / "lake" / "runs").glob("*.parquet"))
    assert len(files) == 5  # four replaced, one compacted
    # a retention of 0 is refused by the profile; the table function takes any
    from jobs.lake.maintenance import maintain_table

    upkeep = maintain_table(lake, "runs", lake.runs(), retention_hours=0)
    assert upkeep.vacuumed == 4
    assert len(list((tmp_path / "lake" / "runs").glob("*.parquet"))) == 1
    assert len(rows(lake, lake.runs(), "run_id")) == 4


def test_maintenance_is_due_every_period_by_logical_date(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    assert due(lake, 7 * DAY, "2026-01-01")  # never done
    assert not due(lake, 0, "2026-01-01")  # switched off
    nights(lake, 1)
    maintain(lake, retention=DAY, logical_date="2026-01-01", echo=lambda *_: None)
    assert not due(lake, 7 * DAY, "2026-01-07")
    assert due(lake, 7 * DAY, "2026-01-08")
    assert not due(lake, 7 * DAY, "2025-12-20")  # a rerun of an older date


def test_ses_maintain_command(tmp_path):
    project = tmp_path / "project"
    (project / "conf").mkdir(parents=True)
    (project / "conf" / "pipeline.yaml").write_text(
        "profiles:\n  local:\n    landing: landing\n    lake: lake\n"
        "    maintenance:\n      every: 7d\n      retention: 2d\n")
    (project / "conf" / "sources.yaml").write_text("sources: {}\n")
    lake = lk.Lake.of(str(project / "lake"))
    nights(lake, 3)

    def ses(*args):
        return subprocess.run([sys.executable, "-m", "jobs", "--project-dir", str(project),
                               *args], capture_output=True, text=True, cwd=ROOT)

    out = ses("maintain", "--if-due", "--logical-date", "2026-01-03")
    assert out.returncode == 0, out.stderr
    assert "maintenance: 3 tables, 9 -> 5 data files, 0 vacuumed, 0 old quality" in out.stdout
    assert len(DeltaTable(lake.runs()).file_uris()) == 1
    again = ses("maintain", "--if-due", "--logical-date", "2026-01-05")
    assert again.returncode == 0 and "maintenance not due (last for 2026-01-03" in again.stdout
    state = json.loads((project / "lake" / "_maintenance.json").read_text())
    assert state["logical_date"] == "2026-01-03"
    (project / "conf" / "pipeline.yaml").write_text(
        "profiles:\n  local:\n    landing: landing\n    lake: lake\n"
        "    maintenance:\n      retention: 1h\n")
    out = ses("maintain")
    assert out.returncode == 2 and "maintenance.retention" in out.stderr \
        and "shorter than 1d" in out.stderr


def test_old_quality_results_are_pruned_but_each_suite_keeps_its_newest(tmp_path):
    import os

    from jobs.lake.maintenance import prune_results

    folder = tmp_path / "gx" / "uncommitted" / "validations"
    now = 1_800_000_000.0
    for suite in ("matches_a", "matches_b"):
        for night in range(3):
            f = folder / suite / f"run{night}" / "t" / "batch.json"
            f.parent.mkdir(parents=True)
            f.write_text("{}")
            os.utime(f, (now - (10 - night) * 86400, now - (10 - night) * 86400))
    os.utime(folder / "matches_b" / "run2" / "t" / "batch.json", (now, now))
    assert prune_results(tmp_path, 7 * DAY, now=now) == 4
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.json"))
    assert left == ["matches_a/run2/t/batch.json", "matches_b/run2/t/batch.json"]
    assert not (folder / "matches_a" / "run0").exists()  # empty folders go too


def test_each_suite_keeps_at_most_its_newest_quality_results_however_recent(tmp_path):
    """Results within the retention are pruned too past the newest ``kept`` of a suite
    (a rerun or a backfill adds one per pattern: the Data Docs build lists them all)."""
    import os

    from jobs.lake.maintenance import prune_results

    folder = tmp_path / "gx" / "uncommitted" / "validations"
    now = 1_800_000_000.0
    for suite, runs in (("matches_a", 5), ("matches_b", 2)):
        for night in range(runs):
            f = folder / suite / f"run{night}" / "t" / "batch.json"
            f.parent.mkdir(parents=True)
            f.write_text("{}")
            os.utime(f, (now - 3600 * (10 - night), now - 3600 * (10 - night)))
    assert prune_results(tmp_path, 7 * DAY, now=now, kept=3) == 2
    left = sorted(str(p.relative_to(folder).parent.parent) for p in folder.rglob("*.json"))
    assert left == ["matches_a/run2", "matches_a/run3", "matches_a/run4",
                    "matches_b/run0", "matches_b/run1"]


def test_the_run_logs_are_compacted_between_maintenances_once_fragmented(tmp_path):
    """A night adds a runs file per pattern: past ``most`` files the log is compacted
    that night (not a row changes); the other tables wait for the weekly maintenance."""
    from jobs.lake.maintenance import compact_logs

    lake = lk.Lake.of(str(tmp_path / "lake"))
    nights(lake, 5)
    before = rows(lake, lake.runs(), "run_id")
    assert compact_logs(lake, most=5) == []  # 5 files: not yet
    lake.append(lake.runs(), pa.table({"run_id": ["r5"], "pattern": ["p"],
                                       "matches": pa.array([5], pa.int64())}))
    assert compact_logs(lake, most=5) == ["runs"]
    assert len(DeltaTable(lake.runs()).file_uris()) == 1
    assert rows(lake, lake.runs(), "run_id") == before + [
        {"run_id": "r5", "pattern": "p", "matches": 5}]
    assert len(DeltaTable(lake.matches("p")).file_uris()) == 5  # untouched
