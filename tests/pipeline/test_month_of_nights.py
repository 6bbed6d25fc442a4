"""Twenty nights of one source, a day at a time, with a late event, a retraction and a
lost state among them, each after a few ordinary nights: after every night, each
history-wide pattern's published matches equal the reference over the whole history up
to that night's horizon (one recompute). One
pattern of each kind: history conditions, partition facts, ``after_match`` episodes;
the first two keep a partition state, so their nights read only what changed."""

import random
import shutil
import textwrap
from datetime import date, datetime, timedelta
from pathlib import Path

from jobs.core.language.patternfile import load_pattern
from jobs.lake import store as lk
from jobs.pipeline.match.horizons import horizon
from jobs.pipeline.run import run_all
from jobs.pipeline.upkeep.retract import retract
from jobs.tools.lakecheck import check_lake

from ..conftest import make_profile
from ..lakes import local_ids, published_ids

HISTORY = """\
    name: dose_with_history
    source: chemo_mw
    within: 3d
    sets:
      - [p]
      - [b]
    conditions:
      - p.type = 'P'
      - b.type = 'B'
      - p.patient = b.patient
    history:
      - {at_least: 1, before: p, by: 2d, same: [patient], where: "h.type = 'C'"}
      - {at_most: 1, after: b, same: [patient], where: "h.type = 'D'"}
"""

FACTS = """\
    name: dose_of_a_busy_patient
    source: chemo_mw
    within: 2d
    sets:
      - [p]
      - [b]
    conditions:
      - p.type = 'P'
      - b.type = 'B'
      - p.patient = b.patient
      - p.ts - partition.first_ts >= 4d
      - partition.count >= 12
    measures:
      since: partition.first_ts
"""

EPISODES = """\
    name: courses
    source: chemo_mw
    within: 6d
    sets:
      - [c]
      - [b]
    conditions:
      - c.type = 'C'
      - b.type = 'B'
      - c.patient = b.patient
    after_match: past_last_event
"""

START = date(2010, 8, 1)
NIGHTS = 20
LATE, RETRACTION, LOST = 10, 14, 17  # the nights of the late events, the retraction and
# the lost state: each has ordinary nights before and after it


def _day_rows(rng: random.Random, day: date, serial: list[int]) -> list[str]:
    rows = []
    for _ in range(rng.randint(2, 6)):
        serial[0] += 1
        t = datetime(day.year, day.month, day.day) + timedelta(minutes=rng.randrange(1440))
        rows.append(f"m{serial[0]},{rng.randint(1, 4)},{rng.choice('PPBBCCD')},1,mg,"
                    f"{t.isoformat()}")
    return rows


def test_twenty_nights_equal_one_recompute(spark, tmp_path):
    landing = tmp_path / "landing" / "chemo_mw"
    landing.mkdir(parents=True)
    src = Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw"
    shutil.copy(next(src.glob("*.csv")), landing / "base.csv")
    profile = make_profile(tmp_path, landing=tmp_path / "landing")
    paths = []
    for text in (HISTORY, FACTS, EPISODES):
        path = tmp_path / f"{text.split()[1]}.yaml"
        path.write_text(textwrap.dedent(text))
        paths.append(path)
    patterns = [load_pattern(p) for p in paths]
    lake = lk.Lake(profile.lake)
    rng, serial = random.Random(7), [0]
    reads = {p.name: [] for p in patterns}
    for n in range(NIGHTS):
        day = START + timedelta(days=n)
        rows = _day_rows(rng, day, serial)
        if n == LATE:  # a late dose, a week back
            rows.append(f"late,2,P,1,mg,{(day - timedelta(days=7)).isoformat()}T08:00:00")
            rows.append(f"late2,3,C,1,mg,{(day - timedelta(days=9)).isoformat()}T08:00:00")
        (landing / f"day{n:02}.csv").write_text(
            "event_id,patient,type,value,unit,ts\n" + "\n".join(rows) + "\n")
        if n == RETRACTION:  # a retraction: an event of the first days
            retract(lake, "chemo_mw", ["m3", "m5"], reason="a test")
        if n == LOST:  # a state lost (as a run killed before writing it leaves it old)
            shutil.rmtree(lake.partition_state(patterns[0].name))
        out = {r["pattern"]: r for r in run_all(spark, profile, day.isoformat(),
                                                [str(p) for p in paths], echo=lambda *_: None)
               if r.get("pattern")}
        for pattern in patterns:
            row = out[pattern.name]
            assert row["status"] == "success", (day, row["message"])
            high = horizon(day, pattern.tau, profile.allowed_lateness)
            assert published_ids(profile, pattern.name) == local_ids(
                profile, pattern, high=high), (pattern.name, day)
            reads[pattern.name].append((row["full_recompute"], row["events"]))
    # the state's nights are incremental: after the first, only the retraction's is full
    # (and, without its state, a night that takes its touched partitions whole)
    for name in ("dose_with_history", "dose_of_a_busy_patient"):
        full = [n for n, (f, _) in enumerate(reads[name]) if f]
        assert full == ([0, RETRACTION, LOST] if name == "dose_with_history"
                        else [0, RETRACTION]), (name, full)
    assert not [f for f in check_lake(lake) if f.table.startswith("partition_state/")]
