"""The nightly pipeline with the real Spark, Delta (delta-rs) and data: the Spark job's
matches equal the local matcher for every pattern (with and without time slices),
reruns change nothing, incremental nights add up to a full recompute, late events are
counted, a pattern version change recomputes everything, bad rows go to quarantine."""

import shutil
from dataclasses import replace
from pathlib import Path

import pandas.testing as pd_testing
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from jobs.config import Source
from jobs.core.engine.output import match_id_of
from jobs.core.engine.window_matcher import windows_of
from jobs.core.language.events import Event, events_from_arrow
from jobs.core.language.patternfile import load_pattern
from jobs.core.local.runner import run
from jobs.core.plans.planners import DEFAULT
from jobs.lake import store as lk
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.horizons import RunRange, horizon, plan_range
from jobs.pipeline.ingest import IngestError, ingest
from jobs.pipeline.match_steps import match_step, planned_range
from jobs.pipeline.publish_steps import publish_step
from jobs.pipeline.run import backfill, run_all
from jobs.project.patterns import pattern_paths

from ..conftest import LOGICAL_DATE, ROOT, make_profile


def events_from_lake(profile, source: str) -> list[Event]:
    return events_from_arrow(DeltaTable(lk.Lake(profile.lake).events(source)).to_pyarrow_table())


def local_ids(profile, pattern, low=None, high=None) -> set[str]:
    events = events_from_lake(profile, pattern.source)
    if pattern.kind == "window":
        found = [(w, w.first.ts) for w in windows_of(pattern, events)[0]]
    else:
        found = [(m, m.start.ts) for m in run(pattern, events)[0]]
    return {match_id_of(pattern, m) for m, start in found
            if (low is None or start >= low) and (high is None or start < high)}


def published_ids(profile, name: str) -> set[str]:
    t = DeltaTable(lk.Lake(profile.lake).matches(name)).to_pyarrow_table(columns=["match_id"])
    return set(t.column("match_id").to_pylist())


def test_every_pattern_spark_equals_local(nightly):
    profile, rows, log = nightly
    models = [r for r in rows if "model" in r]
    rows = [r for r in rows if "pattern" in r]
    assert {r["pattern"] for r in rows} == {load_pattern(p).name for p in pattern_paths()}
    assert all(r["status"] == "success" for r in rows), rows
    assert [(r["model"], r["status"]) for r in models] == [
        ("lab_to_home_passes", "success"), ("paper_ex4_room_state", "success"),
        ("sepsis_episodes", "success")]
    for path in pattern_paths():
        pattern = load_pattern(path)
        expected = local_ids(profile, pattern)
        assert expected, f"{pattern.name} should match something in the committed data"
        assert published_ids(profile, pattern.name) == expected, pattern.name
    assert any("tables:" in line for line in log)


def test_measures_on_spark_equal_local(nightly):
    """Every committed pattern with measures: its match table has one typed, documented
    column per measure, with the values the local engine computes for each match."""
    from jobs.config import load_sources
    from jobs.core.language.measures import measure_types

    profile = nightly[0]
    checked = 0
    for path in pattern_paths():
        pattern = load_pattern(path)
        if pattern.kind == "window" or not pattern.measure_names:
            continue
        checked += 1
        events = events_from_lake(profile, pattern.source)
        want = {match_id_of(pattern, m): dict(m.measures) for m in run(pattern, events)[0]}
        table = DeltaTable(lk.Lake(profile.lake).matches(pattern.name))
        schema = table.schema().to_arrow()
        types = measure_types(pattern, dict(load_sources()[pattern.source].columns))
        arrow = {"integer": pa.int64(), "double": pa.float64(), "string": pa.string()}
        for name in pattern.measure_names:
            field = pa.schema(schema).field(name)
            assert field.type == arrow[types[name]], name
            assert b"measure" in (field.metadata or {}).get(b"comment", b""), name
        rows = table.to_pyarrow_table(columns=["match_id", *pattern.measure_names]).to_pylist()
        got = {r.pop("match_id"): r for r in rows}
        assert got == want, pattern.name
    assert checked, "a committed pattern should have measures"


def _staged(lake, name, run_id) -> list[tuple]:
    import pyarrow.dataset as pads

    t = pads.dataset(lake.staging(name, run_id), format="parquet").to_table()
    t = t.filter(pa.compute.equal(t.column("kind"), "match")).drop_columns(["stats"])
    return sorted(tuple(str(v) for v in row.values()) for row in t.to_pylist())


def test_a_source_pass_equals_each_pattern_alone(spark, nightly):
    """The shareable committed patterns of each source, in one pass and one by one, with
    start ranges that differ per pattern: the same staged rows and the same counters."""
    from jobs.pipeline.phase1 import run_match_job
    from jobs.pipeline.source_pass import PassItem, pass_groups, run_source_pass
    from jobs.runrecord import COUNTERS

    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    items = []
    for k, path in enumerate(pattern_paths()):
        pattern = load_pattern(path)
        middle = {"hospital": "2006-06-01", "sepsis": "2014-06-01"}.get(pattern.source)
        low = None if k % 3 == 0 or middle is None else \
            horizon(middle, 0, 0) + k * 86400 * 10**9
        items.append(PassItem(pattern, Path(path).read_text(), low,
                              horizon(LOGICAL_DATE, pattern.tau, 0)))
    # partition contiguity: a variant of the committed pattern, with its own range, shares
    # a pass with it (positions numbered once over the union of their ranges)
    from jobs.core.language.patternfile import parse_pattern

    text = (ROOT / "patterns" / "sepsis_triage_next_is_treatment.yaml").read_text()
    text = text.replace("name: sepsis_triage_next_is_treatment", "name: triage_next_3h")
    text = text.replace("within: 2h", "within: 3h")
    variant = parse_pattern(text, "<variant>")
    assert variant.contiguity == "partition"
    items.insert(0, PassItem(variant, text, horizon("2014-09-01", 0, 0),
                             horizon(LOGICAL_DATE, variant.tau, 0)))
    # patterns without partition attributes share a pass by time slices: variants of the
    # committed one (a leading negated set) with other windows and their own ranges
    text = (ROOT / "patterns" / "sepsis_antibiotics_without_prior_lactate.yaml").read_text()
    for k, within in enumerate(("3d", "6h")):
        body = text.replace("name: sepsis_antibiotics_without_prior_lactate",
                            f"name: no_lactate_{within}").replace("within: 1d", f"within: {within}")
        one = parse_pattern(body, "<variant>")
        assert not one.partition_attributes
        items.insert(0, PassItem(one, body, None if k else horizon("2014-11-01", 0, 0),
                                 horizon(LOGICAL_DATE, one.tau, 0)))
    # patterns that get the same rows share their preparation in the pass: variants with
    # other windows, and one whose m and h swap properties (same rows, other masks)
    text = (ROOT / "patterns" / "hospital_ca125_blood_then_consult.yaml").read_text()
    swapped = text.replace("m.event_type = 'ca-125", "h.event_type = 'ca-125").replace(
        "h.event_type = 'hemo", "m.event_type = 'hemo")
    for name, body in (("ca125_2d", text.replace("within: 14d", "within: 2d")),
                       ("ca125_30d", text.replace("within: 14d", "within: 30d")),
                       ("ca125_swapped", swapped)):
        body = body.replace("name: hospital_ca125_blood_then_consult", f"name: {name}")
        one = parse_pattern(body, "<variant>")
        items.insert(0, PassItem(one, body, None, horizon(LOGICAL_DATE, one.tau, 0)))
    groups = pass_groups(items)
    assert {g[0].pattern.source for g in groups} >= {"sepsis", "hospital"}
    assert any(i.pattern.name == "triage_next_3h" for g in groups for i in g)
    assert any(i.pattern.name == "no_lactate_3d" for g in groups for i in g)
    # the last pattern of each pass reads a range without events (a quiet night): no rows
    future = horizon("2030-01-01", 0, 0)
    groups = [g[:-1] + [replace(g[-1], low=future, high=future + 86400 * 10**9)]
              for g in groups]
    for n, group in enumerate(groups):
        # short time slices, so that many events are in two of them
        length = 20 * 86400 * 10**9 if not group[0].pattern.partition_attributes \
            else 90 * 86400 * 10**9
        shared = run_source_pass(spark, lake, group, "pass", n, 10**6, slice_length=length)
        for item in group:
            alone = run_match_job(spark, item.pattern, item.text, lake, "alone", item.low,
                                  item.high, length, 10**6)
            name = item.pattern.name
            assert _staged(lake, name, "pass") == _staged(lake, name, "alone"), name
            for c in COUNTERS:
                assert shared[name].stats[c] == alone.stats[c], (name, c)
            assert (shared[name].stats["matches"] > 0) == (item is not group[-1]), name
            lake.remove(lake.staging(name, "pass"))
            lake.remove(lake.staging(name, "alone"))


