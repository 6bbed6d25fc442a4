"""The second step of the pattern language against the oracle: negation, Kleene bounds,
contiguity and rich conditions, each under both matchers and every pruning combination;
the three evaluators of a condition (reference, columns, compiled program) agree; every
new mistake in a pattern file gets its line and a message."""

import itertools
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.core.engine.columns import from_events
from jobs.core.engine.programs import TRUE, Programs, vector_truth
from jobs.core.language.conditions.evaluation import truth
from jobs.core.language.conditions.parser import parse_condition
from jobs.core.language.events import Event, order
from jobs.core.language.patternfile import parse_pattern
from jobs.core.local.runner import MatchOptions, run
from jobs.core.reference import oracle

from ..helpers import assert_problem, keys
from ..strategies import DAY, TYPES, disjunctive_patterns, event_tables, language_patterns

OPERATORS = {
    "negation": dict(negation=True),
    "bounds": dict(bounds=True),
    "contiguity": dict(contiguity=True),
    "conditions": dict(rich=True),
    "aggregates": dict(aggregates=True, bounds=True),
    "times": dict(times=True, bounds=True, negation=True),
    "counting": dict(counting=True, negation=True, bounds=True, aggregates=True),
    "next": dict(steps=True, negation=True, bounds=True, rich=True),
    "optional": dict(optional=True, negation=True, bounds=True, aggregates=True, steps=True),
    "after_match": dict(episodes=True, negation=True, bounds=True, optional=True),
    "self": dict(self_relations=True, bounds=True, negation=True, aggregates=True),
    "self_episodes": dict(self_relations=True, episodes=True, bounds=True, max_vars=1),
    # episodes of the whole source: no partition attributes, one variable or more
    "whole_episodes": dict(episodes=True, whole_source=True, negation=True, bounds=True,
                           self_relations=True, max_vars=2),
    "all": dict(negation=True, bounds=True, contiguity=True, rich=True, aggregates=True,
                times=True, counting=True, steps=True, optional=True),
}


def combinations(matcher):
    return [MatchOptions(matcher=matcher, strategy="eager")] + [
        MatchOptions(matcher=matcher, filter=f, partition=p, conditions=c)
        for f, p, c in itertools.product([True, False], repeat=3)]


def measured(matches) -> dict:
    """Each match's bindings with its measures (None without)."""
    return {tuple(sorted(m.key)): m.measures for m in matches}


def expected(pattern, events):
    return measured(oracle.ses_exec(pattern, events) if pattern.matcher == "ses"
                    else oracle.all_matches(pattern, events))


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
@pytest.mark.parametrize("operator", list(OPERATORS))
@given(data=st.data())
def test_every_operator_equals_the_oracle(operator, matcher, data):
    pattern = data.draw(language_patterns(matcher=matcher, **OPERATORS[operator]))
    events = data.draw(event_tables(max_events=9, max_day=6,
                                    hours=OPERATORS[operator].get("counting", False)))
    want = expected(pattern, events)
    for options in combinations(matcher):
        assert measured(run(pattern, events, options)[0]) == want, options


# -- one condition, three evaluators ------------------------------------------------------
CONDITIONS = [
    "a.type in ('A', 'C')", "a.type not in ('A', 'Z')", "not a.value > 1",
    "not (a.value > 1 or a.type = 'B')", "a.value + 1 > 2 or a.type = 'C'",
    "a.value / (a.value - 1) >= 0", "-a.value < -1", "a.value * 2 = a.other",
    "a.type < 'B' or not a.value in (0, 3)", "a.other != a.type", "a.other < 2 or a.other > 2",
]
VALUES = st.one_of(st.none(), st.integers(0, 3), st.sampled_from(TYPES), st.just(float("nan")))


@given(st.lists(st.tuples(st.sampled_from(TYPES + (None,)), VALUES, VALUES), min_size=1,
                max_size=8))
