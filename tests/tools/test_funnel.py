"""``ses funnel`` on the nightly lake: the steps in order as JSON, one partition's funnel
equal to the brute-force reference on that partition's events, and the whole funnel's
last step holding the partitions that have a published match."""

import json
from pathlib import Path

from jobs.core.language.events import events_from_arrow
from jobs.core.language.patternfile import load_pattern
from jobs.core.reference.funnel import funnel as reference_funnel
from jobs.lake import store as lk

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
    matched = lake.read_spark(spark, lake.matches(PATTERN)).select("patient").toArrow()
    assert steps[-1]["partitions"] == len(set(matched.column("patient").to_pylist()))
    events = lake.read_spark(spark, lake.events("sepsis"))
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
    assert main(["funnel", "no_such_pattern", "--profile", "test"]) == 2
    assert "no pattern file 'no_such_pattern'" in capsys.readouterr().err
