"""The lake's statistics (``jobs.lake.stats``): computed on the driver or on Spark alike,
incremental night by night, and a table's Spark frame reused while its files stay the same."""

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from jobs.core.language.patternfile import load_pattern
from jobs.lake import snapshots
from jobs.lake import store as lk
from jobs.project.patterns import pattern_paths
from jobs.spark import tables
from jobs.spark.tables import read_spark


def _stats_rows(lake, source: str) -> list[tuple]:
    """The stats rows without their time of computing, a sketch as its estimate."""
    from jobs.lake.stats import distinct_estimate

    rows = lake.read_arrow(lake.stats(source)).drop_columns(["computed_at"]).to_pylist()
    return sorted(tuple((k, distinct_estimate([v]) if k == "sketch" else v)
                        for k, v in r.items()) for r in rows)


def test_statistics_on_the_driver_equal_sparks(spark, nightly, tmp_path, monkeypatch):
    """Every source's statistics, computed by Spark and on the driver from the same events
    (the driver's in chunks of a few dates): the same rows (counts, values, quantiles,
    first and last ts, distinct partitions and their sketches' estimates), and the
    sketches of one engine merge with the other's."""
    from pyspark.sql import functions as F

    from jobs.config import load_sources
    from jobs.lake import stats
    from jobs.lake.stats import distinct_estimate
    from jobs.spark.stats import update_stats

    monkeypatch.setattr(stats, "CHUNK_EVENTS", 20_000)  # a few chunks a source

    patterns = [load_pattern(p) for p in pattern_paths()]
    lakes = {e: lk.Lake(str(tmp_path / e)) for e in ("spark", "driver")}
    for name, source in load_sources().items():
        if not Path(lk.Lake(nightly[0].lake).events(name)).exists():
            continue
        for engine, lake in lakes.items():
            shutil.copytree(lk.Lake(nightly[0].lake).events(name), lake.events(name))
            out = update_stats(spark, lake, name, patterns, source.columns, engine=engine)
            assert out["dates"] > 0, (name, engine)
        assert _stats_rows(lakes["spark"], name) == _stats_rows(lakes["driver"], name), name
    keyed = lakes["driver"].read_arrow(lakes["driver"].stats("hospital"))
    keyed = keyed.filter(pc.equal(keyed.column("attribute"), "@patient"))
    on_spark = spark.createDataFrame(keyed.select(["sketch"]).to_pandas()).agg(
        F.hll_sketch_estimate(F.hll_union_agg("sketch"))).first()[0]
    assert on_spark == distinct_estimate(keyed.column("sketch").to_pylist()) > 100
    # a partition attribute of doubles is hashed as Spark writes it (1.0, not Arrow's 1)
    from jobs.lake.stats import HLL_LG_K, _sketches

    values = [1.0, 2.5, 12345.0, 0.001, None]
    theirs = spark.createDataFrame([(v,) for v in values], "x double").agg(
        F.hll_sketch_agg(F.col("x").cast("string"), HLL_LG_K)).first()[0]
    mine = _sketches(pa.chunked_array([["d"] * len(values)]), pa.chunked_array([values]))
    assert mine[3] == [bytes(theirs)] and mine[2] == [4]


def test_a_tables_spark_frame_is_reused_while_its_files_are_the_same(spark, tmp_path):
    """``read_spark`` keeps the frame of a snapshot's files (Spark lists every file of a
    new one): the same files give the same frame, a new commit a new one with its rows,
    and a data file lost since still fails as a broken table, in one line."""
    lake = lk.Lake(str(tmp_path / "lake"))
    path = lk.join(lake.root, "events", "t")
    lake.write(path, pa.table({"x": [1, 2], "d": ["a", "b"]}), partition_by=["d"])
    first = read_spark(spark, lake, path)
    assert read_spark(spark, lake, path) is first and first.count() == 2
    lake.append(path, pa.table({"x": [3], "d": ["c"]}), partition_by=["d"])
    again = read_spark(spark, lake, path)
    assert again is not first and again.count() == 3
    assert read_spark(spark, lake, path, [("d", "=", "a")]).count() == 1
    lost = next(Path(path, "d=b").glob("*.parquet"))
    lost.unlink()
    with pytest.raises(lk.BrokenTable, match="missing"):
        read_spark(spark, lake, path)


