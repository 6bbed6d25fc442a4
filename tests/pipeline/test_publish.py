"""Publish (executors or, for a small run, the driver write the files; the driver commits
add and remove actions) against its oracle: the Delta MERGE on ``match_id`` that published before (rows of the run's scope
replaced, rows that stay untouched, nothing duplicated). Random histories of runs over
random table states; after every run the two tables hold the same rows and report the
same counts."""

import json
import os
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from jobs.core.language.patternfile import parse_pattern
from jobs.lake import store as lk
from jobs.lake.match_commits import RUN_KEY, unchanged_since
from jobs.lake.match_rows import TS, MatchRows
from jobs.pipeline.match.horizons import RunRange
from jobs.pipeline.publish.matches import _schema_changed, publish

from ..conftest import ROOT

PATTERN = parse_pattern((ROOT / "patterns" / "mw_chemo_p1.yaml").read_text())
V = PATTERN.version
DAY = 86_400 * 10**9
EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
UNIVERSE = 24  # match i starts on day i; its id hashes the version, as match_id does


def _start(i: int) -> datetime:
    return EPOCH + timedelta(days=i, microseconds=137)  # sub-millisecond on purpose


def _id(i: int, version: str) -> str:
    return f"{version[:6]}-{i:03d}"


def _staged(matches: list[int]) -> pa.Table:
    n = len(matches)
    return pa.table({
        "kind": pa.array(["match"] * n, pa.string()),
        "match_id": pa.array([_id(i, V) for i in matches], pa.string()),
        "patient": pa.array([f"p{i % 3}" for i in matches], pa.string()),
        "start_ts": pa.array([_start(i) for i in matches], TS),
        "end_ts": pa.array([_start(i) + timedelta(hours=5) for i in matches], TS),
        "n_events": pa.array([3] * n, pa.int64()),
        "bindings": pa.array([json.dumps({"c": [f"e{i}"], "p": [f"e{i}a", f"e{i}b"],
                                          "b": ["x"]}) for i in matches], pa.string()),
        "stats": pa.array([None] * n, pa.string())})


def _initial(rows: list[tuple[int, str]]) -> list[pa.Table]:
    """Published rows of earlier runs (version ``V`` or another), in three files."""
    shape = MatchRows.of(PATTERN, "r0")
    out = []
    for part in (rows[0::3], rows[1::3], rows[2::3]):
        t = shape.convert(_staged([i for i, _ in part]))
        versions = pa.array([v for _, v in part], pa.string())
        t = t.set_column(t.schema.get_field_index("pattern_version"), "pattern_version",
                         versions)
        t = t.set_column(t.schema.get_field_index("match_id"), "match_id",
                         pa.array([_id(i, v) for i, v in part], pa.string()))
        out.append(t)
    return out


def merge_oracle(path: str, data: pa.Table, rng: RunRange) -> dict:
    """The MERGE publish the lake used before, verbatim in effect."""
    def iso(ns):
        return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")

    table = lk.Lake(os.path.dirname(path)).read_table(path)
    if table is None or (rng.full and _schema_changed(table, data.schema)):
        before = table.count() if table is not None else 0
        write_deltalake(path, data, mode="overwrite", schema_mode="overwrite")
        return {"inserted": data.num_rows, "deleted": before}
    scope = [f"t.start_ts < '{iso(rng.high)}'"]
    if rng.low is not None:
        scope.append(f"t.start_ts >= '{iso(rng.low)}'")
    mine = f"t.pattern_version = '{V}' AND " + " AND ".join(scope)
    delete_when = f"({mine}) OR t.pattern_version != '{V}'" if rng.full else mine
    m = (DeltaTable(path).merge(data, predicate="t.match_id = s.match_id", source_alias="s",
                                target_alias="t")
         .when_not_matched_insert_all().when_not_matched_by_source_delete(predicate=delete_when)
         .execute())
    return {"inserted": int(m.get("num_target_rows_inserted", 0)),
            "deleted": int(m.get("num_target_rows_deleted", 0))}


def _rows(path: str) -> list[tuple]:
    t = DeltaTable(path).to_pyarrow_table()
    return sorted((r["match_id"], r["pattern_version"], r["run_id"], r["start_ts"],
                   r["patient"], tuple(sorted((k, tuple(v)) for k, v in r["bindings"])))
                  for r in t.to_pylist())


runs = st.lists(st.tuples(
    st.one_of(st.none(), st.integers(0, UNIVERSE - 1)),  # low day (None: the beginning)
    st.integers(1, UNIVERSE + 2),  # days in the range
    st.booleans(),  # full recompute
    st.sets(st.integers(0, UNIVERSE - 1))), min_size=1, max_size=3)
initial = st.lists(st.tuples(st.integers(0, UNIVERSE - 1), st.sampled_from([V, "oldver"])),
                   unique_by=lambda r: r, max_size=18)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: Spark is slow
