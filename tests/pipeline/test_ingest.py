"""Ingest (``jobs.pipeline.ingest``): bad rows to quarantine, idempotent reruns, an unreadable
file writes nothing, events outside the time range never reach matching, and the events
suite runs before the commit."""

import gzip
import shutil
from datetime import datetime, timezone
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from jobs.config import Source
from jobs.lake import store as lk
from jobs.lake.store import Lake
from jobs.pipeline.ingest import IngestError, describe, ingest
from jobs.pipeline.run import run_all

from ..lakes import P1, chemo_profile

SOURCE = Source(name="toy", columns={"pid": "string", "kind": "string", "dose": "double",
                                     "at": "timestamp"},
                time_column="at", id_column=None, landing="toy", format="csv")


def test_quarantine_and_idempotent_ingest(tmp_path):
    landing = tmp_path / "landing" / "toy"
    landing.mkdir(parents=True)
    (landing / "a.csv").write_text(
        "pid,kind,dose,at\n"
        "1,C,10,2020-01-01T00:00:00\n"
        "1,C,ten,2020-01-02T00:00:00\n"
        "2,P,5,yesterday\n"
        "2,P,5,2020-01-03\n"
        "2,P,5,2020-01-03\n")  # a true duplicate row: occurrence 2 keeps it apart
    lake = lk.Lake(str(tmp_path / "lake"))
    r = ingest(SOURCE, str(tmp_path / "landing"), lake, "run1")
    assert (r.rows, r.new_events, r.quarantined) == (5, 3, 2)
    q = DeltaTable(lake.quarantine("toy")).to_pyarrow_table().to_pylist()
    reasons = {row["line"]: row["reason"] for row in q}
    assert reasons == {3: "column 'dose': 'ten' is not a double",
                       4: "column 'at': 'yesterday' is not a timestamp"}
    assert all(row["source_file"] == "toy/a.csv" for row in q)
    events = DeltaTable(lake.events("toy")).to_pyarrow_table()
    assert set(events.column("event_date").to_pylist()) == {"2020-01-01", "2020-01-03"}
    assert "source_file" in events.column_names and "ingest_run" in events.column_names
    # the same file again adds nothing; a renamed copy adds no event twice
    assert ingest(SOURCE, str(tmp_path / "landing"), lake, "run2").files == 0
    shutil.copy(landing / "a.csv", landing / "b.csv")
    r3 = ingest(SOURCE, str(tmp_path / "landing"), lake, "run3")
    assert r3.files == 1 and r3.new_events == 0
    assert DeltaTable(lake.events("toy")).count() == 3


def test_a_files_events_of_one_date_are_written_once(tmp_path, monkeypatch):
    """A split whose events hold one ``event_date`` (a daily file, gzipped or not) gives
    its data file in the task and the commit moves it into the table; a file of several
    dates is written again by the load. The table, its files' statistics included, is the
    one the load alone gives."""
    from jobs.pipeline.ingest import load, tasks

    landing = tmp_path / "landing" / "toy"
    landing.mkdir(parents=True)
    (landing / "day1.csv").write_text("pid,kind,dose,at\n1,C,10,2020-01-01T00:00:00\n"
                                      "2,P,,2020-01-01T10:00:00\n2,P,,2020-01-01T10:00:00\n")
    (landing / "day2.csv.gz").write_bytes(gzip.compress(
        b"pid,kind,dose,at\n3,C,1,2020-01-02T01:00:00\nx,C,1,never\n"))
    (landing / "both.csv").write_text("pid,kind,dose,at\n4,C,1,2020-01-03T00:00:00\n"
                                      "5,C,1,2020-01-04T00:00:00\n")
    written, write_files = [], load.write_files

    def spy(spark, lake, files, path, schema):
        written.extend(f.rsplit("/", 1)[1] for f in files)
        return write_files(spark, lake, files, path, schema)

    monkeypatch.setattr(load, "write_files", spy)
    tables, one_date_only = [], tasks.DataFile.add
    for name, one_date in (("direct", one_date_only), ("loaded", lambda *_: False)):
        monkeypatch.setattr(tasks.DataFile, "add", one_date)
        written.clear()
        lake = lk.Lake(str(tmp_path / name))
        r = ingest(SOURCE, str(tmp_path / "landing"), lake, "run1")
        assert (r.new_events, r.quarantined) == (6, 1)
        assert len(written) == (1 if name == "direct" else 3)  # both.csv's part alone
        table = DeltaTable(lake.events("toy"))
        files = pa.table(table.get_add_actions(flatten=True)).drop_columns(
            ["path", "size_bytes", "modification_time", "min.ingested_at", "max.ingested_at"]
        ).sort_by("partition.event_date")
        rows = table.to_pyarrow_table().sort_by("event_id")
        tables.append((files, rows.drop_columns(["ingested_at"])))
    assert tables[0][0].column("partition.event_date").to_pylist() == [
        "2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"]
    assert tables[0][0].equals(tables[1][0]) and tables[0][1].equals(tables[1][1])
    assert not any((tmp_path / "direct" / "staging").rglob("*.parquet"))
    # a commit that fails leaves none of the moved files in the table
    monkeypatch.setattr(tasks.DataFile, "add", one_date_only)
    written.clear()
    (landing / "day5.csv").write_text("pid,kind,dose,at\n6,C,1,2020-01-05T00:00:00\n")
    lake = lk.Lake(str(tmp_path / "direct"))
    before = set((tmp_path / "direct" / "events").rglob("*.parquet"))

    def refused(*_):
        raise RuntimeError("commit refused")

    monkeypatch.setattr(load, "commit_files", refused)
    with pytest.raises(RuntimeError, match="commit refused"):
        ingest(SOURCE, str(tmp_path / "landing"), lake, "run2")
    assert written == [] and set((tmp_path / "direct" / "events").rglob("*.parquet")) == before


