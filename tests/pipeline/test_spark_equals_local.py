"""Phase 1 and 2 on real Spark equal the local matcher: every pattern, with and without time
slices, measures, disjunctions with contiguity and negation, source passes (several
patterns in one job) and the tasks phase 2 gets."""

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from jobs.core.engine.output import match_id_of
from jobs.core.language.events import format_ts
from jobs.core.language.patternfile import load_pattern
from jobs.core.local.runner import run
from jobs.lake import store as lk
from jobs.pipeline.context import RunContext
from jobs.pipeline.match.horizons import RunRange, horizon
from jobs.pipeline.match.steps import match_step, planned_range
from jobs.pipeline.run import run_all
from jobs.project.patterns import pattern_paths, row_pattern_paths

from ..conftest import LOGICAL_DATE, ROOT
from ..lakes import P1, chemo_profile, events_from_lake, local_ids, published_ids, staged_rows

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


def test_every_pattern_spark_equals_local(nightly):
    profile, rows, log = nightly
    models = [r for r in rows if "model" in r]
    rows = [r for r in rows if "pattern" in r]
    assert {r["pattern"] for r in rows} == {load_pattern(p).name for p in pattern_paths()} | \
        {p.stem for p in row_pattern_paths()}  # row patterns: tests/pipeline/test_row_pattern_night
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
        arrow = {"integer": pa.int64(), "double": pa.float64(), "string": pa.string(),
                 "timestamp": pa.timestamp("us", tz="UTC")}
        for name in pattern.measure_names:
            field = pa.schema(schema).field(name)
            assert field.type == arrow[types[name]], name
            assert b"measure" in (field.metadata or {}).get(b"comment", b""), name
        rows = table.to_pyarrow_table(columns=["match_id", *pattern.measure_names]).to_pylist()
        got = {r.pop("match_id"): {k: format_ts(int(v.timestamp()) * 10**9)
                                   if types[k] == "timestamp" and v is not None else v
                                   for k, v in r.items()} for r in rows}
        assert got == want, pattern.name
    assert checked, "a committed pattern should have measures"


def test_a_source_pass_equals_each_pattern_alone(spark, nightly, monkeypatch):
    """The shareable committed patterns of each source, in one pass and one by one, with
    start ranges that differ per pattern: the same staged rows and the same counters;
    both prune the partitions without a start before their shuffle, as a large night
    does."""
    from jobs.pipeline.match.phase1 import MatchJob, run_match_job
    from jobs.pipeline.match.source_pass import PassItem, pass_groups, run_source_pass
    from jobs.runrecord import COUNTERS
    from jobs.spark import predicates

    monkeypatch.setattr(predicates, "PRUNE_BEFORE_SHUFFLE", 0)

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
            alone = run_match_job(spark, lake, MatchJob(item.pattern, item.text, "alone",
                                                        item.low, item.high, length, 10**6))
            name = item.pattern.name
            assert staged_rows(lake, name, "pass") == staged_rows(lake, name, "alone"), name
            for c in COUNTERS:
                assert shared[name].stats[c] == alone.stats[c], (name, c)
            assert (shared[name].stats["matches"] > 0) == (item is not group[-1]), name
            lake.remove(lake.staging(name, "pass"))
            lake.remove(lake.staging(name, "alone"))


def test_a_failed_source_pass_is_retried_pattern_by_pattern(spark, tmp_path, monkeypatch):
    """A pass that dies takes no pattern down: each is matched alone and published."""
    from jobs.pipeline.match import steps as match_steps

    profile, _ = chemo_profile(tmp_path)
    folder = tmp_path / "patterns"
    folder.mkdir()
    text = Path(P1).read_text()
    for name in ("first_p1", "second_p1"):
        (folder / f"{name}.yaml").write_text(text.replace("name: mw_chemo_p1", f"name: {name}"))

    def dies(*args, **kw):
        raise RuntimeError("executor lost")

    monkeypatch.setattr(match_steps, "run_source_pass", dies)
    log = []
    rows = run_all(spark, profile, "2010-08-30", [str(p) for p in sorted(folder.iterdir())],
                   echo=log.append)
    assert [(r["pattern"], r["status"]) for r in rows] == [("first_p1", "success"),
                                                            ("second_p1", "success")]
    assert any("did not finish (RuntimeError: executor lost)" in line for line in log), log
    assert len(published_ids(profile, "first_p1")) == len(published_ids(profile, "second_p1")) == 3


