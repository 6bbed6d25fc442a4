"""ZStream plans chosen on the driver (``jobs.pipeline.match.planning``): recorded in the runs log,
sampled on the driver or on Spark alike, together or one by one."""

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from jobs.core.language.patternfile import load_pattern
from jobs.core.plans.planners import DEFAULT
from jobs.lake import store as lk
from jobs.lake.store import Lake
from jobs.project.patterns import pattern_paths

from ..conftest import ROOT
from ..lakes import staged_rows


def test_runs_log_records_the_drivers_plan(nightly):
    profile, rows, _ = nightly
    night = {r["run_id"] for r in rows if "pattern" in r}  # (the lake's idle reruns plan nothing)
    runs = [r for r in DeltaTable(lk.Lake(profile.lake).runs()).to_pyarrow_table().to_pylist()
            if r["run_id"] in night]
    zstream = [r for r in runs if r["matcher"] == "zstream" and r["status"] == "success"]
    ses = [r for r in runs if r["matcher"] == "ses" and r["status"] == "success"]
    assert zstream and ses
    for r in zstream:
        assert r["plan_generator"] == DEFAULT and "⋈" in r["plan"], r
        assert r["estimated_pm"] > 0 and r["actual_pm"] > 0, r
    assert all(r["plan"] is None for r in ses)


def test_plan_samples_of_small_sources_on_the_driver_equal_spark_samples(spark, nightly):
    """A small source's plan statistics come from its events read once on the driver,
    unfiltered; they equal the statistics of Spark's filtered sample, for every committed
    sequence pattern, over the whole history or over a range cut in its middle (every
    other pattern each: each Spark sample is a job of its own)."""
    from jobs.core.language.events import parse_ts
    from jobs.pipeline.match.planning import SAMPLE_EVENTS, SmallSources, sample_statistics

    lake = Lake.of_profile(nightly[0])
    small = SmallSources(lake)
    checked = cut = 0
    for path in pattern_paths():
        pattern = load_pattern(path)
        if pattern.kind == "window" or small.events(pattern.source) is None:
            continue
        assert small.events(pattern.source).num_rows <= SAMPLE_EVENTS
        ts = small.events(pattern.source).column("ts")
        lo, hi = (parse_ts(x.as_py()) for x in (pc.min(ts), pc.max(ts)))
        low, high = ((lo + hi) // 2 - pattern.tau, hi) if checked % 2 else (None, None)
        assert sample_statistics(spark, lake, pattern, low, high, small) == \
            sample_statistics(spark, lake, pattern, low, high), (pattern.name, low, high)
        checked += 1
        cut += low is not None
    assert checked >= 15 and cut >= 7  # every committed sequence pattern's source is small


def test_plan_samples_taken_together_equal_each_patterns_own(spark, nightly, monkeypatch):
    """A large source's ZStream patterns are sampled by two Spark jobs in all
    (``sample_many``); each pattern's rows equal its own ``_spark_sample``, whether its
    range is hash-sampled (over ``SAMPLE_EVENTS``) or taken whole, and so do its plan
    statistics."""
    import re

    from jobs.core.language.events import parse_ts
    from jobs.core.language.patternfile import parse_pattern
    from jobs.pipeline.match import planning

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
    from jobs.pipeline.match.phase1 import MatchJob, run_match_job
    from jobs.pipeline.match.source_pass import NotShared, PassItem, run_source_pass

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
        run_match_job(spark, lake, MatchJob(p, item.text, "alone", item.low, item.high,
                                            nightly[0].slice_length, 10**6))
        assert staged_rows(lake, name, "pass") == staged_rows(lake, name, "alone"), name
        lake.remove(lake.staging(name, "pass"))
        lake.remove(lake.staging(name, "alone"))
    assert min(parse_ts(t) for t in reach) < earliest  # a sample reaches back before it
    # a partition larger than max_partition_events (counted on the cached events): alone
    with pytest.raises(NotShared, match="more than 5 events"):
        run_source_pass(spark, lake, items, "pass", 0, 5, prepare=prepare, sampled=sampled)


def test_a_nights_statistics_are_read_for_its_dates_only(nightly):
    """The night's copy of ``stats/<source>`` holds the dates its patterns asked for (the
    table grows by a file a day): the date statistics and partition shapes it gives equal
    those read from the lake, whatever the order of the ranges asked (narrow, wider on
    either side, inside, open)."""
    from jobs.core.language.events import parse_ts
    from jobs.pipeline.match import planning

    lake = Lake.of_profile(nightly[0])
    ts = lake.read_arrow(lake.events("hospital"), columns=["ts"]).column("ts")
    lo, hi = (parse_ts(x.as_py()) for x in (pc.min(ts), pc.max(ts)))
    day, mid = 86400 * 10**9, (lo + hi) // 2
    every = lake.read_arrow(lake.stats("hospital")).column("event_date")
    small = planning.SmallSources(lake)
    ranges = [(mid, mid + day, day), (mid - 20 * day, mid, 2 * day), (mid, mid + 30 * day, day),
              (mid + day, mid + 2 * day, day), (None, mid, day), (None, None, day)]
    held = []
    for low, high, tau in ranges:
        assert planning.read_date_stats(lake, "hospital", low, high, tau, small) == \
            planning.read_date_stats(lake, "hospital", low, high, tau), (low, high)
        assert planning.partition_shape(lake, "hospital", ("patient",), low, high, tau,
                                        small) == \
            planning.partition_shape(lake, "hospital", ("patient",), low, high, tau)
        held.append(small.stats_tables["hospital"][1].num_rows)
    assert held[0] < held[1] < held[2] == held[3] < held[5]  # a range inside: no new read
    assert held[5] == len(every)