def test_a_failed_source_pass_is_retried_pattern_by_pattern(spark, tmp_path, monkeypatch):
    """A pass that dies takes no pattern down: each is matched alone and published."""
    from jobs.pipeline import run as night

    profile, _ = _chemo_profile(tmp_path)
    folder = tmp_path / "patterns"
    folder.mkdir()
    text = Path(P1).read_text()
    for name in ("first_p1", "second_p1"):
        (folder / f"{name}.yaml").write_text(text.replace("name: mw_chemo_p1", f"name: {name}"))

    def dies(*args, **kw):
        raise RuntimeError("executor lost")

    monkeypatch.setattr(night, "run_source_pass", dies)
    log = []
    rows = run_all(spark, profile, "2010-08-30", [str(p) for p in sorted(folder.iterdir())],
                   echo=log.append)
    assert [(r["pattern"], r["status"]) for r in rows] == [("first_p1", "success"),
                                                            ("second_p1", "success")]
    assert any("did not finish (RuntimeError: executor lost)" in line for line in log), log
    assert len(published_ids(profile, "first_p1")) == len(published_ids(profile, "second_p1")) == 3


def test_every_pattern_with_time_slices(spark, nightly):
    profile = nightly[0]
    for path in pattern_paths():
        ctx = RunContext.start(profile, "sliced", LOGICAL_DATE).for_pattern(path)
        planned = planned_range(ctx, rng=RunRange(None, horizon(LOGICAL_DATE, load_pattern(path).tau, 0),
                                         True))
        stats = match_step(spark, ctx, planned, force_slices=True)
        assert stats["sliced"] == "all"
        if planned.pattern.kind != "window":  # the location stream is one day: one slice
            assert stats["groups"] > stats["partitions"]
        staged = pa.dataset.dataset(lk.Lake(profile.lake).staging(planned.pattern.name, "sliced"),
                                    format="parquet").to_table().to_pylist()
        ids = {r["match_id"] for r in staged if r["kind"] == "match"}
        assert ids == published_ids(profile, planned.pattern.name), planned.pattern.name


def test_rerun_of_the_same_logical_date_changes_nothing(spark, nightly):
    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    names = [load_pattern(p).name for p in pattern_paths()]
    before = {n: DeltaTable(lake.matches(n)).version() for n in names}
    events_before = DeltaTable(lake.events("hospital")).version()
    runs_before = DeltaTable(lake.runs()).version()
    rows = run_all(spark, profile, LOGICAL_DATE, echo=lambda *_: None)
    assert all(r["inserted"] == 0 and r["deleted"] == 0 for r in rows if "pattern" in r)
    assert {n: DeltaTable(lake.matches(n)).version() for n in names} == before
    assert DeltaTable(lake.events("hospital")).version() == events_before
    runs = DeltaTable(lake.runs()).to_pyarrow_table().to_pylist()
    assert len(runs) == 2 * len(names) and {r["status"] for r in runs} == {"success"}
    # runs that committed nothing are logged together: one append for all their rows
    assert DeltaTable(lake.runs()).version() == runs_before + 1


def test_incremental_nights_late_events_and_backfill(spark, tmp_path):
    landing = tmp_path / "landing"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw",
                    landing / "chemo_mw")
    profile = make_profile(tmp_path, landing=landing)
    p1 = [str(Path(__file__).resolve().parents[2] / "patterns" / "mw_chemo_p1.yaml")]
    pattern = load_pattern(p1[0])
    quiet = dict(echo=lambda *_: None)
    nights = ["2010-07-10", "2010-07-20", "2010-08-30"]
    seen = []
    for night in nights:
        rows = run_all(spark, profile, night, p1, **quiet)
        seen.append(rows[0])
    assert seen[0]["full_recompute"] and not seen[1]["full_recompute"]
    assert seen[1]["horizon_low"] == seen[0]["horizon_high"]  # contiguous ranges
    assert [r["inserted"] for r in seen] == [0, 1, 2]
    assert published_ids(profile, pattern.name) == local_ids(profile, pattern)
    # a late P dose for patient 1 on 4 July: its range is closed, so it is counted
    (landing / "chemo_mw" / "late.csv").write_text(
        "event_id,patient,type,value,unit,ts\ne15,1,P,100,mg,2010-07-04T00:00:00\n")
    late = run_all(spark, profile, "2010-08-31", p1, **quiet)[0]
    assert late["late_events"] == 1 and late["inserted"] == 0
    assert published_ids(profile, pattern.name) != local_ids(profile, pattern)
    # backfill of the closed range recomputes e1's match with the late dose
    row = backfill(spark, profile, "2010-07-01", "2010-07-06", p1, **quiet)[0]
    assert (row["inserted"], row["deleted"]) == (1, 1)
    assert row["run_kind"] == "backfill" and row["logical_date"] is None  # a kind, no date
    assert published_ids(profile, pattern.name) == local_ids(profile, pattern)


