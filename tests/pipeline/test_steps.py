"""The per-pattern steps' failures: publish needs a staged run, an executor's error is
reported by its cause, a tampered staged run fails validation and publishes nothing, and
the driver's check frames equal Spark's."""

from pathlib import Path

import pandas.testing as pd_testing
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from jobs.core.language.patternfile import load_pattern
from jobs.core.local.runner import run
from jobs.lake import store as lk
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.match.horizons import RunRange, horizon
from jobs.pipeline.match.steps import match_step, planned_range
from jobs.pipeline.publish.steps import publish_step
from jobs.pipeline.run import run_all
from jobs.project.patterns import pattern_paths

from ..conftest import make_profile
from ..lakes import P1, chemo_profile, events_from_lake, published_ids


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
             **({"values": json.dumps({m: r[m] for m in measures},
                                      default=lambda d: d.strftime("%Y-%m-%dT%H:%M:%S"))}
                if measures else {})}
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


def test_tampered_staged_run_fails_validation_and_publishes_nothing(spark, tmp_path):
    import pyarrow.parquet as pq

    from jobs.pipeline.match.staged import StagedRun
    from jobs.pipeline.publish.steps import validate_step
    from jobs.pipeline.validate.quality import ValidationFailed

    profile, _ = chemo_profile(tmp_path)

    def through_files(*_a, **_k):
        raise AssertionError("a night went through the staged run's files")

    with pytest.MonkeyPatch.context() as mp:  # a night hands the staged run over in memory
        mp.setattr(StagedRun, "save", through_files)
        mp.setattr(StagedRun, "load", through_files)
        outcomes = run_all(spark, profile, "2010-08-30", [P1], echo=lambda *_: None)
    assert len(outcomes) == 1 and outcomes[0].ok, outcomes
    lake = lk.Lake(profile.lake)
    published = published_ids(profile, "mw_chemo_p1")
    version = DeltaTable(lake.matches("mw_chemo_p1")).version()
    ctx = RunContext.start(profile, "tampered", "2010-08-31").for_pattern(Path(P1))
    planned = planned_range(ctx, rng=RunRange(None, horizon("2010-08-31", load_pattern(P1).tau, 0), True))
    match_step(spark, ctx, planned).save(lake)  # as the `match-job` step command keeps it
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
    kept = StagedRun.load(lake, ctx.staging, "tampered")  # the failed verdict stays beside it
    assert kept.verdict is not None and not kept.verdict["success"]
    with pytest.raises(ValidationFailed, match="failed validation, nothing published"):
        publish_step(spark, ctx)
    assert DeltaTable(lake.matches("mw_chemo_p1")).version() == version
    assert published_ids(profile, "mw_chemo_p1") == published


def test_driver_check_frames_equal_the_spark_frames(spark, nightly, tmp_path):
    """A small night's check frames are computed on the driver (DuckDB); they equal the
    Spark frames column for column, type for type and row for row, for every committed
    pattern (windows, alternatives, negations, groups), broken rows included."""
    from functools import reduce

    from pyspark.sql import functions as F

    from jobs.pipeline.validate.check_frames import DriverFrames, StagedMatches
    from jobs.pipeline.validate.quality import _check_frame

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


def test_a_night_s_checks_go_to_the_driver_in_batches_that_fit():
    """However many matches a night (or a full recompute) stages, the driver holds one
    batch of at most DRIVER_ROWS at a time; only a run larger than that goes to Spark."""
    from types import SimpleNamespace

    from jobs.pipeline.validate.quality import driver_batches

    runs = [SimpleNamespace(name=n, rows=r) for n, r in
            [("a", 400), ("b", 500), ("c", 300), ("d", 1200), ("e", 1000), ("f", 0)]]
    got = [([s.name for s in batch], small) for batch, small in driver_batches(runs, most=1000)]
    assert got == [(["a", "b"], True), (["c"], True), (["d"], False), (["e", "f"], True)]
    assert sorted(n for names, _ in got for n in names) == list("abcdef")  # each once
