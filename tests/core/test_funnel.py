"""Funnels (docs/semantics.md, "Funnels"): the engine's steps equal the brute-force
reference window for window, the counts never grow from a step to the next, every
window that stopped is named once, and a hand-made case gives the expected numbers."""

import textwrap
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.core.engine.columns import from_events
from jobs.core.engine.funnel import funnel as engine_funnel
from jobs.core.engine.funnel import window_outcomes
from jobs.core.language.events import Event, order, parse_ts
from jobs.core.language.funnel_steps import (
    AFTER_MATCH,
    WITHIN,
    among,
    funnel_steps,
    negation_label,
)
from jobs.core.language.pattern import Negation
from jobs.core.language.patternfile import parse_pattern
from jobs.core.reference import funnel as reference
from tests.strategies import disjunctive_patterns, event_tables, language_patterns

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _engine(pattern, events):
    cols = from_events(events, sorted(pattern.attributes))
    return [type(o)(events[o.start].seq, o.alternative, o.reached, o.stopped)
            for o in window_outcomes(pattern, cols)]


@SETTINGS
@given(language_patterns(negation=True, bounds=True, contiguity=True, rich=True, steps=True,
                         optional=True, matcher="zstream"), event_tables(max_events=8, hours=True))
def test_engine_funnel_equals_the_reference(pattern, events):
    assert _engine(pattern, events) == reference.window_outcomes(pattern, events)


@SETTINGS
@given(disjunctive_patterns(negation=True), event_tables(max_events=7, hours=True))
def test_alternatives_have_a_funnel_each_and_counts_never_grow(pattern, events):
    rows = reference.funnel(pattern, events)
    assert _engine(pattern, events) == reference.window_outcomes(pattern, events)
    for alt in pattern.alternatives:
        mine = [r for r in rows if r.alternative == alt.alternative]
        assert [r.step for r in mine] == list(range(1, len(alt.sets) + 1))
        for a, b in zip(mine, mine[1:]):
            assert b.windows <= a.windows and b.partitions <= a.partitions
            # every window that reached a step and not the next is stopped by one thing
            assert a.windows - b.windows == sum(n for _, n in a.stopped)


TEXT = """\
    name: labs
    source: toy
    within: 1d
    sets:
      - [r]
      - [l, c]
      - [not f]
      - [a]
    conditions:
      - r.kind = 'Registration'
      - l.kind = 'Leucocytes'
      - c.kind = 'CRP'
      - f.kind = 'IV Liquid'
      - a.kind = 'IV Antibiotics'
      - r.pid = l.pid
      - l.pid = c.pid
      - c.pid = a.pid
      - c.pid = f.pid
"""


def _ev(i, hour, pid, kind):
    return Event(i, parse_ts(f"2014-10-22T{hour:02d}:00:00"), {"pid": pid, "kind": kind})


def test_how_far_each_patient_got():
    """A reaches the end; B stops at the labs (no CRP); C has the labs but a liquid
    before the antibiotics; D has only a registration."""
    pattern = parse_pattern(textwrap.dedent(TEXT), "<labs>")
    events = order([
        _ev("a-r", 1, "A", "Registration"), _ev("a-l", 2, "A", "Leucocytes"),
        _ev("a-c", 3, "A", "CRP"), _ev("a-a", 4, "A", "IV Antibiotics"),
        _ev("b-r", 1, "B", "Registration"), _ev("b-l", 2, "B", "Leucocytes"),
        _ev("b-x", 3, "B", "IV Liquid"),  # an event of the pattern, but no CRP
        _ev("c-r", 1, "C", "Registration"), _ev("c-l", 2, "C", "Leucocytes"),
        _ev("c-c", 3, "C", "CRP"), _ev("c-f", 4, "C", "IV Liquid"),
        _ev("c-a", 5, "C", "IV Antibiotics"),
        _ev("d-r", 1, "D", "Registration")])
    rows = reference.funnel(pattern, events)
    assert [(r.step, r.partitions, r.windows) for r in rows] == [(1, 4, 4), (2, 2, 2), (3, 1, 1)]
    assert [r.negations for r in rows] == [(), (), ("not f",)]
    # D: no event follows its registration, whatever the conditions (no single one)
    assert dict(rows[0].stopped) == {"no c (c.kind = 'CRP')": 1, "within/order": 1}
    assert dict(rows[1].stopped) == {"not f": 1}
    cols = from_events(events, sorted(pattern.attributes))
    assert [(r.step, r.partitions, r.windows, r.stopped) for r in engine_funnel(pattern, cols)] \
        == [(r.step, r.partitions, r.windows, r.stopped) for r in rows]
    step = funnel_steps(pattern)[2]
    start = next(e for e in events if e.id == "c-r")
    m, seen = reference.negation_witnesses(step, "not f", start,
                                           [e for e in events if e.values["pid"] == "C"])
    assert [e.id for e in seen] == ["c-f"] and m.start.id == "c-r"


@SETTINGS
@given(language_patterns(negation=True, bounds=True, steps=True, self_relations=True,
                         episodes=True), event_tables(max_events=8, hours=True))
