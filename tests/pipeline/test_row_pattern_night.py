"""The nightly run of the committed ``.sql`` row patterns: each partition matched on the
executors, ``matches/NAME`` published with typed measures in one commit that carries the
run's row, equal to the local matcher over the same events; a second night with nothing
new commits nothing."""

import pyarrow as pa
from deltalake import DeltaTable

from jobs.core.local.row_patterns import load_row_pattern
from jobs.core.rowpattern.output import event_rows
from jobs.core.rowpattern.table import match_schema, match_table
from jobs.lake import store as lk
from jobs.lake.match_commits import RUN_KEY
from jobs.pipeline.run import run_all

from ..conftest import ROOT
from ..lakes import chemo_profile, events_from_lake

PATTERNS = ["sepsis_crp_falls_then_rebounds", "sepsis_er_treatment_then_admission"]


def test_row_patterns_are_published_as_the_local_matcher_finds(nightly):
    profile, rows, log = nightly
    outcomes = {r["pattern"]: r for r in rows if r.get("pattern") in PATTERNS}
    assert set(outcomes) == set(PATTERNS), log
    lake = lk.Lake(profile.lake)
    for name in PATTERNS:
        assert outcomes[name]["status"] == "success", outcomes[name]
        pf = load_row_pattern(ROOT / "patterns" / f"{name}.sql")
        dt = DeltaTable(lake.matches(name))
        table = dt.to_pyarrow_table()
        events = events_from_lake(profile, "sepsis")
        schema = match_schema(pf.query, {"patient": "string", "value": "double",
                                         "event_type": "string"})
        want = match_table(pf.query, event_rows(events), schema)
        assert table.num_rows == want.num_rows == outcomes[name]["matches"] > 0
        got = table.select(schema.names).sort_by([("match_id", "ascending")])
        assert got.equals(want.sort_by([("match_id", "ascending")]).cast(got.schema))
        assert set(table.column("pattern_version").to_pylist()) == {pf.version}
        commit = next(c for c in dt.history(5) if RUN_KEY in c)  # then its properties
        assert commit["ses.inserted"] == str(table.num_rows)
        conf = dt.metadata().configuration
        assert (conf["ses.pattern.kind"], conf["ses.pattern.source"]) == ("row_pattern", "sepsis")
        assert conf["ses.pattern.path"] == f"patterns/{name}.sql"
    types = DeltaTable(lake.matches(PATTERNS[0])).schema().to_arrow()
    assert types.field("peak_crp").type == pa.float64()
    assert types.field("falls").type == pa.int64()
    assert types.field("seconds_to_rebound").type == pa.float64()


RISE = """SELECT * FROM chemo_mw MATCH_RECOGNIZE (
  PARTITION BY patient
  ORDER BY ts
  MEASURES FIRST(A.value) AS first_value, LAST(B.value) AS top, count(B.*) AS rises
  PATTERN (A B+)
  DEFINE B AS B.value > PREV(B.value)
)
"""


def test_row_pattern_nights_take_only_the_touched_partitions(spark, tmp_path):
    """A rerun with nothing new commits nothing; new events of one patient take that
    patient again and keep the other's rows as published; the table then equals a full
    recompute of every event."""
    profile, landing = chemo_profile(tmp_path)
    folder = tmp_path / "patterns"
    folder.mkdir()
    (folder / "chemo_rise.sql").write_text(RISE)
    paths = [str(folder / "chemo_rise.sql")]
    lake = lk.Lake(profile.lake)
    quiet = dict(echo=lambda *_: None)
    (first,) = run_all(spark, profile, "2010-08-30", paths, **quiet)
    assert first["status"] == "success" and first["full_recompute"] and first["matches"] > 0
    version = DeltaTable(lake.matches("chemo_rise")).version()
    (again,) = run_all(spark, profile, "2010-08-31", paths, **quiet)
    assert again.get("idle") and (again["inserted"], again["deleted"]) == (0, 0)
    assert DeltaTable(lake.matches("chemo_rise")).version() == version
    before = DeltaTable(lake.matches("chemo_rise")).to_pyarrow_table().to_pylist()
    (landing / "chemo_mw" / "chemo_more.csv").write_text(
        "event_id,patient,type,value,unit,ts\n"
        "n1,1,P,1.0,mg,2010-08-20T00:00:00\nn2,1,P,2.0,mg,2010-08-21T00:00:00\n"
        "n3,1,P,3.0,mg,2010-08-22T00:00:00\n")
    (third,) = run_all(spark, profile, "2010-09-01", paths, **quiet)
    assert third["status"] == "success" and not third["full_recompute"], third
    table = DeltaTable(lake.matches("chemo_rise")).to_pyarrow_table()
    after = table.to_pylist()
    kept = [r for r in before if r["patient"] != 1]
    assert kept and all(r in after for r in kept)  # patient 2's rows untouched
    assert {r["run_id"] for r in after if r["patient"] == 1} == {third.record.run_id}
    pf = load_row_pattern(folder / "chemo_rise.sql")
    schema = match_schema(pf.query, {"patient": "bigint", "value": "double"})
    want = match_table(pf.query, event_rows(events_from_lake(profile, "chemo_mw")), schema)
    assert sorted(table.column("match_id").to_pylist()) == \
        sorted(want.column("match_id").to_pylist())
    assert any(r["top"] == 3.0 and r["rises"] == 2 for r in after)