def test_reference_columns_and_programs_agree(rows):
    events = order([Event(f"e{i}", i, {"type": t, "value": v, "other": o})
                    for i, (t, v, o) in enumerate(rows)])
    cols = from_events(events, ("type", "value", "other"))
    from jobs.core.engine import kernels

    for text in CONDITIONS:
        cond, _ = parse_condition(text)
        reference = [truth(cond.expr, {("a", False): e.attrs}) is True for e in events]
        columns = list(vector_truth(cond.expr, cols, cols.row) == TRUE)
        programs = Programs(cols.row)
        k = programs.add(cond.expr, {("a", False): 0})
        code, ptr = programs.arrays()
        cval, ckind = programs.constants(cols)
        compiled = list(kernels.program_column(code, ptr[k], ptr[k + 1], cval, ckind,
                                               cols.values, cols.kinds, programs.depth + 1))
        assert reference == columns == compiled, text


AGGREGATE_CONDITIONS = [
    "sum(p.value) > 2", "avg(p.value) >= 1.5", "min(p.value) = 0", "max(p.value) < 'C'",
    "count(p.value) = 2", "count(p) > 2", "first(p.value) = last(p.value)",
    "last(p.other) > first(p.value)", "min(p.other) = 'A'", "max(p.other) >= 2",
    "sum(p.other) / count(p) < c.value", "not avg(p.value) > c.other",
]


@given(st.lists(st.tuples(VALUES, VALUES), min_size=1, max_size=6))
def test_aggregates_on_columns_equal_the_reference(rows):
    """Missing values, NaN, text and a mix of numbers and text in one group: the engine's
    per-match aggregates against ``conditions.aggregate`` (through the oracle)."""
    events = order([Event("c0", 0, {"type": "C", "value": 1, "other": "B"})] + [
        Event(f"e{i}", (i + 1) * 1000, {"type": "P", "value": v, "other": o})
        for i, (v, o) in enumerate(rows)])
    for text in AGGREGATE_CONDITIONS:
        pattern = parse_pattern(
            "name: agg\nsource: random\nwithin: 1d\nsets: [[c], [p+]]\nconditions:\n"
            f"  - c.type = 'C'\n  - p.type = 'P'\n  - \"{text}\"\n", "<agg>")
        for matcher in ("ses", "zstream"):
            want = keys(oracle.meaning(pattern, events, matcher))
            assert keys(run(pattern, events, MatchOptions(matcher=matcher))[0]) == want, text


def test_running_aggregates_match_each_event_against_all_before_it():
    """``p.value > max(prev(p.value))``: each dose above every earlier one (the engine runs
    it as the equivalent prev relationship; the oracle reads it literally)."""
    text = ("name: r\nsource: s\nwithin: 9d\nsets: [[p+], [b]]\nconditions:\n"
            "  - p.type = 'P'\n  - b.type = 'B'\n  - {cond}\nmatcher: {matcher}\n")
    events = order([Event("e1", 0, {"type": "P", "value": 1}),
                    Event("e2", DAY, {"type": "P", "value": 3}),
                    Event("e3", 2 * DAY, {"type": "P", "value": 2}),
                    Event("e4", 3 * DAY, {"type": "P", "value": 4}),
                    Event("e5", 4 * DAY, {"type": "B"})])
    for matcher in ("ses", "zstream"):
        p = parse_pattern(text.format(cond="p.value > max(prev(p.value))", matcher=matcher))
        got = {m.key for m in run(p, events)[0]}
        assert got == {m.key for m in oracle.meaning(p, events)}
        assert all(tuple(ids) != ("e1", "e2", "e3", "e4") for v, ids in
                   (kv for k in got for kv in k))  # 2 is not above 3
        if matcher == "ses":  # the automaton skips e3: 1, 3, 4 rise above all before
            assert (("p", ("e1", "e2", "e4")), ("b", ("e5",))) in got
    cond, _ = parse_condition("p.value >= max(prev(p.value))")
    assert cond.holds([{"value": 1}, {"value": 5}], {"value": 5})
    assert not cond.holds([{"value": None}], {"value": 5})  # max of no values: unknown


def test_aggregate_values_follow_sql():
    from jobs.core.language.conditions.evaluation import aggregate

    rows = [{"v": 2}, {"v": None}, {"v": float("nan")}, {"v": 3.5}, {}]
    assert aggregate("count", None, rows) == 5 and aggregate("count", "v", rows) == 2
    assert aggregate("sum", "v", rows) == 5.5 and aggregate("avg", "v", rows) == 2.75
    assert (aggregate("min", "v", rows), aggregate("max", "v", rows)) == (2, 3.5)
    assert (aggregate("first", "v", rows), aggregate("last", "v", rows)) == (2, None)
    assert aggregate("sum", "v", [{}, {"v": None}]) is None  # over no values: missing
    assert aggregate("max", "v", [{"v": "B"}, {"v": "A"}]) == "B"
    assert aggregate("min", "v", [{"v": "B"}, {"v": 7}]) == 7  # numbers before text
    cond, _ = parse_condition("sum(p.v) > 1")
    assert cond.holds({"p": [{"v": None}]}) is False  # unknown is not true
    cond, _ = parse_condition("not sum(p.v) > 1")
    assert cond.holds({"p": [{"v": None}]}) is False


