"""Night after night on real Spark and Delta: a rerun changes nothing, incremental nights add
up to a full recompute, late events are counted, a backfill recomputes its range, a new
pattern version recomputes everything."""

from pathlib import Path

from deltalake import DeltaTable

from jobs.core.language.patternfile import load_pattern
from jobs.lake import store as lk
from jobs.pipeline.match.horizons import plan_range
from jobs.pipeline.run import backfill, run_all
from jobs.project.patterns import pattern_paths, row_pattern_paths

from ..conftest import LOGICAL_DATE
from ..lakes import P1, chemo_profile, local_ids, published_ids

CHEMO_TWO = [P1, str(Path(P1).with_name("mw_chemo_courses.yaml"))]


def test_rerun_of_the_same_logical_date_changes_nothing(spark, nightly):
    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    names = [load_pattern(p).name for p in pattern_paths()] + [p.stem for p in row_pattern_paths()]
    before = {n: DeltaTable(lake.matches(n)).version() for n in names}
    events_before = DeltaTable(lake.events("hospital")).version()
    runs_before = DeltaTable(lake.runs()).version()
    rows = run_all(spark, profile, LOGICAL_DATE, echo=lambda *_: None)
    assert all(r["inserted"] == 0 and r["deleted"] == 0 for r in rows if "pattern" in r)
    # nothing was written since the night: every pattern is idle (no Spark job)
    assert all(r.get("idle") for r in rows if "pattern" in r)
    assert {n: DeltaTable(lake.matches(n)).version() for n in names} == before
    assert DeltaTable(lake.events("hospital")).version() == events_before
    runs = DeltaTable(lake.runs()).to_pyarrow_table().to_pylist()
    assert len(runs) == 2 * len(names) and {r["status"] for r in runs} == {"success"}
    # runs that committed nothing are logged together: one append for all their rows
    assert DeltaTable(lake.runs()).version() == runs_before + 1


def test_a_rerun_with_nothing_new_starts_no_spark_and_a_change_undoes_that(spark, tmp_path):
    """A rerun of a full night whose events and match tables nothing wrote since is idle
    (``match_steps.repeats_last_run``): no Spark, the same tables. A lost match table or a
    new event makes the next rerun a real one again, with the tables a first run gives."""
    from .test_model_runs import NoSpark

    profile, landing = chemo_profile(tmp_path)
    paths = CHEMO_TWO
    patterns = [load_pattern(p) for p in paths]
    lake = lk.Lake(profile.lake)
    quiet = dict(echo=lambda *_: None)
    first = run_all(spark, profile, "2010-08-30", paths, **quiet)
    assert all(r["full_recompute"] and not r.get("idle") for r in first)
    versions = {p.name: DeltaTable(lake.matches(p.name)).version() for p in patterns}
    ids = {p.name: published_ids(profile, p.name) for p in patterns}
    no_spark = NoSpark()
    again = run_all(no_spark, profile, "2010-08-30", paths, **quiet)
    assert not no_spark.used
    assert [(r["status"], r.get("idle"), r["full_recompute"], r["inserted"], r["deleted"])
            for r in again] == [("success", True, True, 0, 0)] * 2
    assert [r["horizon_high"] for r in again] == [r["horizon_high"] for r in first]
    assert {p.name: DeltaTable(lake.matches(p.name)).version() for p in patterns} == versions
    # the first pattern's table lost: it is matched again, the other stays idle
    lake.remove(lake.matches(patterns[0].name))
    third = run_all(spark, profile, "2010-08-30", paths, **quiet)
    assert [r.get("idle") for r in third] == [None, True]
    assert published_ids(profile, patterns[0].name) == ids[patterns[0].name]
    # a new event: every pattern of its source is matched again
    (landing / "chemo_mw" / "late.csv").write_text(
        "event_id,patient,type,value,unit,ts\ne15,1,P,100,mg,2010-07-04T00:00:00\n")
    fourth = run_all(spark, profile, "2010-08-30", paths, **quiet)
    assert [r.get("idle") for r in fourth] == [None, None]
    for p in patterns:
        assert published_ids(profile, p.name) == local_ids(profile, p)
    # another logical date's run is not repeated by a rerun of this one
    run_all(spark, profile, "2010-08-31", paths, **quiet)
    assert [r.get("idle") for r in run_all(spark, profile, "2010-08-30", paths, **quiet)] \
        == [None, None]


