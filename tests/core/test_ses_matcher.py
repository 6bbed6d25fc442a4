"""The lazy two-phase SES matcher: automaton construction, the summary statistics of Fig. 5,
and every strategy and pruning combination equal to the oracle."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.core.engine.columns import from_events
from jobs.core.engine.matchers import SESMatcher
from jobs.core.engine.runtime import compile_pattern, group_events, scan
from jobs.core.local.runner import MatchOptions, run
from jobs.core.reference import oracle
from jobs.core.reference.summary import SummaryStatistics, reference_candidates

from ..helpers import as_dicts, chemo_mw, chemo_ses, keys, pattern_file, pattern_text
from ..strategies import event_tables, patterns

COMBINATIONS = [MatchOptions(matcher="ses", strategy="eager")] + [
    MatchOptions(matcher="ses", filter=f, partition=p, conditions=c)
    for f, p, c in itertools.product([True, False], repeat=3)]


def automaton(pattern, partitioned=False):
    return SESMatcher(compile_pattern(pattern), MatchOptions(), partitioned)


def windows_of(pattern, events, options=MatchOptions()):
    """The group, every window's diagnosis and the candidates, as the engine sees them."""
    c = compile_pattern(pattern)
    partitioned = options.partition and bool(c.partition_attributes)
    group = group_events(c, from_events(events, c.attributes), options, partitioned)
    first, end, _, d_end, d_cnt, d_c45, d_pos = scan(c, group, options, diagnose=True)
    return group, first, d_end, d_cnt, d_c45, d_pos


def test_automaton_states_of_q1():
    """SES paper, Fig. 5: 8 states for {c, p+, d} plus the accepting state; loops for p+."""
    a = automaton(pattern_file("ses_chemo_q1"))
    assert len(a.labels) == 9
    text = a.describe()
    assert "{c, p, d} --p--> {c, p, d} loop" in text
    assert "{c, p, d} --b--> {c, p, d, b} new set" in text
    assert "{} --c--> {c}" in text
    assert "{c, p, d, b} --" not in text  # b is a singleton: no loop in the accepting state
    assert len(a.transitions) == 12 + 4 + 1  # 12 forward, 4 loops, 1 to {b}


def test_fig5_summary_statistics_sequence():
    """Match-window paper, Fig. 5: the window of patient 1 and its counters; rows (6) and
    (7) of the figure are the counter test of Theorem 3."""
    p = pattern_file("mw_chemo_p1")
    events = chemo_mw()
    group, _, d_end, d_cnt, d_c45, d_pos = windows_of(p, events)
    ids = group.cols.ids.to_pylist()
    i = ids.index("e1")
    window = ids[i:d_end[i]]
    assert (window, tuple(d_cnt[i]), d_c45[i], d_pos[i]) == \
        (["e1", "e2", "e3", "e9", "e11"], (1, 2, 1), True, True)
    # replay the statistics event by event, as in the figure
    s = SummaryStatistics(p)
    masks = dict(zip(ids, group.masks.tolist()))
    counted, rows = {}, []
    window = []
    for eid in ["e1", "e2", "e3", "e9", "e11"]:
        counted[eid] = s.add(masks[eid])
        window.append(eid)
        rows.append((tuple(window), s.counters(), len(window) >= 3,
                     bool(masks[window[0]] & 0b011), s.all_positive()))
    s.remove(counted["e1"])
    window.pop(0)
    rows.append((tuple(window), s.counters(), len(window) >= 3, bool(masks[window[0]] & 0b011),
                 s.all_positive()))
    assert [r[1] for r in rows] == [(1, 0, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0), (1, 2, 1), (0, 2, 0)]
    assert [r[2] for r in rows] == [False, False, True, True, True, True]  # condition (4)
    assert [r[3] for r in rows] == [True, True, True, True, True, False]  # condition (5)
    assert [r[4] for r in rows] == [False, False, False, False, True, False]  # (6) and (7)


