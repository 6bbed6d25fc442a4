"""An aggregate over an expression (``sum(b.value + a.value)``, a gap the peers' suites
found): the loader rewrites it with the aggregates of the group's attribute, and both
matchers and the oracle give what SQL's aggregate over the expression gives, row by row,
with missing values skipped, over random groups."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.core.language.conditions.expressions import ConditionSyntaxError
from jobs.core.language.events import Event, order
from jobs.core.language.patternfile import PatternError, parse_pattern
from jobs.core.local.runner import MatchOptions, run
from jobs.core.reference import oracle

EXPRESSIONS = {  # the expression, and the same per b event in Python (None: missing)
    "b.value + a.value": lambda b, a: None if None in (a, b) else b + a,
    "2 * b.value - a.value": lambda b, a: None if None in (a, b) else 2 * b - a,
    "-b.value": lambda b, a: None if b is None else -b,
    "(b.value + 1) / 2": lambda b, a: None if b is None else (b + 1) / 2,
    "a.value - 3 * b.value": lambda b, a: None if None in (a, b) else a - 3 * b,
}
FUNCS = {
    "sum": lambda xs: sum(xs) if xs else None,
    "avg": lambda xs: sum(xs) / len(xs) if xs else None,
    "min": lambda xs: min(xs) if xs else None,
    "max": lambda xs: max(xs) if xs else None,
}


def pattern(measures: dict[str, str]):
    lines = "".join(f"  m{i}: {text}\n" for i, text in enumerate(measures.values()))
    return parse_pattern("name: t\nsource: s\nwithin: 1h\nsets: [[a], ['b+']]\nconditions:\n"
                         "  - a.kind = 'A'\n  - b.kind = 'B'\n  - a.k = b.k\n"
                         f"measures:\n{lines}matcher: ses\n", "<t>")


VALUE = st.one_of(st.none(), st.integers(-5, 5).map(float))


@settings(max_examples=150, deadline=None)
@given(VALUE, st.lists(VALUE, min_size=1, max_size=4))
def test_aggregates_of_expressions_equal_sql(a_value, b_values):
    texts = {(f, e): f"{f}({e})" for f in FUNCS for e in EXPRESSIONS}
    p = pattern(texts)
    events = order([Event("a1", 1, {"kind": "A", "value": a_value, "k": 1})] +
                   [Event(f"b{i}", 2 + i, {"kind": "B", "value": v, "k": 1})
                    for i, v in enumerate(b_values)])
    want = {}
    for i, (f, e) in enumerate(texts):
        per_row = [EXPRESSIONS[e](b, a_value) for b in b_values]
        want[f"m{i}"] = FUNCS[f]([x for x in per_row if x is not None])
    everything = len(events)  # the match that binds every b (zstream finds the others too)
    (match,) = [m for m in oracle.meaning(p, events) if len(m.events) == everything]
    assert _close(dict(match.measures), want)
    for matcher in ("ses", "zstream"):
        (found,) = [m for m in run(p, events, MatchOptions(matcher=matcher))[0]
                    if len(m.events) == everything]
        assert _close(dict(found.measures), want), matcher


def _close(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(
        (g is None) == (w is None) and (g is None or abs(g - w) < 1e-9)
        for g, w in ((got[k], want[k]) for k in want))


def test_a_condition_on_an_aggregate_of_an_expression():
    """Esper's and Flink's test: the b events' values plus a's, summed, above a bound."""
    p = parse_pattern("name: t\nsource: s\nwithin: 1h\nsets: [[a], ['b+']]\nconditions:\n"
                      "  - a.kind = 'A'\n  - b.kind = 'B'\n  - a.k = b.k\n"
                      "  - sum(b.value + a.value) > 10\nmatcher: zstream\n", "<t>")
    assert str(p.conditions[-1]) == "sum(b.value) + a.value * count(b.value) > 10"
    events = order([Event("a1", 1, {"kind": "A", "value": 2.0, "k": 1}),
                    Event("b1", 2, {"kind": "B", "value": 3.0, "k": 1}),
                    Event("b2", 3, {"kind": "B", "value": 5.0, "k": 1})])
    assert {tuple(e.id for e in m.events) for m in oracle.meaning(p, events)} == \
        {("a1", "b1", "b2")}  # 5 + 7 = 12; b1 alone: 5, b2 alone: 7


@pytest.mark.parametrize("text, message", [
    ("sum(b.value * b.value)", "is not"),
    ("sum(a.value / b.value)", "is not"),
    ("min(b.value * a.value)", "must be a number"),
    ("count(b.value + 1)", "count an attribute"),
])
def test_what_cannot_be_rewritten_is_named(text, message):
    with pytest.raises((PatternError, ConditionSyntaxError)) as info:
        pattern({"x": text})
    assert message in str(info.value)
