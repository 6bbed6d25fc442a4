"""Funnels (docs/semantics.md, "Funnels"): the engine's steps equal the brute-force
reference window for window, the counts never grow from a step to the next, every
window that stopped is named once, and a hand-made case gives the expected numbers."""

import textwrap

from hypothesis import HealthCheck, given, settings

from jobs.core.engine.columns import from_events
from jobs.core.engine.funnel import funnel as engine_funnel
from jobs.core.engine.funnel import window_outcomes
from jobs.core.language.events import Event, order, parse_ts
from jobs.core.language.funnel_steps import funnel_steps
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
        _ev("b-x", 3, "B", "Triage"),
        _ev("c-r", 1, "C", "Registration"), _ev("c-l", 2, "C", "Leucocytes"),
        _ev("c-c", 3, "C", "CRP"), _ev("c-f", 4, "C", "IV Liquid"),
        _ev("c-a", 5, "C", "IV Antibiotics"),
        _ev("d-r", 1, "D", "Registration")])
    rows = reference.funnel(pattern, events)
    assert [(r.step, r.partitions, r.windows) for r in rows] == [(1, 4, 4), (2, 2, 2), (3, 1, 1)]
    assert [r.negations for r in rows] == [(), (), ("not f",)]
    assert dict(rows[0].stopped) == {"no c (c.kind = 'CRP')": 1, "no l (l.kind = 'Leucocytes')": 1}
    assert dict(rows[1].stopped) == {"not f": 1}
    cols = from_events(events, sorted(pattern.attributes))
    assert [(r.step, r.partitions, r.windows, r.stopped) for r in engine_funnel(pattern, cols)] \
        == [(r.step, r.partitions, r.windows, r.stopped) for r in rows]
    step = funnel_steps(pattern)[2]
    start = next(e for e in events if e.id == "c-r")
    m, seen = reference.negation_witnesses(step, "not f", start,
                                           [e for e in events if e.values["pid"] == "C"])
    assert [e.id for e in seen] == ["c-f"] and m.start.id == "c-r"
