"""``explain`` on a real lake: the plan's costs and the statistics behind them."""

from pathlib import Path

from jobs.core.language.patternfile import load_pattern
from jobs.lake import store as lk


def test_explain_prints_plan_costs_and_statistics(spark, nightly):
    from jobs.config import load_sources
    from jobs.pipeline.match.planning import choose_plan, explain_text

    profile = nightly[0]
    path = Path("patterns/sepsis_high_marker_then_admission.yaml")
    pattern = load_pattern(path)
    choice = choose_plan(spark, lk.Lake(profile.lake), pattern, None, None,
                         dict(load_sources()["sepsis"].columns), generator="dp-b")
    text = explain_text(pattern, choice)
    assert "generator dp-b" in text and "W·r h" in text and "SEL h ~ w" in text
    assert choice.sources == ["stats table (leaves), sample (pairs)"]
    assert all(name in text for name in ("trivial", "ii-random", "zstream-ord", "dp-ld"))
    # re-planning: the sizes observed in the sampled windows instead of the table's rates
    again = choose_plan(spark, lk.Lake(profile.lake), pattern, None, None,
                        dict(load_sources()["sepsis"].columns), observed=True)
    assert again.replanned == "observed" and again.sources == ["sample (leaves and pairs)"]
    assert "re-planned" in explain_text(pattern, again)
