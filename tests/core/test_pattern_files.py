"""Pattern files: the condition grammar, every validation error (with file and line), the
safe YAML loading, and the derived parts of the papers (properties, relationships, prev,
Θ+eq, partition attributes X)."""

from pathlib import Path

import pytest

from jobs.core.language.conditions.expressions import ConditionSyntaxError
from jobs.core.language.conditions.kinds import PrevRelationship, Property, Relationship
from jobs.core.language.conditions.parser import parse_condition, parse_conditions
from jobs.core.language.pattern import parse_duration
from jobs.core.language.patternfile import PatternError, check_schema, load_pattern, parse_pattern

ROOT = Path(__file__).resolve().parents[2]

VALID = """\
name: p1
source: chemo_mw
within: 15d
sets:
  - [c, p+]
  - [b]
conditions:
  - c.type = 'C'
  - p.type = 'P'
  - b.type = 'B'
  - c.patient = p.patient
  - p.patient = b.patient
  - prev(p.value) < p.value
"""


def problems_of(text: str) -> list[tuple[int, str]]:
    with pytest.raises(PatternError) as info:
        parse_pattern(text, "f.yaml")
    assert all(p.path == "f.yaml" for p in info.value.problems)
    return [(p.line, p.message) for p in info.value.problems]


def only_problem(text: str) -> tuple[int, str]:
    found = problems_of(text)
    assert len(found) == 1, found
    return found[0]


# -- grammar ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, kind, canonical", [
    ("c.type = 'C'", Property, "c.type = 'C'"),
    ("'C' = c.type", Property, "c.type = 'C'"),
    ("5 < b.value", Property, "b.value > 5"),
    ("b.value >= -2.5", Property, "b.value >= -2.5"),
    ("b.unit != 'it''s'", Property, "b.unit != 'it''s'"),
    ("b.unit <> 'x'", Property, "b.unit != 'x'"),
    ("c.start <= c.end", Property, "c.start <= c.end"),
    ("c.patient = p.patient", Relationship, "c.patient = p.patient"),
    ("prev(p.value) < p.value", PrevRelationship, "prev(p.value) < p.value"),
    ("p.value > prev(p.value)", PrevRelationship, "prev(p.value) < p.value"),
    ("prev ( p.end )<=p.start", PrevRelationship, "prev(p.end) <= p.start"),
    ("a.type in ('IV Antibiotics', 'IV Liquid')", Property,
     "a.type in ('IV Antibiotics', 'IV Liquid')"),
    ("a.type NOT IN ('x')", Property, "a.type not in ('x')"),
    ("b.value > 2 * a.value or b.type = 'ICU'", Relationship,
     "b.value > 2 * a.value or b.type = 'ICU'"),
    ("not (a.x > 1 or a.y = 'k')", Property, "not (a.x > 1 or a.y = 'k')"),
    ("(a.x + 1) * 2 > -3", Property, "(a.x + 1) * 2 > -3"),
    ("prev(p.value) * 1.1 < p.value", PrevRelationship, "prev(p.value) * 1.1 < p.value"),
])
def test_condition_grammar(text, kind, canonical):
    cond, _ = parse_condition(text)
    assert isinstance(cond, kind) and str(cond) == canonical
    again, _ = parse_condition(str(cond))
    assert again == cond  # the canonical text parses to the same tree


def test_top_level_and_splits_an_entry():
    found = [c for c, _ in parse_conditions("p.type = 'Lactic Acid' and prev(p.value) < p.value")]
    assert [type(c) for c in found] == [Property, PrevRelationship]
    assert len(parse_conditions("a.x = 1 or a.y = 2 and a.z = 3")) == 1  # and binds tighter