@given(initial=initial, history=runs)
@pytest.mark.parametrize("engine", ["spark", "arrow"])
def test_publish_equals_the_merge(spark, engine, initial, history):
    with tempfile.TemporaryDirectory() as tmp:
        ours, oracle = lk.Lake(tmp).matches(PATTERN.name), f"{tmp}/oracle"
        if initial:
            for part in _initial(initial):
                for path in (ours, oracle):
                    write_deltalake(path, part, mode="append")
        for k, (low_day, days, full, matches) in enumerate(history):
            low = None if (low_day is None or full) else low_day * DAY
            high = ((low_day or 0) + days) * DAY + EPOCH_NS
            low = None if low is None else low + EPOCH_NS
            rng = RunRange(low, high, full)
            inside = [i for i in sorted(matches)  # the matcher stages its range only
                      if (low is None or _ns(_start(i)) >= low) and _ns(_start(i)) < high]
            staging = Path(tmp) / f"staging{k}"
            staging.mkdir()
            pq.write_table(_staged(inside), staging / "part-0.parquet")
            run_id = f"r{k + 1}"
            before = DeltaTable(ours).version() if lk.Lake(tmp).exists(ours) else None
            got = publish(spark, lk.Lake(tmp), PATTERN, run_id, str(staging), rng,
                          engine=engine)
            want = merge_oracle(oracle, MatchRows.of(PATTERN, run_id).convert(
                _staged(inside)), rng)
            assert (got["inserted"], got["deleted"]) == (want["inserted"], want["deleted"])
            assert _rows(ours) == _rows(oracle)
            after = DeltaTable(ours).version()
            changed = got["inserted"] or got["deleted"] or before is None
            assert after == (before + 1 if before is not None else 0) if changed \
                else after == before  # one commit per change, none for a rerun
            if before is not None and changed:  # readers of the old version see it whole
                old = DeltaTable(ours, version=before).to_pyarrow_table().num_rows
                assert old == DeltaTable(ours, version=before).count()


EPOCH_NS = int(EPOCH.timestamp()) * 10**9


def _ns(ts: datetime) -> int:
    return int(ts.timestamp()) * 10**9 + ts.microsecond * 1000


@pytest.fixture
def lake(tmp_path):
    return lk.Lake(str(tmp_path / "lake"))


def _publish(spark, lake, tmp_path, matches, run_id, rng):
    staging = tmp_path / f"staging-{run_id}"
    staging.mkdir()
    pq.write_table(_staged(matches), staging / "part-0.parquet")
    return publish(spark, lake, PATTERN, run_id, str(staging), rng)


def test_a_rerun_commits_nothing_and_keeps_the_first_run_id(spark, lake, tmp_path):
    full = RunRange(None, 30 * DAY + EPOCH_NS, True)
    assert _publish(spark, lake, tmp_path, [1, 2, 3], "r1", full)["inserted"] == 3
    path = lake.matches(PATTERN.name)
    version = DeltaTable(path).version()
    again = _publish(spark, lake, tmp_path, [1, 2, 3], "r2", RunRange(None, full.high, False))
    assert (again["inserted"], again["deleted"], again["published"]) == (0, 0, 3)
    assert again["committed"] is False
    assert DeltaTable(path).version() == version
    assert {r["run_id"] for r in DeltaTable(path).to_pyarrow_table().to_pylist()} == {"r1"}


def test_the_commit_carries_the_run_and_its_counts(spark, lake, tmp_path):
    rng = RunRange(None, 30 * DAY + EPOCH_NS, True)
    _publish(spark, lake, tmp_path, [1, 2], "r1", rng)
    out = _publish(spark, lake, tmp_path, [2, 5], "r2", RunRange(EPOCH_NS, rng.high, False))
    h = DeltaTable(lake.matches(PATTERN.name)).history(1)[0]
    assert (h["ses.inserted"], h["ses.deleted"]) == ("1", "1") == \
        (str(out["inserted"]), str(out["deleted"]))
    assert json.loads(h["ses.run"])["run_id"] == "r2"


def test_files_of_a_failed_publish_are_not_left_behind(spark, lake, tmp_path, monkeypatch):
    from jobs.lake import delta_files

    rng = RunRange(None, 30 * DAY + EPOCH_NS, True)
    _publish(spark, lake, tmp_path, [1, 2], "r1", rng)
    path = Path(lake.matches(PATTERN.name))
    files = set(path.glob("*.parquet"))

    def refuse(*_, **__):
        raise RuntimeError("commit refused")

    monkeypatch.setattr(delta_files, "commit", refuse)
    with pytest.raises(RuntimeError, match="commit refused"):
        _publish(spark, lake, tmp_path, [3], "r2", RunRange(EPOCH_NS, rng.high, False))
    assert set(path.glob("*.parquet")) == files
    assert DeltaTable(str(path)).count() == 2


