"""OpenLineage events without Spark: written one per file under <lake>/_lineage/, read
back with the facets other tools read, and a parent run (the DAG's task) when given."""

from datetime import datetime, timezone

import pyarrow as pa

from jobs.lake import store as lk
from jobs.pipeline.outcome import PatternOutcome
from jobs.pipeline.upkeep.lineage import emit, read_events, run_uuid
from jobs.runrecord import RunRecord


class _Pattern:
    source, matcher, version = "s", "ses", "v2"


def test_events_of_a_run_with_their_versions_and_parent(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    lake.append(lake.events("s"), pa.table({"event_id": ["a"]}))
    lake.append(lake.events("s"), pa.table({"event_id": ["b"]}))
    lake.append(lake.matches("p"), pa.table({"match_id": ["m"]}))
    t0 = datetime(2026, 11, 20, 2, 0, tzinfo=timezone.utc)
    ok = PatternOutcome.published(RunRecord(
        "r1", pattern="p", source="s", matcher="ses", pattern_version="v1", status="success",
        matches=5, inserted=2, deleted=1, started_at=t0, finished_at=t0))
    bad = PatternOutcome.failed("r1", "q", RuntimeError("boom"))
    parent = "airflow-ns/ses_nightly.run_source/01234567-89ab-cdef-0123-456789abcdef"
    n = emit(lake, [ok, bad], {"q": _Pattern()}, "2026-11-20", parent=parent)
    events = read_events(lake, "2026-11-20")
    assert n == 4 == len(events)
    by = {(e["job"]["name"], e["eventType"]): e for e in events}
    assert set(by) == {("p", "START"), ("p", "COMPLETE"), ("q", "START"), ("q", "FAIL")}
    done = by[("p", "COMPLETE")]
    assert done["job"]["namespace"] == "ses" and done["run"]["runId"] == run_uuid("r1", "p")
    assert [(i["namespace"], i["name"]) for i in done["inputs"]] == \
        [(f"file://{lake.root}", "events/s")]
    assert done["inputs"][0]["facets"]["version"]["datasetVersion"] == "1"
    assert done["outputs"][0]["facets"]["version"]["datasetVersion"] == "0"
    assert done["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    assert done["run"]["facets"]["ses"]["deleted"] == 1
    job = done["run"]["facets"]["parent"]["job"]
    assert (job["namespace"], job["name"]) == ("airflow-ns", "ses_nightly.run_source")
    assert done["run"]["facets"]["parent"]["run"]["runId"] == parent.rsplit("/", 1)[1]
    failed = by[("q", "FAIL")]
    assert failed["run"]["facets"]["errorMessage"]["message"].endswith("boom")
    assert failed["run"]["facets"]["ses"]["pattern_version"] == "v2"
    assert failed["outputs"] == []  # no table of q: nothing to point at
    assert run_uuid("r1", "p") == run_uuid("r1", "p") != run_uuid("r2", "p")


def test_events_are_read_in_the_order_they_happened(tmp_path):
    """A run that starts and ends within one second (the file names' precision), and one
    that starts and ends at the same instant: each START comes before its end."""
    lake = lk.Lake.of(str(tmp_path / "lake"))
    t0 = datetime(2026, 11, 20, 2, 0, 0, 100, tzinfo=timezone.utc)
    t1 = datetime(2026, 11, 20, 2, 0, 0, 900_000, tzinfo=timezone.utc)
    t2 = datetime(2026, 11, 20, 2, 0, 0, 950_000, tzinfo=timezone.utc)
    runs = [PatternOutcome.published(RunRecord(
        "r1", pattern=p, source="s", matcher="ses", pattern_version="v1", status="success",
        started_at=start, finished_at=end)) for p, start, end in (("a", t0, t1), ("b", t2, t2))]
    emit(lake, runs, {}, "2026-11-20")
    assert [(e["job"]["name"], e["eventType"]) for e in read_events(lake)] == [
        ("a", "START"), ("a", "COMPLETE"), ("b", "START"), ("b", "COMPLETE")]