def test_incremental_nights_late_events_and_backfill(spark, tmp_path):
    profile, landing = chemo_profile(tmp_path)
    p1 = [P1]
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
    profile, landing = chemo_profile(tmp_path)
    path = tmp_path / "p1.yaml"
    original = Path(P1).read_text()
    path.write_text(original)
    quiet = dict(echo=lambda *_: None)
    first = run_all(spark, profile, "2010-08-30", [str(path)], **quiet)[0]
    v1 = load_pattern(path).version
    path.write_text(original.replace("within: 15d", "within: 9d"))
    changed = load_pattern(path)
    assert changed.version != v1
    runs = DeltaTable(lk.Lake(profile.lake).runs()).to_pyarrow_table().to_pylist()
    assert not plan_range("2010-08-31", changed.tau, 0, changed.version, runs).low
    # it removes most of the published matches: held unless accepted (test_operators_night)
    second = run_all(spark, profile, "2010-08-31", [str(path)], accept_changes=[changed.name],
                     **quiet)[0]
    assert first["full_recompute"] and second["full_recompute"]
    t = DeltaTable(lk.Lake(profile.lake).matches(changed.name)).to_pyarrow_table()
    assert set(t.column("pattern_version").to_pylist()) == {changed.version}
    assert published_ids(profile, changed.name) == local_ids(profile, changed)
    assert second["deleted"] >= 1  # the old version's rows went in the same commit


def test_a_night_with_nothing_new_starts_no_spark_and_changes_nothing(spark, tmp_path):
    """Idle patterns (match_steps.is_idle): the events table not written since the last
    run, and no event in the night's range: no Spark, no publish, a success row each."""
    from .test_model_runs import NoSpark

    profile, landing = chemo_profile(tmp_path)
    paths = CHEMO_TWO
    names = [load_pattern(p).name for p in paths]
    lake = lk.Lake(profile.lake)
    log = []
    first = run_all(spark, profile, "2010-08-30", paths, echo=log.append)
    assert all(r["status"] == "success" and not r.get("idle") for r in first)
    versions = {n: DeltaTable(lake.matches(n)).version() for n in names}
    idle = NoSpark()
    log.clear()
    second = run_all(idle, profile, "2010-08-31", paths, echo=log.append)
    assert not idle.used
    assert [(r["status"], r.get("idle"), r["inserted"], r["deleted"]) for r in second] == [
        ("success", True, 0, 0)] * 2
    assert not second[0]["full_recompute"]  # after_match too: nothing to take again
    assert all(r["horizon_low"] == f["horizon_high"] for r, f in zip(second, first))
    assert {n: DeltaTable(lake.matches(n)).version() for n in names} == versions
    assert any("(nothing new: no Spark)" in line for line in log)
    assert not any(line.startswith("match ") for line in log)  # no range for an idle night
    # a new file makes the next night a real one again, counted as late where it is late
    (landing / "chemo_mw" / "late.csv").write_text(
        "event_id,patient,type,value,unit,ts\ne15,1,P,100,mg,2010-07-04T00:00:00\n")
    third = run_all(spark, profile, "2010-09-01", paths, echo=lambda *_: None)
    assert [r.get("idle") for r in third] == [None, None]
    # the episodes resume from the late event's partition's last kept match: no full night
    assert third[0]["late_events"] == 1 and not third[1]["full_recompute"]
    assert published_ids(profile, names[0]) != local_ids(profile, load_pattern(paths[0]))
    assert published_ids(profile, names[1]) == local_ids(profile, load_pattern(paths[1]))
