"""Cases from the peers' own test suites, translated: the inputs and the expected matches are
the peers' facts, the patterns are ours. Flink CEP streams carry no key, so the positions
of ``next`` count every event (a pattern without partition attributes); Flink's event
timestamps are milliseconds. Each case runs both matchers where the peer's contiguity means
the same, under every pruning combination, and the oracle.

Flink CEP, ``NFAITCase``: testStrictContinuityWithResults, testStrictContinuityNoResults
(``next()``); ``NotPatternITCase``: testNotNext, testNotNextNoMatches,
testNotNextNoMatchesAtTheEnd (``notNext()``), testNotFollowedByBeforeOptional(Times)
(``optional()``); ``AfterMatchSkipITCase``: testNoSkipWithFollowedByAny,
testSkipToNextWithFollowedByAny (after-match skip; every Flink event gets one key ``k``,
since episodes are taken per partition here).

Trino, ``TestRowPatternMatching``: testSimpleQuery, testAfterMatchSkip (every skip rule, the
never-binding optional ``D?``), testRunningAndFinal (``FINAL LAST`` measures). Its
quantifier tests (``B*``, ``B?``, ``B{,2}`` alone) expect empty matches, which this language
refuses (a pattern that could match nothing), and compare the first row of ``B`` with a row
outside the match (``PREV``), which no condition here reads: they stay untranslated.
"""

import itertools

import pytest

from jobs.core.language.events import Event, order
from jobs.core.language.patternfile import parse_pattern
from jobs.core.local.runner import MatchOptions, run
from jobs.core.reference import oracle

MS = 10**6


def stream(*pairs) -> list[Event]:
    """Flink's (name, timestamp in ms) records; ids are the test's variable names."""
    return order([Event(ident, ts * MS, {"name": ident.rstrip("0123456789"), "k": 1})
                  for ident, ts in pairs])


def pattern(sets: str, names: dict[str, str], matcher: str, extra: str = ""):
    conditions = "".join(f"  - {v}.name = '{n}'\n" for v, n in names.items())
    return parse_pattern(f"name: peer\nsource: s\nwithin: 1h\nsets: {sets}\nconditions:\n"
                         f"{conditions}{extra}matcher: {matcher}\n", "<peer>")


def matches(p, events) -> set[tuple[str, ...]]:
    """Each match's event ids in processing order, the same under every pruning."""
    want = {tuple(e.id for e in m.events) for m in oracle.meaning(p, events)}
    for f, part, c in itertools.product([True, False], repeat=3):
        options = MatchOptions(matcher=p.matcher, filter=f, partition=part, conditions=c)
        got = {tuple(e.id for e in m.events) for m in run(p, events, options)[0]}
        assert got == want, options
    return want


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_flink_strict_continuity(matcher):
    p = pattern("[[a], [next b]]", {"a": "a", "b": "b"}, matcher)
    assert matches(p, stream(("a1", 3), ("b1", 5))) == {("a1", "b1")}
    assert matches(p, stream(("a1", 3), ("c1", 4), ("b1", 5))) == set()


def test_flink_not_next():
    """a, notNext b, followedByAny c, followedBy d: every c (followedByAny), so zstream."""
    p = pattern("[[a], ['not next n'], [c], [d]]", {"a": "a", "n": "b", "c": "c", "d": "d"},
                "zstream")
    events = stream(("a1", 1), ("c1", 2), ("b1", 3), ("c2", 4), ("d1", 5))
    assert matches(p, events) == {("a1", "c1", "d1"), ("a1", "c2", "d1")}
    events = stream(("a1", 1), ("b1", 2), ("c1", 3), ("c2", 4), ("d1", 5))
    assert matches(p, events) == set()


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_flink_not_next_at_the_end(matcher):
    p = pattern("[[a], [c], [d], ['not next n']]", {"a": "a", "c": "c", "d": "d", "n": "b"},
                matcher)
    events = stream(("a1", 1), ("c1", 2), ("c2", 3), ("d1", 4), ("b1", 5))
    assert matches(p, events) == set()


def test_flink_not_followed_by_before_optional():
    """NotPatternITCase testNotFollowedByBeforeOptional: a, notFollowedBy b, followedByAny c
    optional, followedBy d; and testNotFollowedByBeforeOptionalTimes (c times(2) optional:
    a whole optional set)."""
    names = {"a": "a", "n": "b", "c": "c", "d": "d"}
    events = stream(("a1", 1), ("c1", 2), ("b1", 3), ("c2", 4), ("d1", 5))
    p = pattern("[[a], [not n], ['c?'], [d]]", names, "zstream")
    assert matches(p, events) == {("a1", "c1", "d1")}
    p = pattern("[[a], [not n], {optional: ['c{2}']}, [d]]", names, "zstream")
    assert matches(p, events) == {("a1", "c1", "c2", "d1")}