def test_three_valued_logic():
    cond, _ = parse_condition("not a.value > 1")
    assert truth(cond.expr, {("a", False): {"value": None}}) is None  # unknown, not true
    cond, _ = parse_condition("a.value > 1 or a.type = 'A'")
    assert truth(cond.expr, {("a", False): {"value": None, "type": "A"}}) is True
    cond, _ = parse_condition("a.value / 0 > 1")
    assert truth(cond.expr, {("a", False): {"value": 3}}) is None


# -- worked examples: each rule of the issue, literally -----------------------------------
def ev(i, day, **attrs):
    return Event(f"e{i}", int(day * DAY), attrs)


NEG = """name: n
source: s
within: 2d
sets: [[not q], [a], [not n], [b], [not t]]
conditions:
  - a.type = 'A'
  - b.type = 'B'
  - q.type = 'Q'
  - n.type = 'N'
  - t.type = 'T'
  - a.patient = b.patient
  - q.patient = a.patient
  - n.patient = a.patient
  - t.patient = a.patient
matcher: {matcher}
"""


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_negation_intervals(matcher):
    p = parse_pattern(NEG.format(matcher=matcher))
    base = [ev(1, 1, type="A", patient=1), ev(2, 2, type="B", patient=1)]
    assert len(run(p, order(base))[0]) == 1
    cases = {  # witness -> is the match removed?
        ev(3, 1.5, type="N", patient=1): True,  # between a and b
        ev(3, 1.5, type="N", patient=2): False,  # another patient
        ev(3, 1, type="N", patient=1): False,  # at a's time: not strictly after
        ev(3, 0, type="Q", patient=1): True,  # leading: end_ts - τ = day 0, inclusive
        ev(3, -0.1, type="Q", patient=1): False,  # before end_ts - τ
        ev(3, 3, type="T", patient=1): True,  # trailing: start_ts + τ = day 3, inclusive
        ev(3, 3.1, type="T", patient=1): False,
        ev(3, 2, type="T", patient=1): False,  # at b's time: not strictly after
    }
    for witness, removed in cases.items():
        events = order(base + [witness])
        got = run(p, events)[0]
        assert len(got) == (0 if removed else 1), (witness, witness.attrs)
        assert keys(got) == keys(oracle.all_matches(p, events) if matcher == "zstream"
                                 else oracle.ses_exec(p, events))


def test_negated_variable_related_to_a_group_holds_for_every_event():
    p = parse_pattern("name: g\nsource: s\nwithin: 5d\nsets: [[p+], [not n], [b]]\n"
                      "conditions:\n  - p.type = 'P'\n  - b.type = 'B'\n  - n.type = 'N'\n"
                      "  - n.value > p.value\nmatcher: zstream\n")
    events = order([ev(1, 1, type="P", value=1), ev(2, 1, type="P", value=5),
                    ev(3, 2, type="N", value=3), ev(4, 3, type="B")])
    got = {tuple(m.key[0][1]) for m in run(p, events)[0]}
    # n (value 3) exceeds p=e1 (1) but not e2 (5): only matches binding e2 survive
    assert got == {("e2",), ("e1", "e2")}


def test_kleene_bounds_ses_is_greedy_and_stops_at_the_maximum():
    text = ("name: k\nsource: s\nwithin: 9d\nsets:\n  - - a\n    - p{2,3}\n  - [b]\n"
            "conditions:\n  - a.type = 'A'\n  - p.type = 'P'\n  - b.type = 'B'\n")
    p = parse_pattern(text)
    events = order([ev(1, 0, type="A")] + [ev(i, i, type="P") for i in range(2, 7)]
                   + [ev(9, 8, type="B")])
    got = [dict(m.key) for m in run(p, events)[0]]
    assert got == [{"a": ("e1",), "p": ("e2", "e3", "e4"), "b": ("e9",)}]
    one = order([ev(1, 0, type="A"), ev(2, 1, type="P"), ev(9, 8, type="B")])
    assert run(p, one)[0] == []  # fewer than the minimum: no match
    z = parse_pattern(text + "matcher: zstream\n")
    assert len(run(z, events)[0]) == 10 + 10  # C(5,2) + C(5,3) sequences for p


