"""Running the examples a pattern file carries (given events -> expected matches), like
the tests of a dbt model."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.engine.window_matcher import windows_of
from jobs.core.language.events import Event, format_ts, order, parse_ts
from jobs.core.language.pattern import Disjunction, Example, Pattern
from jobs.core.language.window import BINDINGS
from jobs.core.local.runner import run


@dataclass(frozen=True)
class ExampleResult:
    example: Example
    missing: tuple[dict, ...]  # expected, not found
    unexpected: tuple[dict, ...]  # found, not expected

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected

    def message(self) -> str:
        if self.ok:
            return f"example {self.example.name!r} ok"
        parts = []
        if self.missing:
            parts.append("missing " + "; ".join(map(str, self.missing)))
        if self.unexpected:
            parts.append("unexpected " + "; ".join(map(str, self.unexpected)))
        return f"example {self.example.name!r} fails: " + ", ".join(parts)

    def describe(self, path: str) -> str:
        return f"{path}:{self.example.line}: {self.message()}"


def _canon(match: dict, measures: dict | None = None) -> tuple:
    """An expected or found match as a sortable key: its alternative (0 without), then
    its bindings, then the values of ``measures`` (those an expected match gives)."""
    alternative = match.get("alternative") or 0
    key = (alternative, tuple(sorted((v, tuple(ids)) for v, ids in match.items()
                                     if v not in ("alternative", "measures"))))
    if measures is None:
        return key
    return key + (tuple(sorted((k, _plain_value(v)) for k, v in measures.items())),)


def _shown(key: tuple) -> dict:
    alternative, bindings, *measures = key
    return ({"alternative": alternative} if alternative else {}) | \
        {v: list(ids) for v, ids in bindings} | \
        ({"measures": dict(measures[0])} if measures else {})


def example_events(example: Example) -> list[Event]:
    """An example's given events, in processing order."""
    return order(Event(str(r["event_id"]), parse_ts(r["ts"]), dict(r.items()))
                 for r in example.events)


def run_example(pattern: Pattern | Disjunction, example: Example) -> ExampleResult:
    events = example_events(example)
    if pattern.kind == "window":
        return _window_example(pattern, example, events)
    matches, _ = run(pattern, events)
    expected = {_canon(m, m.get("measures")) for m in example.expect}
    given = {_canon(m): m["measures"] for m in example.expect if "measures" in m}
    found = set()
    for m in matches:
        bindings = {"alternative": m.alternative} | {v: list(ids) for v, ids in m.key}
        values = given.get(_canon(bindings))
        found.add(_canon(bindings, None if values is None else
                         {k: dict(m.measures or ()).get(k) for k in values}))
    return ExampleResult(example, tuple(_shown(x) for x in sorted(expected - found)),
                         tuple(_shown(x) for x in sorted(found - expected)))


def _window_example(pattern, example: Example, events: list[Event]) -> ExampleResult:
    """A window pattern's example: windows as {first, buffer, last}, plus their select
    ``values`` where the example gives them."""

    found, _ = windows_of(pattern, events)
    names = [k for k, _ in pattern.select]

    def key(w: dict, values: dict | None) -> tuple:
        out = tuple((k, tuple(w[k])) for k in BINDINGS)
        if values is None:
            return out
        return out + (("values", tuple(sorted((k, _plain_value(w["values"].get(k)))
                                              for k in values))),)

    def shown(k: tuple) -> dict:
        return {name: (dict(ids) if name == "values" else list(ids)) for name, ids in k}

    given = {key(m, None): m["values"] for m in example.expect if "values" in m}
    expected = {key(m, m.get("values")) for m in example.expect}
    got = set()
    for w in found:
        b = w.bindings() | {"values": dict(zip(names, w.values))}
        got.add(key(b, given.get(key(b, None))))
    return ExampleResult(example, tuple(shown(x) for x in sorted(expected - got, key=str)),
                         tuple(shown(x) for x in sorted(got - expected, key=str)))


def _plain_value(v):
    """An expected or found select value in one comparable form."""
    from datetime import date


    if isinstance(v, date):
        return format_ts(parse_ts(v))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return v
