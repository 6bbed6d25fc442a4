"""The plan generators of the join-optimization paper and their cost models: hand
computations, optimality of the dynamic programs against enumeration, local minima of
iterative improvement, and every generator's plan gives the oracle's matches."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.core.local.runner import MatchOptions, run
from jobs.core.plans.costs import (
    CostModel,
    PlanStatistics,
    cost_ord,
    cost_tree,
    latency_ord,
    latency_tree,
    set_pm,
)
from jobs.core.plans.planners import (
    PLANNERS,
    IterativeImprovement,
    greedy_order,
    plan_cost,
    planner,
    zstream_tree,
)
from jobs.core.plans.trees import Join, Leaf, leaf_order, left_deep
from jobs.core.reference import oracle

from ..helpers import keys, pattern_text
from ..strategies import event_tables, patterns

FOUR = pattern_text("name: x\nsource: s\nwithin: 1d\nsets: [[a], [b, c], [d]]\n")
STATS = PlanStatistics((10.0, 50.0, 2.0, 5.0),
                       {(0, 1): 0.1, (0, 2): 0.5, (1, 2): 0.01, (0, 3): 0.2, (1, 3): 1.0,
                        (2, 3): 0.3})


def test_cost_ord_and_latency_by_hand():
    # O = (c, a, d, b): PM of the prefixes
    c, ca, cad = 2.0, 2 * 10 * 0.5, 2 * 10 * 5 * 0.5 * 0.3 * 0.2
    cadb = cad * 50 * 0.01 * 0.1 * 1.0
    assert cost_ord([2, 0, 3, 1], STATS) == pytest.approx(c + ca + cad + cadb)
    # the last set is {d}: after d comes b (W·r_b = 50)
    assert latency_ord([2, 0, 3, 1], STATS, (3,)) == 50.0
    assert latency_ord([0, 1, 2, 3], STATS, (3,)) == 0.0
    model = CostModel(alpha=0.5)
    assert model.order([2, 0, 3, 1], STATS, (3,)) == pytest.approx(c + ca + cad + cadb + 25)
    # Cost_ord equals the cost of the left-deep tree without its leaves but the first
    tree = left_deep([Leaf(i, "abcd"[i]) for i in (2, 0, 3, 1)])
    assert cost_tree(tree, STATS) == pytest.approx(cost_ord([2, 0, 3, 1], STATS) + 10 + 5 + 50)


def test_latency_tree_by_hand():
    a, b, c, d = (Leaf(i, n) for i, n in enumerate("abcd"))
    tree = Join(Join(a, d), Join(b, c))  # d's path: (a ⋈ d), root: siblings a, (b ⋈ c)
    assert latency_tree(tree, STATS, (3,)) == pytest.approx(10 + 50 * 2 * 0.01)
    # left-deep with d last: only the partial matches of (a ⋈ b) ⋈ c wait for d
    assert latency_tree(Join(Join(Join(a, b), c), d), STATS, (3,)) == \
        pytest.approx(10 * 50 * 2 * 0.1 * 0.5 * 0.01)
    assert set_pm([1, 2], STATS) == 50 * 2 * 0.01


def test_order_generators_by_hand():
    assert leaf_order(planner("trivial").plan(FOUR, STATS)) == [0, 1, 2, 3]
    assert leaf_order(planner("efreq").plan(FOUR, STATS)) == [2, 3, 0, 1]  # by W·r
    # greedy: c (2) first; then the cheapest prefix with c: c·b = 2·50·0.01 = 1,
    # c·d = 2·5·0.3 = 3, c·a = 2·10·0.5 = 10 -> b; then with {c, b}: d gives
    # 1·5·0.3·1.0 = 1.5, a gives 1·10·0.5·0.1 = 0.5 -> a; then d
    assert greedy_order(FOUR, STATS, CostModel()) == [2, 1, 0, 3]
    assert leaf_order(planner("greedy").plan(FOUR, STATS)) == [2, 1, 0, 3]


def test_zstream_ord_is_zstream_on_the_greedy_order():
    leaves = [Leaf(v.index, str(v)) for v in FOUR.variables]
    greedy = [leaves[i] for i in greedy_order(FOUR, STATS, CostModel())]
    assert planner("zstream-ord").plan(FOUR, STATS) == zstream_tree(greedy, STATS)
    assert planner("zstream").plan(FOUR, STATS) == zstream_tree(leaves, STATS)


def all_trees(leaves):
    if len(leaves) == 1:
        yield leaves[0]
        return
    first, rest = leaves[0], leaves[1:]
    for k in range(len(rest) + 1):  # splits with the first leaf on the left
        for chosen in itertools.combinations(rest, k):
            left = [first, *chosen]
            right = [x for x in rest if x not in chosen]
            if not right:
                continue
            for lt in all_trees(left):
                for rt in all_trees(right):
                    yield Join(lt, rt)
                    yield Join(rt, lt)


@st.composite
def statistics(draw, n):
    pm = tuple(draw(st.floats(0.1, 100)) for _ in range(n))
    sel = {(i, j): draw(st.floats(0.01, 1.0)) for i, j in itertools.combinations(range(n), 2)}
    return PlanStatistics(pm, sel)


def pattern_of(n):
    names = "abcdef"[:n]
    return pattern_text("name: x\nsource: s\nwithin: 1d\nsets: [[" + ", ".join(names) + "]]\n")


@settings(max_examples=40)
@given(st.integers(2, 5).flatmap(lambda n: st.tuples(st.just(n), statistics(n))))
def test_dynamic_programs_are_optimal(case):
    n, stats = case
    p = pattern_of(n)
    best_ord = min(cost_ord(list(o), stats) for o in itertools.permutations(range(n)))
    assert cost_ord(leaf_order(planner("dp-ld").plan(p, stats)), stats) == pytest.approx(best_ord)
    leaves = [Leaf(i, "abcdef"[i]) for i in range(n)]
    best_tree = min(cost_tree(t, stats) for t in all_trees(leaves))
    assert cost_tree(planner("dp-b").plan(p, stats), stats) == pytest.approx(best_tree)
    # no generator beats the exact programs in its own cost model
    for name, gen in PLANNERS.items():
        tree = gen.plan(p, stats)
        if gen.kind == "order":
            assert cost_ord(leaf_order(tree), stats) >= best_ord * (1 - 1e-9), name
        assert cost_tree(tree, stats) >= best_tree * (1 - 1e-9), name


@settings(max_examples=30)
@given(st.integers(3, 6).flatmap(lambda n: st.tuples(st.just(n), statistics(n))))
def test_iterative_improvement_ends_in_a_local_minimum(case):
    n, stats = case
    p = pattern_of(n)
    for start in ("random", "greedy"):
        order = leaf_order(IterativeImprovement(start).plan(p, stats))
        cost = cost_ord(order, stats)
        for kind, i, j, k in IterativeImprovement._moves(n):
            new = list(order)
            if kind == "swap":
                new[i], new[j] = new[j], new[i]
            else:
                new[i], new[j], new[k] = order[j], order[k], order[i]
            assert cost_ord(new, stats) >= cost * (1 - 1e-9)
    assert cost_ord(leaf_order(planner("ii-greedy").plan(p, stats)), stats) <= \
        cost_ord(greedy_order(p, stats, CostModel()), stats) * (1 + 1e-9)


def test_plan_cost_uses_the_generators_model():
    tree = planner("greedy").plan(FOUR, STATS)
    assert plan_cost(planner("greedy"), FOUR, tree, STATS) == cost_ord(leaf_order(tree), STATS)
    tree = planner("dp-b").plan(FOUR, STATS)
    assert plan_cost(planner("dp-b"), FOUR, tree, STATS) == cost_tree(tree, STATS)


def test_unknown_generator_is_named():
    with pytest.raises(ValueError, match="unknown plan generator 'dpb': use one of trivial"):
        planner("dpb")


@given(st.data())
def test_every_generator_gives_the_oracles_matches(data):
    pattern = data.draw(patterns(matcher="zstream"))
    events = data.draw(event_tables(max_events=8))
    expected = keys(oracle.all_matches(pattern, events))
    for name in PLANNERS:
        options = MatchOptions(matcher="zstream", plan=name)
        assert keys(run(pattern, events, options)[0]) == expected, name


def test_replanning_rule():
    from jobs.pipeline.match.planning import REPLAN_FACTOR, needs_replan

    def run(est, actual, version="v1", status="success", at=1):
        return {"pattern_version": version, "status": status, "estimated_pm": est,
                "actual_pm": actual, "started_at": at}

    assert not needs_replan([], "v1")
    assert not needs_replan([run(10.0, 30.0)], "v1")  # within the factor
    assert needs_replan([run(1.0, REPLAN_FACTOR * 2)], "v1")  # underestimated
    assert needs_replan([run(100.0, 1.0)], "v1")  # overestimated
    assert not needs_replan([run(1.0, 100.0, version="v0")], "v1")  # another version
    assert not needs_replan([run(1.0, 100.0, at=1), run(1.0, 2.0, at=2)], "v1")  # the last


def test_driver_plans_travel_as_json():
    from jobs.core.plans.json_form import plans_from_json
    from jobs.pipeline.match.planning import PlanChoice

    trees = [planner(name).plan(FOUR, STATS) for name in ("dp-b", "greedy")]
    for tree in trees:
        choice = PlanChoice("dp-b", trees=[tree])
        shipped = plans_from_json(choice.to_json(), FOUR)
        assert shipped.plan(FOUR, STATS) == tree and str(shipped.trees[0]) == str(tree)


def test_latency_weight_moves_the_last_set_to_the_end():
    """With a large α the plans stop buffering events behind the last set's variable d."""
    rare_d = PlanStatistics((10.0, 50.0, 2.0, 0.1), STATS.selectivity)
    assert greedy_order(FOUR, rare_d, CostModel())[0] == 3  # the rarest first
    for name in ("greedy", "ii-greedy"):
        order = leaf_order(planner(name).plan(FOUR, rare_d, CostModel(alpha=1000.0)))
        assert order[-1] == 3, name
    tree = planner("trivial").plan(FOUR, STATS)
    assert CostModel(alpha=2.0).tree(tree, STATS, (3,)) == pytest.approx(
        cost_tree(tree, STATS) + 2.0 * latency_tree(tree, STATS, (3,)))