def test_strict_and_partition_contiguity():
    base = ("name: c\nsource: s\nwithin: 9d\nsets: [[a], [b]]\nconditions:\n"
            "  - a.type = 'A'\n  - b.type = 'B'\n  - a.patient = b.patient\n")
    events = order([ev(1, 0, type="A", patient=1), ev(2, 1, type="X", patient=2),
                    ev(3, 2, type="B", patient=1)])
    for matcher in ("ses", "zstream"):
        strict = parse_pattern(base + f"matcher: {matcher}\ncontiguity: strict\n")
        part = parse_pattern(base + f"matcher: {matcher}\ncontiguity: partition\n")
        assert run(strict, events)[0] == []  # e2 of another patient lies between
        assert len(run(part, events)[0]) == 1  # consecutive among patient 1's events


# -- every new mistake, with its line --------------------------------------------------------
HEAD = "name: x\nsource: s\nwithin: 1d\n"


@pytest.mark.parametrize("body, line, fragment", [
    ("sets: [[a], [not p+]]\n", 4, "a negated variable takes a lower bound only"),
    ("sets:\n  - - a\n    - p{5,2}\n", 6, "the minimum 5 is larger than the maximum 2"),
    ("sets:\n  - - a\n    - p{0}\n", 6, "the minimum must be at least 1"),
    ("sets: [[a, p{2,5}]]\n", 4, "quote them, [a, 'p{2,5}']"),
    ("sets: [[a, not n]]\n", 4, "mixes negated and positive"),
    ("sets: [[not n]]\nconditions:\n  - n.x = 1\n", 4, "at least one positive variable"),
    ("sets: [[a], [not n]]\nconditions:\n  - prev(n.x) < n.x\n", 6,
     "prev() cannot be used on the negated variable 'n'"),
    ("sets: [[a], [not n], [not m]]\nconditions:\n  - n.x = m.x\n", 6,
     "relates two negated variables"),
    ("sets: [[a]]\nconditions:\n  - foo(a.x) > 1\n", 6, "unknown function 'foo'"),
    ("sets: [[a]]\nconditions:\n  - a.x * 'k' > 1\n", 6, "need numbers"),
    ("sets: [[a]]\ncontiguity: sometimes\n", 5, "use one of none, partition, strict"),
    # aggregates (docs/semantics.md, aggregate conditions)
    ("sets: [[a], [b]]\nconditions:\n  - sum(a.x) > 1\n", 6, "aggregates the singleton 'a'"),
    ("sets: [[a], [not n]]\nconditions:\n  - count(n) > 1\n", 6,
     "aggregates the negated variable 'n'"),
    ("sets: [[a, p+], [not n]]\nconditions:\n  - sum(p.x) > n.x\n", 6,
     "attribute of the negated variable 'n'"),
    ("sets: [[a, p+]]\nconditions:\n  - sum(p.x) > p.x + a.x\n", 6, "e.g. last(p.x)"),
    ("sets: [[p+]]\nconditions:\n  - prev(sum(p.x)) > 1\n", 6,
     "an aggregate (sum(...)) cannot be inside it"),
    ("sets: [[p+]]\nconditions:\n  - prev(p.x) < max(prev(p.x))\n", 6,
     "a running condition reads the current event of one group"),
    ("sets: [[p+]]\nconditions:\n  - p.x > count(distinct prev(p.y))\n", 6,
     "write distinct"),
    ("sets: [[a, p+]]\nconditions:\n  - a.x > max(prev(a.x))\n", 6,
     "but 'a' is the singleton"),
    ("sets: [[p+]]\nconditions:\n  - sum(count(p)) > 1\n", 6, "aggregates do not nest"),
    ("sets: [[p+]]\nconditions:\n  - sum(p) > 1\n", 6, "write sum(p.attr)"),
    ("sets: [[p+]]\nconditions:\n  - last(p.ts) - first(p.ts) > 5\n", 6,
     "compares a duration with a number"),
    ("sets: [[p+]]\nconditions:\n  - sum(p.ts) > 5\n", 6, "sum of times is not defined"),
    ("sets: [[p+]]\nconditions:\n  - sum(q.x) > 1\n", 6, "unknown variable 'q'"),
    # the fourth step: counting, time functions, next steps, consecutive groups
    ("sets: [[a], ['not n{2,3}']]\n", 4, "takes a lower bound only"),
    ("sets: [[p+]]\nconditions:\n  - count(distinct p) > 1\n", 6,
     "write count(distinct p.attr)"),
    ("sets: [[p+]]\nconditions:\n  - sum(distinct p.x) > 1\n", 6, "distinct is for count"),
    ("sets: [[a]]\nconditions:\n  - hour(a.x) > 1\n", 6, "takes an event's time"),
    ("sets: [[a]]\nconditions:\n  - date(a.ts) > 1\n", 6, "compares a time with a number"),
    ("sets: [[a], [b]]\nconditions:\n  - date(a.ts) = a.ts\n", 6, "reads only a's own time"),
    ("sets: [[next a], [b]]\n", 4, "the first set cannot be a 'next' step"),
    ("sets: [['not next n'], [a]]\n", 4, "cannot lead"),
    ("sets: [[a], [next b, c]]\n", 4, "a 'next' step is a set of its own"),
    ("sets: [[a], ['not next n{2,}']]\n", 4, "is about one event"),
    ("sets: [[consecutive a], [b]]\n", 4, "consecutive is for a group"),
    ("sets: [['a?'], ['p*']]\n", 4, "could match no event at all"),
    ("sets: [[a], ['t?'], [b]]\nconditions:\n  - a.k = t.k\n  - t.k = b.k\n", 4,
     "t may be absent, so it cannot be the only link on k"),
    ("sets: [[a], ['not n?']]\n", 4, "a negated variable cannot be optional"),
    ("sets:\n  - [a]\n  - optional: ['not n']\n", 6, "a negated set cannot be optional"),
    ("sets: [[a], [b]]\nafter_match: skip_ahead\n", 5, "use one of all, past_last_event"),
    ("sets: [[a], [b]]\nconditions:\n  - a.k = b.k\nafter_match: to_first c\n", 7,
     "'c' is not a positive variable"),
    ("sets: [[a], [b], [not n]]\nconditions:\n  - a.k = b.k\nafter_match: to_next_event\n",
     7, "must be linked to the partition attributes"),
])
def test_language_mistakes(body, line, fragment):
    assert_problem(HEAD + body, line, fragment)


