"""The matchers' memory budget, in-process: every SES path (lazy windows, eager SESExec)
and ZStream's match buffers stop at the budget with a message naming the pattern, the
window and the setting; a partition's events count too."""

import pytest

from jobs.core.engine.batches import MatchBudgetExceeded
from jobs.core.engine.options import MatchOptions
from jobs.core.language.events import Event, order
from jobs.core.local.runner import run
from tests.helpers import pattern_text

BRANCHING = ("name: many\nsource: s\nwithin: 100d\nsets: [[a+, b+, c+]]\nconditions:\n"
             "  - a.type = 'A'\n  - b.type = 'A'\n  - c.type = 'A'\n")
EVENTS = order([Event(f"a{i:02d}", i, {"type": "A"}) for i in range(40)])
BUDGET = 4 * 1024**2


@pytest.mark.parametrize("strategy", ["lazy", "eager"])
def test_ses_stops_at_the_budget(strategy):
    with pytest.raises(MatchBudgetExceeded) as info:
        run(pattern_text(BRANCHING), EVENTS, MatchOptions(
            strategy=strategy, memory_budget=BUDGET, max_matches_per_window=10**12))
    msg = str(info.value)
    assert "pattern 'many'" in msg and "memory budget of 4 MB" in msg
    assert "--memory-budget" in msg
    if strategy == "lazy":
        assert "window starting at event a00" in msg


def test_within_the_budget_nothing_changes():
    small = order([Event(f"a{i}", i, {"type": "A"}) for i in range(5)])
    p = pattern_text(BRANCHING)
    matches = run(p, small, MatchOptions(memory_budget=BUDGET))[0]
    assert matches and matches == run(p, small)[0]


def test_zstream_match_buffers_and_partition_events_count():
    p = pattern_text("name: pairs\nsource: s\nwithin: 100d\nsets: [[a], [b+]]\nconditions:\n"
                     "  - a.type = 'A'\n  - b.type = 'A'\nmatcher: zstream\n")
    events = order([Event(f"a{i:02d}", i, {"type": "A"}) for i in range(22)])
    with pytest.raises(MatchBudgetExceeded, match="for its matches"):
        run(p, events, MatchOptions(memory_budget=BUDGET, max_matches_per_window=10**12))
    with pytest.raises(MatchBudgetExceeded, match="its 22 events"):
        run(p, events, MatchOptions(memory_budget=100))
