"""``first_ever`` night after night on Spark and Delta: the published matches equal the
reference over the whole history after a first night, after a late event that is earlier
than a partition's first (it replaces the match the old first made), and after that
event's retraction (the next one is promoted again); the run log counts both, and no
night reads more than the events ingested since the state's watermark."""

import shutil
import textwrap
from pathlib import Path

from jobs.core.language.patternfile import load_pattern
from jobs.lake import store as lk
from jobs.pipeline.retract import retract
from jobs.pipeline.run import run_all

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


def test_late_first_replaces_and_retraction_promotes(spark, tmp_path):
    landing = tmp_path / "landing"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw",
                    landing / "chemo_mw")
    profile = make_profile(tmp_path, landing=landing)
    path = tmp_path / "first_dose.yaml"
    path.write_text(textwrap.dedent(FIRST_DOSE))
    pattern = load_pattern(path)
    lake = lk.Lake(profile.lake)
    quiet = dict(echo=lambda *_: None)

    def night(day):
        [row] = [r for r in run_all(spark, profile, day, [str(path)], **quiet)
                 if r.get("pattern") == pattern.name]
        assert row["status"] == "success", row["message"]
        assert published_ids(profile, pattern.name) == local_ids(profile, pattern), day
        return row

    first = night("2010-07-25")
    assert first["full_recompute"] and first["inserted"] == 2  # patients 1 and 2
    assert night("2010-08-30")["inserted"] == 0
    # a dose for patient 1 on 1 July arrives late: it is the first now, and its match
    # (with the blood count of 4 July) replaces the one of the dose of 5 July
    (landing / "chemo_mw" / "late.csv").write_text(
        "event_id,patient,type,value,unit,ts\nlate1,1,P,100,mg,2010-07-01T00:00:00\n")
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


NO_EARLIER_C = """\
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
    landing = tmp_path / "landing"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw",
                    landing / "chemo_mw")
    profile = make_profile(tmp_path, landing=landing)
    path = tmp_path / "no_d.yaml"
    path.write_text(textwrap.dedent(NO_EARLIER_C))
    pattern = load_pattern(path)
    quiet = dict(echo=lambda *_: None)

    def night(day):
        [row] = [r for r in run_all(spark, profile, day, [str(path)], **quiet)
                 if r.get("pattern") == pattern.name]
        assert row["status"] == "success", row["message"]
        assert published_ids(profile, pattern.name) == local_ids(profile, pattern), day
        return row

    first = night("2010-08-30")
    assert first["inserted"] == 2  # patient 1's blood counts of 17 and 22 July
    # a D for patient 1 on 1 July arrives late: no blood count of theirs qualifies now
    (landing / "chemo_mw" / "late.csv").write_text(
        "event_id,patient,type,value,unit,ts\nlate2,1,D,100,mg,2010-07-01T00:00:00\n")
    late = night("2010-08-31")
    assert late["full_recompute"] and late["deleted"] == 2


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
    landing = tmp_path / "landing"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "landing" / "chemo_mw",
                    landing / "chemo_mw")
    profile = make_profile(tmp_path, landing=landing)
    path = tmp_path / "facts.yaml"
    path.write_text(textwrap.dedent(FACTS).replace("      - [x]\n", "      - [x]\n"))
    pattern = load_pattern(path)
    lake = lk.Lake(profile.lake)
    quiet = dict(echo=lambda *_: None)
    for day, extra in (("2010-08-30", None),
                       ("2010-08-31", "event_id,patient,type,value,unit,ts\n"
                                      "n1,2,P,1,mg,2010-06-20T00:00:00\n")):
        if extra:
            (landing / "chemo_mw" / "more.csv").write_text(extra)
        [row] = [r for r in run_all(spark, profile, day, [str(path)], **quiet)
                 if r.get("pattern") == pattern.name]
        assert row["status"] == "success", row["message"]
        assert published_ids(profile, pattern.name) == local_ids(profile, pattern), day
    table = lake.read_arrow(lake.matches(pattern.name)).to_pylist()
    assert table and all(r["seen"] >= 8 for r in table)
