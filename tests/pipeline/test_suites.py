"""The expectations the matches suite derives from a pattern file (no Spark here: the
suites run on real frames in tests/pipeline/test_pipeline.py)."""

from jobs.core.patternfile import load_pattern, parse_pattern
from jobs.pipeline.quality import matches_expectations

from ..conftest import ROOT


def _between(suite: list[dict]) -> list[dict]:
    return [e["kwargs"] for e in suite if e["type"] == "expect_column_values_to_be_between"]


def test_a_count_measure_lies_within_its_variables_bounds():
    pattern = load_pattern(ROOT / "patterns" / "sepsis_crp_run_high_average.yaml")
    assert {"column": "m_tests", "min_value": 2} in _between(matches_expectations(pattern))
    text = ("name: x\nsource: s\nwithin: 1d\nalternatives:\n"
            "  - sets: [[a, 'p{2,4}']]\n    measures: {doses: count(p), total: sum(p.v)}\n"
            "  - sets: [[a, q+]]\n    measures: {doses: count(q)}\n")
    kwargs = _between(matches_expectations(parse_pattern(text)))
    assert {"column": "a1_m_doses", "min_value": 2, "max_value": 4} in kwargs
    assert {"column": "a2_m_doses", "min_value": 1} in kwargs
    assert not any("total" in k["column"] for k in kwargs)  # a sum has no bounds