def test_all_rows_per_match_publishes_a_row_per_matched_event(spark, tmp_path):
    """ALL ROWS PER MATCH: a row per matched event with its classifier and match number,
    and the measures as of that row; no match_events view over it (it is one already)."""
    from jobs.lake.views import derived_views, lake_tables

    profile, _ = chemo_profile(tmp_path)
    sql = tmp_path / "chemo_rows.sql"
    sql.write_text(RISE.replace("PATTERN", "ALL ROWS PER MATCH\n  PATTERN")
                   .replace("count(B.*) AS rises", "RUNNING count(B.*) AS rises"))
    (row,) = run_all(spark, profile, "2010-08-30", [str(sql)], echo=lambda *_: None)
    assert row["status"] == "success", row
    lake = lk.Lake(profile.lake)
    dt = DeltaTable(lake.matches("chemo_rows"))
    table = dt.to_pyarrow_table()
    assert dt.metadata().configuration["ses.pattern.kind"] == "row_pattern_rows"
    pf = load_row_pattern(sql)
    want = match_table(pf.query, event_rows(events_from_lake(profile, "chemo_mw")),
                       match_schema(pf.query, {"patient": "bigint", "value": "double"}))
    assert table.num_rows == want.num_rows == row["matches"] > 0
    columns = ["event_id", "classifier", "match_number", "rises"]
    assert sorted(map(str, table.select(columns).to_pylist())) == \
        sorted(map(str, want.select(columns).to_pylist()))
    assert set(table.column("classifier").to_pylist()) == {"A", "B"}
    assert "match_events_chemo_rows" not in derived_views(lake, lake_tables(lake), "duckdb")


def test_the_row_matches_suite_names_a_bad_row(tmp_path):
    """The suite of a row pattern's rows (real Great Expectations, on the driver): a
    match id given twice, or a match longer than WITHIN, fails it."""
    import pyarrow as pa

    from jobs.pipeline.validate.quality import validate_row_matches

    pf = load_row_pattern(ROOT / "patterns" / f"{PATTERNS[0]}.sql")
    lake = lk.Lake(str(tmp_path / "lake"))
    day = 86400 * 10**6
    good = pa.table({"pattern": [pf.name] * 2, "match_number": [1, 2],
                     "match_id": ["m1", "m2"],
                     "start_ts": pa.array([0, 5 * day], pa.timestamp("us", tz="UTC")),
                     "end_ts": pa.array([2 * day, 6 * day], pa.timestamp("us", tz="UTC"))})
    assert validate_row_matches(lake, pf.query, good, "r1").success
    twice = good.set_column(2, "match_id", pa.array(["m1", "m1"]))
    outcome = validate_row_matches(lake, pf.query, twice, "r2")
    assert not outcome.success and "match_id" in outcome.describe()
    late = good.set_column(4, "end_ts", pa.array([40 * day, 6 * day],
                                                 pa.timestamp("us", tz="UTC")))
    assert "span_seconds" in validate_row_matches(lake, pf.query, late, "r3").describe()


def test_a_failed_suite_publishes_nothing(spark, tmp_path, monkeypatch):
    from jobs.pipeline.publish import row_patterns
    from jobs.pipeline.validate.gx import Outcome

    profile, _ = chemo_profile(tmp_path)
    sql = tmp_path / "chemo_rise.sql"
    sql.write_text(RISE)
    quiet = dict(echo=lambda *_: None)
    (first,) = run_all(spark, profile, "2010-08-30", [str(sql)], **quiet)
    lake = lk.Lake(profile.lake)
    version = DeltaTable(lake.matches("chemo_rise")).version()
    sql.write_text(RISE.replace("PATTERN (A B+)", "PATTERN (A B*)"))  # a new version
    monkeypatch.setattr(row_patterns, "validate_row_matches", lambda *a: Outcome(
        "matches_chemo_rise", False, ["expect_column_values_to_be_unique(match_id)"], None, 6))
    (failed,) = run_all(spark, profile, "2010-08-31", [str(sql)], **quiet)
    assert failed["status"] == "failed" and "nothing was published" in failed["message"]
    assert DeltaTable(lake.matches("chemo_rise")).version() == version


def test_a_retraction_takes_every_partition_of_a_row_pattern_again(spark, tmp_path):
    """A retraction's commit adds no file (it is not an append): the next night matches
    every partition again, and the table equals the matcher over the events left."""
    from jobs.pipeline.upkeep.retract import retract

    profile, _ = chemo_profile(tmp_path)
    sql = tmp_path / "chemo_rise.sql"
    sql.write_text(RISE)
    quiet = dict(echo=lambda *_: None)
    run_all(spark, profile, "2010-08-30", [str(sql)], **quiet)
    lake = lk.Lake(profile.lake)
    retract(lake, "chemo_mw", ["e3"], reason="a test")
    (again,) = run_all(spark, profile, "2010-08-31", [str(sql)], **quiet)
    assert again["status"] == "success" and again["full_recompute"] and not again.get("idle")
    pf = load_row_pattern(sql)
    want = match_table(pf.query, event_rows(events_from_lake(profile, "chemo_mw")),
                       match_schema(pf.query, {"patient": "bigint", "value": "double"}))
    table = DeltaTable(lake.matches("chemo_rise")).to_pyarrow_table()
    assert sorted(table.column("match_id").to_pylist()) == \
        sorted(want.column("match_id").to_pylist())
