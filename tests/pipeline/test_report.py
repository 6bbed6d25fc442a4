"""The run's summary table, as ``ses run`` prints it."""

from jobs.config import Profile
from jobs.pipeline.report import summary

from ..conftest import SPARK_CONF


def _row(name: str, **kw) -> dict:
    row = dict(pattern=name, matches=12, inserted=3, events=4000, events_after_filter=250,
               late_events=0, match_seconds=1.25, validate_seconds=0.1, publish_seconds=0.0,
               status="success")
    row.update(kw)
    return row


def test_a_pattern_name_longer_than_the_column_keeps_every_row_aligned(tmp_path):
    profile = Profile(name="t", landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"),
                      spark_master="local[1]", spark_conf=SPARK_CONF)
    long = "sepsis_registration_optional_triage_antibiotics_and_more"
    rows = [_row("short"), _row(long),
            _row("broken", status="failed", message="the events table is missing")]
    lines = summary(profile, rows, "r1", 2.0).splitlines()
    table = lines[2:6]
    assert table[0].startswith("pattern") and table[2].startswith(long + " ")
    # each column ends where the header's does: "matches" over 12, "status" over success
    end = table[0].index("matches") + len("matches")
    assert [line[end - 2:end] for line in table[1:3]] == ["12", "12"]
    start = table[0].index("status")
    assert [line[start:].split()[0] for line in table[1:4]] == ["success", "success",
                                                                "failed"]
    assert "r1 (2.0 s)" in lines[1]


def test_a_failure_message_is_whole_and_wrapped(tmp_path):
    """A long message keeps its end (the "did you mean"), wrapped under the table."""
    profile = Profile(name="t", landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"),
                      spark_master="local[1]", spark_conf=SPARK_CONF)
    message = ("patterns/x.yaml:9: in condition 'c.valeu > 3': the source has no attribute "
               "'valeu' (columns: event_id, event_type, org_group, patient, ts, value); "
               "did you mean 'value'?")
    out = summary(profile, [_row("x", status="failed", message=message)], "r1", None)
    assert "did you mean 'value'?" in out
    wrapped = out[out.index("x failed:"):out.index("\ntables:")].strip().splitlines()
    assert len(wrapped) > 1 and all(len(line) <= 100 for line in wrapped)
    assert " ".join(line.strip() for line in wrapped) == f"x failed: {message}"
