"""``.sql`` row patterns at the front of the tools: ``ses match FILE.sql EVENTS`` prints a
line per match, ``ses validate`` parses without executing anything and runs the sidecar's
examples, the catalogue tells a sidecar from a pattern, and the nightly catalogue names a
row pattern as not run yet."""

import json

import pytest

from jobs.cli.main import main
from jobs.project.patterns import every_pattern_path, load_catalog, pattern_paths

V_SHAPE = """-- a fall then a rise in one patient's values
SELECT * FROM sepsis MATCH_RECOGNIZE (
  PARTITION BY patient
  ORDER BY ts
  MEASURES FIRST(B.value) AS top, LAST(C.value) AS last_value, count(B.*) AS falls
  PATTERN (A B+ C+)
  WITHIN INTERVAL '10' DAY
  DEFINE B AS B.value < PREV(B.value), C AS C.value > PREV(C.value)
) AS m
"""
EVENTS = """event_id,ts,patient,value
e1,2024-01-01,p1,90
e2,2024-01-02,p1,80
e3,2024-01-03,p1,70
e4,2024-01-04,p1,80
e5,2024-01-05,p1,90
e6,2024-01-06,p2,50
e7,2024-01-07,p2,40
e8,2024-01-20,p2,60
"""
SIDECAR = """description: a fall then a rise
examples:
  - name: one V per patient within ten days
    events:
      - {event_id: a, patient: '1', value: 5, ts: 2024-01-01}
      - {event_id: b, patient: '1', value: 3, ts: 2024-01-02}
      - {event_id: c, patient: '1', value: 4, ts: 2024-01-03}
    expect:
      - {A: [a], B: [b], C: [c], measures: {top: 3, falls: 1}}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "v_shape.sql").write_text(V_SHAPE)
    (tmp_path / "v_shape.yaml").write_text(SIDECAR)
    (tmp_path / "events.csv").write_text(EVENTS)
    return tmp_path


def test_match_prints_a_line_per_match(folder, capsys):
    code = main(["match", str(folder / "v_shape.sql"), str(folder / "events.csv")])
    out, err = capsys.readouterr()
    assert code == 0, err
    (line,) = [json.loads(x) for x in out.splitlines()]  # p2's rise is 13 days later
    assert line["pattern"] == "v_shape" and line["partition"] == {"patient": "p1"}
    assert line["bindings"] == {"A": ["e1"], "B": ["e2", "e3"], "C": ["e4", "e5"]}
    assert line["measures"] == {"top": 80, "last_value": 90, "falls": 2}
    assert (line["start"], line["end"]) == ("2024-01-01T00:00:00", "2024-01-05T00:00:00")


def test_validate_runs_the_sidecar_examples(folder, capsys):
    assert main(["validate", str(folder)]) == 0, capsys.readouterr()
    assert "1 pattern file(s) valid, 1 example(s) pass" in capsys.readouterr().out
    (folder / "v_shape.yaml").write_text(SIDECAR.replace("top: 3", "top: 4"))
    assert main(["validate", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"{folder / 'v_shape.yaml'}:3: example 'one V per patient within ten days' " \
           "fails" in err


@pytest.mark.parametrize("text, where, message", [
    (V_SHAPE.replace("count(B.*)", "count(B.dose)"), "5:70", "dose is not a column of "
     "source 'sepsis'"),
    (V_SHAPE.replace("B.value < PREV", "X.value < PREV"), "8:15", "undefined variable X"),
    (V_SHAPE.replace("count(B.*)", "sum(B.value + C.value)"), "5:64", "mixes variables B, C"),
    (V_SHAPE.replace("PATTERN (A B+ C+)", "PATTERN (A B{4,2} C+)"), "6:15", "lower bound"),
    (V_SHAPE + "; DROP TABLE events", "10:3", "one statement only"),
    ("DELETE FROM events", "1:1", "one statement SELECT * FROM"),
])
def test_validate_names_file_line_and_column(folder, capsys, text, where, message):
    (folder / "v_shape.sql").write_text(text)
    assert main(["validate", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"{folder / 'v_shape.sql'}:{where}: " in err and message in err


def test_sidecar_holds_description_and_examples_only(folder, capsys):
    (folder / "v_shape.yaml").write_text(SIDECAR + "within: 3d\n")
    assert main(["validate", str(folder)]) == 1
    assert "unknown key 'within'" in capsys.readouterr().err
    (folder / "v_shape.yaml").unlink()
    assert main(["validate", str(folder)]) == 1
    assert "no examples" in capsys.readouterr().err


def test_the_catalogue_tells_a_sidecar_from_a_pattern(folder):
    assert pattern_paths(folder) == []  # v_shape.yaml is the sidecar of v_shape.sql
    assert [p.name for p in every_pattern_path(folder)] == ["v_shape.sql"]
    catalog = load_catalog(folder=folder, sources={})
    assert catalog.patterns == () and catalog.rejected == ()
    ((path, pf),) = catalog.row_patterns
    assert path.name == "v_shape.sql" and pf.name == "v_shape" and pf.source == "sepsis"
    assert [ex.name for ex in pf.examples] == ["one V per patient within ten days"]


def test_a_row_pattern_of_an_unknown_source_or_a_taken_name_is_rejected(folder):
    catalog = load_catalog(folder=folder, sources={"hospital": object()})
    (rejected,) = catalog.rejected
    assert "unknown source 'sepsis' in FROM" in rejected.message
    (folder / "other.yaml").write_text("name: v_shape\nsource: sepsis\nwithin: 1d\n"
                                        "sets: [[a]]\nconditions:\n  - a.value > 1\n")
    catalog = load_catalog(folder=folder, sources={})
    assert sorted(r.path.name for r in catalog.rejected) == ["other.yaml", "v_shape.sql"]
    assert all("is also used by" in r.message for r in catalog.rejected)


def test_explain_shows_how_a_row_pattern_is_matched(folder, capsys):
    assert main(["explain", str(folder / "v_shape.sql")]) == 0
    out = capsys.readouterr().out
    assert "partitions: patient; order: ts" in out
    assert "output: ONE ROW PER MATCH; after a match: skip past last" in out
    assert "every match holds: A, B, C" in out
    assert "conditions evaluated on the match so far: B, C" in out
    assert "measure falls: bigint" in out and "measure top: double" in out
    assert " label A" in out and " done" in out


def test_a_value_sql_refuses_names_the_file_line_and_column(folder, capsys):
    (folder / "v_shape.sql").write_text(V_SHAPE.replace("B.value < PREV(B.value)",
                                                        "B.value / 0 < PREV(B.value)"))
    assert main(["match", str(folder / "v_shape.sql"), str(folder / "events.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {folder / 'v_shape.sql'}:8:23: division by zero"