def test_with_episodes_and_groups_related_to_themselves_engine_equals_reference(pattern,
                                                                               events):
    assert _engine(pattern, events) == reference.window_outcomes(pattern, events)


def _without(pattern, label: str):
    """``pattern`` without everything ``label`` names, built from the file's parts (not
    from the funnel's steps): its conditions, negated sets, [next] marks, consecutive
    groups or after-match rule; X is kept (a window holds one partition)."""
    if label == AFTER_MATCH:
        return replace(pattern, after_match="all")
    gone = {n.var.name for n in pattern.negations if negation_label(n) in label.split(" and ")}
    negations = [n for n in pattern.negations if n.var.name not in gone]
    index = len(pattern.variables)
    negations = [Negation(replace(n.var, index=index + i), n.before, n.after, n.next)
                 for i, n in enumerate(negations)]
    conditions = tuple(c for c in pattern.conditions if not (
        gone & set(getattr(c, "variables", None) or (c.var,)) or str(c) in label))
    # a variable whose own condition is left out still binds only events of the pattern
    # (those that fit some variable: what the nightly pass reads)
    conditions += tuple(g for v in pattern.variables for g in among(pattern, v.name)
                        if any(getattr(c, "var", None) == v.name and c not in conditions
                               for c in pattern.conditions))
    sets = tuple(tuple(replace(v, consecutive=False) if str(v) in label else v for v in s)
                 for s in pattern.sets)
    nexts = tuple(i for i in pattern.next_sets if not label.startswith("next "))
    return replace(pattern, negations=tuple(negations), conditions=conditions, sets=sets,
                   next_sets=nexts, after_match="all",
                   partition_keys=pattern.partition_attributes)


@SETTINGS
@given(st.one_of(language_patterns(negation=True, bounds=True, steps=True, self_relations=True,
                                   episodes=True, aggregates=True),
                 language_patterns(negation=True, bounds=True, steps=True, rich=True,
                                   self_relations=True, aggregates=True)),
       event_tables(max_events=9, max_day=4))
def test_every_stop_it_names_when_left_out_lets_the_window_through(pattern, events):
    """For each window the funnel says a condition stopped (anything but within/order),
    the pattern without that condition (or those named together) lets the window reach
    the next step; a window skipped by after_match has a match without the rule."""
    for o in reference.window_outcomes(pattern, events):
        if o.stopped in (None, WITHIN):
            continue
        relaxed = _without(pattern, o.stopped)
        after = {x.start: x.reached for x in reference.window_outcomes(relaxed, events)}
        assert after.get(o.start, 0) > o.reached or (
            o.stopped == AFTER_MATCH and after.get(o.start) == len(pattern.sets)), o


EPISODES = """\
    name: crp_runs
    source: toy
    within: 2d
    sets: [['c{3,}']]
    conditions:
      - c.kind = 'CRP'
      - c.pid = c.pid
    after_match: past_last_event
"""


def test_a_match_after_match_did_not_keep_is_named_so():
    """Five CRPs of A (B's between them is another patient's): the window of the first
    keeps the episode; the windows of the second and third have matches that overlap it."""
    pattern = parse_pattern(textwrap.dedent(EPISODES), "<crp>")
    hours = [("c1", 1, "A"), ("c2", 2, "A"), ("b1", 3, "B"), ("c3", 4, "A"), ("c4", 5, "A"),
             ("c5", 6, "A")]
    events = order([_ev(i, h, pid, "CRP") for i, h, pid in hours])
    rows = reference.funnel(pattern, events)
    assert [(r.step, r.windows, dict(r.stopped)) for r in rows] == [(1, 3, {AFTER_MATCH: 2})]
    assert _engine(pattern, events) == reference.window_outcomes(pattern, events)


HISTORY = """\
    name: first_ab_long_history
    source: toy
    within: 1d
    sets: [[r], [ab]]
    conditions:
      - r.kind = 'Registration'
      - ab.kind = 'IV Antibiotics'
      - r.pid = ab.pid
      - partition.count >= 3
    first_ever: [ab]
    history:
      - {at_least: 1, before: r, by: 2d, same: [pid]}
"""


def test_stops_are_named_as_the_file_writes_them():
    """A history condition, first ever and a partition fact appear in the funnel's stops
    as the file writes them, never as the attributes that carry their marks."""
    pattern = parse_pattern(textwrap.dedent(HISTORY), "<history>")
    marked = pattern.marked()
    labels = [label for s in funnel_steps(marked) for r in s.requirements
              for label, _ in r.without]
    assert "no r (history: at least 1 of [any event] before r by 2d same pid)" in labels
    assert "no ab (first ever ab)" in labels and "no r (partition.count >= 3)" in labels
    assert not any("__" in label for label in labels)


def test_an_or_among_a_variables_conditions_keeps_its_parentheses():
    from jobs.core.language.conditions.expressions import conjoined

    assert conjoined(["l.kind = 'L'", "l.value > 12 or l.value < 4"]) == \
        "l.kind = 'L' and (l.value > 12 or l.value < 4)"
    assert conjoined(["l.value > 12 or l.value < 4"]) == "l.value > 12 or l.value < 4"