def test_pattern_version_change_recomputes_everything(spark, tmp_path):
    landing = tmp_path / "landing"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw",
                    landing / "chemo_mw")
    profile = make_profile(tmp_path, landing=landing)
    path = tmp_path / "p1.yaml"
    original = (Path(__file__).resolve().parents[2] / "patterns" / "mw_chemo_p1.yaml").read_text()
    path.write_text(original)
    quiet = dict(echo=lambda *_: None)
    first = run_all(spark, profile, "2010-08-30", [str(path)], **quiet)[0]
    v1 = load_pattern(path).version
    path.write_text(original.replace("within: 15d", "within: 9d"))
    changed = load_pattern(path)
    assert changed.version != v1
    runs = DeltaTable(lk.Lake(profile.lake).runs()).to_pyarrow_table().to_pylist()
    assert not plan_range("2010-08-31", changed.tau, 0, changed.version, runs).low
    second = run_all(spark, profile, "2010-08-31", [str(path)], **quiet)[0]
    assert first["full_recompute"] and second["full_recompute"]
    t = DeltaTable(lk.Lake(profile.lake).matches(changed.name)).to_pyarrow_table()
    assert set(t.column("pattern_version").to_pylist()) == {changed.version}
    assert published_ids(profile, changed.name) == local_ids(profile, changed)
    assert second["deleted"] >= 1  # the old version's rows went in the same commit


def test_match_row_contract(nightly):
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).matches("mw_chemo_p1")).to_pyarrow_table()
    assert t.column_names == ["match_id", "pattern", "pattern_version", "patient", "start_ts",
                              "end_ts", "n_events", "bindings", "run_id"]
    rows = sorted(t.to_pylist(), key=lambda r: r["start_ts"])
    assert dict(rows[0]["bindings"]) == {"c": ["e1"], "p": ["e3", "e9"], "b": ["e11"]}
    assert rows[0]["n_events"] == 4 and rows[0]["patient"] == 1


def test_disjunction_row_contract(nightly):
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).matches("sepsis_escalation_either_way")).to_pyarrow_table()
    assert t.column_names == ["match_id", "pattern", "pattern_version", "alternative", "patient",
                              "start_ts", "end_ts", "n_events", "bindings", "run_id"]
    rows = t.to_pylist()
    assert {r["alternative"] for r in rows} == {1, 2}
    assert {frozenset(dict(r["bindings"])) for r in rows} == {frozenset("li"),
                                                                frozenset(("w", "ab", "fl"))}
    assert all(set(dict(r["bindings"])) == set("li") for r in rows if r["alternative"] == 1)


DISJUNCTION = """name: toy_disjunction_contiguity
source: sepsis
within: 1d
matcher: zstream
alternatives:
  - sets: [[not r], [t], [a]]
    contiguity: partition
    conditions:
      - t.event_type = 'ER Sepsis Triage'
      - a.event_type in ('IV Antibiotics', 'IV Liquid')
      - t.patient = a.patient
      - r.event_type = 'Return ER' and r.patient = t.patient
  - sets: [[c], [l]]
    contiguity: strict
    conditions:
      - c.event_type = 'CRP'
      - l.event_type = 'LacticAcid'
"""


@pytest.mark.parametrize("force_slices", [False, True])
def test_disjunction_with_contiguity_and_negation_spark_equals_local(spark, nightly, tmp_path,
                                                                       force_slices):
    """Each alternative gets its own contiguity positions in phase 1 (partition positions
    by its own X, strict over the source); no common X, so time slices over all events."""
    profile = nightly[0]
    path = tmp_path / "toy_disjunction_contiguity.yaml"
    path.write_text(DISJUNCTION)
    pattern = load_pattern(path)
    rng = RunRange(None, horizon(LOGICAL_DATE, pattern.tau, 0), True)
    ctx = RunContext.start(profile, "toy", LOGICAL_DATE).for_pattern(path, pattern)
    planned = planned_range(ctx, rng=rng)
    stats = match_step(spark, ctx, planned, force_slices=force_slices)
    staged = pa.dataset.dataset(lk.Lake(profile.lake).staging(pattern.name, "toy"),
                                format="parquet").to_table().to_pylist()
    matches = [r for r in staged if r["kind"] == "match"]
    expected = local_ids(profile, pattern, high=rng.high)
    assert {r["match_id"] for r in matches} == expected and len(matches) == len(expected)
    assert {r["alternative"] for r in matches} == {1, 2} and stats["sliced"] == "all"
    if not force_slices:  # the match suite checks each row against its own alternative
        from jobs.pipeline.quality import validate_matches

        outcome = validate_matches(spark, lk.Lake(profile.lake), pattern, "toy", rng.low, rng.high)
        assert outcome.success, outcome.describe()
        assert outcome.evaluated > 15  # the common checks and each alternative's own


def _stats_rows(lake, source: str) -> list[tuple]:
    """The stats rows without their time of computing, a sketch as its estimate."""
    from jobs.lake.stats import distinct_estimate

    rows = lake.read_arrow(lake.stats(source)).drop_columns(["computed_at"]).to_pylist()
    return sorted(tuple((k, distinct_estimate([v]) if k == "sketch" else v)
                        for k, v in r.items()) for r in rows)


def test_statistics_on_the_driver_equal_sparks(spark, nightly, tmp_path):
    """Every source's statistics, computed by Spark and on the driver from the same events:
    the same rows (counts, values, quantiles, first and last ts, distinct partitions and
    their sketches' estimates), and the sketches of one engine merge with the other's."""
    from pyspark.sql import functions as F

    from jobs.config import load_sources
    from jobs.lake.stats import distinct_estimate, update_stats

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
    first = lake.read_spark(spark, path)
    assert lake.read_spark(spark, path) is first and first.count() == 2
    lake.append(path, pa.table({"x": [3], "d": ["c"]}), partition_by=["d"])
    again = lake.read_spark(spark, path)
    assert again is not first and again.count() == 3
    assert lake.read_spark(spark, path, [("d", "=", "a")]).count() == 1
    lost = next(Path(path, "d=b").glob("*.parquet"))
    lost.unlink()
    with pytest.raises(lk.BrokenTable, match="missing"):
        lake.read_spark(spark, path)


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_lake_statistics_are_incremental(spark, nightly, tmp_path, engine):
    from jobs.config import load_sources
    from jobs.lake.stats import update_stats

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


def test_runs_log_records_the_drivers_plan(nightly):
    profile = nightly[0]
    runs = DeltaTable(lk.Lake(profile.lake).runs()).to_pyarrow_table().to_pylist()
    zstream = [r for r in runs if r["matcher"] == "zstream" and r["status"] == "success"]
    ses = [r for r in runs if r["matcher"] == "ses" and r["status"] == "success"]
    assert zstream and ses
    for r in zstream:
        assert r["plan_generator"] == DEFAULT and "⋈" in r["plan"], r
        assert r["estimated_pm"] > 0 and r["actual_pm"] > 0, r
    assert all(r["plan"] is None for r in ses)