def test_a_small_tables_frame_is_held_in_memory_and_filtered_as_its_files_are(
        spark, tmp_path, monkeypatch):
    """A small table's snapshot is read into the session's memory once (``HELD``) and its
    partition filters become row filters: each read equals the read of the files the
    filters keep; a table over ``HELD_BYTES`` is read from its files."""
    lake = lk.Lake(str(tmp_path / "lake"))
    path = lk.join(lake.root, "events", "t")
    days = ["2020-01-01", "2020-01-02", "2020-01-10", "2020-02-01"]
    lake.write(path, pa.table({"x": [1, 2, 3, 4], "event_date": days}),
               partition_by=["event_date"])
    filters = [None, [("event_date", ">=", "2020-01-02")], [("event_date", "<", "2020-01-10")],
               [("event_date", "in", ["2020-01-01", "2020-02-01"])],
               [("event_date", "not in", ["2020-01-01"])], [("event_date", "=", "2020-01-10")],
               [("event_date", ">", "2020-01-01"), ("event_date", "<=", "2020-01-10")]]

    def rows(f):
        return sorted(r["x"] for r in read_spark(spark, lake, path, f).collect())

    held = [rows(f) for f in filters]
    assert path in tables.HELD and tables.HELD.get(path)[2].is_cached
    monkeypatch.setattr(snapshots, "HELD_BYTES", 0)
    tables.HELD.pop(path)[2].unpersist()
    assert held == [rows(f) for f in filters] and held[1] == [2, 3, 4]
    assert path not in tables.HELD


def test_a_small_tables_arrow_snapshot_is_held_and_filtered_as_its_files_are(
        tmp_path, monkeypatch):
    """On the driver too (``read_arrow``): a small table's snapshot is read once per
    process, and every read of it (columns, row filters, partition filters) equals the
    scan of its files; a file lost since is still named as missing."""
    lake = lk.Lake(str(tmp_path / "lake"))
    path = lk.join(lake.root, "events", "t")
    days = ["2020-01-01", "2020-01-02", "2020-01-10", "2020-02-01"]
    lake.write(path, pa.table({"x": [1, 2, 3, 4], "event_date": days}),
               partition_by=["event_date"])
    reads = [dict(), dict(columns=["x"]), dict(filter=pc.field("x") > 1),
             dict(partition_filters=[("event_date", ">=", "2020-01-02")], columns=["x"]),
             dict(partition_filters=[("event_date", "in", ["2020-01-01", "2020-02-01"])],
                  filter=pc.field("x") < 4)]

    def rows(kw):
        return sorted(lake.read_arrow(path, **kw).to_pylist(), key=repr)

    held = [rows(kw) for kw in reads]
    assert [t.num_rows for _, t, _ in snapshots.HELD_ARROW.values()][-1] == 4
    monkeypatch.setattr(snapshots, "HELD_BYTES", 0)
    snapshots.HELD_ARROW.clear()
    assert held == [rows(kw) for kw in reads] and held[4] == [{"x": 1, "event_date": "2020-01-01"}]
    monkeypatch.undo()
    rows({})
    next(Path(path, "event_date=2020-01-02").glob("*.parquet")).unlink()
    with pytest.raises(lk.BrokenTable, match="missing"):
        rows({})


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_lake_statistics_are_incremental(spark, nightly, tmp_path, engine):
    from jobs.config import load_sources
    from jobs.spark.stats import update_stats

    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    stats = lake.read_arrow(lake.stats("sepsis")).to_pylist()
    totals = {r["event_date"]: r["events"] for r in stats if r["attribute"] == "*"}
    types = {}
    for r in stats:
        if r["attribute"] == "event_type":
            types[r["event_date"]] = types.get(r["event_date"], 0) + r["events"]
    assert sum(totals.values()) == 15214 and types == totals  # every event has a type
    assert {r["attribute"] for r in stats} >= {"*", "event_type", "value", "@patient"}
    # a copy of the lake: a late event on one old date recomputes that date only
    copy = lk.Lake(str(tmp_path / "lake"))
    shutil.copytree(profile.lake, copy.root)
    sepsis, patterns = load_sources()["sepsis"], [load_pattern(p) for p in pattern_paths()]
    assert update_stats(spark, copy, "sepsis", patterns, sepsis.columns, engine=engine) == \
        {"dates": 0, "rows": 0}
    events = copy.read_arrow(copy.events("sepsis"))
    late = events.slice(0, 1).to_pylist()[0]
    late.update(event_id="late-1", ingested_at=late["ingested_at"].replace(year=2100))
    copy.append(copy.events("sepsis"), pa.Table.from_pylist([late], schema=events.schema),
              partition_by=["event_date"])
    out = update_stats(spark, copy, "sepsis", patterns, sepsis.columns, engine=engine)
    assert out["dates"] == 1
    after = {r["event_date"]: r["events"] for r in copy.read_arrow(copy.stats("sepsis")).to_pylist()
             if r["attribute"] == "*"}
    assert after[late["event_date"]] == totals[late["event_date"]] + 1
    assert {d: n for d, n in after.items() if d != late["event_date"]} == \
        {d: n for d, n in totals.items() if d != late["event_date"]}


