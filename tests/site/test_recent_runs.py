"""The catalogue reads the newest runs only: its time must not grow with a year of nights."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from jobs.lake import store as lk
from jobs.site import pages


def test_the_site_lists_the_newest_runs_rows(tmp_path, monkeypatch):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for night in range(5):  # one commit per night, as the runs log grows
        lake.append(lake.runs(), pa.table({
            "run_id": [f"r{night}"], "pattern": ["p"],
            "started_at": pa.array([start + timedelta(days=night)],
                                   pa.timestamp("us", tz="UTC"))}))
    assert pages._recent_runs(lake).num_rows == 5
    monkeypatch.setattr(pages, "RUNS_SHOWN", 2)
    assert sorted(pages._recent_runs(lake).column("run_id").to_pylist()) == ["r3", "r4"]


def test_a_pattern_page_of_an_empty_match_table(tmp_path):
    """A table with no match yet (or none left) still gets its page: nothing to show."""
    from jobs.core.language.patternfile import load_pattern

    from ..helpers import ROOT

    lake = lk.Lake.of(str(tmp_path / "lake"))
    ts = pa.timestamp("us", tz="UTC")
    lake.write(lake.matches("mw_chemo_p1"), pa.table({
        "match_id": pa.array([], pa.string()), "start_ts": pa.array([], ts),
        "end_ts": pa.array([], ts),
        "bindings": pa.array([], pa.map_(pa.string(), pa.list_(pa.string())))}))
    pattern = load_pattern(ROOT / "patterns" / "mw_chemo_p1.yaml")
    page = pages.PatternPage(pattern.name, "p.yaml", "", pattern)
    pages._fill_pattern_page(lake, pages.SourceEvents(lake), pattern, page, None)
    assert page.rows == 0 and page.shown == [] and page.per_month == []


def _direct(lake, name):
    """The summary read the slow way: the whole table at once."""
    import pyarrow.compute as pc

    t = lake.read_arrow(lake.matches(name), columns=["match_id", "start_ts"])
    months = pc.value_counts(pc.strftime(t.column("start_ts"), format="%Y-%m")).to_pylist()
    first = t.sort_by([("start_ts", "ascending"), ("match_id", "ascending")]).slice(0, 5)
    return (t.num_rows, sorted((m["values"], m["counts"]) for m in months),
            first.column("match_id").to_pylist())


def test_a_pattern_page_reads_only_the_files_a_night_added(tmp_path):
    """Appends, deletes (late events, retractions) and a compaction, night after night:
    the page built from the previous build's per-file summaries equals a whole read, and
    reads only the files added since."""
    import random

    from deltalake import DeltaTable

    from jobs.core.language.patternfile import load_pattern

    from ..helpers import ROOT

    rng = random.Random(7)
    lake = lk.Lake.of(str(tmp_path / "lake"))
    pattern = load_pattern(ROOT / "patterns" / "mw_chemo_p1.yaml")
    path = lake.matches(pattern.name)
    site = tmp_path / "site"
    site.mkdir()
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    ts = pa.timestamp("us", tz="UTC")
    n = 0
    for night in range(12):
        days = [rng.randrange(0, 40 + 10 * night) for _ in range(rng.randrange(1, 30))]
        starts = [start + timedelta(days=d, seconds=rng.randrange(86400)) for d in days]
        lake.append(path, pa.table({
            "match_id": [f"m{n + k:04d}" for k in range(len(starts))],
            "start_ts": pa.array(starts, ts),
            "end_ts": pa.array([s + timedelta(hours=1) for s in starts], ts),
            "bindings": pa.array([[("a", [f"e{n + k}"])] for k in range(len(starts))],
                                 pa.map_(pa.string(), pa.list_(pa.string())))}))
        n += len(starts)
        if night % 3 == 2:  # a retraction removes some matches, the earliest among them
            DeltaTable(path).delete(f"match_id < 'm{rng.randrange(n):04d}' AND "
                                    f"match_id > 'm{rng.randrange(n):04d}'")
        if night == 7:
            DeltaTable(path).optimize.compact()
        cache = pages.PageCache(site)
        page = pages.PatternPage(pattern.name, "p.yaml", "", pattern)
        pages._fill_pattern_page(lake, pages.SourceEvents(lake), pattern, page, cache)
        cache.write(site)
        rows, months, first = _direct(lake, pattern.name)
        assert (page.rows, page.per_month) == (rows, months)
        assert cache.new[f"pattern {pattern.name}"]["shown_ids"] == first
        files = {lk.file_name(f) for f in DeltaTable(path).file_uris()}
        assert set(cache.new[f"pattern {pattern.name}"]["files"]) == files
    from jobs.site.match_files import summarise_table

    kept = pages._kept_files(cache.new[f"pattern {pattern.name}"])
    assert summarise_table(DeltaTable(path).to_pyarrow_dataset(), kept, 5).read == 0
    lake.append(path, pa.table({"match_id": ["m9999"], "start_ts": pa.array([start], ts),
                                "end_ts": pa.array([start], ts),
                                "bindings": pa.array([[("a", ["e"])]],
                                                     pa.map_(pa.string(), pa.list_(pa.string())))}))
    summary = summarise_table(DeltaTable(path).to_pyarrow_dataset(), kept, 5)
    assert summary.read == 1 and summary.rows == rows + 1


def test_a_source_page_sums_its_event_types_over_the_statistics_files_it_kept(tmp_path):
    """The event types of a source page: per statistics file, read once; a day whose
    statistics are replaced drops its old counts."""
    from deltalake import DeltaTable

    lake = lk.Lake.of(str(tmp_path / "lake"))
    site = tmp_path / "site"
    site.mkdir()

    def day(date, counts):
        return pa.table({"event_date": [date] * (len(counts) + 1),
                         "attribute": ["event_type"] * len(counts) + ["other"],
                         "value": list(counts) + ["x"],
                         "events": pa.array(list(counts.values()) + [99], pa.int64())})

    kept = {}
    lake.append(lake.stats("s"), day("2025-01-01", {"a": 3, "b": 1}), partition_by=["event_date"])
    types, kept = pages._type_counts(lake, "s", "event_type", kept)
    assert types == [("a", 3), ("b", 1)] and len(kept) == 1
    lake.append(lake.stats("s"), day("2025-01-02", {"b": 5}), partition_by=["event_date"])
    types, kept = pages._type_counts(lake, "s", "event_type", kept)
    assert types == [("b", 6), ("a", 3)] and len(kept) == 2
    DeltaTable(lake.stats("s")).delete("event_date = '2025-01-01'")  # the day re-counted
    lake.append(lake.stats("s"), day("2025-01-01", {"c": 2}), partition_by=["event_date"])
    types, kept = pages._type_counts(lake, "s", "event_type", kept)
    assert types == [("b", 5), ("c", 2)] and len(kept) == 2