def test_explain_prints_plan_costs_and_statistics(spark, nightly):
    from jobs.config import load_sources
    from jobs.pipeline.planning import choose_plan, explain_text

    profile = nightly[0]
    path = Path("patterns/sepsis_high_marker_then_admission.yaml")
    pattern = load_pattern(path)
    choice = choose_plan(spark, lk.Lake(profile.lake), pattern, None, None,
                         dict(load_sources()["sepsis"].columns), generator="dp-b")
    text = explain_text(pattern, choice)
    assert "generator dp-b" in text and "W·r h" in text and "SEL h ~ w" in text
    assert choice.sources == ["stats table (leaves), sample (pairs)"]
    assert all(name in text for name in ("trivial", "ii-random", "zstream-ord", "dp-ld"))
    # re-planning: the sizes observed in the sampled windows instead of the table's rates
    again = choose_plan(spark, lk.Lake(profile.lake), pattern, None, None,
                        dict(load_sources()["sepsis"].columns), observed=True)
    assert again.replanned == "observed" and again.sources == ["sample (leaves and pairs)"]
    assert "re-planned" in explain_text(pattern, again)


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


def test_unreadable_file_fails_and_writes_nothing(tmp_path):
    landing = tmp_path / "landing" / "toy"
    landing.mkdir(parents=True)
    (landing / "a.csv").write_text("pid,kind,dose,at\n1,C,10,2020-01-01T00:00:00\n")
    lake = lk.Lake(str(tmp_path / "lake"))
    ingest(SOURCE, str(tmp_path / "landing"), lake, "run1")
    version = DeltaTable(lake.events("toy")).version()
    (landing / "b.csv").write_text("pid,kind,dose,at\n2,C,1,2020-02-01T00:00:00\n")
    (landing / "c.csv.gz").write_bytes(b"this is not gzip")
    with pytest.raises(IngestError, match=r"c\.csv\.gz: cannot be read as csv"):
        ingest(SOURCE, str(tmp_path / "landing"), lake, "run2")
    assert DeltaTable(lake.events("toy")).version() == version  # b.csv not written either
    log = DeltaTable(lake.ingest_log()).to_pyarrow_table().to_pylist()
    assert [r["file"] for r in log] == ["toy/a.csv"]


def test_publish_needs_a_staged_run(tmp_path):
    profile = make_profile(tmp_path, landing=tmp_path)
    with pytest.raises(FileNotFoundError, match="run `match-job` for it first"):
        publish_step(None, RunContext.start(profile, "nope").for_pattern(
            Path(__file__).resolve().parents[2] / "patterns" / "mw_chemo_p1.yaml"))


def test_an_executor_error_is_reported_by_its_cause(spark):
    """A failed pattern's runs row says what went wrong on the executor, not only that a
    Python worker threw."""
    from jobs.pipeline.outcome import short_error

    def fail(batches):
        for _ in batches:
            raise FileNotFoundError("staging/x/part-0.parquet is gone")
        yield from ()

    with pytest.raises(Exception) as info:
        spark.range(4).mapInArrow(fail, "id long").collect()
    assert short_error(info.value) == "FileNotFoundError: staging/x/part-0.parquet is gone"


def test_java_missing_is_explained(monkeypatch, tmp_path):
    from jobs.spark.session import JavaMissing, check_java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(JavaMissing, match="Java 17 or newer.*openjdk-17-jre-headless"):
        check_java()


def _chemo_profile(tmp_path):
    landing = tmp_path / "landing"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw",
                    landing / "chemo_mw")
    return make_profile(tmp_path, landing=landing), landing


P1 = str(Path(__file__).resolve().parents[2] / "patterns" / "mw_chemo_p1.yaml")


def test_event_outside_the_time_range_is_quarantined_before_matching(spark, tmp_path):
    profile, landing = _chemo_profile(tmp_path)
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
    from jobs.pipeline import quality
    from jobs.pipeline.ingest import stage
    from jobs.pipeline.quality import validate_events_frame

    profile, landing = _chemo_profile(tmp_path)
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

    def failing_gate(src, events):
        raise RuntimeError("suite failed")

    with pytest.raises(RuntimeError):
        ingest(source, profile.landing, lake, "r1", gate=failing_gate)
    assert not lake.exists(lake.events("chemo_mw")) and not lake.exists(lake.ingest_log())


def _restaged(lake: Lake, pattern, run_id: str) -> int:
    """The pattern's published matches written back as a staged run ``run_id`` (the match
    job's columns, bindings as JSON), with broken rows when there are enough: a duplicated
    match, a bound id that is no event, an event bound twice, a start one second off and
    two matches' bindings swapped. Returns the staged rows."""
    import json
    from datetime import timedelta

    import pyarrow.parquet as pq

    t = DeltaTable(lake.matches(pattern.name)).to_pyarrow_table()
    keep = ["match_id", *(["alternative"] if "alternative" in t.column_names else []),
            "start_ts", "end_ts", "n_events"]
    measures = [] if pattern.kind == "window" else list(pattern.measure_names)
    rows = [{"kind": "match", **{k: r[k] for k in keep},
             "bindings": json.dumps(dict(r["bindings"])),
             **({"values": json.dumps({m: r[m] for m in measures})} if measures else {})}
            for r in t.to_pylist()]
    rows.sort(key=lambda r: r["match_id"])
    if len(rows) >= 6:
        if measures:  # a count below its variable's minimum
            v = json.loads(rows[0]["values"])
            rows[0]["values"] = json.dumps(v | {k: 0 for k, x in v.items() if isinstance(x, int)})
        rows.append(dict(rows[0]))
        b = json.loads(rows[1]["bindings"])
        var = next(iter(b))
        b[var] = b[var][:-1] + ["no-such-event"]
        rows[1]["bindings"] = json.dumps(b)
        b = json.loads(rows[2]["bindings"])
        b[list(b)[-1]] = b[list(b)[-1]] + [b[list(b)[0]][0]]
        rows[2]["bindings"] = json.dumps(b)
        rows[3]["start_ts"] += timedelta(seconds=1)
        rows[4]["bindings"], rows[5]["bindings"] = rows[5]["bindings"], rows[4]["bindings"]
    folder = Path(lake.staging(pattern.name, run_id))
    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(rows)
    if "alternative" in keep:  # the match job's type
        i = table.column_names.index("alternative")
        table = table.set_column(i, "alternative", table.column(i).cast(pa.int32()))
    pq.write_table(table, folder / "part-0.parquet", coerce_timestamps="us")
    return len(rows)