@pytest.mark.parametrize("rule, expected", [
    ("all", {("a1", "b1"), ("a1", "b2"), ("a2", "b2")}),
    ("to_next_event", {("a1", "b1"), ("a2", "b2")}),
])
def test_flink_after_match_skip(rule, expected):
    """a followedByAny b (every b: zstream), with no skip and with skip to next."""
    p = pattern("[[a], [b]]", {"a": "a", "b": "b"}, "zstream",
                f"  - a.k = b.k\nafter_match: {rule}\n")
    events = stream(("a1", 1), ("b1", 2), ("a2", 4), ("b2", 5))
    assert matches(p, events) == expected


# Trino, ``TestRowPatternMatching`` (MATCH_RECOGNIZE). Rows ``(id, value)`` ordered by id, one
# partition; MATCH_RECOGNIZE's rows are contiguous (``contiguity: partition``) and its
# ``PREV(B.value)`` for the first row of ``B`` is the row before it, the last row of the set
# before: ``first(b.value) < a.value`` beside the running ``b.value < prev(b.value)``.
# MATCH_RECOGNIZE is greedy and keeps one match per start row, so its expected matches
# are the episodes of both matchers (``zstream``'s shorter matches lose the tie to the longer
# one; SES keeps the maximal one).
A_B_PLUS_C_PLUS = ("[[a], ['b+'], ['c+']{optional}]", """  - b.value < prev(b.value)
  - first(b.value) < a.value
  - c.value > prev(c.value)
  - first(c.value) > last(b.value)
""")


def rows(*values) -> list[Event]:
    """Trino's ``VALUES (id, value)`` with ids 1, 2, ...; one row a minute."""
    return order([Event(str(i), i * 60 * 10**9, {"value": float(v), "k": 1})
                  for i, v in enumerate(values, start=1)])


def trino(rule: str, matcher: str, optional_d: bool = False, measures: str = ""):
    sets, conditions = A_B_PLUS_C_PLUS
    if optional_d:  # D AS false: an optional step that never binds
        sets = sets.format(optional=", ['d?']")
        conditions += "  - d.value < 0\n  - d.k = a.k\n"
    else:
        sets = sets.format(optional="")
    return parse_pattern(
        f"name: trino\nsource: s\nwithin: 1h\nsets: {sets}\nconditions:\n{conditions}"
        f"  - a.k = b.k\n  - b.k = c.k\ncontiguity: partition\nafter_match: {rule}\n"
        f"matcher: {matcher}\n{measures}", "<trino>")


def ids(found) -> set[tuple[int, ...]]:
    return {tuple(int(i) for i in m) for m in found}


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_trino_simple_query(matcher):
    """testSimpleQuery: A B+ C+, AFTER MATCH SKIP PAST LAST ROW."""
    p = trino("past_last_event", matcher)
    events = rows(90, 80, 70, 80, 90, 50, 40, 60)
    assert ids(matches(p, events)) == {(1, 2, 3, 4, 5), (6, 7, 8)}


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
@pytest.mark.parametrize("rule, expected", [
    ("past_last_event", {(1, 2, 3, 4)}),
    ("to_next_event", {(1, 2, 3, 4), (2, 3, 4), (4, 5, 6)}),
    ("to_first c", {(1, 2, 3, 4), (4, 5, 6)}),
    ("to_last b", {(1, 2, 3, 4), (4, 5, 6)}),
])
def test_trino_after_match_skip(matcher, rule, expected):
    """testAfterMatchSkip: A B+ C+ D? with D never true, under each skip rule."""
    p = trino(rule, matcher, optional_d=True)
    events = rows(90, 80, 70, 80, 70, 80)
    assert ids(matches(p, events)) == expected


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_trino_running_and_final(matcher):
    """testRunningAndFinal: A B+ C+ over 90, 80, 70, 100, 200; the FINAL LAST measures."""
    measures = ("measures:\n  a_final: a.value\n  b_final: last(b.value)\n"
                "  c_final: last(c.value)\n")
    p = trino("past_last_event", matcher, measures=measures)
    events = rows(90, 80, 70, 100, 200)
    assert ids(matches(p, events)) == {(1, 2, 3, 4, 5)}
    want = {"a_final": 90.0, "b_final": 70.0, "c_final": 200.0}
    (match,) = oracle.meaning(p, events)
    assert dict(match.measures) == want
    (found,) = run(p, events, MatchOptions(matcher=matcher))[0]
    assert dict(found.measures) == want