def test_every_pattern_with_time_slices(spark, nightly):
    # slices of 30 days (the committed windows are 2 h to 60 d, so events reach into one
    # to three slices), a fraction of the groups of 7-day slices (each group is one
    # matcher call); phase 2's own tests cut slices of a few days. The patterns' jobs run
    # side by side on threads, as a night's ``match.parallel_jobs`` do. Without funnels:
    # this test compares the matches, and a funnel counted group by group (tests/tools/
    # test_funnel.py, with a pattern cut in time slices) was half of each sliced job.
    profile = replace(nightly[0], slice_length=30 * 86400 * 10**9, funnels=False)

    def sliced(path):
        ctx = RunContext.start(profile, "sliced", LOGICAL_DATE).for_pattern(path)
        planned = planned_range(ctx, rng=RunRange(None, horizon(LOGICAL_DATE, load_pattern(path).tau, 0),
                                         True))
        return planned, match_step(spark, ctx, planned, force_slices=True).stats

    with ThreadPoolExecutor(max_workers=3) as pool:
        done = list(pool.map(sliced, pattern_paths()))
    for planned, stats in done:
        episodes = planned.pattern.after_match != "all" or getattr(planned.pattern,
                                                                    "whole_history", False)
        # after_match takes episodes over whole partitions, history conditions count
        # whole partitions: never sliced
        assert stats["sliced"] == ("no" if episodes else "all")
        if planned.pattern.kind != "window" and not episodes:  # locations: one day, one slice
            assert stats["groups"] > stats["partitions"]
        staged = pa.dataset.dataset(lk.Lake(profile.lake).staging(planned.pattern.name, "sliced"),
                                    format="parquet").to_table().to_pylist()
        ids = {r["match_id"] for r in staged if r["kind"] == "match"}
        assert ids == published_ids(profile, planned.pattern.name), planned.pattern.name


def _staged_toy(spark, profile, tmp_path, text: str, force_slices: bool):
    """A pattern file's whole history matched by phases 1 and 2 into staging: (pattern,
    range, counters, staged match rows)."""
    pattern = load_pattern(_written(tmp_path, text))
    path = Path(pattern.path)
    rng = RunRange(None, horizon(LOGICAL_DATE, pattern.tau, 0), True)
    ctx = RunContext.start(profile, "toy", LOGICAL_DATE).for_pattern(path, pattern)
    stats = match_step(spark, ctx, planned_range(ctx, rng=rng), force_slices=force_slices).stats
    staged = pa.dataset.dataset(lk.Lake(profile.lake).staging(pattern.name, "toy"),
                                format="parquet").to_table().to_pylist()
    return pattern, rng, stats, [r for r in staged if r["kind"] == "match"]


def _written(tmp_path, text: str) -> Path:
    name = text.split("\n", 1)[0].split(":", 1)[1].strip()
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("force_slices", [False, True])
def test_disjunction_with_contiguity_and_negation_spark_equals_local(spark, nightly, tmp_path,
                                                                       force_slices):
    """Each alternative gets its own contiguity positions in phase 1 (partition positions
    by its own X, strict over the source); no common X, so time slices over all events."""
    profile = nightly[0]
    pattern, rng, stats, matches = _staged_toy(spark, profile, tmp_path, DISJUNCTION,
                                               force_slices)
    expected = local_ids(profile, pattern, high=rng.high)
    assert {r["match_id"] for r in matches} == expected and len(matches) == len(expected)
    assert {r["alternative"] for r in matches} == {1, 2} and stats["sliced"] == "all"
    if not force_slices:  # the match suite checks each row against its own alternative
        from jobs.pipeline.validate.quality import validate_matches

        outcome = validate_matches(spark, lk.Lake(profile.lake), pattern, "toy", rng.low, rng.high)
        assert outcome.success, outcome.describe()
        assert outcome.evaluated > 15  # the common checks and each alternative's own


def test_phase_two_tasks_follow_the_events(spark):
    """One task per core at least, one per ``EVENTS_PER_TASK`` events, at most the
    shuffle's partitions (a source pass counts the events it keeps, in its cache)."""
    from jobs.spark.session import EVENTS_PER_TASK, cores, match_tasks

    most, slots = int(spark.conf.get("spark.sql.shuffle.partitions")), cores(spark)
    assert match_tasks(spark, 0) == min(most, slots)
    assert match_tasks(spark, EVENTS_PER_TASK * (slots + 1)) == min(most, slots + 1)
    assert match_tasks(spark, 10**12) == most


FOURTH_STEP = """name: toy_fourth_step
source: sepsis
within: 1d
matcher: zstream
sets:
  - [r]
  - ['t?']
  - ['c{0,2}']
  - [a]
  - ['not next f']
conditions:
  - r.event_type = 'ER Registration'
  - t.event_type = 'ER Triage'
  - c.event_type = 'CRP' and c.value >= first(c.value)
  - a.event_type in ('IV Antibiotics', 'IV Liquid')
  - f.event_type = 'IV Liquid'
  - r.patient = a.patient
  - t.patient = a.patient
  - c.patient = a.patient
  - hour(a.ts) >= 6
measures:
  crp_days: count(distinct date(c.ts))
  triaged: count(t)
"""


