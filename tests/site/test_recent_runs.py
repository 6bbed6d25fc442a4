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