@pytest.mark.parametrize("text, fragment", [
    ("c.type == 'C'", "bad operator '=='"),
    ("c.type => 1", "bad operator '=>'"),
    ("c.type = \"C\"", "single quotes"),
    ("c.type = 'C", "unterminated"),
    ("c.type 'C'", "expected an operator"),
    ("c = 'C'", "'.' after a variable name"),
    ("p+.type = 'P'", "the + belongs in 'sets' only"),
    ("prev(p.value) < c.value", "the other side must be p.attr"),
    ("prev(p.value) < 3", "must be compared with an attribute of the same variable"),
    ("1 = 1", "must name a variable"),
    ("c.type = __import__('os')", "unknown function '__import__'"),
    ("a.x + 'k' > 1", "+ - * / need numbers"),
    ("a.x = b.y or c.z = 1", "at most two variables"),
    ("a.x in (b.y)", "expected a literal in the list"),
    ("a.x > 1 b.y", "join conditions with and / or"),
    ("(a.x > 1", "expected ')'"),
])
def test_condition_syntax_errors(text, fragment):
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize("text, ns", [("15d", 15 * 86400 * 10**9), ("264h", 264 * 3600 * 10**9),
                                      ("20ms", 20 * 10**6), ("3 min", 180 * 10**9), ("0s", 0)])
def test_durations(text, ns):
    assert parse_duration(text) == ns


# -- validation errors, each with its line ---------------------------------------------
def test_valid_file_parses():
    p = parse_pattern(VALID, "f.yaml")
    assert [str(v) for v in p.variables] == ["c", "p+", "b"]
    assert p.tau == 15 * 86400 * 10**9 and p.matcher == "ses"
    assert p.condition_lines == (8, 9, 10, 11, 12, 13)


def test_unknown_variable():
    line, msg = only_problem(VALID.replace("b.type = 'B'", "x.type = 'B'"))
    assert line == 10 and "unknown variable 'x'" in msg and "c, p, b" in msg


def test_variable_in_two_sets():
    line, msg = only_problem(VALID.replace("  - [b]", "  - [b, c]").replace(
        "  - b.type = 'B'\n", ""))
    assert line == 6 and "'c' appears in sets 1 and 2" in msg


def test_variable_twice_in_one_set():
    line, msg = only_problem(VALID.replace("[c, p+]", "[c, p+, c]"))
    assert line == 5 and "twice in set 1" in msg


def test_group_variable_misused_in_condition():
    line, msg = only_problem(VALID.replace("p.type = 'P'", "p+.type = 'P'"))
    assert line == 9 and "+ belongs in 'sets' only" in msg


def test_bad_variable_token_in_sets():
    line, msg = only_problem(VALID.replace("[c, p+]", "[c, p++]"))
    assert line == 5 and "bad variable 'p++'" in msg


def test_prev_on_singleton():
    line, msg = only_problem(VALID + "  - prev(c.value) < c.value\n")
    assert line == 14 and "prev() needs a group variable" in msg and "'c' is a singleton" in msg


def test_bad_operator_names_line_and_column():
    line, msg = only_problem(VALID.replace("b.type = 'B'", "b.type == 'B'"))
    assert line == 10 and "bad operator '=='" in msg and "column 8" in msg


@pytest.mark.parametrize("within, fragment", [
    ("15 weeks", "bad unit 'weeks'"), ("15", "has no unit"), ("fortnight", "bad duration"),
    ("-3d", "bad duration")])
def test_bad_within(within, fragment):
    line, msg = only_problem(VALID.replace("within: 15d", f"within: {within}"))
    assert line == 3 and fragment in msg


@pytest.mark.parametrize("field", ["name", "source", "within", "sets"])
def test_missing_field(field):
    lines = [ln for ln in VALID.splitlines(keepends=True) if not ln.startswith(field + ":")]
    text = "".join(lines)
    if field == "sets":
        text = text.replace("  - [c, p+]\n  - [b]\n", "")
        text = text.replace("conditions:\n", "conditions: []\n").split("  - c.type")[0]
    found = problems_of(text)
    assert (1, f"missing field '{field}'") in found