def test_a_full_recompute_with_other_columns_replaces_the_table(spark, lake, tmp_path):
    path = lake.matches(PATTERN.name)
    old = pa.table({"match_id": ["x1", "x2"], "pattern_version": ["old", "old"],
                    "ward": ["a", "b"]})
    write_deltalake(path, old)
    out = _publish(spark, lake, tmp_path, [1, 4], "r1", RunRange(None, 30 * DAY + EPOCH_NS,
                                                                  True))
    assert (out["inserted"], out["deleted"], out["published"]) == (2, 2, 2)
    t = DeltaTable(path)
    assert "ward" not in t.schema().to_arrow().names and "patient" in \
        t.schema().to_arrow().names
    assert sorted(r["match_id"] for r in t.to_pyarrow_table().to_pylist()) == \
        [_id(1, V), _id(4, V)]


def test_a_small_run_is_published_without_a_spark_job(spark, lake, tmp_path, monkeypatch):
    from jobs.pipeline.publish import matches as publishing

    tracker = spark.sparkContext.statusTracker()
    rng = RunRange(None, 30 * DAY + EPOCH_NS, True)
    spark.sparkContext.setJobGroup("publish-small", "a small publish")
    _publish(spark, lake, tmp_path, [1, 2], "r1", rng)
    _publish(spark, lake, tmp_path, [2, 5], "r2", RunRange(EPOCH_NS, rng.high, False))
    assert tracker.getJobIdsForGroup("publish-small") == []
    monkeypatch.setattr(publishing, "DRIVER_ROWS", 1)  # three staged rows: too many
    spark.sparkContext.setJobGroup("publish-large", "a large publish")
    out = _publish(spark, lake, tmp_path, [2, 5, 7], "r3", RunRange(EPOCH_NS, rng.high, False))
    spark.sparkContext.setJobGroup("", "")
    assert tracker.getJobIdsForGroup("publish-large")
    assert (out["inserted"], out["deleted"], out["published"]) == (1, 0, 3)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_bindings_are_read_as_one_json_per_match_would_read_them(data):
    """The published ``bindings`` map, parsed with Arrow's JSON reader one alternative
    at a time, is what ``json.loads`` of each match gives, in order: for a pattern, a
    disjunction and a window (an empty buffer), with ids that JSON must escape."""
    escalation = parse_pattern((ROOT / "patterns" / "sepsis_escalation_either_way.yaml")
                               .read_text())
    window = parse_pattern((ROOT / "patterns" / "paper_ex2_next_after_lab.yaml").read_text())
    pattern = data.draw(st.sampled_from([PATTERN, escalation, window]))
    rows = MatchRows.of(pattern, "r1")
    ids = st.lists(st.text(alphabet='ab"\\\n\tü€ 1', min_size=1, max_size=4),
                   min_size=0 if pattern is window else 1, max_size=3)
    texts, alternatives = [], []
    for _ in range(data.draw(st.integers(1, 30))):
        number, names = data.draw(st.sampled_from(rows.variables))
        texts.append(json.dumps({v: data.draw(ids) for v in names}))
        alternatives.append(number or 1)
    staged = pa.table({"bindings": texts, "alternative": pa.array(alternatives, pa.int32())})
    want = [list(json.loads(t).items()) for t in texts]
    with mock.patch("jobs.lake.match_rows._bindings_per_row", side_effect=AssertionError):
        assert rows.bindings(staged).to_pylist() == want  # without the per-row fallback


def test_unchanged_since_places_the_newest_commit_that_changed_rows(tmp_path):
    """A rerun may skip matching only while the newest commit that changed the match
    table's rows is the last run's own (or older than it, when it committed nothing);
    the table's documentation and maintenance change no row."""
    lake = lk.Lake(str(tmp_path / "lake"))
    path = lake.matches("p")
    meta = {RUN_KEY: json.dumps({"run_id": "r1"})}
    write_deltalake(path, pa.table({"a": [1]}),
                    commit_properties=CommitProperties(custom_metadata=meta))
    made = DeltaTable(path).history(1)[0]["timestamp"] / 1000

    def at(seconds: float) -> datetime:  # a time relative to r1's commit
        return datetime.fromtimestamp(made + seconds, tz=timezone.utc)

    r1 = {"run_id": "r1", "inserted": 1, "deleted": 0, "started_at": at(-1)}
    quiet = {"run_id": "r2", "inserted": 0, "deleted": 0, "started_at": at(1)}
    assert unchanged_since(lake, "p", r1) and unchanged_since(lake, "p", quiet)
    assert not unchanged_since(lake, "p", {**quiet, "started_at": at(-1)})  # before r1's
    assert not unchanged_since(lake, "p", {**quiet, "inserted": 2})  # r2 committed: where?
    DeltaTable(path).alter.set_table_description("documented")
    DeltaTable(path).alter.set_column_metadata("a", {"comment": "a column"})
    assert unchanged_since(lake, "p", r1)
    write_deltalake(path, pa.table({"a": [2]}), mode="append")  # another writer
    assert not unchanged_since(lake, "p", r1) and not unchanged_since(lake, "p", quiet)
    assert not unchanged_since(lake, "q", r1)  # no table
