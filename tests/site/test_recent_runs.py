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
