"""``first_ever: [a]`` and ``history:`` (docs/semantics.md, "First ever", "History
conditions"): the engine equals the reference on random patterns and events, both
matchers; for all matches (Definition 2) first_ever gives the unmarked pattern's matches
whose a is its partition's first event fitting a, and a history condition the matches
whose anchor has the counted events around it; the file forms are checked."""

import textwrap
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.core.language.conditions.parser import parse_condition, parse_conditions
from jobs.core.language.first_ever import first_events
from jobs.core.language.pattern import HistoryCondition
from jobs.core.language.patternfile import PatternError, parse_pattern
from jobs.core.local.runner import run
from jobs.core.reference import oracle
from jobs.core.reference.matches import sorted_matches
from tests.strategies import DAY, TYPES, event_tables, language_patterns

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _with_first(pattern):
    single = [v for v in pattern.variables if not v.group and v.min == 1]
    if not single or pattern.optional_units:
        return None
    return replace(pattern, first_ever=(single[-1].name,))


def _ids(matches):
    return sorted(tuple((v, tuple(e.id for e in es)) for v, es in m.bindings) for m in matches)


@SETTINGS
@given(language_patterns(negation=True, bounds=True, rich=True, matcher="zstream"),
       event_tables(max_events=9, hours=True))
def test_all_matches_are_those_whose_variable_binds_the_first_event(pattern, events):
    marked = _with_first(pattern)
    if marked is None:
        return
    v = marked.first_ever[0]
    firsts = {e.id for e in first_events(marked, events)[v].values()}
    plain = [m for m in oracle.all_matches(pattern, events)
             if dict(m.bindings)[v][0].id in firsts]
    assert _ids(oracle.meaning(marked, events)) == _ids(plain)
    assert _ids(run(marked, events)[0]) == _ids(plain)


@SETTINGS
@given(language_patterns(negation=True, bounds=True, contiguity=True, steps=True),
       event_tables(max_events=9, hours=True))
def test_the_automaton_equals_the_reference(pattern, events):
    marked = _with_first(pattern)
    if marked is None:
        return
    assert _ids(run(marked, events)[0]) == _ids(sorted_matches(oracle.meaning(marked, events)))


BASE = """\
    name: first
    source: toy
    within: 2d
    first_ever: {first}
    sets:
      - [a, p+]
      - [b]
      - [not n]
    conditions:
      - a.kind = 'A'
      - b.kind = 'B'
      - a.pid = b.pid
"""


@pytest.mark.parametrize("first, message", [
    ("[x]", "'x' is not a variable of sets"),
    ("[n]", "'n' is a negated variable"),
    ("[p]", "must bind exactly one event"),
    ("a", "must be a list of variable names"),
    ("[a, a]", "names a variable twice"),
])
def test_what_first_ever_may_name(first, message):
    with pytest.raises(PatternError, match=message):
        parse_pattern(textwrap.dedent(BASE.format(first=first)), "<first>")


def test_the_version_counts_first_ever_and_the_marked_form_keeps_it():
    with_first = parse_pattern(textwrap.dedent(BASE.format(first="[a]")), "<first>")
    without = parse_pattern(textwrap.dedent(BASE.replace("    first_ever: {first}\n", "")),
                            "<first>")
    assert with_first.version != without.version
    assert with_first.marked().version == with_first.version
    assert "first ever a" in with_first.describe()


@st.composite
def history_conditions(draw, anchor: str):
    bound = draw(st.integers(0, 2))
    where = draw(st.sampled_from([None, *TYPES]))
    at_least, at_most = (bound, None) if draw(st.booleans()) else (None, bound)
    return HistoryCondition(anchor, at_least, at_most,
                            draw(st.sampled_from(["before", "after"])),
                            draw(st.sampled_from([0, DAY, 2 * DAY])),
                            () if where is None else
                            (parse_condition(f"h.type = '{where}'")[0],),
                            0, draw(st.sampled_from([(), ("patient",)])))


def _count(h, pattern, events, e):
    attrs = h.same or pattern.partition_attributes
    key = tuple(e.values.get(a) for a in attrs)
    n = 0
    for x in events:
        if tuple(x.values.get(a) for a in attrs) != key:
            continue
        if not all(p.holds(x.values) for p in h.where):
            continue
        if h.direction == "before":
            n += x.ts < e.ts if not h.by else x.ts <= e.ts - h.by
        else:
            n += x.ts > e.ts if not h.by else x.ts >= e.ts + h.by
    return n


