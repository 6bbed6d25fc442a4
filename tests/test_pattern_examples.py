"""Pattern CI: every example a pattern file carries passes (the pattern is tested like a
dbt model), and a failing or malformed example is reported with its file and line."""

from pathlib import Path

import pytest

from jobs.cli.main import main
from jobs.core.language.patternfile import PatternError, load_pattern, parse_pattern
from jobs.core.local.examples import run_example
from jobs.core.local.row_patterns import example_problems, is_sidecar, load_row_pattern

ROOT = Path(__file__).resolve().parent.parent
YAML = [f for f in sorted((ROOT / "patterns").glob("*.yaml")) if not is_sidecar(f)]
EXAMPLES = [(f, ex.name) for f in YAML for ex in load_pattern(f).examples]


def test_every_committed_pattern_has_examples():
    for f in YAML:
        assert load_pattern(f).examples, f"{f.name} carries no example"


@pytest.mark.parametrize("path", sorted((ROOT / "patterns").glob("*.sql")),
                         ids=lambda p: p.stem)
def test_every_committed_row_pattern_passes_its_examples(path):
    pf = load_row_pattern(path)
    assert pf.examples, f"{path.name}'s sidecar carries no example"
    assert example_problems(pf) == []


@pytest.mark.parametrize("path, name", EXAMPLES, ids=[f"{f.stem}: {n}" for f, n in EXAMPLES])
def test_pattern_example(path, name):
    pattern = load_pattern(path)
    example = next(e for e in pattern.examples if e.name == name)
    result = run_example(pattern, example)
    assert result.ok, result.describe(path.name)


BASE = """\
name: x
source: chemo_mw
within: 2d
sets: [[c], [b]]
conditions:
  - c.type = 'C'
  - b.type = 'B'
examples:
  - name: one pair
    events:
      - {event_id: e1, type: C, ts: 2010-01-01}
      - {event_id: e2, type: B, ts: 2010-01-02}
    expect:
      - {c: [e1], b: [e2]}
"""


def test_failing_example_names_file_and_line(tmp_path, capsys):
    f = tmp_path / "x.yaml"
    f.write_text(BASE.replace("ts: 2010-01-02", "ts: 2010-01-05"))
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:9: example 'one pair' fails: missing {{'c': ['e1'], 'b': ['e2']}}" in err \
        or f"{f}:9: example 'one pair' fails: missing {{'b': ['e2'], 'c': ['e1']}}" in err


@pytest.mark.parametrize("change, fragment, line", [
    (("{c: [e1], b: [e2]}", "{c: [e1], x: [e2]}"), "do not match the pattern's", 14),
    (("{c: [e1], b: [e2]}", "{c: [e1], b: [e9]}"), "unknown event id(s) ['e9']", 14),
    (("{event_id: e2, type: B, ts: 2010-01-02}", "{type: B, ts: 2010-01-02}"),
     "need event_id and ts", 11),
    (("    expect:", "    expected:"), "unknown key(s) expected", 9),
])
def test_malformed_examples(change, fragment, line):
    with pytest.raises(PatternError) as info:
        parse_pattern(BASE.replace(*change), "x.yaml")
    found = [(p.line, p.message) for p in info.value.problems]
    assert any(ln == line and fragment in msg for ln, msg in found), found


def test_examples_do_not_change_the_version():
    with_examples = parse_pattern(BASE)
    without = parse_pattern(BASE.split("examples:")[0])
    assert with_examples.version == without.version