CHECKED_NEGATION = """name: toy_checked_negation
source: sepsis
within: 2d
matcher: ses
sets: [[c], [not l], [a]]
conditions:
  - c.event_type = 'CRP'
  - a.event_type = 'IV Antibiotics'
  - c.patient = a.patient
  - l.event_type = 'LacticAcid' and l.patient = a.patient
"""


def _staged_without_negation(profile, tmp_path, run_id: str):
    """The matches of CHECKED_NEGATION without its negated variable, staged as a run of
    CHECKED_NEGATION: the suite's ``no_l_ok`` is false exactly where a lactate lies
    between the CRP and the antibiotics."""
    import json

    import pyarrow.parquet as pq

    from jobs.core.language.events import to_datetime

    path = tmp_path / "toy_checked_negation.yaml"
    path.write_text(CHECKED_NEGATION)
    positive = tmp_path / "positive" / "toy_checked_negation.yaml"
    positive.parent.mkdir()
    positive.write_text(CHECKED_NEGATION.replace("[[c], [not l], [a]]", "[[c], [a]]")
                        .replace("  - l.event_type = 'LacticAcid' and l.patient = a.patient\n", ""))
    found = run(load_pattern(positive), events_from_lake(profile, "sepsis"))[0]
    rows = [{"kind": "match", "match_id": f"m{i}", "start_ts": to_datetime(m.start.ts),
             "end_ts": to_datetime(m.end.ts), "n_events": len(m.events),
             "bindings": json.dumps({v: [e.id for e in es] for v, es in m.bindings})}
            for i, m in enumerate(found)]
    folder = Path(Lake(profile.lake).staging("toy_checked_negation", run_id))
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "part-0.parquet", coerce_timestamps="us")
    return load_pattern(path), len(rows)


