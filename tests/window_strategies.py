"""Hypothesis strategies for pattern-based windows: random ``kind: window`` files (as
text, through the loader) and random event streams with ties and missing values."""

from hypothesis import strategies as st

from jobs.core.language.events import Event, order
from jobs.core.language.patternfile import parse_pattern

from .strategies import DAY, OPS, TYPES

CURRENT = ("type = '{t}'", "value {op} {x}", "patient = {p}", "type in ('{t}', 'B')",
           "not type = '{t}'", "value + 1 {op} {x}")
DYNAMIC = ("patient = first(patient)", "patient != first(patient)", "value {op} first(value)",
           "type = first(type)", "value - first(value) {op} {x}")
BUFFERED = ("value {op} prev(value)", "num() {op} {x}", "prev(type) = '{t}'")
SELECT = {"who": "first(patient)", "last_type": "last(type)", "n": "num()",
          "span": "last(ts) - first(ts)", "rise": "last(value) - first(value)",
          "at": "last(ts)"}


def _atom(draw, kinds):
    template = draw(st.sampled_from(kinds))
    return template.format(t=draw(st.sampled_from(TYPES)), op=draw(st.sampled_from(OPS)),
                           x=draw(st.integers(0, 3)), p=draw(st.integers(1, 2)))


@st.composite
def _condition(draw, kinds, depth: int = 0):
    shape = draw(st.sampled_from(["atom", "atom", "and", "or", "not"] if depth < 2 else ["atom"]))
    if shape == "atom":
        return _atom(draw, kinds)
    if shape == "not":
        return f"not ({draw(_condition(kinds, depth + 1))})"
    parts = [draw(_condition(kinds, depth + 1)) for _ in range(draw(st.integers(2, 3)))]
    return "(" + f" {shape} ".join(parts) + ")"


def _clause(draw, kinds, partitioned: bool, constant: str, linked: str) -> str:
    """ITERATION or FILTER: with partitioning, ``constant`` or ``linked`` + a condition
    (the shapes that keep the partition attribute); else also the other constant or any
    random condition."""
    choices = [constant, "linked"] if partitioned else ["TRUE", "TRUE", "FALSE", "random",
                                                         "linked"]
    choice = draw(st.sampled_from(choices))
    if choice == "random":
        return draw(_condition(kinds))
    if choice == "linked":
        return f"{linked} {draw(_condition(kinds))}"
    return choice


@st.composite
def window_patterns(draw, buffered: bool = True, counters: bool = True):
    """A window pattern over events with type, value and patient; often partitionable
    (``patient = first(patient)`` in termination and filter), sometimes with prev(),
    num() or iter()."""
    dyn = CURRENT + DYNAMIC + (BUFFERED if buffered else ())
    if counters and draw(st.integers(0, 9)) == 0:
        dyn = dyn + ("iter() {op} {x}",)
    partitioned = draw(st.booleans())
    start = draw(_condition(CURRENT + ("first(value) {op} {x}",))) \
        if draw(st.integers(0, 2)) == 0 else _atom(draw, CURRENT)
    simple = draw(st.booleans())  # a termination that holds often: windows close
    termination = _atom(draw, CURRENT) if simple else draw(_condition(dyn))
    if partitioned:
        termination = f"patient = first(patient) and {termination}"
    # iteration: TRUE, or one other patients always pass; filter: FALSE, or same patient
    iteration = _clause(draw, dyn, partitioned, "TRUE", "patient != first(patient) or")
    filter_ = _clause(draw, dyn, partitioned, "FALSE", "patient = first(patient) and")
    keys = draw(st.lists(st.sampled_from(sorted(SELECT)), max_size=3, unique=True))
    lines = ["name: w", "kind: window", "source: s", f"within: {draw(st.integers(1, 4))}d",
             f"start: \"{start}\"", f"termination: \"{termination}\"",
             f"iteration: \"{iteration}\"", f"filter: \"{filter_}\""]
    if keys:
        lines.append("select:")
        lines += [f"  {k}: \"{SELECT[k]}\"" for k in keys]
    if draw(st.integers(0, 3)) == 0:
        lines.append(f"where: \"{draw(st.sampled_from(['last(type) != ' + repr('A'), 'num() > 2', 'first(value) < last(value)']))}\"")
    return parse_pattern("\n".join(lines) + "\n", "<window>")


@st.composite
def window_events(draw, max_events: int = 12, max_day: int = 6):
    """Events in processing order: many ties, two patients, some values missing."""
    n = draw(st.integers(0, max_events))
    events = []
    for i in range(n):
        attrs = {"type": draw(st.sampled_from(TYPES)),
                 "value": draw(st.sampled_from([0, 1, 2, 3, None])),
                 "patient": draw(st.sampled_from([1, 2, 2, 1, None]))}
        events.append(Event(f"e{i:02d}", draw(st.integers(0, max_day)) * DAY, attrs))
    return order(events)