@SETTINGS
@given(language_patterns(negation=True, bounds=True, rich=True, matcher="zstream"),
       event_tables(max_events=9, hours=True), st.data())
def test_history_conditions_keep_the_matches_whose_anchor_has_its_history(pattern, events,
                                                                           data):
    single = [v for v in pattern.variables if not v.group and v.min == 1]
    if not single or pattern.optional_units:
        return
    h = data.draw(history_conditions(single[0].name))
    marked = replace(pattern, history=(h,))
    plain = [m for m in oracle.all_matches(pattern, events)
             if h.holds(_count(h, pattern, events, dict(m.bindings)[h.anchor][0]))]
    assert _ids(oracle.meaning(marked, events)) == _ids(plain)
    assert _ids(run(marked, events)[0]) == _ids(plain)


@SETTINGS
@given(language_patterns(negation=True, bounds=True, contiguity=True, steps=True),
       event_tables(max_events=9, hours=True), st.data())
def test_history_with_the_automaton_equals_the_reference(pattern, events, data):
    single = [v for v in pattern.variables if not v.group and v.min == 1]
    if not single or pattern.optional_units:
        return
    marked = replace(pattern, history=(data.draw(history_conditions(single[-1].name)),))
    assert _ids(run(marked, events)[0]) == _ids(sorted_matches(oracle.meaning(marked, events)))


@pytest.mark.parametrize("entry, message", [
    ("{at_least: 1}", "one of at_least / at_most and one of before / after"),
    ("{at_least: -1, before: a}", "a whole number"),
    ("{at_most: 0, before: p}", "must bind exactly one event"),
    ("{at_most: 0, before: a, where: \"a.kind = 'A'\"}", "on the history event h alone"),
    ("{at_most: 0, before: a, by: 3 weeks}", "bad"),
    ("{at_most: 0, before: a, when: x}", "unknown key 'when'"),
])
def test_what_a_history_condition_may_say(entry, message):
    text = BASE.replace("    first_ever: {first}\n", f"    history: [{entry}]\n")
    with pytest.raises(PatternError, match=message):
        parse_pattern(textwrap.dedent(text), "<history>")


FACTS = ["partition.count >= {k}", "{v}.ts - partition.first_ts >= {d}d",
         "partition.last_ts - {v}.ts >= {d}d", "partition.last_ts - partition.first_ts <= {d}d"]


@SETTINGS
@given(language_patterns(negation=True, bounds=True, rich=True),
       event_tables(max_events=9, hours=True), st.data())
def test_partition_facts_engine_equals_reference(pattern, events, data):
    from jobs.core.language.conditions.kinds import classify
    from jobs.core.language.partition_facts import anchored

    single = [v for v in pattern.variables if not v.group and v.min == 1]
    if not single or pattern.optional_units:
        return
    text = data.draw(st.sampled_from(FACTS)).format(
        k=data.draw(st.integers(1, 6)), d=data.draw(st.integers(0, 3)), v=single[0].name)
    [(cond, _)] = parse_conditions(text)
    fact = classify(anchored(cond.expr, single[0].name))
    with_fact = replace(pattern, conditions=pattern.conditions + (fact,), condition_lines=())
    assert with_fact.whole_history
    assert _ids(run(with_fact, events)[0]) == _ids(sorted_matches(oracle.meaning(with_fact,
                                                                                 events)))


def test_partition_facts_in_a_file_are_read_on_a_variable():
    text = textwrap.dedent(BASE.replace("    first_ever: {first}\n", "")) + (
        "  - a.ts - partition.first_ts >= 1d\n  - partition.count >= 3\n"
        "measures:\n  seen: partition.count\n")
    pattern = parse_pattern(text, "<facts>")
    assert {"__partition_first_ts", "__partition_count"} <= pattern.attributes
    assert "__partition_count" not in pattern.stored_attributes and pattern.whole_history
    with pytest.raises(PatternError, match="partition's facts are"):
        parse_pattern(text.replace("partition.count >= 3", "partition.size >= 3"), "<facts>")