def test_type_mismatch_against_the_schema():
    from jobs.core.language.patternfile import check_schema

    p = parse_pattern(HEAD + "sets: [[a], [b]]\nconditions:\n  - b.value > 2 * a.type\n"
                      "  - a.type in ('x', 3)\n", "f.yaml")
    found = [str(x) for x in check_schema(p, {"type": "string", "value": "number"})]
    assert any("f.yaml:6:" in x and "multiplies text" in x for x in found), found
    assert any("f.yaml:7:" in x and "the list after in has numbers" in x for x in found), found


def test_aggregates_against_the_schema():
    from jobs.core.language.patternfile import check_schema

    p = parse_pattern(HEAD + "sets: [[c, p+]]\nconditions:\n  - avg(p.type) > 2\n"
                      "  - max(p.type) > 3\n  - count(p.type) > 1\n  - sum(p.dose) > 1\n"
                      "  - min(p.seen) < max(p.seen)\n", "f.yaml")
    schema = {"type": "string", "value": "number", "seen": "timestamp"}
    found = [str(x) for x in check_schema(p, schema)]
    assert any("f.yaml:6:" in x and "avg needs numbers, but type holds strings" in x
               for x in found), found
    assert any("f.yaml:7:" in x and "compares a string with a number" in x for x in found), found
    assert not any("f.yaml:8:" in x for x in found), found  # count takes any type
    assert any("f.yaml:9:" in x and "no attribute 'dose'" in x for x in found), found
    assert any("f.yaml:10:" in x and "seen holds timestamps" in x for x in found), found



