"""ZStream: all matches by tree plans, equal to the oracle (Definition 2) for every plan
shape and every pruning combination; plans, the cost model and the cap."""

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.cli.main import main
from jobs.core.local.runner import MatchCapExceeded, MatchOptions, run
from jobs.core.plans.costs import PlanStatistics, cost_tree, partial_matches
from jobs.core.plans.planners import FixedPlan, planner
from jobs.core.plans.trees import Join, Leaf
from jobs.core.reference import oracle

from ..helpers import EXAMPLES, ROOT, chemo_mw, keys, pattern_file, pattern_text
from ..strategies import event_tables, patterns

COMBINATIONS = [MatchOptions(matcher="zstream", strategy="eager")] + [
    MatchOptions(matcher="zstream", filter=f, partition=p, conditions=c, plan=plan)
    for (f, p, c), plan in itertools.product(itertools.product([True, False], repeat=3),
                                             ["zstream", "left-deep"])]


@st.composite
def trees(draw, pattern):
    """A random tree shape over a random order of the pattern's variables."""
    leaves = [Leaf(v.index, str(v)) for v in pattern.variables]
    leaves = draw(st.permutations(leaves))

    def build(items):
        if len(items) == 1:
            return items[0]
        k = draw(st.integers(1, len(items) - 1))
        return Join(build(items[:k]), build(items[k:]))

    return build(list(leaves))


def zpattern(name):
    p = pattern_file(name)
    return pattern_text(open(p.path).read().replace("matcher: ses", "matcher: zstream"))


def test_p1_all_eleven_matches_every_combination():
    p, events = zpattern("mw_chemo_p1"), chemo_mw()
    expected = keys(oracle.all_matches(p, events))
    assert len(expected) == 11
    for options in COMBINATIONS:
        found, stats = run(p, events, options)
        assert keys(found) == expected, options
        assert stats["matches"] == 11


def test_q1_all_matches():
    from ..helpers import chemo_ses
    p, events = zpattern("ses_chemo_q1"), chemo_ses()
    expected = keys(oracle.all_matches(p, events))
    for options in COMBINATIONS:
        assert keys(run(p, events, options)[0]) == expected, options


@given(st.data())
def test_every_plan_shape_equals_the_oracle(data):
    pattern = data.draw(patterns(matcher="zstream"))
    events = data.draw(event_tables(max_events=8))
    expected = keys(oracle.all_matches(pattern, events))
    plan = data.draw(trees(pattern))
    for partition, conditions in itertools.product((False, True), repeat=2):
        options = MatchOptions(matcher="zstream", plan=FixedPlan(plan), partition=partition,
                               conditions=conditions)
        assert keys(run(pattern, events, options)[0]) == expected, str(plan)


def test_a_given_tree_samples_no_statistics_to_match(monkeypatch):
    """A tree given to the matcher (the driver's, shipped to phase 2) is used as it is:
    no group samples statistics to match with it; the stats still name it and its cost
    unless the caller keeps neither (phase 2), and the matches stay the oracle's."""
    from jobs.core.engine import matchers

    p, events = zpattern("ses_chemo_q1"), chemo_mw()
    expected = keys(oracle.all_matches(p, events))
    tree = planner("zstream").plan(p, PlanStatistics((1.0,) * len(p.variables), {}))
    sampled = []
    real = matchers.estimate_statistics
    monkeypatch.setattr(matchers, "estimate_statistics",
                        lambda *a, **k: sampled.append(1) or real(*a, **k))
    quiet = MatchOptions(matcher="zstream", plan=FixedPlan(tree), describe_plan=False)
    matches, stats = run(p, events, quiet)
    assert keys(matches) == expected and not sampled
    assert "plan" not in stats and "plan_cost" not in stats
    matches, stats = run(p, events, MatchOptions(matcher="zstream", plan=FixedPlan(tree)))
    assert keys(matches) == expected and stats["plan"] == str(tree) and stats["plan_cost"] > 0
    assert sampled  # the cost is estimated for the asking
    sampled.clear()
    run(p, events, MatchOptions(matcher="zstream", plan="zstream", describe_plan=False))
    assert sampled  # a generator that reads the statistics samples them


