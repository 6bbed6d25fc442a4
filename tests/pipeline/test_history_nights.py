"""``first_ever`` night after night on Spark and Delta: the published matches equal the
reference over the whole history after a first night, after a late event that is earlier
than a partition's first (it replaces the match the old first made), and after that
event's retraction (the next one is promoted again); the run log counts both, and no
night reads more than the events ingested since the state's watermark."""

import shutil
import textwrap
from pathlib import Path

import pyarrow.compute as pc

from jobs.core.language.patternfile import load_pattern
from jobs.lake import store as lk
from jobs.pipeline.run import run_all
from jobs.pipeline.upkeep.retract import retract
from jobs.tools.lakecheck import check_lake

from ..conftest import make_profile
from ..lakes import local_ids, published_ids

FIRST_DOSE = """\
    name: first_dose_then_blood_count
    source: chemo_mw
    within: 15d
    first_ever: [p]
    sets:
      - [p]
      - [b]
    conditions:
      - p.type = 'P'
      - b.type = 'B'
      - p.patient = b.patient
"""


class ChemoNights:
    """The chemotherapy log's landing copy, a lake and one pattern file under ``tmp``;
    ``night(day)`` runs it and checks the published matches against the reference over
    the whole history; ``arrive(name, rows)`` lands a CSV file."""

    def __init__(self, spark, tmp: Path, text: str):
        self.spark, self.landing = spark, tmp / "landing"
        shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw",
                        self.landing / "chemo_mw")
        self.profile = make_profile(tmp, landing=self.landing)
        self.path = tmp / "pattern.yaml"
        self.path.write_text(textwrap.dedent(text))
        self.pattern = load_pattern(self.path)
        self.lake = lk.Lake(self.profile.lake)

    def night(self, day: str):
        [row] = [r for r in run_all(self.spark, self.profile, day, [str(self.path)],
                                    echo=lambda *_: None)
                 if r.get("pattern") == self.pattern.name]
        assert row["status"] == "success", row["message"]
        assert published_ids(self.profile, self.pattern.name) == local_ids(
            self.profile, self.pattern), day
        return row

    def arrive(self, name: str, rows: str) -> None:
        (self.landing / "chemo_mw" / name).write_text(
            "event_id,patient,type,value,unit,ts\n" + rows)


def test_late_first_replaces_and_retraction_promotes(spark, tmp_path):
    nights = ChemoNights(spark, tmp_path, FIRST_DOSE)
    night, lake, pattern = nights.night, nights.lake, nights.pattern
    first = night("2010-07-25")
    assert first["full_recompute"] and first["inserted"] == 2  # patients 1 and 2
    assert night("2010-08-30")["inserted"] == 0
    # a dose for patient 1 on 1 July arrives late: it is the first now, and its match
    # (with the blood count of 4 July) replaces the one of the dose of 5 July
    nights.arrive("late.csv", "late1,1,P,100,mg,2010-07-01T00:00:00\n")
    late = night("2010-08-31")
    assert late["first_ever_replaced"] == 1 and (late["inserted"], late["deleted"]) == (1, 1)
    state = lake.read_arrow(lake.first_ever(pattern.name)).to_pylist()
    assert {r["event_id"] for r in state} == {"late1", "e5"}
    # the late dose retracted: the dose of 5 July is the first again
    retract(lake, "chemo_mw", ["late1"], reason="test")
    back = night("2010-09-01")
    assert back["first_ever_promoted"] == 1 and (back["inserted"], back["deleted"]) == (1, 1)
    assert {r["event_id"] for r in lake.read_arrow(lake.first_ever(pattern.name)).to_pylist()} \
        == {"e3", "e5"}
    # a night with nothing new changes nothing
    quiet_night = night("2010-09-02")
    assert (quiet_night["inserted"], quiet_night["deleted"]) == (0, 0)