@pytest.mark.parametrize("condition, fragment", [
    ("b.ts - a.ts < 864000", "compares a duration with a number: write the number with its unit"),
    ("a.ts > 5", "compares a time with a number or text"),
    ("a.x = 1 or not (b.ts >= 2)", "compares a time with a number or text"),
    ("b.ts > 2h", "compares a time with a duration"),
    ("b.ts * 2 > a.ts", "can only be added and subtracted"),
    ("b.ts + 1 > a.ts", "a time plus a number"),
    ("b.ts - a.ts > a.x", "compares a duration with a number"),
    ("b.ts in (1, 2)", "not times or durations"),
    ("b.ts - b.ts >= 0d", "reads only b's own time"),
    ("b.ts + 1.5h > a.ts", "use a smaller unit, e.g. 90min instead of 1.5h"),
    ("b.ts > a.ts + 2w", "bad unit 'w' in 2w"),
])
def test_a_condition_on_time_must_compare_times_or_durations(condition, fragment):
    """A condition on ts used to be accepted and never hold: now times compare with times
    and durations (with a unit) with durations, or the file is refused with its line."""
    assert_problem(HEAD + f"sets: [[a], [b]]\nconditions:\n  - a.x = 1\n  - {condition}\n", 7,
                   fragment)


@pytest.mark.parametrize("condition", [
    "b.ts - a.ts <= 9d", "b.ts > a.ts + 2h", "-2h <= b.ts - a.ts", "a.ts + 30min < b.ts",
    "b.ts - a.ts = 1d or b.ts - a.ts >= 48h", "end_ts - start_ts < 3d"])
def test_conditions_on_time_are_accepted(condition):
    p = parse_pattern(HEAD + f"sets: [[a], [b]]\nconditions:\n  - {condition}\n")
    assert "ts" in p.attributes or "start_ts" in str(p.conditions[0])


def test_a_timestamp_column_in_a_condition_is_refused_against_the_schema():
    from jobs.core.language.patternfile import check_schema

    p = parse_pattern(HEAD + "sets: [[a], [b]]\nconditions:\n  - b.seen > a.seen\n",
                      "f.yaml")
    found = [str(x) for x in check_schema(p, {"seen": "timestamp", "value": "number"})]
    assert found and all("f.yaml:6:" in x and "seen holds timestamps" in x for x in found), found


def test_bounds_are_quoted_or_block_style():
    a = parse_pattern(HEAD + "sets: [[a, 'p{2,5}', 'q{3,}']]\n")
    b = parse_pattern(HEAD + "sets:\n  - - a\n    - p{2,5}\n    - q{3,}\n")
    assert [str(v) for v in a.variables] == [str(v) for v in b.variables] == \
        ["a", "p{2,5}", "q{3,}"]
    assert a.version == b.version and np.array_equal([v.min for v in a.variables], [1, 2, 3])


# -- disjunction (alternatives) -------------------------------------------------------------
@pytest.mark.parametrize("matcher", ["ses", "zstream"])
@pytest.mark.parametrize("operators", [{}, OPERATORS["all"]], ids=["plain", "all"])
@given(data=st.data())
def test_disjunction_equals_the_union_of_the_oracle(operators, matcher, data):
    pattern = data.draw(disjunctive_patterns(matcher=matcher, **operators))
    events = data.draw(event_tables(max_events=9, max_day=6,
                                    hours=operators.get("counting", False)))
    want = set()
    for alt in pattern.alternatives:  # the union, each match tagged with its alternative
        found = keys(oracle.ses_exec(alt, events) if matcher == "ses"
                     else oracle.all_matches(alt, events))
        assert all(k[0] == alt.alternative for k in found)
        want |= found
    meant = oracle.meaning(pattern, events)
    assert keys(meant) == want
    columns = {(m.alternative, tuple(sorted(m.key))): m.measures for m in meant}
    for options in combinations(matcher):
        got = run(pattern, events, options)[0]
        assert keys(got) == want, options
        assert {(m.alternative, tuple(sorted(m.key))): m.measures for m in got} == columns


