"""Running the examples a pattern file carries (given events -> expected matches), like
the tests of a dbt model."""

from __future__ import annotations

from dataclasses import dataclass

from .events import Event, order, parse_ts
from .pattern import Disjunction, Example, Pattern
from .runner import run


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


def _canon(match: dict) -> tuple:
    """An expected or found match as a sortable key: its alternative (0 without), then
    its bindings."""
    alternative = match.get("alternative") or 0
    return (alternative, tuple(sorted((v, tuple(ids)) for v, ids in match.items()
                                      if v != "alternative")))


def _shown(key: tuple) -> dict:
    alternative, bindings = key
    return ({"alternative": alternative} if alternative else {}) | \
        {v: list(ids) for v, ids in bindings}


def run_example(pattern: Pattern | Disjunction, example: Example) -> ExampleResult:
    events = order(Event(str(r["event_id"]), parse_ts(r["ts"]),
                         {k: v for k, v in r.items()}) for r in example.events)
    matches, _ = run(pattern, events)
    found = {_canon({"alternative": m.alternative} | {v: list(ids) for v, ids in m.key})
             for m in matches}
    expected = {_canon(m) for m in example.expect}
    return ExampleResult(example, tuple(_shown(x) for x in sorted(expected - found)),
                         tuple(_shown(x) for x in sorted(found - expected)))
