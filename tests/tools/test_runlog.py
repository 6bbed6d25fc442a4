"""``ses runs``: the run log as a table that fits its names and says what it left out."""

from datetime import datetime, timedelta, timezone

from jobs.lake import store as lk
from jobs.lake.runs import log_run
from jobs.runrecord import RunRecord
from jobs.tools.runlog import lines, run_rows


def test_the_run_log_fits_long_names_and_says_how_many_rows_it_left_out(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    long = "sepsis_registration_optional_triage_antibiotics_and_more"
    for day in range(5):
        log_run(lake, RunRecord(run_id=f"r{day}", pattern=long if day == 4 else "p",
                                status="success", started_at=t + timedelta(days=day),
                                finished_at=t + timedelta(days=day), message="x" * 300))
    rows, total = run_rows(lake, last=3)
    assert total == 5 and [r.run_id for r in rows] == ["r2", "r3", "r4"]
    out = lines(rows, total)
    assert long in out[-2] and out[-2].index("success") == out[0].index("status")
    assert out[-2].endswith("x" * 300)  # the message whole
    assert out[-1].startswith("(3 of 5 records, the newest")
    assert not lines(*run_rows(lake, last=9))[-1].startswith("(")