EITHER = HEAD + """matcher: {matcher}
alternatives:
  - sets: [[a], [b]]
    conditions:
      - a.type = 'A'
      - b.type = 'B'
  - sets: [[a], [b]]
    conditions:
      - a.value > 1
      - b.type = 'B'
"""


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_one_binding_matching_two_alternatives_is_two_matches(matcher):
    from jobs.core.engine.output import match_id_of

    p = parse_pattern(EITHER.format(matcher=matcher))
    events = order([ev(1, 0, type="A", value=2), ev(2, 0.5, type="B", value=0)])
    found = run(p, events)[0]
    assert keys(found) == {(1, (("a", ("e1",)), ("b", ("e2",)))),
                           (2, (("a", ("e1",)), ("b", ("e2",))))}
    assert len({match_id_of(p, m) for m in found}) == 2  # the alternative is in the id
    assert [json.loads(m.to_json())["alternative"] for m in found] == [1, 2]


def test_disjunction_model():
    p = parse_pattern(HEAD + """alternatives:
  - sets: [[a], [b]]
    conditions: [a.patient = b.patient, a.ward = b.ward, a.x = 1]
  - sets: [[c+]]
    contiguity: strict
    conditions: [c.patient = c.patient, c.y > 2]
  - sets: [[d], [e]]
    conditions: [d.patient = e.patient]
contiguity: partition
""")
    a, b, c = p.alternatives
    assert [x.alternative for x in p.alternatives] == [1, 2, 3]
    assert a.partition_attributes == ("patient", "ward") and c.partition_attributes == ("patient",)
    # b's group is related to itself on patient (every two of its events): X of b too
    assert b.partition_attributes == ("patient",) and p.partition_attributes == ("patient",)
    assert (a.contiguity, b.contiguity, c.contiguity) == ("partition", "strict", "partition")
    assert p.attributes == {"patient", "ward", "x", "y"}
    assert len({a.version, b.version, c.version, p.version}) == 4
    q = parse_pattern(HEAD + "alternatives:\n  - sets: [[a], [b]]\n    conditions: "
                      "[a.patient = b.patient, a.ward = b.ward, a.x = 1]\n  - sets: [[d], [e]]\n"
                      "    conditions: [d.patient = e.patient, d.x = 2]\n")
    assert q.partition_attributes == ("patient",)


@pytest.mark.parametrize("body, line, fragment", [
    ("alternatives:\n  - sets: [[a]]\n", 4, "at least two patterns"),
    ("alternatives: [[a], [b]]\n", 4, "alternative 1 must be a mapping with sets"),
    ("sets: [[a]]\nalternatives:\n  - sets: [[a]]\n  - sets: [[b]]\n", 4,
     "'sets' belongs inside each alternative"),
    ("alternatives:\n  - sets: [[a]]\n    within: 2d\n  - sets: [[b]]\n", 6,
     "name, within, matcher and source are shared"),
    ("alternatives:\n  - sets: [[a]]\n  - conditions: [b.x = 1]\n", 6, "alternative 2 has no sets"),
    ("alternatives:\n  - sets: [[a]]\n  - sets: [[b]]\n    conditions: [a.x = 1]\n", 7,
     "unknown variable 'a'"),
    ("alternatives:\n  - sets: [[a]]\n  - [b]\n", 6, "alternative 2 must be a mapping"),
    ("alternatives:\n  - sets: [[a]]\n  - sets: [[b]]\nexamples:\n  - events: "
     "[{event_id: e1, ts: 2024-01-01}]\n    expect: [{a: [e1]}]\n", 9, "name its alternative"),
    ("alternatives:\n  - sets: [[a]]\n  - sets: [[b]]\nexamples:\n  - events: "
     "[{event_id: e1, ts: 2024-01-01}]\n    expect: [{alternative: 2, a: [e1]}]\n", 9,
     "do not match alternative 2's (b)"),
    ("alternatives:\n  - sets: [[a]]\n  - sets: [[b]]\nexamples:\n  - events: "
     "[{event_id: e1, ts: 2024-01-01}]\n    expect: [{alternative: 3, b: [e1]}]\n", 9,
     "a number from 1 to 2"),
])
def test_disjunction_mistakes(body, line, fragment):
    assert_problem(HEAD + body, line, fragment)