def test_the_papers_example_leaf_reordering():
    """Section 2.3: SEQ(A, B, C) WHERE a.x = c.x, equal rates, a very selective a ~ c.
    ZStream keeps the order a, b, c (only ((a ⋈ b) ⋈ c) or (a ⋈ (b ⋈ c))); the optimal
    tree joins a and c first, which ZSTREAM-ORD and DP-B find."""
    p = pattern_text("name: x\nsource: s\nwithin: 1d\nsets: [[a], [b], [c]]\n")
    st_ = PlanStatistics((10.0, 10.0, 10.0), {(0, 2): 0.001})
    a, b, c = (Leaf(i, n) for i, n in enumerate("abc"))
    assert planner("zstream").plan(p, st_) in (Join(Join(a, b), c), Join(a, Join(b, c)))
    best = Join(Join(a, c), b)
    assert planner("dp-b").plan(p, st_) in (best, Join(b, Join(a, c)), Join(Join(c, a), b))
    assert planner("zstream-ord").plan(p, st_) == best
    assert cost_tree(best, st_) == pytest.approx(30 + 0.1 + 1.0)
    assert cost_tree(planner("zstream").plan(p, st_), st_) == pytest.approx(30 + 100 + 1.0)


def test_the_language_names_every_plan_generator():
    """Pattern files are checked against ``PLAN_NAMES`` (the language imports no plan):
    it must list the generators ``planners`` has, in order, and their aliases."""
    from jobs.core.language.pattern import PLAN_ALIASES, PLAN_NAMES
    from jobs.core.plans.planners import ALIASES, PLANNERS
    assert tuple(PLANNERS) == PLAN_NAMES and ALIASES == PLAN_ALIASES