def test_counter_decrement_only_for_counted_events():
    """The paper's dequeue rule would decrement b for the leading b event that was never
    counted (no p before it) and miss the match a, b that follows."""
    p = pattern_text("name: x\nsource: s\nwithin: 5d\nsets: [[a], [b]]\nconditions:\n"
                     "  - a.type = 'A'\n  - b.type = 'B'\n")
    s = SummaryStatistics(p)
    c0 = s.add(0b10)  # b: not counted, cnt_a = 0
    s.add(0b01)  # a
    s.add(0b10)  # b: counted
    s.remove(c0)
    assert s.counters() == (1, 1) and s.all_positive()


@pytest.mark.parametrize("name, data", [("mw_chemo_p1", chemo_mw), ("ses_chemo_q1", chemo_ses)])
@pytest.mark.parametrize("options", COMBINATIONS, ids=str)
def test_papers_examples_every_combination(name, data, options):
    p, events = pattern_file(name), data()
    matches, stats = run(p, events, options)
    assert keys(matches) == keys(oracle.ses_exec(p, events))
    assert stats["matches"] == 3


def test_pruning_counters_show_the_work_saved():
    p, events = pattern_file("mw_chemo_p1"), chemo_mw()
    _, base = run(p, events, MatchOptions(filter=False, partition=False, conditions=False))
    _, full = run(p, events, MatchOptions())
    _, eager = run(p, events, MatchOptions(strategy="eager"))
    assert base["windows"] == 14 and base["matcher_calls"] == 14
    assert full["events_after_filter"] == 13  # e6 (D) filtered out, Example 8
    assert full["partitions"] == 2 and full["windows"] == 13
    assert full["candidate_windows"] == full["matcher_calls"] == 3
    assert full["peak"] < eager["peak"] and full["work_item"] == "live instances"


def test_design_example_automaton_semantics():
    p = pattern_text("name: d\nsource: s\nwithin: 9d\nsets: [[c], [x+]]\nconditions:\n"
                     "  - c.type = 'C'\n  - x.type != 'C'\n  - c.patient = x.patient\n"
                     "  - prev(x.value) != x.value\n")
    for options in COMBINATIONS:
        assert as_dicts(run(p, chemo_ses(), options)[0]) == [
            {"c": ["e1"], "x": ["e2", "e3", "e4", "e12"]}, {"c": ["e8"], "x": ["e10", "e13", "e14"]}]


@given(patterns(), event_tables())
def test_every_combination_equals_the_oracle(pattern, events):
    expected = keys(oracle.ses_exec(pattern, events))
    for options in COMBINATIONS:
        assert keys(run(pattern, events, options)[0]) == expected, options


@given(patterns(max_vars=3), event_tables(max_events=14, max_day=12))
def test_longer_streams_equal_the_oracle(pattern, events):
    expected = keys(oracle.ses_exec(pattern, events))
    for options in (COMBINATIONS[0], COMBINATIONS[1], COMBINATIONS[-1]):
        assert keys(run(pattern, events, options)[0]) == expected, options


@given(st.data())
def test_necessary_conditions_never_reject_a_window_with_a_match(data):
    pattern = data.draw(patterns())
    events = data.draw(event_tables())
    starts = {m.start.id for m in oracle.ses_exec(pattern, events)}
    group, _, _, _, c45, pos = windows_of(pattern, events, MatchOptions(partition=False))
    ids = group.cols.ids.to_pylist()
    rejected = {ids[i] for i in range(len(ids)) if not (c45[i] and pos[i])}
    assert not starts & rejected


@given(patterns(), event_tables(max_events=14, max_day=12), st.booleans())
def test_window_kernel_equals_the_reference_statistics(pattern, events, partition):
    """kernels.scan_windows keeps exactly the windows the Python SummaryStatistics keep."""
    options = MatchOptions(partition=partition)
    group, first, *_ = windows_of(pattern, events, options)
    segments = list(zip(group.seg_start.tolist(), group.seg_end.tolist()))
    expected = reference_candidates(pattern, group.cols.ts.tolist(), group.masks.tolist(),
                                    segments, pattern.tau)
    assert first.tolist() == expected