def test_which_dates_are_computed_comes_from_the_delta_log(nightly, tmp_path, monkeypatch):
    """The attributes every date has are a table property (``COVERED``), kept a lower
    bound through every change of the patterns' attributes: lowered before dates computed
    with fewer are written, raised after. With it, a night learns which dates are computed
    from the Delta log, without opening a file per day; when the patterns ask for more,
    the rows say which dates lack it."""
    from datetime import datetime, timezone

    from jobs.config import load_sources
    from jobs.lake import stats
    from jobs.spark import stats as spark_stats

    copy = lk.Lake(str(tmp_path / "lake"))
    shutil.copytree(nightly[0].lake, copy.root)
    columns = load_sources()["sepsis"].columns
    full = stats.covered_attributes(copy.table(copy.stats("sepsis")))
    assert full and {"*", "event_type", "@patient"} <= full
    slow, fast = stats.computed_dates(copy, "sepsis"), stats.computed_dates(copy, "sepsis", full)
    assert fast.keys() == slow.keys() and len(fast) > 100
    assert all(fast[d][1] <= slow[d][1] < fast[d][1] + 1000 and fast[d][0] == full
               for d in fast)  # milliseconds in the log: rounded down
    assert stats.computed_dates(copy, "sepsis", full | {"other"}) == slow  # not recorded

    def late_event(n: int) -> str:
        """A copy of the n-th event with a ``value`` (its date then has ``value`` rows,
        whatever order the files are read in)."""
        events = copy.read_arrow(copy.events("sepsis"))
        late = events.filter(pc.is_valid(events.column("value"))).slice(n, 1).to_pylist()[0]
        late.update(event_id=f"late-{n}", ingested_at=datetime.now(timezone.utc))
        copy.append(copy.events("sepsis"), pa.Table.from_pylist([late], schema=events.schema),
                    partition_by=["event_date"])
        return late["event_date"]

    monkeypatch.setattr(spark_stats, "needed_attributes", lambda patterns: ({"event_type"}, set()))
    assert spark_stats.update_stats(None, copy, "sepsis", [], columns)["dates"] == 0  # has more
    day = late_event(0)
    assert spark_stats.update_stats(None, copy, "sepsis", [], columns)["dates"] == 1
    assert stats.covered_attributes(copy.table(copy.stats("sepsis"))) == {"*", "event_type"}
    monkeypatch.undo()
    patterns = [load_pattern(p) for p in pattern_paths()]
    out = spark_stats.update_stats(None, copy, "sepsis", patterns, columns)
    assert out["dates"] == 1  # the date computed with fewer attributes, found in its rows
    assert stats.covered_attributes(copy.table(copy.stats("sepsis"))) == full
    assert {r["attribute"] for r in copy.read_arrow(copy.stats("sepsis")).to_pylist()
            if r["event_date"] == day} >= {"*", "event_type", "value", "@patient"}
    assert spark_stats.update_stats(None, copy, "sepsis", patterns, columns)["dates"] == 0


def test_when_each_date_was_last_ingested_comes_from_the_delta_log(tmp_path):
    """No column scan: each date's newest ``ingested_at`` from the files' statistics, at
    most a millisecond above the data's (Delta truncates them), never below."""
    from datetime import datetime, timedelta, timezone

    import pyarrow.compute as pc

    from jobs.lake import store as lk
    from jobs.lake.stats import latest_ingested

    lake = lk.Lake.of(str(tmp_path / "lake"))
    path = lake.events("s")
    t0 = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    stamp = pa.timestamp("us", tz="UTC")
    for night, dates in enumerate([["2025-01-01", "2025-01-02"], ["2025-01-02"]]):
        at = t0 + timedelta(days=night, microseconds=night * 777)
        lake.append(path, pa.table({"event_id": [f"{night}{d}" for d in dates],
                                    "ingested_at": pa.array([at] * len(dates), stamp),
                                    "event_date": dates}), partition_by=["event_date"])
    got = latest_ingested(lake, path)
    data = lake.read_arrow(path).group_by("event_date").aggregate([("ingested_at", "max")])
    want = dict(zip(data.column("event_date").to_pylist(),
                    pc.cast(pc.cast(data.column("ingested_at_max"), stamp), pa.int64()).to_pylist()))
    assert set(got) == set(want) == {"2025-01-01", "2025-01-02"}
    for d in want:
        assert want[d] <= got[d] < want[d] + 1000


def test_dates_are_cut_into_chunks_of_about_so_many_events():
    from jobs.lake.stats import date_chunks

    counts = {"a": 3, "b": 4, "c": 10, "d": 1, "e": 2}
    assert date_chunks(list(counts), counts, 7) == [["a", "b"], ["c"], ["d", "e"]]
    assert date_chunks(list(counts), counts, 100) == [list(counts)]
    assert date_chunks(["x", "y"], {}, 1) == [["x", "y"]]  # counts unknown: one chunk
    assert date_chunks([], counts, 7) == []
