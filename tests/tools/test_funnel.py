"""``ses funnel`` on the nightly lake: the steps in order as JSON, one partition's funnel
equal to the brute-force reference on that partition's events, and the whole funnel's
last step holding the partitions that have a published match."""

import json
from pathlib import Path

from jobs.core.language.events import events_from_arrow
from jobs.core.language.patternfile import load_pattern
from jobs.core.reference.funnel import funnel as reference_funnel
from jobs.lake import store as lk
from jobs.spark.tables import read_spark

PATTERN = "sepsis_labs_then_antibiotics"


def test_funnel_command_prints_the_steps_in_order(spark, nightly, monkeypatch, capsys, tmp_path):
    from jobs.cli.main import main

    profile = nightly[0]
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  test:\n    landing: {profile.landing}\n"
                    f"    lake: {profile.lake}\n    spark: {{master: 'local[1]'}}\n")
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    assert main(["funnel", PATTERN, "--profile", "test", "--format", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert [s["variables"] for s in steps] == [["r"], ["l", "c"], ["a"]]
    counts = [s["partitions"] for s in steps]
    assert counts == sorted(counts, reverse=True) and counts[-1] > 0
    for a, b in zip(steps, steps[1:]):
        assert a["windows"] - b["windows"] == sum(a["stopped"].values())
    lake = lk.Lake(profile.lake)
    matched = read_spark(spark, lake, lake.matches(PATTERN)).select("patient").toArrow()
    assert steps[-1]["partitions"] == len(set(matched.column("patient").to_pylist()))
    events = read_spark(spark, lake, lake.events("sepsis"))
    # one partition: the engine's funnel equals the reference on that patient's events
    patient = events.where(events.event_type == "IV Antibiotics").first()["patient"]
    assert main(["funnel", PATTERN, "--profile", "test", "--partition", str(patient)]) == 0
    table = capsys.readouterr().out
    assert "1. r" in table and "3. a" in table
    assert main(["funnel", PATTERN, "--profile", "test", "--partition", str(patient),
                 "--format", "json"]) == 0
    mine = json.loads(capsys.readouterr().out)
    rows = events_from_arrow(events.where(events.patient == patient).toArrow())
    pattern = load_pattern(Path("patterns") / f"{PATTERN}.yaml")
    assert mine == [r.as_dict() for r in reference_funnel(pattern, rows)]
    # the night's funnel from the funnels table (no Spark): a first night, the same steps
    assert main(["funnel", PATTERN, "--profile", "test", "--run", "latest",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == steps
    assert main(["funnel", PATTERN, "--profile", "test", "--run", "nope"]) == 2
    assert "no funnel of" in capsys.readouterr().err
    assert main(["funnel", "no_such_pattern", "--profile", "test"]) == 2
    assert "no pattern file 'no_such_pattern'" in capsys.readouterr().err


def test_the_nights_funnels_table_equals_the_funnel_of_the_whole_history(spark, nightly):
    """A first night counts every window of the history: its rows in ``funnels`` (counted
    in phase 2, group by group, and added up) equal the funnel computed at once on the
    driver, for a negation, a group variable, optional steps with [not next], a window
    partitioned by the patient and one of the hospital log."""
    from jobs.lake.funnels import latest, read_funnels
    from jobs.tools.funnel import funnel_of

    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    for name in ("sepsis_antibiotics_without_prior_lactate", "sepsis_rising_crp_then_icu",
                 "sepsis_registration_optional_triage_antibiotics", PATTERN,
                 "sepsis_escalation_either_way", "hospital_crossmatch_transfusion"):
        stored = [(r.alternative, r.step, r.partitions, r.windows, r.stops)
                  for r in latest(read_funnels(lake, name))]
        _, rows = funnel_of(spark, profile, name)
        assert stored == [(r.alternative, r.step, r.partitions, r.windows, dict(r.stopped))
                          for r in rows], name
        assert stored and all(r.incomplete_groups == 0 for r in latest(read_funnels(lake, name)))
