"""Night after night, nothing is lost: content-hash ids do not depend on chunking, every table
stays readable after every write of ours (no ``string_view`` files beside ``string`` ones),
a lake that holds such files is read and repaired, and a retracted source goes on."""

import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from hypothesis import given
from hypothesis import strategies as st

from jobs.config import load_sources
from jobs.lake import rewrite
from jobs.lake.store import Lake
from jobs.landing import reading, splits
from jobs.pipeline import ingest as ig
from jobs.pipeline.run import run_all
from jobs.pipeline.upkeep.reconcile import reconcile
from jobs.pipeline.upkeep.retract import retract
from jobs.spark.tables import read_spark
from jobs.tools.lakecheck import check_lake, vacuum
from jobs.tools.query import run_duckdb

from ..conftest import ROOT, make_profile
from .conftest import P1
from .lakecheck import check

HOSPITAL = load_sources()["hospital"]
SEPSIS = load_sources()["sepsis"]
HEADER = list(HOSPITAL.columns)


def _staged_ids(landing: Path, lake_root: Path, chunk: int) -> list[tuple]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reading, "CHUNK", chunk)  # the row reader's blocks
        mp.setattr(reading, "BLOCK_BYTES", chunk * 8)  # the columnar reader's blocks
        mp.setattr(splits, "SPLIT_BYTES", chunk * 16)  # the tasks' splits
        mp.setattr(splits, "MIN_SPLIT", 1)
        batch = ig.stage(HOSPITAL, str(landing), Lake(str(lake_root)), "r")
    t = batch.events
    return sorted(zip(t.column("event_id").to_pylist(), t.column("patient").to_pylist()))


@given(rows=st.lists(st.tuples(st.sampled_from("12"), st.sampled_from("ab"),
                               st.sampled_from(["2006-01-01", "2006-01-02"])),
                     min_size=1, max_size=25),
       chunk=st.integers(1, 6))
def test_content_hash_ids_do_not_depend_on_the_chunks(tmp_path_factory, rows, chunk):
    """Identical rows on every kind of chunk boundary: every row is an event, and the ids
    (the n-th identical row of the file) are those of one chunk for the whole file."""
    tmp = tmp_path_factory.mktemp("chunks")
    folder = tmp / "landing" / "hospital"
    folder.mkdir(parents=True)
    lines = [",".join(HEADER)] + [
        ",".join({"patient": p, "event_type": e, "timestamp": d}.get(c, "") for c in HEADER)
        for p, e, d in rows]
    (folder / "f.csv").write_text("\n".join(lines) + "\n")
    chunked = _staged_ids(tmp / "landing", tmp / "lake", chunk)
    whole = _staged_ids(tmp / "landing", tmp / "lake", 10**6)
    assert chunked == whole
    assert len(chunked) == len(rows) == len({i for i, _ in chunked})


def test_a_real_repeated_test_across_a_chunk_boundary_is_kept(tmp_path):
    """hospital_2006.csv without its first four rows: 12,513 rows, 12,513 events (the row
    ``00000788, bloedgroep abo en rhesusfactor, 2006-07-29`` was lost at a chunk boundary)."""
    folder = tmp_path / "landing" / "hospital"
    folder.mkdir(parents=True)
    with gzip.open(ROOT / "data" / "landing" / "hospital" / "hospital_2006.csv.gz", "rt") as f:
        lines = f.readlines()
    (folder / "h.csv").write_text("".join(lines[:1] + lines[5:]))
    batch = ig.stage(HOSPITAL, str(tmp_path / "landing"), Lake(str(tmp_path / "lake")), "r")
    assert batch.result.rows == len(lines) - 5 == batch.events.num_rows
    assert batch.result.duplicates == 0


def _sepsis_days(days: int) -> tuple[list[str], dict[str, list[str]]]:
    """The committed sepsis log as a history before 2014-05-01 and one file per day after."""
    history, by_day = [], {}
    for f in sorted((ROOT / "data" / "landing" / "sepsis").iterdir()):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                day = json.loads(line)["timestamp"][:10]
                if day < "2014-05-01":
                    history.append(line)
                else:
                    by_day.setdefault(day, []).append(line)
    return history, {d: by_day[d] for d in sorted(by_day)[:days]}


def _events(lake: Lake, source: str) -> list[tuple]:
    t = lake.read_arrow(lake.events(source))
    cols = [c for c in t.column_names if c not in ("ingest_run", "ingested_at")]
    return sorted(tuple(map(repr, r.values())) for r in t.select(cols).to_pylist())


def _no_views(lake: Lake) -> None:
    from jobs.pipeline.upkeep.reconcile import typed_tables

    for path in typed_tables(lake):
        assert not rewrite.view_files(lake, path), f"{path}: string_view files"


