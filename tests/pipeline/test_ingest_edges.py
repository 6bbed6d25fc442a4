"""Every rule of ingest, on landing files with every edge it names
(``data/edge_landing``, written by ``data/make_edge_landing.py``): BOMs, CRLF and missing
line ends, blank and ragged lines, quoted fields with line ends, bad, empty, over-long and
non-finite values, times in every ISO form and outside the range, JSON numbers for text
and text for numbers, nested values, keys written twice, malformed lines, repeated ids
and corrections. ``golden/ingest_edges.json`` holds what the row-by-row ingest (before
the columnar one) made of them: every event's values and every quarantined row (file,
line, reason, raw) and the counts. The columnar ingest must make the same, however the
files are split, in this process and on Spark's executors."""

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from jobs.config import TimeRange, load_sources
from jobs.lake.store import Lake
from jobs.landing import reading, splits
from jobs.pipeline.ingest import ingest

HERE = Path(__file__).parent
LANDING = HERE / "data" / "edge_landing"
GOLDEN = json.loads((HERE / "golden" / "ingest_edges.json").read_text())
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
RANGES = {"default": TimeRange(),
          "narrow": TimeRange(1_000_000_000_000_000_000, 1_500_000_000_000_000_000)}


def digest(lake: Lake, name: str, result) -> dict:
    t = DeltaTable(lake.events(name)).to_pyarrow_table()
    cols = sorted(t.column_names)
    rows = sorted(json.dumps([r[c] for c in cols], default=str) for r in t.to_pylist())
    q = lake.read_arrow(lake.quarantine(name))
    qrows = sorted(json.dumps([r["source_file"], r["line"], r["reason"], r["raw"]])
                   for r in (q.to_pylist() if q is not None else []))
    return {"events": len(rows), "values": hashlib.sha256("\n".join(rows).encode()).hexdigest(),
            "quarantine": len(qrows),
            "quarantine_sha256": hashlib.sha256("\n".join(qrows).encode()).hexdigest(),
            "result": [result.files, result.rows, result.new_events, result.quarantined,
                       result.duplicates]}


def ingest_all(tmp_path, spark=None, ranges=RANGES) -> dict:
    got = {}
    for range_name, ts_range in ranges.items():
        lake = Lake.of(str(tmp_path / range_name))
        for name in ("hospital", "sepsis", "chemo_mw"):
            r = ingest(load_sources()[name], str(LANDING), lake, "edge", now=NOW,
                       ts_range=ts_range, spark=spark)
            got[f"{name}/{range_name}"] = digest(lake, name, r)
    return got