def test_unreadable_file_fails_and_writes_nothing(tmp_path):
    landing = tmp_path / "landing" / "toy"
    landing.mkdir(parents=True)
    (landing / "a.csv").write_text("pid,kind,dose,at\n1,C,10,2020-01-01T00:00:00\n")
    lake = lk.Lake(str(tmp_path / "lake"))
    ingest(SOURCE, str(tmp_path / "landing"), lake, "run1")
    version = DeltaTable(lake.events("toy")).version()
    (landing / "b.csv").write_text("pid,kind,dose,at\n2,C,1,2020-02-01T00:00:00\n")
    good = gzip.compress(b"pid,kind,dose,at\n" + b"3,C,1,2020-02-01T00:00:00\n" * 500)
    corrupt = bytearray(good)
    corrupt[20:60] = bytes(range(200, 240))  # a deflate block that cannot be decoded
    for bad in (b"this is not gzip", bytes(corrupt), good[:len(good) // 2]):
        (landing / "c.csv.gz").write_bytes(bad)
        with pytest.raises(IngestError, match=r"c\.csv\.gz: cannot be read as csv"):
            ingest(SOURCE, str(tmp_path / "landing"), lake, "run2")
        assert DeltaTable(lake.events("toy")).version() == version  # b.csv not written either
    log = DeltaTable(lake.ingest_log()).to_pyarrow_table().to_pylist()
    assert [r["file"] for r in log] == ["toy/a.csv"]


def test_event_outside_the_time_range_is_quarantined_before_matching(spark, tmp_path):
    profile, landing = chemo_profile(tmp_path)
    (landing / "chemo_mw" / "bad.csv").write_text(
        "event_id,patient,type,value,unit,ts\nz1,1,B,1,mg,2999-01-01T00:00:00\n"
        "z2,1,B,1,mg,0001-01-01T00:00:00\n")
    rows = run_all(spark, profile, "2010-08-30", [P1], echo=lambda *_: None)
    assert rows[0]["status"] == "success"
    lake = lk.Lake(profile.lake)
    q = DeltaTable(lake.quarantine("chemo_mw")).to_pyarrow_table().to_pylist()
    assert {r["raw"][:30] for r in q} >= {'{"event_id": "z1", "patient": '}
    assert all("outside the accepted range 1900-01-01" in r["reason"]
               and "ingest.earliest" in r["reason"] for r in q) and len(q) == 2
    ids = DeltaTable(lake.events("chemo_mw")).to_pyarrow_table().column("event_id").to_pylist()
    assert "z1" not in ids and "z2" not in ids


def test_events_suite_runs_before_commit(spark, tmp_path):
    """A batch that fails the events suite (Great Expectations) is not committed, its files
    stay pending, and the source's patterns fail with a row in the run log."""
    from jobs.config import TimeRange, load_sources
    from jobs.pipeline.ingest import stage
    from jobs.pipeline.validate import quality
    from jobs.pipeline.validate.quality import validate_events_frame

    profile, landing = chemo_profile(tmp_path)
    source = load_sources()["chemo_mw"]
    lake = lk.Lake(profile.lake)
    (landing / "chemo_mw" / "late.csv").write_text(
        "event_id,patient,type,value,unit,ts\nz1,1,B,1,mg,2100-01-01T00:00:00\n")
    wide = TimeRange()  # a batch typed without the profile's range: the suite must catch it
    batch = stage(source, profile.landing, lake, "r1", ts_range=wide)
    for driver_rows in (quality.DRIVER_ROWS, 0):  # GX's pandas engine, then Spark
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(quality, "DRIVER_ROWS", driver_rows)
            outcome = validate_events_frame(spark, Lake.of_profile(profile), source,
                                            batch.events, profile.ts_range())
        assert not outcome.success and outcome.evaluated == 5 + len(source.columns)
        assert outcome.failed == ["expect_column_values_to_be_between(ts): 1 row(s)"]
        # a column whose values are not of the schema's type fails its type check
        i = batch.events.schema.get_field_index("value")
        retyped = batch.events.set_column(i, "value", batch.events.column(i).cast(pa.string()))
        outcome = quality._events_suite(
            Lake.of_profile(profile), source,
            quality.driver_frame(retyped) if driver_rows else spark.createDataFrame(retyped),
            wide, quality.PANDAS_TYPES if driver_rows else quality.SPARK_TYPES)
        assert outcome.failed == ["expect_column_values_to_be_of_type(value)"], outcome.failed

    # a batch is first checked for its verdict alone; only a failing one again, for the
    # counts that say why (each sample of unexpected rows is a scan on Spark)
    from jobs.pipeline.validate import gx

    formats, validated = [], gx.validated

    def spy(*args, **kwargs):
        formats.append(kwargs.get("result_format", args[6] if len(args) > 6 else "BASIC"))
        return validated(*args, **kwargs)

    good = batch.events.filter(pc.field("ts") < pa.scalar(datetime(2099, 1, 1, tzinfo=timezone.utc)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gx, "validated", spy)
        assert quality._events_suite(Lake.of_profile(profile), source, quality.driver_frame(good),
                                     wide, quality.PANDAS_TYPES).success
        assert formats == ["BOOLEAN_ONLY"]
        formats.clear()
        failed = quality._events_suite(Lake.of_profile(profile), source,
                                       quality.driver_frame(batch.events), profile.ts_range(),
                                       quality.PANDAS_TYPES)
        assert formats == ["BOOLEAN_ONLY", "BASIC"]
        assert failed.failed == ["expect_column_values_to_be_between(ts): 1 row(s)"]

    def failing_gate(src, events):
        raise RuntimeError("suite failed")

    with pytest.raises(RuntimeError):
        ingest(source, profile.landing, lake, "r1", gate=failing_gate)
    assert not lake.exists(lake.events("chemo_mw")) and not lake.exists(lake.ingest_log())


def test_the_spark_suites_verdict_on_id_keys_is_the_ids_verdict(spark, tmp_path):
    """On Spark, the events suite first sees each ``event_id`` as a 64-bit key: the
    staged parts' own (``_k``), else its hash (unique keys mean unique ids; sorting
    numbers is half the time of sorting texts): a batch of unique ids passes in that one
    run; a repeated id fails, counted on the ids themselves; keys that meet for distinct
    ids (made here by hand) fail only the first run, and the ids' own run passes the
    batch."""
    from pyspark.sql import functions as F

    from jobs.config import TimeRange
    from jobs.pipeline.validate import gx, quality
    from jobs.pipeline.validate.quality import validate_events_frame

    source = SOURCE
    lake = Lake(str(tmp_path / "lake"))
    at = datetime(2020, 1, 1, tzinfo=timezone.utc)
    schema = quality.events_schema(source)
    rows = [{"pid": "p", "kind": "k", "dose": 1.0, "event_id": f"id{i}", "ts": at,
             "event_date": "2020-01-01", "source_file": "f", "ingest_run": "r", "ingested_at": at}
            for i in range(4)]
    unique = pa.Table.from_pylist(rows, schema=schema)
    repeated = pa.Table.from_pylist(rows + rows[:1], schema=schema)
    seen, validated = [], gx.validated

    def spy(lake_, name, expectations, df, *args, **kwargs):
        seen.append(dict(df.dtypes)["event_id"])
        return validated(lake_, name, expectations, df, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(quality, "DRIVER_ROWS", 0)
        mp.setattr(gx, "validated", spy)
        assert validate_events_frame(spark, lake, source, unique, TimeRange()).success
        assert seen == ["bigint"]
        seen.clear()
        failed = validate_events_frame(spark, lake, source, repeated, TimeRange())
        assert failed.failed == ["expect_column_values_to_be_unique(event_id): 2 row(s)"]
        assert seen == ["bigint", "string"]
        seen.clear()
        exact = spark.createDataFrame(unique).select(*schema.names)
        met = quality._events_suite(lake, source, exact.withColumn("event_id", F.lit(7)),
                                    TimeRange(), exact=exact)
        assert met.success and seen == ["int", "string"]
        # a staged batch: the parts' own key of each id (``_k``) stands for it, and the
        # keys are what the verdict sorts (two distinct ids given one key here by hand)
        for keys, runs in (([1, 2, 3, 4], ["bigint"]), ([1, 1, 3, 4], ["bigint", "string"])):
            seen.clear()
            folder = tmp_path / f"staged{keys[1]}"
            folder.mkdir()
            pq.write_table(unique.append_column("_k", pa.array(keys, pa.int64())),
                           folder / "part-0.parquet")
            staged = SimpleNamespace(events_path=str(folder), num_events=4)
            assert validate_events_frame(spark, lake, source, staged, TimeRange()).success
            assert seen == runs


def test_the_spark_suite_is_warmed_without_a_trace(spark, tmp_path):
    """While the tasks of a batch too large for the driver run, the events suite runs once
    on Spark over one row: it succeeds (``warm_up`` would swallow an error, and the batch's
    suite would pay the warm-up), stores no validation result and leaves no file."""
    from jobs.config import load_sources
    from jobs.pipeline.validate import quality

    profile, _ = chemo_profile(tmp_path)
    lake = Lake.of_profile(profile)
    quality._warm_spark_suite(spark, lake, load_sources()["chemo_mw"], profile.ts_range())
    warm = lake.local_home() / "staging" / "_warm"
    assert not warm.exists() or not any(warm.iterdir())
    results = lake.local_home() / "gx" / "uncommitted" / "validations"
    assert not results.exists() or not any(results.rglob("*.json"))


def test_a_night_hashes_only_new_or_changed_landing_files(tmp_path, monkeypatch):
    """Digests: each file's sha256 is remembered by size and modification time, so the
    ingest log's (file, sha256) key costs no read of the files already ingested."""
    import os

    from jobs.pipeline.ingest import listing as ingest_module

    landing = tmp_path / "landing" / "toy"
    landing.mkdir(parents=True)
    for day in (1, 2, 3):
        (landing / f"d{day}.csv").write_text(f"pid,kind,dose,at\n1,C,{day},2020-01-0{day}\n")
    lake = lk.Lake(str(tmp_path / "lake"))
    hashed = []
    real = ingest_module.sha256
    monkeypatch.setattr(ingest_module, "sha256", lambda p: hashed.append(p.name) or real(p))
    assert ingest(SOURCE, str(tmp_path / "landing"), lake, "run1").new_events == 3
    assert sorted(hashed) == ["d1.csv", "d2.csv", "d3.csv"]
    hashed.clear()
    (landing / "d4.csv").write_text("pid,kind,dose,at\n1,C,4,2020-01-04\n")
    r = ingest(SOURCE, str(tmp_path / "landing"), lake, "run2")
    assert hashed == ["d4.csv"] and (r.files, r.skipped_files, r.new_events) == (1, 3, 1)
    # a file rewritten in place (new content, new time) is hashed and read again
    hashed.clear()
    (landing / "d1.csv").write_text("pid,kind,dose,at\n1,C,1,2020-01-01\n2,C,9,2020-01-05\n")
    os.utime(landing / "d1.csv", ns=(1, 1))
    r = ingest(SOURCE, str(tmp_path / "landing"), lake, "run3")
    assert hashed == ["d1.csv"] and r.files == 1 and r.new_events == 1
    assert r.changed == ["toy/d1.csv"] and "changed since ingested: toy/d1.csv" in describe(r)


def test_repeated_ids_are_found_alike_by_a_sort_and_by_spark(spark, tmp_path, monkeypatch):
    """The keys more than one staged row holds, across parts: the driver's sort (in one
    range of the 64-bit space or in many, its two ends included) and the executors' sorts
    (above ``SORT_ROWS``) give the same keys as a plain count does (a null key is no
    key)."""
    import random
    from collections import Counter

    import pyarrow.parquet as pq

    from jobs.pipeline.ingest import staging

    lake = lk.Lake(str(tmp_path / "lake"))
    folder = tmp_path / "lake" / "part"
    folder.mkdir(parents=True)
    rng = random.Random(7)
    keys = [rng.randrange(-2**63, 2**63) for _ in range(400)] + [-2**63, 2**63 - 1]
    keys += rng.sample(keys, 30) + [keys[0]] * 3 + [-1, -1, -2**63, 2**63 - 1]
    rng.shuffle(keys)
    uris = []
    for k, chunk in enumerate((keys[:150], keys[150:151], keys[151:] + [None, None])):
        uri = str(folder / f"{k:06d}.parquet")
        pq.write_table(pa.table({"_k": pa.array(chunk, pa.int64())}), uri)
        uris.append(uri)
    parts = staging.Parts(lake, uris)
    expected = sorted(k for k, n in Counter(keys).items() if n > 1)
    assert sum(parts.row_counts()) == len(keys) + 2
    assert staging.repeated_keys(parts).to_pylist() == expected
    monkeypatch.setattr(staging, "CHUNK_KEYS", 7)  # the driver's sort in many ranges
    assert len(staging.key_ranges(len(keys))) > 50
    assert staging.repeated_keys(parts).to_pylist() == expected
    monkeypatch.setattr(staging, "SORT_ROWS", 0)
    monkeypatch.setattr(staging, "TASK_KEYS", 50)  # tasks of several keys each
    assert staging.repeated_keys(parts, spark, str(folder)).to_pylist() == expected


def test_key_ranges_cover_every_key_once(monkeypatch):
    """The driver's ranges of the 64-bit key space: every non-null key, the space's ends
    and the keys at and beside each range's edge included, falls in exactly one."""
    from jobs.pipeline.ingest import staging

    monkeypatch.setattr(staging, "CHUNK_KEYS", 10)
    for n in (1, 2, 3, 7, 64):
        near = [-(2**63) + (2**64 * i) // n + d for i in range(1, n) for d in (-1, 0, 1)]
        keys = pa.table({"_k": pa.array([-2**63, 2**63 - 1, 0, -1, None, *near], pa.int64())})
        ranges = staging.key_ranges(10 * n)
        assert len(ranges) == n
        hits = sorted(k for where in ranges for k in keys.filter(where).column("_k").to_pylist())
        assert hits == sorted(k for k in keys.column("_k").to_pylist() if k is not None)


def test_a_killed_task_s_temporary_file_is_read_by_no_one(tmp_path):
    """A task killed while writing leaves its temporary file beside the parts: its name
    is hidden, so the driver's stream of the batch (and Spark, and pyarrow's datasets)
    skip it, and the commit loads the events once."""
    from jobs.pipeline.ingest import commit, stage
    from jobs.pipeline.ingest.staging import batches
    from jobs.pipeline.ingest.tasks import _hidden_temp, part

    landing = tmp_path / "landing" / "toy"
    landing.mkdir(parents=True)
    (landing / "a.csv").write_text("pid,kind,dose,at\n1,C,10,2020-01-01T00:00:00\n"
                                   "2,P,5,2020-01-03T00:00:00\n")
    lake = lk.Lake(str(tmp_path / "lake"))
    batch = stage(SOURCE, str(tmp_path / "landing"), lake, "run1")
    target = part(lk.join(batch.folder, "typed"), "part", 0)
    leftover = _hidden_temp(target)
    assert lk.file_name(leftover).startswith(".") and leftover.rsplit("/", 1)[0] == \
        target.rsplit("/", 1)[0]
    with open(leftover, "wb") as f:
        f.write(b"PAR1 cut short")  # a Parquet file a killed writer never finished
    assert sum(b.num_rows for b in batches(lake, batch.events_path)) == 2
    assert commit(lake, batch).new_events == 2
    assert DeltaTable(lake.events("toy")).to_pyarrow_table().num_rows == 2


def test_spark_starts_early_only_for_a_new_file(spark, tmp_path):
    """A landing folder whose files are all in the ingest log starts no Spark; a new file
    starts the session on its own thread before the files are hashed (the JVM's start
    overlaps the hashing), and the batch is typed on it."""
    from jobs.config import load_sources
    from jobs.pipeline.ingest import stage
    from jobs.spark.session import LazySession

    profile, landing = chemo_profile(tmp_path)
    source = load_sources()["chemo_mw"]
    lake = lk.Lake(profile.lake)
    ingest(source, profile.landing, lake, "r1")
    idle = LazySession(profile)
    assert stage(source, profile.landing, lake, "r2", spark=idle).num_events == 0
    assert not idle.started
    (landing / "chemo_mw" / "more.csv").write_text(
        "event_id,patient,type,value,unit,ts\nz9,1,B,1,mg,2010-08-20T00:00:00\n")
    fresh = LazySession(profile)
    batch = stage(source, profile.landing, lake, "r3", spark=fresh)
    assert fresh.started and batch.num_events == 1
    # where the tasks' time went: reading, typing and the ids apart
    assert {"tasks: read", "tasks: type", "tasks: ids", "tasks: write"} <= set(batch.result.seconds)
    assert batch.result.seconds["tasks: ids"] > 0