def test_thirty_nights_of_one_source_equal_one_recompute(tmp_path):
    """One landing file a night for thirty nights: every ingest succeeds, no table gets a
    view-typed file, and the events, ingest log and quarantine equal one ingest of the same
    files (the fourth night's MERGE used to stop the source for good)."""
    history, days = _sepsis_days(30)
    nightly, once = tmp_path / "nightly", tmp_path / "once"
    for root in (nightly, once):
        (root / "landing" / "sepsis").mkdir(parents=True)
        (root / "landing" / "sepsis" / "history.jsonl").write_text("".join(history))
    lake = Lake(str(nightly / "lake"))
    for n, (day, lines) in enumerate(days.items()):
        (nightly / "landing" / "sepsis" / f"day_{day}.jsonl").write_text("".join(lines))
        (once / "landing" / "sepsis" / f"day_{day}.jsonl").write_text("".join(lines))
        result = ig.ingest(SEPSIS, str(nightly / "landing"), lake, f"night{n}")
        assert result.files == (2 if n == 0 else 1) and result.new_events == (
            len(history) + len(lines) if n == 0 else len(lines))
        # a filtered read, as the next night's ingest makes
        some = lake.read_arrow(lake.events("sepsis"), columns=["event_id"],
                               filter=pc.field("event_id") >= "8")
        assert some is not None
    _no_views(lake)
    fresh = Lake(str(once / "lake"))
    ig.ingest(SEPSIS, str(once / "landing"), fresh, "once")
    assert _events(lake, "sepsis") == _events(fresh, "sepsis")
    assert len(_events(lake, "sepsis")) == len(history) + sum(map(len, days.values()))


def _merge_the_old_way(lake: Lake, path: str, data: pa.Table) -> None:
    """What ``insert_new`` did before: a delta-rs MERGE, whose files store string_view."""
    DeltaTable(path).merge(data, predicate="t.event_id = s.event_id", source_alias="s",
                           target_alias="t").when_not_matched_insert_all().execute()


def test_a_lake_with_string_view_files_is_read_and_repaired(tmp_path):
    history, days = _sepsis_days(4)
    (tmp_path / "landing" / "sepsis").mkdir(parents=True)
    (tmp_path / "landing" / "sepsis" / "h.jsonl").write_text("".join(history))
    lake = Lake(str(tmp_path / "lake"))
    ig.ingest(SEPSIS, str(tmp_path / "landing"), lake, "first")
    path = lake.events("sepsis")
    for day, lines in days.items():
        (tmp_path / "landing" / "sepsis" / f"d{day}.jsonl").write_text("".join(lines))
        batch = ig.stage(SEPSIS, str(tmp_path / "landing"), lake, day)
        if day == max(days):
            break  # the fourth night's batch: its ids are looked up in the table
        _merge_the_old_way(lake, path, batch.events)
        lake.insert_new(lake.ingest_log(), pa.Table.from_pylist(batch.log, schema=ig.INGEST_LOG_SCHEMA),
                        key=("source", "file", "sha256"))
    assert rewrite.view_files(lake, path)  # the lake as the old code left it
    pending = batch.events  # the fourth night's (its staging goes with the next reconcile)
    ids = pc.field("event_id").isin(pending.column("event_id"))
    with pytest.raises(pa.ArrowNotImplementedError, match="string_view"):  # what stopped it
        DeltaTable(path).to_pyarrow_dataset().to_table(filter=ids)
    assert lake.read_arrow(path, filter=ids).num_rows == 0
    before = _events(lake, "sepsis")
    # read: a filtered read still answers, and the next ingest works
    (tmp_path / "landing" / "sepsis" / "late.jsonl").write_text(history[0].replace(
        '"patient": "', '"patient": "late'))
    assert ig.ingest(SEPSIS, str(tmp_path / "landing"), lake, "next").new_events == \
        1 + pending.num_rows
    # repaired by the next writer's reconcile: the same rows, no view files, logged once
    notes = reconcile(lake, echo=lambda *_: None)
    assert any("events/sepsis had" in n and "string_view" in n for n in notes)
    _no_views(lake)
    after = _events(lake, "sepsis")
    assert len(after) == len(before) + 1 + pending.num_rows and set(before) <= set(after)
    assert DeltaTable(path).history(1)[0]["ses.operation"] == "retype"
    assert not [n for n in reconcile(lake, echo=lambda *_: None) if "repaired" in n]