def test_unknown_key_with_hint():
    line, msg = only_problem(VALID.replace("conditions:", "condition:"))
    assert line == 7 and "unknown key 'condition'" in msg and "did you mean 'conditions'" in msg


def test_unknown_matcher_and_bad_name():
    found = problems_of(VALID.replace("name: p1", "name: P 1") + "matcher: nfa\n")
    assert (1, "name 'P 1' must be lower case letters, digits and _ (it names the output "
               "table)") in found
    assert any(line == 14 and "unknown matcher 'nfa'" in m for line, m in found)


def test_duplicate_key_and_bad_yaml():
    line, msg = only_problem(VALID + "within: 3d\n")
    assert line == 14 and "'within' appears twice" in msg
    line, msg = only_problem("name: [unclosed\n")
    assert "not valid YAML" in msg


def test_several_problems_reported_together():
    text = VALID.replace("c.type = 'C'", "z.type = 'C'").replace("15d", "15y")
    assert {line for line, _ in problems_of(text)} == {3, 8}


def test_python_tags_are_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    evil = VALID.replace("name: p1", f"name: !!python/object/apply:os.system ['touch {marker}']")
    line, msg = only_problem(evil)
    assert line == 1 and "tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed" in msg
    assert not marker.exists()
    line, msg = only_problem(VALID.replace("[b]", "!custom [b]"))
    assert line == 6 and "not allowed" in msg


def test_load_pattern_names_the_file(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text(VALID.replace("15d", "15y"))
    with pytest.raises(PatternError) as info:
        load_pattern(f)
    assert str(info.value) == f"{f}:3: within: bad unit 'y' in '15y': use one of ms, s, min, h, d"


def test_schema_check():
    p = parse_pattern(VALID.replace("c.type = 'C'", "c.typ = 'C'").replace(
        "b.type = 'B'", "b.type = 3"), "f.yaml")
    schema = {"patient": "number", "type": "string", "value": "number"}
    found = [(x.line, x.message) for x in check_schema(p, schema)]
    assert found[0][0] == 8 and "no attribute 'typ'" in found[0][1] and "did you mean 'type'" in found[0][1]
    assert found[1][0] == 10 and "type holds strings but is compared with a number" in found[1][1]
    assert len(found) == 2


# -- derived parts ---------------------------------------------------------------------
def test_derived_parts_of_p1():
    p = load_pattern(ROOT / "patterns" / "mw_chemo_p1.yaml")
    assert {v: [str(c) for c in cs] for v, cs in p.properties.items()} == {
        "c": ["c.type = 'C'"], "p": ["p.type = 'P'"], "b": ["b.type = 'B'"]}
    assert [str(c) for c in p.prev_relationships["p"]] == ["prev(p.value) < p.value"]
    assert len(p.relationships) == 2
    # Example 12: Θ+eq adds c.PID = b.PID (and the reflexive p.PID = p.PID); X = {PID}
    assert set(map(str, p.equality_closure)) == {
        "c.patient = p.patient", "c.patient = b.patient", "p.patient = b.patient",
        "p.patient = p.patient"}
    assert p.partition_attributes == ("patient",)


def test_partition_attributes_need_every_variable():
    text = VALID + "  - c.unit = p.unit\n"
    p = parse_pattern(text)
    assert p.partition_attributes == ("patient",)  # unit links only c and p
    assert "c.unit = p.unit" in set(map(str, p.equality_closure))
    p2 = parse_pattern(VALID.replace("p.patient = b.patient", "p.patient < b.patient"))
    assert p2.partition_attributes == ()
    assert set(map(str, p2.equality_closure)) == {"c.patient = p.patient", "p.patient = p.patient"}


def test_version_ignores_order_and_changes_with_content():
    p = parse_pattern(VALID)
    swapped = VALID.replace("  - c.type = 'C'\n  - p.type = 'P'\n", "  - p.type = 'P'\n  - c.type = 'C'\n")
    assert parse_pattern(swapped).version == p.version
    assert parse_pattern(VALID.replace("15d", "16d")).version != p.version