@given(patterns(matcher="zstream"), event_tables(max_events=8))
def test_every_combination_equals_the_oracle(pattern, events):
    expected = keys(oracle.all_matches(pattern, events))
    for options in COMBINATIONS:
        assert keys(run(pattern, events, options)[0]) == expected, options


def test_cost_model_and_zstream_plan_choice():
    """PM(in) = PM(l)·PM(r)·SEL; the DP finds the cheapest shape for the leaf order."""
    p = pattern_text("name: x\nsource: s\nwithin: 1d\nsets: [[a], [b], [c]]\n")
    st_ = PlanStatistics((100.0, 100.0, 2.0), {(0, 1): 0.5, (1, 2): 0.01, (0, 2): 1.0})
    a, b, c = (Leaf(i, n) for i, n in enumerate("abc"))
    left_deep = Join(Join(a, b), c)
    right_deep = Join(a, Join(b, c))
    assert partial_matches(Join(a, b), st_) == 100 * 100 * 0.5
    assert cost_tree(left_deep, st_) == 202 + 5000 + 5000 * 2 * 0.01 * 1.0
    assert cost_tree(right_deep, st_) == 202 + 2 + 100 * 2 * 0.5 * 1.0
    assert planner("zstream").plan(p, st_) == right_deep
    assert planner("trivial").plan(p, st_) == left_deep == planner("left-deep").plan(p, st_)
    assert str(right_deep) == "(a ⋈ (b ⋈ c))"


def test_plan_option_prints_tree_and_cost(capsys, tmp_path):
    z = tmp_path / "z.yaml"
    z.write_text(open(ROOT / "patterns" / "mw_chemo_p1.yaml").read().replace(
        "matcher: ses", "matcher: zstream"))
    code = main(["match", str(z), str(EXAMPLES / "chemo_mw" / "chemo_match_windows.csv"), "--plan", "--stats"])
    out2, err2 = capsys.readouterr()
    assert code == 0 and len(out2.splitlines()) == 11
    code = main(["match", str(z), str(EXAMPLES / "chemo_mw" / "chemo_match_windows.csv"),
                 "--plan", "dp-b", "--stats"])
    out, err = capsys.readouterr()
    assert code == 0 and out == out2  # a plan never changes the matches
    assert err.splitlines()[0].startswith("plan (dp-b): ") and "Cost_tree" in err
    code = main(["match", str(z), str(EXAMPLES / "chemo_mw" / "chemo_match_windows.csv"), "--plan", "--stats"])
    out, err = capsys.readouterr()
    assert code == 0 and len(out.splitlines()) == 11
    first, stats = err.splitlines()[0], json.loads(err.splitlines()[1])
    assert first.startswith("plan (dp-ld): ") and "estimated Cost_ord = " in first
    assert stats["plan"] in first and stats["peak"] > 0


def test_cap_names_the_window_and_how_to_raise_it(capsys, tmp_path):
    from jobs.core.language.events import Event, order
    p = pattern_text("name: blowup\nsource: s\nwithin: 10d\nsets: [[a+], [b]]\nconditions:\n"
                     "  - a.type = 'A'\n  - b.type = 'B'\nmatcher: zstream\n")
    events = order([Event(f"a{i:02d}", i, {"type": "A"}) for i in range(16)] +
                   [Event("b", 100, {"type": "B"})])
    with pytest.raises(MatchCapExceeded) as info:
        run(p, events, MatchOptions(max_matches_per_window=1000))
    msg = str(info.value)
    assert "more than 1,000 partial matches" in msg and "event a00" in msg
    assert "--max-matches-per-window" in msg
    assert len(run(p, events, MatchOptions(max_matches_per_window=10**6))[0]) == 2**16 - 1
    f = tmp_path / "e.csv"
    f.write_text("event_id,ts,type\n" + "".join(f"a{i:02d},2010-01-01T00:00:{i:02d},A\n"
                                                for i in range(16)) + "b,2010-01-02,B\n")
    y = tmp_path / "p.yaml"
    y.write_text("name: blowup\nsource: s\nwithin: 10d\nsets: [[a+], [b]]\nconditions:\n"
                 "  - a.type = 'A'\n  - b.type = 'B'\nmatcher: zstream\n")
    code = main(["match", str(y), str(f), "--max-matches-per-window", "500"])
    assert code == 3 and "raise the cap" in capsys.readouterr().err
