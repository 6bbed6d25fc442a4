"""``explain``: each step of the lazy strategy is named correctly on hand-made cases (the
filter, conditions 4-5, a counter at zero, a failed condition in the matcher), per-variable
counts with the nearest known values on a real Spark frame, and the warnings."""

import textwrap

import pytest

from jobs.core.language.events import Event, order, parse_ts
from jobs.core.language.patternfile import load_pattern
from jobs.spark.diagnostics import unsatisfiable, variable_counts
from jobs.tools.explain import why_not

RISING = """\
    name: rising
    source: toy
    within: 7d
    sets:
      - [c+]
      - [i]
    conditions:
      - c.kind = 'CRP'
      - i.kind = 'ICU'
      - c.pid = i.pid
      - prev(c.value) < c.value
"""


@pytest.fixture
def rising(tmp_path):
    path = tmp_path / "rising.yaml"
    path.write_text(textwrap.dedent(RISING))
    return load_pattern(path)


def ev(i: str, day: int, kind: str, value=None, pid="A") -> Event:
    return Event(i, parse_ts(f"2014-03-{day:02d}"), {"pid": pid, "kind": kind, "value": value})


def test_the_filter_removed_every_event(rising):
    [r] = why_not(rising, order([ev("x1", 1, "Lactate"), ev("x2", 2, "Triage")]))
    assert (r.events, r.kept, r.candidates) == (2, 0, 0)
    assert "the filter removed every event" in "\n".join(r.lines())


def test_a_counter_stayed_at_zero(rising):
    """CRPs but no ICU admission within 7 days: the counter of i is zero."""
    [r] = why_not(rising, order([ev("c1", 1, "CRP", 10), ev("c2", 2, "CRP", 20),
                                 ev("c3", 3, "CRP", 30), ev("i1", 20, "ICU")]))
    assert r.kept == 4 and r.windows == 4
    assert r.no_start == 2  # i1 cannot start a match; c3's window holds one event
    assert r.zero_counters == {"i": 2} and r.candidates == 0
    assert "counter stayed at zero (i in 2)" in "\n".join(r.lines())


def test_a_failed_relationship_is_named(tmp_path):
    path = tmp_path / "dose.yaml"
    path.write_text(textwrap.dedent("""\
        name: dose
        source: toy
        within: 7d
        sets:
          - [c]
          - [i]
        conditions:
          - c.kind = 'CRP'
          - i.kind = 'ICU'
          - c.value > 100
          - i.value < c.value
    """))
    pattern = load_pattern(path)
    [r] = why_not(pattern, order([ev("c1", 1, "CRP", 150), ev("i1", 2, "ICU", 200)]))
    assert r.candidates == 1 and r.matched == 0
    assert r.failed == {"i.value < c.value": 1}
    assert "condition failed in 1 window(s): i.value < c.value" in "\n".join(r.lines())
    # --at: only the windows whose first event lies in the range
    [r] = why_not(pattern, order([ev("c1", 1, "CRP", 150), ev("i1", 2, "ICU", 200)]),
                  low=parse_ts("2014-03-05"), high=parse_ts("2014-03-09"))
    assert r.windows == 0 and r.candidates == 0