NO_EARLIER_D = """\
    name: blood_count_without_prior_d
    source: chemo_mw
    within: 1d
    sets:
      - [b]
    conditions:
      - b.type = 'B'
    history:
      - {at_most: 0, before: b, same: [patient], where: "h.type = 'D'"}
      - {at_least: 1, before: b, by: 2d, same: [patient]}
"""


def test_history_conditions_night_after_night(spark, tmp_path):
    """Blood counts with no D of the patient ever before and some event of theirs at least
    2 days before: published equal to the reference over the whole history, also after a
    late D that removes the matches of an earlier night."""
    nights = ChemoNights(spark, tmp_path, NO_EARLIER_D)
    night = nights.night
    first = night("2010-08-30")
    assert first["inserted"] == 2  # patient 1's blood counts of 17 and 22 July
    # a D for patient 1 on 1 July arrives late: no blood count of theirs qualifies now
    nights.arrive("late.csv", "late2,1,D,100,mg,2010-07-01T00:00:00\n")
    late = night("2010-08-31")
    # the state says what changed: the night is incremental, reopened from τ before it
    assert not late["full_recompute"] and late["deleted"] == 2


FACTS = """\
    name: late_blood_counts_of_busy_patients
    source: chemo_mw
    within: 1d
    sets:
      - [b]
      - [x]
    conditions:
      - b.type = 'B'
      - b.patient = x.patient
      - b.ts - partition.first_ts >= 10d
      - partition.count >= 8
    measures:
      seen: partition.count
      since: partition.first_ts
"""


def test_partition_facts_night_after_night(spark, tmp_path):
    """Partition facts in conditions and measures: published equal to the reference over
    the whole history, and again after a night that adds an event to one partition."""
    nights = ChemoNights(spark, tmp_path, FACTS)
    first = nights.night("2010-08-30")
    before = nights.lake.read_arrow(nights.lake.matches(nights.pattern.name)).to_pylist()
    nights.arrive("more.csv", "n1,1,P,1,mg,2010-06-20T00:00:00\n")
    second = nights.night("2010-08-31")
    table = nights.lake.read_arrow(nights.lake.matches(nights.pattern.name)).to_pylist()
    assert table and all(r["seen"] >= 8 for r in table)
    # only patient 1's partition was matched again: patient 2's rows keep their run
    assert first["partitions"] == 2 and second["partitions"] == 1
    twos = [r for r in before if r["patient"] == 2]
    assert twos and all(r in table for r in twos)
    # the state counts what its watermark has seen; `ses check` says when it does not
    lake = nights.lake
    state_path = lake.partition_state(nights.pattern.name)
    assert not [f for f in check_lake(lake) if f.table.startswith("partition_state/")]
    state = lake.read_arrow(state_path)
    counts = pc.add(state.column("count"), 1)
    lake.write(state_path, state.set_column(state.column_names.index("count"), "count",
                                            counts), mode="overwrite")
    found = [f for f in check_lake(lake) if f.table.startswith("partition_state/")]
    assert len(found) == 1 and "count differs" in found[0].problem


def test_a_retraction_takes_every_partition_again(spark, tmp_path):
    """After a commit of the events that was not an append (a retraction), a history
    pattern's night matches every partition again: what was removed may be anywhere."""
    nights = ChemoNights(spark, tmp_path, FACTS)
    nights.night("2010-08-30")
    retract(nights.lake, "chemo_mw", ["e3"], reason="a test")
    again = nights.night("2010-08-31")
    assert again["partitions"] == 2, {k: again[k] for k in again}


def test_episodes_night_after_night(spark, tmp_path):
    """``after_match`` episodes: a night with a new event of one patient takes only that
    patient's partition again, whole; the table equals the reference."""
    text = (Path(__file__).resolve().parents[2] / "patterns" / "mw_chemo_courses.yaml")
    nights = ChemoNights(spark, tmp_path, text.read_text())
    first = nights.night("2010-08-30")
    nights.arrive("more.csv", "n1,2,P,1,mg,2010-07-30T00:00:00\n")
    second = nights.night("2010-08-31")
    assert first["partitions"] == 2 and second["partitions"] == 1