@pytest.mark.parametrize("split", [None, 300])
def test_the_columnar_ingest_makes_what_the_row_ingest_made(tmp_path, monkeypatch, split):
    if split:  # splits of ~300 bytes read in blocks of ~150: every kind of cut
        monkeypatch.setattr(splits, "SPLIT_BYTES", split)
        monkeypatch.setattr(splits, "MIN_SPLIT", 1)
        monkeypatch.setattr(reading, "BLOCK_BYTES", split // 2)
    assert ingest_all(tmp_path) == GOLDEN


def test_on_spark_executors_too(tmp_path, monkeypatch, spark):
    """Splits of ~400 bytes packed into tasks of ~2,000: a task reads several, of several
    files."""
    monkeypatch.setattr(splits, "SPLIT_BYTES", 400)
    monkeypatch.setattr(splits, "MIN_SPLIT", 1)
    monkeypatch.setattr(splits, "TASK_BYTES", 2000)
    got = ingest_all(tmp_path, spark, {"default": RANGES["default"]})
    assert got == {k: v for k, v in GOLDEN.items() if k.endswith("/default")}


def test_a_task_killed_mid_ingest_runs_again_and_nothing_is_lost_or_doubled(
        tmp_path, monkeypatch, spark):
    """A Python worker SIGKILLed in the middle of its first split (failpoint
    ``ingest:task``): the job's dead task is run again (Spark's own retries on a cluster;
    here, with local Spark's single attempt, ingest's next job over the splits no task
    finished), and the events and quarantine are those of an uninterrupted ingest."""
    monkeypatch.setattr(splits, "SPLIT_BYTES", 400)
    monkeypatch.setattr(splits, "MIN_SPLIT", 1)
    monkeypatch.setenv("SES_FAILPOINT", "ingest:task")
    said: list[str] = []
    lake = Lake.of(str(tmp_path / "lake"))
    r = ingest(load_sources()["hospital"], str(LANDING), lake, "edge", now=NOW, spark=spark,
               echo=said.append)
    assert any("a task of ingest died" in s for s in said), said
    assert digest(lake, "hospital", r) == GOLDEN["hospital/default"]


def test_small_splits_are_packed_into_even_tasks_in_file_order(tmp_path):
    """Every split in one task; at least two tasks a slot; about ``TASK_BYTES`` each,
    the heaviest task at most the lightest plus the largest split; each task's splits in
    file order."""
    sizes = [50, 3000, 700, 700, 10, 1200, 400, 900, 2500, 60, 1800, 300]
    made = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"f{i:02d}.csv"
        path.write_bytes(b"x" * size)
        made.append(splits.Split(i, i, str(path), path.name, "csv"))
    old = splits.TASK_BYTES
    try:
        splits.TASK_BYTES = 2500
        for slots, expected in ((1, 5), (2, 5), (4, 8), (8, 12)):
            tasks = splits.packed(made, slots)
            assert len(tasks) == expected
            assert sorted(s.index for t in tasks for s in t) == list(range(len(sizes)))
            assert all([s.index for s in t] == sorted(s.index for s in t) for t in tasks)
            loads = [sum(sizes[s.index] for s in t) for t in tasks]
            assert max(loads) <= min(loads) + max(sizes)
        gz = tmp_path / "g.csv.gz"
        gz.write_bytes(b"x" * 100)
        assert splits.split_bytes([splits.Split(0, 0, str(gz), gz.name, "csv")]) == \
            [100 * splits.GZIP_RATIO]
    finally:
        splits.TASK_BYTES = old


def test_the_events_are_the_tasks_data_files_in_one_commit(tmp_path):
    """The events' data files are written from the staged files into their dates'
    folders and committed at once: one commit, each file's ``add`` action with its date,
    row count and time bounds; a failed commit leaves no data file of the batch."""
    from jobs.pipeline.ingest import load

    lake = Lake.of(str(tmp_path / "lake"))
    source = load_sources()["hospital"]
    r = ingest(source, str(LANDING), lake, "edge", now=NOW)
    dt = DeltaTable(lake.events("hospital"))
    assert dt.version() == 0 and dt.metadata().partition_columns == ["event_date"]
    files = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert sum(f["num_records"] for f in files) == r.new_events > 0
    for f in files:
        assert f["path"].startswith(f"event_date={f['partition.event_date']}/")
        assert f["min.ts"] <= f["max.ts"] and f["null_count.event_id"] == 0
    events = dt.to_pyarrow_table()
    assert sorted(events.column("event_id").to_pylist()) == sorted(
        set(events.column("event_id").to_pylist()))
    table = events.slice(0, 3)
    before = set(Path(lake.events("hospital")).rglob("*.parquet"))
    schema = events.schema

    def refused(*args, **kw):
        raise RuntimeError("commit refused")

    original = load.commit_files
    load.commit_files = refused
    try:
        staged = tmp_path / "staged.parquet"
        import pyarrow.parquet as pq

        pq.write_table(table, staged)
        with pytest.raises(RuntimeError, match="commit refused"):
            load.load(None, lake, lake.events("hospital"), [str(staged)], schema)
    finally:
        load.commit_files = original
    assert set(Path(lake.events("hospital")).rglob("*.parquet")) == before
