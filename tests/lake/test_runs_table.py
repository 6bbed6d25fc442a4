"""A night reads of the runs table only the rows its planning needs: the answers are those
of the whole table (a property test over random run histories)."""

import random
from datetime import datetime, timedelta, timezone

from jobs.lake import store as lk
from jobs.lake.runs import all_runs, planning_runs, published_by
from jobs.pipeline.match.horizons import plan_range
from jobs.pipeline.match.planning import needs_replan
from jobs.runrecord import BACKFILL, NIGHTLY, RunRecord, to_arrow

DAY = 86400 * 10**9


def _history(rng: random.Random) -> list[RunRecord]:
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    out = []
    for n in range(rng.randrange(1, 60)):
        night = rng.randrange(0, 40)
        out.append(RunRecord(
            run_id=f"r{n}", pattern=rng.choice(["p", "q", "r"]),
            pattern_version=rng.choice(["v1", "v2"]), logical_date=(
                start + timedelta(days=night)).date().isoformat(),
            status=rng.choice(["success", "success", "failed"]),
            run_kind=rng.choice([NIGHTLY, NIGHTLY, BACKFILL, None]),
            horizon_high=rng.choice([None, (night + rng.randrange(-2, 2)) * DAY]),
            started_at=start + timedelta(days=night, seconds=rng.randrange(3)),
            estimated_pm=rng.choice([None, 0.0, rng.random() * 10]),
            actual_pm=rng.random() * 10))
    return out


def _answers(runs, ld, version):
    ok = [r["started_at"] for r in runs if r["status"] == "success"
          and r["pattern_version"] == version]
    return (plan_range(ld, DAY, 0, version, runs), max(ok) if ok else None,
            needs_replan(runs, version))


def test_planning_reads_the_runs_rows_that_decide_the_night(tmp_path):
    for seed in range(40):
        rng = random.Random(seed)
        lake = lk.Lake.of(str(tmp_path / f"lake{seed}"))
        history = _history(rng)
        for k in range(0, len(history), 7):  # committed over several nights
            lake.append(lake.runs(), to_arrow(history[k:k + 7]))
        ld = (datetime(2025, 1, 1) + timedelta(days=rng.randrange(0, 45))).date().isoformat()
        every = all_runs(lake)
        chosen = planning_runs(lake, {"p", "q", "s"}, ld)
        assert set(chosen) == {"p", "q", "s"} and chosen["s"] == []
        for name in ("p", "q"):
            mine = [r for r in every if r.pattern == name]
            assert len(chosen[name]) <= 6
            for version in ("v1", "v2"):
                assert _answers(chosen[name], ld, version) == _answers(mine, ld, version), seed
        assert published_by(lake, "r0") == {r.pattern for r in every
                                            if r.run_id == "r0" and r.status == "success"}


def test_ses_runs_lists_the_newest_rows_as_a_whole_read_would(tmp_path):
    from jobs import runrecord
    from jobs.tools.runlog import run_rows

    for seed in range(20):
        rng = random.Random(seed)
        lake = lk.Lake.of(str(tmp_path / f"lake{seed}"))
        history = _history(rng)
        for r in history:  # some rows without a start, many sharing one
            if rng.random() < 0.1:
                r.started_at = None
        lake.append(lake.runs(), to_arrow(history))
        every = runrecord.from_arrow(lake.read_arrow(lake.runs()))
        for last in (1, 3, 20):
            for run_id in (None, "r1"):
                mine = [r for r in every if run_id is None or r.run_id == run_id]
                want = sorted(mine, key=lambda r: (str(r.started_at), r.pattern or ""))[-last:]
                got, total = run_rows(lake, run_id, last)
                assert total == len(mine)
                assert [(r.run_id, r.pattern) for r in got] == \
                    [(r.run_id, r.pattern) for r in want], (seed, last, run_id)