def test_retract_then_ingest_run_and_query_the_same_source(spark, tmp_path):
    """A retract used to rewrite its partition with string_view: the next ingest, every run
    of the source and DuckDB's query failed. Now: a retract, a new landing file, a run and
    a query of the same source all succeed, and a second retract of the same events says
    it was done."""
    landing = tmp_path / "landing"
    shutil.copytree(ROOT / "data" / "landing" / "chemo_mw", landing / "chemo_mw")
    profile = make_profile(tmp_path, landing=landing)
    lake = Lake.of_profile(profile)
    quiet = dict(echo=lambda *_: None)
    assert run_all(spark, profile, "2010-08-30", [P1], **quiet)[0]["status"] == "success"
    row = retract(lake, "chemo_mw", event_ids=["e1"], reason="test")
    assert row["events"] == 1
    # ses check names what the next run must repair: a match bound to a retracted event
    (Path(lake.staging("mw_chemo_p1", "20200101T000000Z-abcdef")) / "x").mkdir(parents=True)
    findings = [str(f) for f in check_lake(lake)]
    assert len(findings) == 2, findings
    assert findings[0].startswith("matches/mw_chemo_p1: 1 bound event(s) are not in "
                                  "events/chemo_mw, e.g. e1")
    assert findings[1].startswith("staging/mw_chemo_p1/20200101T000000Z-abcdef: no run in "
                                  "progress owns it")
    again = retract(lake, "chemo_mw", event_ids=["e1"], reason="test")
    assert again["already"] and again["retraction_id"] == row["retraction_id"]
    (landing / "chemo_mw" / "later.csv").write_text(
        "event_id,patient,type,value,unit,ts\nz1,9,C,1,mg,2010-08-20T00:00:00\n")
    later = run_all(spark, profile, "2010-08-31", [P1], **quiet)[0]
    assert later["status"] == "success", later["message"]
    assert later["deleted"] == 1
    _no_views(lake)
    t = run_duckdb(lake, "SELECT count(*) AS n, count(*) FILTER (WHERE event_id = 'e1') AS e1 "
                         "FROM events_chemo_mw", None)
    assert t.to_pylist() == [{"n": 14, "e1": 0}]
    check(profile.lake)
    assert check_lake(lake) == []  # the run re-matched the range and removed the staging
    # VACUUM: the files the retract replaced, and a killed write's file, go; nothing else
    orphan = Path(lake.matches("mw_chemo_p1")) / "part-killed.parquet"
    orphan.write_bytes(b"PAR1")
    assert "part-killed.parquet" in vacuum(lake, 0, dry_run=True)["matches/mw_chemo_p1"]
    before = _events(lake, "chemo_mw")
    gone = vacuum(lake, 0)
    assert not orphan.exists() and len(gone["events/chemo_mw"]) >= 1
    assert _events(lake, "chemo_mw") == before and check_lake(lake) == []
    check(profile.lake)


def test_a_corrupt_data_file_is_named_as_its_table_in_one_line(spark, tmp_path):
    """Spark's error for a data file that is not Parquet (hundreds of lines of Java stack)
    becomes one line naming the lake's table, in a run's row and in ``query``."""
    from jobs.core.errors import UserError
    from jobs.pipeline.outcome import short_error
    from jobs.tools.query import run_spark

    lake = Lake(str(tmp_path / "lake"))
    table = pa.table({"event_id": ["a", "b"], "event_date": ["2020-01-01", "2020-01-02"]})
    lake.write(lake.events("chemo_mw"), table, partition_by=["event_date"])
    victim = sorted((tmp_path / "lake" / "events" / "chemo_mw").rglob("*.parquet"))[0]
    victim.write_bytes(b"this is not parquet at all" * 10)
    with pytest.raises(Exception) as info:
        read_spark(spark, lake, lake.events("chemo_mw")).collect()
    line = short_error(info.value)
    assert line.startswith("the lake's table events/chemo_mw cannot be read (data file ")
    assert victim.name in line and "\n" not in line
    with pytest.raises(UserError) as query:  # one line, no Java stack
        run_spark(spark, lake, "SELECT count(*) FROM events_chemo_mw", None)
    assert str(query.value).startswith("the lake's table events/chemo_mw cannot be read")
    with pytest.raises(UserError, match="the lake's table events/chemo_mw cannot be read"):
        lake.read_arrow(lake.events("chemo_mw"))  # DuckDB's, the catalogue's, ingest's reads


def test_a_redelivered_row_is_found_on_its_own_date_only(tmp_path, monkeypatch):
    """Content-hash ids hash the row's values, its time among them: the ingest looks for a
    night's ids among the stored events of the night's dates only (its cost follows what
    it adds), and still finds a row delivered again in another file; a source's own ids are
    looked for in the whole table (they may come back with another time)."""
    folder = tmp_path / "landing" / "hospital"
    folder.mkdir(parents=True)
    rows = {d: ",".join({"patient": "p1", "event_type": f"t{d}", "timestamp": f"2006-01-0{d}"}
                        .get(c, "") for c in HEADER) for d in (1, 2, 3)}
    head = ",".join(HEADER)
    (folder / "a.csv").write_text("\n".join([head, rows[1], rows[2]]) + "\n")
    lake = Lake(str(tmp_path / "lake"))
    first = ig.ingest(HOSPITAL, str(tmp_path / "landing"), lake, "r1")
    assert first.new_events == 2
    seen = []
    read = Lake.read_arrow

    def spy(self, path, *args, **kw):
        if path == lake.events("hospital"):
            seen.append(kw.get("partition_filters"))
        return read(self, path, *args, **kw)

    monkeypatch.setattr(Lake, "read_arrow", spy)
    (folder / "b.csv").write_text("\n".join([head, rows[2], rows[3]]) + "\n")  # 2 again
    second = ig.ingest(HOSPITAL, str(tmp_path / "landing"), lake, "r2")
    assert (second.new_events, second.duplicates) == (1, 1)
    assert seen and all(f == [("event_date", "in", ["2006-01-02", "2006-01-03"])]
                        for f in seen[:1])
    ts = lake.read_arrow(lake.events("hospital"), columns=["ts"]).column("ts")
    assert len(ts) == 3