def test_disjunction_examples_name_their_alternative():
    from jobs.core.local.examples import run_example

    p = parse_pattern(EITHER.format(matcher="ses") + """examples:
  - name: both
    events:
      - {event_id: e1, ts: 2024-01-01T00:00:00, type: A, value: 2}
      - {event_id: e2, ts: 2024-01-01T01:00:00, type: B, value: 0}
    expect:
      - {alternative: 1, a: [e1], b: [e2]}
""")
    result = run_example(p, p.examples[0])
    assert not result.ok and result.unexpected == ({"alternative": 2, "a": ["e1"], "b": ["e2"]},)
    assert "unexpected {'alternative': 2, 'a': ['e1'], 'b': ['e2']}" in result.message()


# -- a group related to itself: every two of its events ------------------------------------
LEUCOCYTES = """name: w3
source: s
within: 3d
sets: [['w{3}']]
conditions:
  - w.type = 'L' and w.value > 12
  - w.patient = w.patient
"""
INTERLEAVED = [("w1", "A", 13, 0), ("w2", "A", 14, 0.2), ("b1", "B", 20, 0.25),
               ("w3", "A", 8, 0.3), ("w4", "A", 15, 1.0), ("b2", "B", 21, 1.1),
               ("b3", "B", 22, 1.2)]


def _interleaved():
    return order([Event(i, int(day * DAY), {"type": "L", "patient": p, "value": v})
                  for i, p, v, day in INTERLEAVED])


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_a_group_related_to_itself_binds_one_patient(matcher):
    """The guide's idiom (docs/patterns.md §5) with patient B's counts between A's: each
    match is of one patient, under every pruning combination and the oracle; patient
    becomes the partition attribute of a pattern of one variable."""
    p = parse_pattern(LEUCOCYTES + f"matcher: {matcher}\n", "<test>")
    assert p.partition_attributes == ("patient",)
    want = {(("w", ("w1", "w2", "w4")),), (("w", ("b1", "b2", "b3")),)}
    events = _interleaved()
    assert set(expected(p, events)) == want
    for options in combinations(matcher):
        assert {tuple(sorted(m.key)) for m in run(p, events, options)[0]} == want, options


@pytest.mark.parametrize("op, values, groups", [
    ("<", [13, 14, 20, 15, 21, 22], {(0, 1, 2), (1, 2, 4), (2, 4, 5), (3, 4, 5)}),
    ("!=", [1, 2, 1, 3, 4], {(0, 1, 3), (1, 2, 3), (2, 3, 4)}),
])
def test_an_order_of_a_group_with_itself_holds_for_every_two_events(op, values, groups):
    """``w.value < w.value``: each event of the group above every earlier one; ``!=``:
    all values different (1, 2, 1 is no group, though each value differs from the one
    before it)."""
    p = parse_pattern(LEUCOCYTES.replace("w.patient = w.patient", f"w.value {op} w.value")
                      .replace(" and w.value > 12", ""), "<test>")
    assert p.partition_attributes == ()
    events = order([Event(f"e{i}", i * DAY // 10, {"type": "L", "value": v})
                    for i, v in enumerate(values)])
    want = {tuple(f"e{i}" for i in g) for g in groups}
    assert {dict(m.key)["w"] for m in oracle.ses_exec(p, events)} == want
    for options in combinations("ses"):
        assert {dict(m.key)["w"] for m in run(p, events, options)[0]} == want, options


def test_a_group_related_to_itself_changes_the_version_a_singleton_does_not():
    """Published patterns whose matches change get a new version (and are held as any
    changed version is); a singleton's ``c.a = c.a`` stays a property of its one event."""
    group = parse_pattern(LEUCOCYTES, "<test>")
    assert "pairwise" in group.normalized() and group.self_related == {"w": ("patient",)}
    single = parse_pattern(LEUCOCYTES.replace("'w{3}'", "w"), "<test>")
    assert "pairwise" not in single.normalized() and not single.relationships
    assert single.partition_attributes == ("patient",)  # one event per match: exact


def test_episodes_of_one_variable():
    """after_match on a pattern of one group variable related to itself on patient: the
    episodes are taken per patient (both matchers equal the oracle)."""
    text = LEUCOCYTES.replace("'w{3}'", "'w{2,}'") + "after_match: past_last_event\n"
    events = _interleaved()
    for matcher in ("ses", "zstream"):
        p = parse_pattern(text + f"matcher: {matcher}\n", "<test>")
        want = expected(p, events)
        assert want and all(len({i[0] for i in ids[0][1]}) == 1 for ids in want)
        for options in combinations(matcher):
            assert measured(run(p, events, options)[0]) == want, options