@pytest.mark.parametrize("force_slices", [False, True])
def test_fourth_step_spark_equals_local(spark, nightly, force_slices, tmp_path):
    """Optional steps (ZStream: each expansion planned by the engine), a running condition,
    [not next f] (positions numbered in phase 1 by X), a time function and a distinct
    count: Spark's staged matches and measures equal the local engine's, sliced or not."""
    profile = nightly[0]
    pattern, rng, _, matches = _staged_toy(spark, profile, tmp_path, FOURTH_STEP, force_slices)
    expected = local_ids(profile, pattern, high=rng.high)
    assert expected and {r["match_id"] for r in matches} == expected
    assert len(matches) == len(expected)
    import json

    events = events_from_lake(profile, pattern.source)
    want = {match_id_of(pattern, m): dict(m.measures) for m in run(pattern, events)[0]}
    assert {r["match_id"]: json.loads(r["values"]) for r in matches} == \
        {k: v for k, v in want.items() if k in expected}


def test_after_match_nights_go_on_from_the_previous_horizon(nightly):
    """A pattern with after_match: which episodes are kept depends on the previous kept
    match of the partition, which the published table holds, so a later night goes on
    from the previous run's horizon (resuming each partition's walk), as a pattern without
    it does."""
    from datetime import date, timedelta

    profile = nightly[0]
    later = (date.fromisoformat(LOGICAL_DATE) + timedelta(days=1)).isoformat()
    ranges = {}
    for name in ("mw_chemo_courses", "mw_chemo_p1"):
        path = ROOT / "patterns" / f"{name}.yaml"
        pattern = load_pattern(path)
        ctx = RunContext.start(profile, "later", later).for_pattern(path, pattern)
        ranges[name] = planned_range(ctx).rng
    assert ranges["mw_chemo_courses"].low is not None and not ranges["mw_chemo_courses"].full
    assert ranges["mw_chemo_p1"].low is not None


ONE_PATIENT_EPISODES = """name: toy_one_patient_crp_episodes
source: sepsis
within: 2d
sets:
  - ['c{2,}']
conditions:
  - c.event_type = 'CRP'
  - c.patient = c.patient
  - c.value <= c.value
after_match: past_last_event
"""


def test_a_group_related_to_itself_is_one_patient_on_spark(spark, nightly, tmp_path):
    """``c.patient = c.patient`` relates every two events of the group (patient becomes
    the partition attribute, so a pattern of one variable takes episodes); ``c.value <=
    c.value`` every earlier event to every later one. Spark's staged matches equal the
    local engine's, each of one patient, non-decreasing."""
    profile = nightly[0]
    pattern, rng, _, matches = _staged_toy(spark, profile, tmp_path, ONE_PATIENT_EPISODES,
                                           False)
    assert pattern.partition_attributes == ("patient",)
    expected = local_ids(profile, pattern, high=rng.high)
    assert expected and {r["match_id"] for r in matches} == expected
    events = events_from_lake(profile, pattern.source)
    found = run(pattern, events)[0]
    groups = [dict(m.bindings)["c"] for m in found]
    assert groups and all(len({e.values["patient"] for e in g}) == 1 for g in groups)
    assert all([e.values["value"] for e in g] == sorted(e.values["value"] for e in g)
               for g in groups)


WHOLE_SOURCE_EPISODES = """name: toy_whole_source_lactic_runs
source: sepsis
within: 1d
sets:
  - ['l{3}']
conditions:
  - l.event_type = 'LacticAcid'
after_match: past_last_event
"""


def test_episodes_of_the_whole_source_on_spark(spark, nightly, tmp_path):
    """``after_match`` on a pattern of one variable without partition attributes (Flink's
    ``times(3)`` with skip past last, on an unkeyed stream): its episodes are taken over
    the whole source, one group that Spark never cuts into time slices (asked to or not).
    Spark's staged matches equal the local engine's and the oracle's; no two overlap in
    time order, and fewer are kept than every match."""
    from jobs.core.reference import oracle

    profile = nightly[0]
    pattern, rng, stats, matches = _staged_toy(spark, profile, tmp_path,
                                               WHOLE_SOURCE_EPISODES, force_slices=True)
    assert pattern.partition_attributes == () and stats["sliced"] == "no"
    expected = local_ids(profile, pattern, high=rng.high)
    assert expected and {r["match_id"] for r in matches} == expected
    events = events_from_lake(profile, pattern.source)
    kept = [m for m in oracle.ses_exec(pattern, events) if m.start.ts < rng.high]
    assert {match_id_of(pattern, m) for m in kept} == expected
    spans = sorted((m.start.seq, m.end.seq) for m in kept)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # past the last event
    every = {match_id_of(pattern, m) for m in run(replace(pattern, after_match="all"),
                                                  events)[0]}
    assert expected < every