def test_variable_counts_name_the_nearest_known_values(spark, tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(textwrap.dedent(RISING).replace("'ICU'", "'Admission ICU'"))
    pattern = load_pattern(path)
    df = spark.createDataFrame(
        [("A", "CRP", 1.0), ("A", "CRP", 2.0), ("A", "Admission IC", None),
         ("B", "Admission NC", None), ("B", "Lactate", 3.0)], "pid string, kind string, value double")
    counts = {c.variable: c for c in variable_counts(df, pattern)}
    assert counts["c"].events == 2 and counts["i"].events == 0
    assert counts["i"].hints and "'Admission IC'" in counts["i"].hints[0] \
        and "'Admission NC'" in counts["i"].hints[0]
    [warning] = unsatisfiable(list(counts.values()))
    assert warning.startswith("variable i can never bind: 0 event(s) with i.kind = 'Admission ICU'")
    assert "known: 'Admission IC', 'Admission NC'" in warning


def test_explain_lists_aggregate_conditions_and_typed_measures():
    from jobs.config import load_sources
    from jobs.tools.explain import whole_match_lines

    from ..conftest import ROOT

    pattern = load_pattern(ROOT / "patterns" / "sepsis_crp_run_high_average.yaml")
    lines = whole_match_lines(pattern, dict(load_sources()["sepsis"].columns))
    assert lines[:3] == ["conditions on each whole match (aggregates), tested after matching:",
                         "  avg(c.value) > 100", "  w.ts - last(c.ts) <= 12h"]
    assert "measures (columns of the match table):" in lines
    for line in ("  tests integer = count(c)", "  mean_crp double = avg(c.value)",
                 "  ward string = w.event_type", "  wait double = w.ts - last(c.ts)"):
        assert line in lines, lines
    plain = load_pattern(ROOT / "patterns" / "mw_chemo_p1.yaml")
    assert whole_match_lines(plain, {}) == []


LIQUID_FIRST = """\
    name: lactate_then_antibiotics
    source: toy
    within: 1d
    sets:
      - [l]
      - [not f]
      - [ab]
    conditions:
      - l.kind = 'LacticAcid'
      - f.kind = 'IV Liquid'
      - ab.kind = 'IV Antibiotics'
      - l.pid = f.pid
      - l.pid = ab.pid
"""


def test_a_negation_is_named_with_the_event_that_witnessed_it(tmp_path):
    """A lactate, an IV liquid at 13:00:34 and antibiotics at 13:10:31: the liquid stopped
    the window, not the antibiotics' condition; the filter counts the liquid too."""
    path = tmp_path / "liquid.yaml"
    path.write_text(textwrap.dedent(LIQUID_FIRST))
    pattern = load_pattern(path)
    at = "2014-10-22T{}"
    events = order([Event("l1", parse_ts(at.format("12:50:00")), {"pid": "A", "kind": "LacticAcid"}),
                    Event("f1", parse_ts(at.format("13:00:34")), {"pid": "A", "kind": "IV Liquid"}),
                    Event("a1", parse_ts(at.format("13:10:31")),
                          {"pid": "A", "kind": "IV Antibiotics"})])
    [r] = why_not(pattern, events)
    assert r.kept == 3  # the negated variable's event is kept by the filter too
    assert r.candidates == 1 and r.matched == 0
    assert r.failed == {"not f": 1}
    text = "\n".join(r.lines())
    assert "negated set failed in 1 window(s): not f" in text
    assert "f = f1 at 2014-10-22T13:00:34" in text and "ab.kind" not in text


HISTORY = """\
    name: icu_after_a_week
    source: toy
    within: 7d
    sets:
      - [c]
      - [i]
    conditions:
      - c.kind = 'CRP'
      - i.kind = 'ICU'
      - c.pid = i.pid
    history:
      - {at_least: 1, before: c, by: 7d, same: [pid]}
"""


def test_a_history_condition_is_named_where_it_keeps_a_window_from_starting(tmp_path):
    """Patient B's CRP has no event a week before it: explain says the history condition
    kept it from being c, not only that it fits no variable of the first set."""
    path = tmp_path / "icu_after_a_week.yaml"
    path.write_text(textwrap.dedent(HISTORY))
    pattern = load_pattern(path)
    events = order([ev("b1", 10, "CRP", pid="B"), ev("b2", 11, "ICU", pid="B")])
    lines = why_not(pattern, events)[0].lines()
    assert any("1 of the others fit c but for history: at least 1 of [any event] before c "
               "by 7d same pid" in line for line in lines), lines
    assert not any("__history" in line for line in lines)


def test_at_a_day_covers_the_whole_day():
    from jobs.tools.explain import DAY_NS, at_range

    low, high = at_range("2013-11-23", 2 * DAY_NS)
    assert high - low == 3 * DAY_NS - 1 and at_range("2013-11-23T08:00:00", 5)[1] - 5 == \
        at_range("2013-11-23T08:00:00", 5)[0]
    assert high == parse_ts("2013-11-24") - 1