def test_plan_samples_of_small_sources_on_the_driver_equal_spark_samples(spark, nightly):
    """A small source's plan statistics come from its events read once on the driver,
    unfiltered; they equal the statistics of Spark's filtered sample, for every committed
    sequence pattern over the whole history and over a range cut in its middle."""
    from jobs.core.language.events import parse_ts
    from jobs.pipeline.planning import SAMPLE_EVENTS, SmallSources, sample_statistics

    lake = Lake.of_profile(nightly[0])
    small = SmallSources(lake)
    checked = 0
    for path in pattern_paths():
        pattern = load_pattern(path)
        if pattern.kind == "window" or small.events(pattern.source) is None:
            continue
        assert small.events(pattern.source).num_rows <= SAMPLE_EVENTS
        ts = small.events(pattern.source).column("ts")
        lo, hi = (parse_ts(x.as_py()) for x in (pc.min(ts), pc.max(ts)))
        for low, high in ((None, None), ((lo + hi) // 2 - pattern.tau, hi)):
            assert sample_statistics(spark, lake, pattern, low, high, small) == \
                sample_statistics(spark, lake, pattern, low, high), (pattern.name, low, high)
            checked += 1
    assert checked >= 20  # every committed sequence pattern's source is small


def test_plan_samples_taken_together_equal_each_patterns_own(spark, nightly, monkeypatch):
    """A large source's ZStream patterns are sampled by two Spark jobs in all
    (``sample_many``); each pattern's rows equal its own ``_spark_sample``, whether its
    range is hash-sampled (over ``SAMPLE_EVENTS``) or taken whole, and so do its plan
    statistics."""
    import re

    from jobs.core.language.events import parse_ts
    from jobs.core.language.patternfile import parse_pattern
    from jobs.pipeline import planning

    monkeypatch.setattr(planning, "SAMPLE_EVENTS", 400)  # the hospital's events are "large"
    lake = Lake.of_profile(nightly[0])
    text = (ROOT / "patterns" / "hospital_crossmatch_transfusion.yaml").read_text()
    text = text.split("\nexamples:")[0] + "\n"
    texts = [re.sub(r"(?m)^within: .*$", f"within: {w}", text).replace(
        "name: hospital_crossmatch_transfusion", f"name: crossmatch_{w}")
        for w in ("1d", "3d", "9d")]
    patterns = [parse_pattern(t, "<variant>") for t in texts]
    other = load_pattern(ROOT / "patterns" / "sepsis_high_marker_then_admission.yaml")
    ts = lake.read_arrow(lake.events("hospital"), columns=["ts"]).column("ts")
    lo, hi = (parse_ts(x.as_py()) for x in (pc.min(ts), pc.max(ts)))
    runs = [(patterns[0], None, None), (patterns[1], (lo + hi) // 2, hi),
            (patterns[2], hi - 30 * 86400 * 10**9, hi), (other, None, None)]
    small = planning.SmallSources(lake)
    assert small.events("hospital") is None  # sampled by Spark
    assert planning.sample_many(spark, lake, small, runs) == 3  # the lone sepsis one: alone
    assert planning._sample_key(other, None, None) not in small.samples
    sizes = []
    for pattern, low, high in runs[:3]:
        together = small.samples[planning._sample_key(pattern, low, high)]
        alone = planning._spark_sample(spark, lake, pattern, low, high,
                                       list(pattern.partition_attributes),
                                       planning._sample_columns(pattern))
        order = [("event_id", "ascending")]
        assert together.sort_by(order).equals(alone.sort_by(order)), pattern.name
        sizes.append(together.num_rows)
        assert planning.sample_statistics(spark, lake, pattern, low, high, small) == \
            planning.sample_statistics(spark, lake, pattern, low, high)
    assert sizes[0] > 0 and len(set(sizes)) == 3

    # a source pass samples its ZStream patterns from its own cached events (reaching τ
    # further back for them): the same rows; its matches stay each pattern's own
    from jobs.pipeline.phase1 import run_match_job
    from jobs.pipeline.source_pass import NotShared, PassItem, run_source_pass

    ses = ROOT / "patterns" / "hospital_ca125_blood_then_consult.yaml"
    day = 86400 * 10**9
    items = [PassItem(p, t, low, hi) for p, t, low in zip(
        patterns, texts, ((lo + hi) // 2 + 10 * day, (lo + hi) // 2 + 20 * day, (lo + hi) // 2))]
    items.append(PassItem(load_pattern(ses), ses.read_text(), (lo + hi) // 2 + 5 * day, hi))
    pass_small = planning.SmallSources(lake)

    def prepare(events):
        planning.sample_together(events, pass_small, [(i.pattern, i.low, i.high)
                                                      for i in items[:3]], cache=False)
        return items

    sampled = frozenset(p.name for p in patterns)
    earliest = min(i.read_low for i in items)  # the pass's own range starts there
    reach = []
    run_source_pass(spark, lake, items, "pass", 0, 10**6, prepare=prepare, sampled=sampled)
    for item in items:
        p, name = item.pattern, item.pattern.name
        if name in sampled:
            alone = planning._spark_sample(spark, lake, p, item.low, item.high,
                                           list(p.partition_attributes),
                                           planning._sample_columns(p))
            together = pass_small.samples[planning._sample_key(p, item.low, item.high)]
            assert together.sort_by(order).equals(alone.sort_by(order)), name
            reach.append(pc.min(alone.column("ts")).as_py())
        run_match_job(spark, p, item.text, lake, "alone", item.low, item.high,
                      nightly[0].slice_length, 10**6)
        assert _staged(lake, name, "pass") == _staged(lake, name, "alone"), name
        lake.remove(lake.staging(name, "pass"))
        lake.remove(lake.staging(name, "alone"))
    assert min(parse_ts(t) for t in reach) < earliest  # a sample reaches back before it
    # a partition larger than max_partition_events (counted on the cached events): alone
    with pytest.raises(NotShared, match="more than 5 events"):
        run_source_pass(spark, lake, items, "pass", 0, 5, prepare=prepare, sampled=sampled)


def test_driver_check_frames_equal_the_spark_frames(spark, nightly, tmp_path):
    """A small night's check frames are computed on the driver (DuckDB); they equal the
    Spark frames column for column, type for type and row for row, for every committed
    pattern (windows, alternatives, negations, groups), broken rows included."""
    from functools import reduce

    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    from jobs.pipeline.check_frames import DriverFrames, StagedMatches
    from jobs.pipeline.quality import _check_frame

    lake = Lake(nightly[0].lake)
    staged = []
    for path in pattern_paths():
        pattern = load_pattern(path)
        staged.append(StagedMatches(pattern, "frames", None, None,
                                    _restaged(lake, pattern, "frames")))
    negated, rows = _staged_without_negation(nightly[0], tmp_path, "frames")
    staged.append(StagedMatches(negated, "frames", None, None, rows))
    driver = DriverFrames(lake, staged)
    # only the events some run binds are read
    fewer = [t.num_rows < lake.count_rows(lake.events(src)) for src, t in driver.events.items()]
    assert any(fewer), driver.events.keys()
    frames = [(s.pattern.name, _check_frame(spark, lake, s)) for s in staged]
    union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True),
                   [df.withColumn("__pattern", F.lit(name)) for name, df in frames]).toArrow()
    flags = {"times_ok": 0, "events_found_ok": 0, "distinct_events_ok": 0}
    counted = 0
    for s, (name, df) in zip(staged, frames):
        want = union.filter(pc.equal(union.column("__pattern"), name)).select(df.columns)
        got = driver.frame(s)
        assert got.column_names == want.column_names, name
        assert [f.type for f in got.schema] == [f.type for f in want.schema], name
        a, b = (x.to_pandas().sort_values("match_id", kind="stable").reset_index(drop=True)
                for x in (got, want))
        pd_testing.assert_frame_equal(a, b, obj=name)
        for flag in flags:
            flags[flag] += int((~a[flag]).sum())
        measured = [c for c in a.columns if c.startswith("m_")]
        counted += int(sum((a[c] == 0).sum() for c in measured))
        if name == negated.name:  # a negation's witnesses found and not found
            assert set(a["no_l_ok"]) == {True, False}
        lake.remove(lake.staging(name, "frames"))
    assert all(n > 0 for n in flags.values()), flags  # the broken rows were compared too
    assert counted > 0  # a count measure out of its bounds too


def test_tampered_staged_run_fails_validation_and_publishes_nothing(spark, tmp_path):
    import pyarrow.parquet as pq

    from jobs.pipeline.publish_steps import validate_step
    from jobs.pipeline.quality import ValidationFailed

    profile, _ = _chemo_profile(tmp_path)
    run_all(spark, profile, "2010-08-30", [P1], echo=lambda *_: None)
    lake = lk.Lake(profile.lake)
    published = published_ids(profile, "mw_chemo_p1")
    version = DeltaTable(lake.matches("mw_chemo_p1")).version()
    ctx = RunContext.start(profile, "tampered", "2010-08-31").for_pattern(Path(P1))
    planned = planned_range(ctx, rng=RunRange(None, horizon("2010-08-31", load_pattern(P1).tau, 0), True))
    match_step(spark, ctx, planned)
    staging = Path(lake.staging("mw_chemo_p1", "tampered"))
    files = sorted(staging.glob("*.parquet"))
    t = pa.concat_tables([pq.read_table(f) for f in files])
    for f in files:
        f.unlink()
    rows = t.to_pylist()
    first = next(r for r in rows if r["kind"] == "match")
    rows.append(dict(first))  # a duplicated match
    wrong = next(r for r in rows if r["kind"] == "match" and r is not first)
    wrong["bindings"] = wrong["bindings"].replace('"b": ["e12"]', '"b": ["e2"]')  # b before p
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), staging / "part-0.parquet",
                   coerce_timestamps="us")  # as Spark writes them (Spark reads no nanoseconds)
    with pytest.raises(ValidationFailed) as info:
        validate_step(spark, ctx)
    msg = str(info.value)
    assert "expect_column_values_to_be_unique(match_id)" in msg
    assert "expect_column_values_to_be_in_set(set_order_ok)" in msg
    with pytest.raises(ValidationFailed, match="failed validation, nothing published"):
        publish_step(spark, ctx)
    assert DeltaTable(lake.matches("mw_chemo_p1")).version() == version
    assert published_ids(profile, "mw_chemo_p1") == published


def test_window_row_contract(nightly):
    """A window pattern's table: bindings first/buffer/last and one typed column per
    select value (the local `match` command's `values`)."""
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).matches("paper_ex5_lab_to_home")).to_pyarrow_table()
    assert t.schema.field("duration").type == pa.float64()
    assert t.schema.field("steps").type == pa.int64()
    assert t.schema.field("person").type == pa.string()
    rows = sorted(t.to_pylist(), key=lambda r: r["start_ts"])
    assert [(dict(r["bindings"]), r["person"], r["duration"], r["steps"], r["n_events"])
            for r in rows] == [
        ({"first": ["l01"], "buffer": ["l03", "l07"], "last": ["l09"]}, "Tom", 5400.0, 4, 4),
        ({"first": ["l02"], "buffer": ["l04"], "last": ["l06"]}, "Ann", 2100.0, 3, 3),
        ({"first": ["l13"], "buffer": [], "last": ["l14"]}, "Ann", 3600.0, 2, 2)]
    arrived = DeltaTable(lk.Lake(profile.lake).matches("paper_ex4_next_room")).to_pyarrow_table()
    assert arrived.schema.field("arrived").type == pa.timestamp("us", tz="UTC")


def test_example_4_model_joins_windows_with_room_states(nightly):
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).model("paper_ex4_room_state")).to_pyarrow_table()
    got = sorted((r["person"], r["room"], r["state"]) for r in t.to_pylist())
    # the states of the room in the 2 minutes up to arriving; Bob's lab-to-lab is dropped
    assert got == [("Ann", "Cafe", "crowded"), ("Ann", "Home", "lights on"),
                   ("Bob", "Room 101", "empty"), ("Tom", "Room 101", "meeting")]
    passes = DeltaTable(lk.Lake(profile.lake).model("lab_to_home_passes")).to_pyarrow_table()
    assert sorted((r["person"], r["step"], r["location"]) for r in passes.to_pylist()) == [
        ("Ann", 1, "Cafe"), ("Tom", 1, "Room 101"), ("Tom", 2, "Corridor")]
    episodes = DeltaTable(lk.Lake(profile.lake).model("sepsis_episodes")).to_pyarrow_table()
    assert episodes.num_rows == len(published_ids(profile, "sepsis_er_episode"))
    assert sum(episodes.column("lab_tests").to_pylist()) > 0


