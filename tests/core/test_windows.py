"""Pattern-based windows (``kind: window``): the semantics of docs/windows.md on
hand-made streams, the paper's six examples on the committed location stream, the matcher
against the brute-force oracle under every pruning, and the loader's messages."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.core.engine.options import MatchOptions
from jobs.core.engine.window_matcher import windows_of
from jobs.core.language.events import Event, order, parse_ts, read_events
from jobs.core.language.patternfile import PatternError, check_schema, parse_pattern
from jobs.core.language.window import oracle_windows
from jobs.core.local.examples import run_example

from ..helpers import EXAMPLES, ROOT, assert_problem, pattern_file
from ..window_strategies import window_events, window_patterns

LOCATIONS = EXAMPLES / "locations" / "locations.csv"


HEAD = "name: w\nkind: window\nsource: s\n"


def window(text: str):
    return parse_pattern(HEAD + text, "<test>")


def stream(*rows):
    """rows: (id, minute, attrs)"""
    return order(Event(i, parse_ts("2010-07-03T09:00:00") + m * 60 * 10**9, dict(a))
                 for i, m, a in rows)


def shapes(windows):
    return [(w.first.id, [e.id for e in w.buffer], w.last.id, w.values) for w in windows]


def both(pattern, events):
    """The oracle's windows, checked equal to the engine's (pruned and not)."""
    expected = shapes(oracle_windows(pattern, events))
    for options in (MatchOptions(), MatchOptions(filter=False, partition=False)):
        assert shapes(windows_of(pattern, events, options)[0]) == expected
    return expected


# -- semantics (docs/windows.md) --------------------------------------------------------
def test_ties_follow_event_id_and_an_event_never_tests_its_own_window():
    p = window("within: 1d\nstart: kind = 'S'\ntermination: kind = 'S'\n")
    ev = stream(("b", 0, {"kind": "S"}), ("a", 0, {"kind": "S"}), ("c", 0, {"kind": "S"}))
    # processing order a, b, c: a opens; b closes a's window and opens its own; c closes b's
    assert both(p, ev) == [("a", [], "b", ()), ("b", [], "c", ())]


def test_first_plus_tau_still_closes_and_later_is_dropped():
    p = window("within: 10min\nstart: kind = 'S'\ntermination: kind = 'E'\n")
    at = stream(("s", 0, {"kind": "S"}), ("e", 10, {"kind": "E"}))
    late = stream(("s", 0, {"kind": "S"}), ("e", 11, {"kind": "E"}))
    assert both(p, at) == [("s", [], "e", ())]
    assert both(p, late) == []


def test_iteration_failure_drops_and_filter_chooses_the_buffer():
    p = window("within: 1d\nstart: kind = 'S'\ntermination: kind = 'E'\n"
               "iteration: kind != 'X'\nfilter: v > 1\n")
    ev = stream(("s", 0, {"kind": "S", "v": 0}), ("a", 1, {"kind": "M", "v": 5}),
                ("b", 2, {"kind": "M", "v": 0}), ("e", 3, {"kind": "E", "v": 0}))
    assert both(p, ev) == [("s", ["a"], "e", ())]
    dropped = stream(("s", 0, {"kind": "S", "v": 0}), ("x", 1, {"kind": "X", "v": 5}),
                     ("e", 3, {"kind": "E", "v": 0}))
    assert both(p, dropped) == []


def test_prev_num_and_iter_in_conditions_and_in_select():
    # rising values: prev() is the last buffered event, else the first; num() counts the
    # first and the buffered events in a condition, and also the last one in select
    p = window("within: 1d\nstart: kind = 'S'\ntermination: kind = 'E' and num() >= 3\n"
               "iteration: kind = 'E' or v > prev(v)\nfilter: TRUE\n"
               "select:\n  n: num()\n  tested: iter()\n  first_v: first(v)\n")
    ev = stream(("s", 0, {"kind": "S", "v": 1}), ("a", 1, {"kind": "M", "v": 2}),
                ("e1", 2, {"kind": "E", "v": 0}), ("b", 3, {"kind": "M", "v": 3}),
                ("e2", 4, {"kind": "E", "v": 0}))
    # e1: num() is 2 (s, a), so no close; as the iteration holds (kind E) it is buffered,
    # then b (3 > prev = e1's 0) joins, e2 closes with num() = 4 in the condition
    assert both(p, ev) == [("s", ["a", "e1", "b"], "e2", (5, 4, 1.0))]


def test_missing_values_are_unknown_and_unknown_does_not_hold():
    p = window("within: 1d\nstart: kind = 'S'\ntermination: v = first(v)\n"
               "iteration: not v = 7\nfilter: FALSE\n")
    ev = stream(("s", 0, {"kind": "S", "v": None}), ("a", 1, {"kind": "M", "v": 1}))
    # the first event has no v: the termination is unknown; not (1 = 7) holds
    assert both(p, ev) == []
    p2 = window("within: 1d\nstart: kind = 'S'\ntermination: kind = 'E'\n"
                "iteration: not v = 7\nfilter: FALSE\n")
    ev2 = stream(("s", 0, {"kind": "S", "v": 1}), ("a", 1, {"kind": "M", "v": None}),
                 ("e", 2, {"kind": "E", "v": 1}))
    assert both(p2, ev2) == []  # not (unknown) is unknown: the iteration fails at a


def test_and_binds_tighter_than_or_and_keywords_are_case_insensitive():
    p = window("within: 1d\nstart: KIND = 'S'\ntermination: kind = 'E' OR kind = 'F' AND v = 1\n")
    assert str(p.termination) == "kind = 'E' or kind = 'F' and v = 1"
    with pytest.raises(PatternError, match="no variables"):
        window("within: 1d\nstart: a.kind = 'S'\ntermination: TRUE\n")


# -- partition attributes and the filter ------------------------------------------------------
def test_partition_attributes_follow_the_conditions():
    ex5 = pattern_file("paper_ex5_lab_to_home")
    assert ex5.partition_attributes == ("person",)
    assert pattern_file("paper_ex1_tom_after_lab").partition_attributes == ()
    # an iteration other persons might fail: no partitioning
    p = window("within: 1d\nstart: l = 'Lab'\ntermination: person = first(person)\n"
               "iteration: l != 'Lab'\nfilter: FALSE\n")
    assert p.partition_attributes == ()
    # iter() counts every event: nothing is pruned
    p = window("within: 1d\nstart: l = 'Lab'\ntermination: person = first(person) and "
               "iter() < 3\n")
    assert p.partition_attributes == () and p.uses_iter


def test_the_filter_keeps_only_events_that_can_matter():
    ex1 = pattern_file("paper_ex1_tom_after_lab")
    events = read_events(LOCATIONS)
    found, stats = windows_of(ex1, events)
    assert stats["events_after_filter"] == 4  # Tom's events: the others cannot matter
    assert shapes(found) == shapes(oracle_windows(ex1, events))


def test_an_event_without_the_partition_value_can_still_drop_windows():
    p = window("within: 1d\nstart: kind = 'S'\n"
               "termination: person = first(person) and kind = 'E'\n"
               "iteration: person != first(person) or kind != 'X'\nfilter: FALSE\n")
    ev = stream(("s", 0, {"kind": "S", "person": "A"}), ("x", 1, {"kind": "X", "person": None}),
                ("e", 2, {"kind": "E", "person": "A"}))
    assert p.partition_attributes == ("person",)
    assert both(p, ev) == []  # x has no person: the iteration is unknown, the window dropped


# -- the oracle ------------------------------------------------------------------------------
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window_patterns(), window_events(), st.sampled_from([(True, True), (True, False),
                                                            (False, True)]))
def test_the_matcher_gives_the_oracles_windows_under_every_pruning(pattern, events, pruning):
    filter_, partition = pruning
    expected = shapes(oracle_windows(pattern, events))
    found, _ = windows_of(pattern, events, MatchOptions(filter=filter_, partition=partition))
    assert shapes(found) == expected


# -- the paper's examples on the location stream ------------------------------------------
PAPER = {
    "paper_ex1_tom_after_lab": [("l01", [], "l03", ("Room 101",))],
    "paper_ex2_next_after_lab": [("l01", [], "l03", ("Tom", "Room 101")),
                                 ("l02", [], "l04", ("Ann", "Cafe")),
                                 ("l08", [], "l10", ("Bob", "Room 101")),
                                 ("l11", [], "l12", ("Ann", "Room 101")),
                                 ("l13", [], "l14", ("Ann", "Home"))],
    "paper_ex3_lab_then_room101": [("l01", [], "l03", ("Tom",)), ("l08", [], "l10", ("Bob",)),
                                   ("l11", [], "l12", ("Ann",))],
    "paper_ex5_lab_to_home": [("l01", ["l03", "l07"], "l09", ("Tom", 5400.0, 4)),
                              ("l02", ["l04"], "l06", ("Ann", 2100.0, 3)),
                              ("l13", [], "l14", ("Ann", 3600.0, 2))],
    "paper_ex6_lab_to_home_passes": [("l01", ["l03", "l07"], "l09", ()),
                                     ("l02", ["l04"], "l06", ()), ("l13", [], "l14", ())],
}


@pytest.mark.parametrize("name", sorted(PAPER))
def test_the_papers_examples_on_the_location_stream(name):
    pattern = pattern_file(name)
    assert both(pattern, read_events(LOCATIONS)) == PAPER[name]
    for example in pattern.examples:
        assert run_example(pattern, example).ok, run_example(pattern, example).message()


def test_example_4_window_keeps_the_lab_to_lab_window_for_the_model():
    windows = both(pattern_file("paper_ex4_next_room"), read_events(LOCATIONS))
    assert ("l05", [], "l08", ("Bob", "Lab", "2010-07-03T10:00:00")) in windows
    assert len(windows) == 6


def test_match_prints_one_json_line_per_window(capsys):
    from jobs.cli.main import main

    assert main(["match", str(ROOT / "patterns" / "paper_ex5_lab_to_home.yaml"),
                 str(LOCATIONS)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == {"pattern": "paper_ex5_lab_to_home", "start": "2010-07-03T09:00:00",
                       "end": "2010-07-03T10:30:00",
                       "bindings": {"first": ["l01"], "buffer": ["l03", "l07"],
                                    "last": ["l09"]},
                       "values": {"person": "Tom", "duration": 5400.0, "steps": 4}}
    assert len(rows) == 3


# -- the loader ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, line, message", [
    ("within: 1d\nstart: prev(l) = 1\ntermination: TRUE\n", 5, "start: prev() in start"),
    ("within: 1d\nstart: l = 1\ntermination: last(l) = 1\n", 6, "last() is only for select"),
    ("within: 1d\nstart: l = 1\ntermination: TRUE\nselect:\n  x: l\n", 8,
     "attribute alone in select"),
    ("within: 1d\nstart: l = 1\ntermination: TRUE\nselect:\n  match_id: num()\n", 8,
     "every match table"),
    ("within: 1d\nstart: l = 1\ntermination: lag(l) = 1\n", 6, "unknown function 'lag'"),
    ("within: 1d\nstart: l = 1\n", 1, "missing field 'termination'"),
    ("start: l = 1\ntermination: TRUE\n", 1, "missing field 'within'"),
    ("within: 1d\nstart: l\ntermination: TRUE\n", 5, "expected an operator"),
    ("within: 1d\nstart: l = 1\ntermination: TRUE\nsets: [[a]]\n", 7, "unknown key 'sets'"),
])
def test_mistakes_in_a_window_file_get_their_line(text, line, message):
    assert_problem(HEAD + text, line, message)


def test_kind_must_be_known_and_attributes_must_exist():
    with pytest.raises(PatternError, match="kind 'windows'"):
        parse_pattern("name: w\nkind: windows\n", "<test>")
    p = window("within: 1d\nstart: locaton = 'Lab'\ntermination: TRUE\n")
    problems = check_schema(p, {"person": "string", "location": "string", "ts": "timestamp"})
    assert problems and "did you mean 'location'" in str(problems[0])
    assert problems[0].line == 5