def test_models_run_in_dependency_order_and_a_failing_test_keeps_the_table(spark, nightly,
                                                                           tmp_path,
                                                                           monkeypatch):
    from jobs.pipeline import models as model_step
    from jobs.pipeline import quality
    from jobs.pipeline.models import run_models

    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "b_top.sql").write_text("SELECT person, n FROM models_a_counts WHERE n > 1")
    (folder / "a_counts.sql").write_text(
        "SELECT person, count(*) AS n FROM matches_paper_ex5_lab_to_home GROUP BY person")
    (folder / "a_counts.yaml").write_text("tests:\n  - unique: [person]\n"
                                          "  - row_count: {min: 1, max: 10}\n")
    log = []
    rows = run_models(spark, lake, folder=folder, echo=log.append)
    assert [(r["model"], r["status"]) for r in rows] == [("a_counts", "success"), ("b_top", "success")]
    top = DeltaTable(lake.model("b_top")).to_pyarrow_table().to_pylist()
    assert top == [{"person": "Ann", "n": 2}]
    before = DeltaTable(lake.model("a_counts")).version()
    (folder / "a_counts.sql").write_text(
        "SELECT person, 1 AS n FROM matches_paper_ex5_lab_to_home")  # Ann twice: not unique
    rows = run_models(spark, lake, folder=folder, echo=log.append)
    assert [(r["model"], r["status"]) for r in rows] == [("a_counts", "failed"),
                                                         ("b_top", "skipped")]
    assert "expect_column_values_to_be_unique(person)" in rows[0]["message"]
    assert DeltaTable(lake.model("a_counts")).version() == before
    # the same tests on GX's Spark engine (a model too large for the driver), then on the
    # driver's again with a new process's GX context: the same verdicts
    for driver_rows in (-1, 10**6):
        monkeypatch.setattr(model_step, "DRIVER_ROWS", driver_rows)
        quality._CONTEXTS.clear()
        rows = run_models(spark, lake, folder=folder, echo=log.append)
        assert [(r["model"], r["status"]) for r in rows] == [("a_counts", "failed"),
                                                             ("b_top", "skipped")]
        assert "expect_column_values_to_be_unique(person)" in rows[0]["message"], rows
    assert DeltaTable(lake.model("a_counts")).version() == before


def _exploded(profile, name: str) -> list[tuple]:
    t = DeltaTable(lk.Lake(profile.lake).matches(name)).to_pyarrow_table(
        columns=["match_id", "bindings"])
    return sorted((m, var, i + 1, e) for m, b in zip(t.column("match_id").to_pylist(),
                                                     t.column("bindings").to_pylist())
                  for var, ids in b for i, e in enumerate(ids))


def test_match_events_views_equal_the_bindings_on_spark_and_duckdb(spark, nightly):
    from jobs.lake.views import duckdb_connection, register_spark

    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    views = register_spark(spark, lake)
    con, duck_views = duckdb_connection(lake)
    assert sorted(views) == sorted(duck_views) and "match_events" in views
    total = 0
    for path in pattern_paths():
        pattern = load_pattern(path)
        expected = _exploded(profile, pattern.name)
        sql = f"SELECT match_id, variable, position, event_id FROM match_events_{pattern.name}"
        assert sorted(tuple(r) for r in spark.sql(sql).collect()) == expected, pattern.name
        assert sorted(con.sql(sql).fetchall()) == expected, pattern.name
        total += len(expected)
        # with the event's own columns, as in events_<source>
        events = DeltaTable(lake.events(pattern.source)).to_pyarrow_table().to_pylist()
        by_id = {e["event_id"]: e for e in events}
        row = con.sql(f"SELECT * FROM match_events_{pattern.name} LIMIT 1").to_arrow_table() \
            .to_pylist()[0]
        assert {k: v for k, v in row.items() if k in by_id[row["event_id"]]} == \
            by_id[row["event_id"]]
    assert spark.sql("SELECT count(*) FROM match_events").collect()[0][0] == total
    assert con.sql("SELECT count(*) FROM match_events").fetchall()[0][0] == total


FAST_QUERIES = [
    "SELECT e.pattern, count(*) AS n, min(m.start_ts) AS first, max(m.n_events) AS most "
    "FROM match_events e JOIN matches_sepsis_rising_crp_then_icu m ON e.match_id = m.match_id "
    "GROUP BY e.pattern",
    "SELECT patient, count(*) AS n FROM matches_sepsis_rising_crp_then_icu GROUP BY patient "
    "ORDER BY n DESC, patient LIMIT 5",
    "SELECT variable, count(DISTINCT event_id) AS events FROM match_events_mw_chemo_p1 "
    "GROUP BY variable ORDER BY variable",
    "SELECT pattern, status, matches FROM runs ORDER BY pattern",
    "SELECT event_type, count(*) AS n FROM events_sepsis GROUP BY event_type ORDER BY n DESC, "
    "event_type",
    "SELECT r.room, count(*) AS n FROM events_locations e JOIN reference_room_state r "
    "ON e.location = r.room GROUP BY r.room ORDER BY r.room",
]


@pytest.mark.parametrize("sql", FAST_QUERIES)
def test_fast_query_path_equals_spark(spark, nightly, sql):
    from jobs.lake.views import duckdb_connection, register_spark

    lake = lk.Lake(nightly[0].lake)
    register_spark(spark, lake)
    con, _ = duckdb_connection(lake, sql)
    duck = con.sql(sql).to_arrow_table()
    ours = spark.sql(sql).toArrow()
    assert duck.num_rows > 0
    assert [list(r.values()) for r in duck.to_pylist()] == \
        [list(r.values()) for r in ours.to_pylist()]


def test_spark_views_are_those_of_the_last_lake_registered(spark, tmp_path):
    """A table only the first lake has must not answer queries over the second (pr-check
    and the models register one lake after another on one session)."""
    from jobs.lake.views import register_spark

    first, second = lk.Lake(str(tmp_path / "a")), lk.Lake(str(tmp_path / "b"))
    first.append(first.events("only_a"), pa.table({"event_id": ["x"]}))
    for lake, n in ((first, 1), (second, 2)):
        lake.append(lake.retractions(), pa.table({"retraction_id": [f"r{i}" for i in range(n)]}))
    assert "events_only_a" in register_spark(spark, first)
    assert "events_only_a" not in register_spark(spark, second)
    assert not spark.catalog.tableExists("events_only_a")
    assert spark.sql("SELECT count(*) AS n FROM retractions").first()["n"] == 2


def test_query_command_formats_and_fallback(nightly, monkeypatch, capsys, tmp_path):
    import csv
    import io
    import json

    from jobs.cli.main import main

    profile = nightly[0]
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  test:\n    landing: {profile.landing}\n"
                    f"    lake: {profile.lake}\n    spark: {{master: 'local[1]'}}\n")
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    sql = "SELECT match_id, bindings, start_ts FROM matches_mw_chemo_p1 ORDER BY match_id"
    assert main(["query", "--profile", "test", "--format", "json", sql]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and all(isinstance(r["bindings"], dict) for r in rows)
    assert main(["query", "--profile", "test", "--format", "csv", sql]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["match_id"] for r in table] == [r["match_id"] for r in rows]
    assert json.loads(table[0]["bindings"]) == rows[0]["bindings"]
    assert main(["query", "--profile", "test", "--limit", "2", sql]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["match_id", "bindings", "start_ts"]
    assert "(2 rows (the limit" in out
    # a query only Spark SQL reads falls back to Spark, and says so
    assert main(["query", "--profile", "test", "SELECT explode(array(1, 2)) AS x"]) == 0
    captured = capsys.readouterr()
    assert "running it on Spark" in captured.err and captured.out.split()[:4] == ["x", "-", "1", "2"]
    assert main(["query", "--profile", "test", "--engine", "duckdb", "SELECT * FROM nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_match_tables_carry_their_pattern_in_delta_metadata(nightly):
    profile = nightly[0]
    pattern = load_pattern("patterns/sepsis_rising_crp_then_icu.yaml")
    dt = DeltaTable(lk.Lake(profile.lake).matches(pattern.name))
    meta = dt.metadata()
    assert meta.name == pattern.name and meta.description == pattern.description.strip()
    assert meta.configuration["ses.pattern.path"] == "patterns/sepsis_rising_crp_then_icu.yaml"
    assert meta.configuration["ses.pattern.version"] == pattern.version
    assert meta.configuration["ses.pattern.source"] == "sepsis"
    comments = {f.name: (f.metadata or {}).get(b"comment", b"").decode()
                for f in dt.schema().to_arrow()}
    assert all(comments.values()), comments
    assert "partition attribute 'patient'" in comments["patient"]


def _chromium() -> str:
    import shutil as sh

    found = sh.which("chromium") or sh.which("chromium-browser")
    assert found, "the catalogue tests need headless Chromium: `make test` installs it " \
                  "(Debian: apt-get install chromium)"
    return found


def screenshot(page: Path, out: Path):
    """A real headless Chromium renders the page; returns the picture's pixels."""
    import subprocess

    import matplotlib.image as mpimg

    proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--window-size=1200,1600",
                           f"--screenshot={out}", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert out.exists(), proc.stderr[-2000:]
    return mpimg.imread(out)


@pytest.mark.browser
def test_catalogue_site_opens_offline_in_a_headless_browser(nightly, tmp_path):
    import dataclasses
    import re

    import numpy as np

    from jobs.pipeline.run import site_step

    profile = dataclasses.replace(nightly[0], site=str(tmp_path / "site"))
    log = []
    site_step(RunContext.start(profile, "site"), log.append)
    site = tmp_path / "site"
    assert any(line.startswith("catalogue:") for line in log), log
    pages = {"index": site / "index.html",
             "sequence pattern": site / "patterns" / "sepsis_rising_crp_then_icu.html",
             "window pattern": site / "patterns" / "paper_ex5_lab_to_home.html",
             "disjunction": site / "patterns" / "sepsis_escalation_either_way.html",
             "source": site / "sources" / "sepsis.html", "runs": site / "runs.html",
             "quality": site / "quality.html", "models": site / "models.html"}
    for kind, page in pages.items():
        html = page.read_text()
        # offline: nothing is loaded from the network, every picture is there
        assert not re.search(r"""<(script|link)[^>]*(src|href)=["']https?:""", html), kind
        for src in re.findall(r'<img src="([^"]+)"', html):
            assert (page.parent / src).resolve().is_file(), (kind, src)
        pixels = screenshot(page, tmp_path / f"{kind.replace(' ', '_')}.png")
        assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000, kind
        colors = len(np.unique(pixels.reshape(-1, pixels.shape[-1])[::97], axis=0))
        assert colors > 20, f"{kind}: the screenshot looks blank ({colors} colors)"
    seq = pages["sequence pattern"].read_text()
    for part in ("patterns/sepsis_rising_crp_then_icu.yaml", "rising CRP values",
                 "Matches per month", "A few matches", "partition attribute",
                 "CRP rises twice"):
        assert part in seq, part
    assert "Admission IC" in pages["source"].read_text()
    quality = pages["quality"].read_text()
    assert "matches_sepsis_rising_crp_then_icu" in quality and "__none__" not in quality
    index = pages["index"].read_text()
    assert all(f"patterns/{load_pattern(p).name}.html" in index for p in pattern_paths())
    # built again on the same lake: every picture is the previous build's, none is drawn
    before = {p.name: p.read_bytes() for p in (site / "img").glob("*.png")}
    site_step(RunContext.start(profile, "site"), log.append)
    assert re.search(r"pictures: 0 drawn, [1-9]\d* unchanged", log[-1]), log[-1]
    assert {p.name: p.read_bytes() for p in (site / "img").glob("*.png")} == before


def test_readme_recipes_run_offline_on_the_lake(nightly, capsys):
    """The README's pandas, Polars and DuckDB recipes, as written, on the nightly lake."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Querying the results"):readme.index("## Running on")]
    recipes = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(recipes) == 3
    lake = nightly[0].lake
    for code in recipes:
        exec(compile(code.replace('"lake/', f'"{lake}/'), "README", "exec"), {})
    out = capsys.readouterr().out
    assert "variable" in out  # pandas: the mean per variable
    assert "2014-" in out  # Polars: months
    assert "patient" in out and "sepsis_rising_crp_then_icu" in out  # DuckDB


def test_phase_two_tasks_follow_the_events(spark):
    """One task per core at least, one per ``EVENTS_PER_TASK`` events, at most the
    shuffle's partitions (a source pass counts the events it keeps, in its cache)."""
    from jobs.spark.session import EVENTS_PER_TASK, cores, match_tasks

    most, slots = int(spark.conf.get("spark.sql.shuffle.partitions")), cores(spark)
    assert match_tasks(spark, 0) == min(most, slots)
    assert match_tasks(spark, EVENTS_PER_TASK * (slots + 1)) == min(most, slots + 1)
    assert match_tasks(spark, 10**12) == most
