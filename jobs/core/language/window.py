"""Pattern-based windows (Kawashima, Kitagawa, Li, section 4): the model of a
``kind: window`` pattern file, what it lets the pipeline prune, and its meaning.

The semantics (docs/windows.md; docs/windows.md), written down once here and in the
oracle below: events are tested in processing order ``(ts, event_id)``. Every event that
satisfies START opens a window with it as the first event. Each later event is tested
against every open window: if it satisfies TERMINATION the window closes with it as the
last event and is output (if ``where`` holds); else if it satisfies ITERATION the window
stays open, and the event joins the window's buffer if it satisfies FILTER; else the
window is dropped. An event is tested against older windows before it opens its own.
An event at exactly first + τ may still close a window; a window still open after that,
or at the end of the input, produces nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

from jobs.core.language.conditions.expressions import (
    BoolOp,
    Cmp,
    Expr,
    In,
    Lit,
    Not,
    Truth,
    attributes_of,
)
from jobs.core.language.events import Event, format_ts
from jobs.core.language.pattern import Example
from jobs.core.language.window_conditions import (
    TS,
    Counter,
    Seq,
    event_values,
    holds,
    read_attributes,
    uses,
    value,
)

CONDITIONS = ("start", "termination", "iteration", "filter")
BINDINGS = ("first", "buffer", "last")  # a window's bindings, its "variables" 0, 1, 2


@dataclass(frozen=True)
class WindowPattern:
    """A pattern-based window: START, TERMINATION, ITERATION and FILTER conditions, the
    span limit τ (batch finality), the optional ``select`` values (one row per window)
    and ``where`` (a filter of the output windows)."""

    after_match = "all"  # every window is kept (``after_match:`` is for sequence patterns)
    name: str
    source: str | None
    within: str
    tau: int
    start: Expr
    termination: Expr
    iteration: Expr = Truth(True)
    filter: Expr = Truth(True)
    select: tuple[tuple[str, Expr], ...] = ()
    where: Expr | None = None
    description: str = ""
    path: str | None = field(default=None, compare=False)
    lines: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)
    examples: tuple[Example, ...] = field(default=(), compare=False, repr=False)

    kind = "window"
    matcher = "window"  # the runs log's matcher column
    plan = None
    # what a sequence pattern may have and a window never has: the callers of both kinds
    # read them without asking which kind they hold
    first_ever = ()
    marks = ()
    measure_names = ()
    whole_history = False
    marks_needed = False

    @property
    def conditions(self) -> dict[str, Expr]:
        return {c: getattr(self, c) for c in CONDITIONS}

    def line(self, clause: str) -> int:
        return dict(self.lines).get(clause, 0)

    @property
    def expressions(self) -> list[Expr]:
        """Every condition and value of the file."""
        return [*self.conditions.values(), *(e for _, e in self.select),
                *([self.where] if self.where is not None else [])]

    @cached_property
    def uses_iter(self) -> bool:
        """``iter()`` counts every event tested, of any partition: nothing may be pruned."""
        return any(uses(e, "iter()") for e in self.expressions)

    @cached_property
    def sequential(self) -> bool:
        """Whether a condition reads the buffer (prev(), num()): then the events of a
        window are tested one by one, else a whole range at once."""
        return any(uses(self.conditions[c], "prev", "num()")
                   for c in ("termination", "iteration", "filter"))

    @cached_property
    def partition_attributes(self) -> tuple[str, ...]:
        """Attributes A for which events with another value of A than the first event's
        cannot affect a window: TERMINATION and FILTER each have the conjunct
        ``A = first(A)`` (or FILTER is FALSE), and ITERATION is TRUE or has the disjunct
        ``A != first(A)``. Such an event cannot close the window, cannot join its buffer,
        and passes ITERATION; a first event without A never closes. Not with ``iter()``,
        which counts the events of every partition."""
        if self.uses_iter or self.termination == Truth(False):
            return ()
        out = []
        for a in sorted(read_attributes(self.termination)):
            if not any(_same(c, a, "=") for c in _items(self.termination, "and")):
                continue
            if self.filter != Truth(False) and not any(
                    _same(c, a, "=") for c in _items(self.filter, "and")):
                continue
            if self.iteration != Truth(True) and not any(
                    _same(c, a, "!=") for c in _items(self.iteration, "or")):
                continue
            out.append(a)
        return tuple(out)

    @property
    def missing_keys_matter(self) -> bool:
        """Whether an event without a partition value can still affect windows (drop
        them, failing ITERATION) in every partition: then it may not be left out."""
        return self.iteration != Truth(True)

    @cached_property
    def attributes(self) -> frozenset[str]:
        return frozenset().union(*(read_attributes(e) for e in self.expressions))

    def normalized(self) -> dict:
        return {"kind": "window", "name": self.name, "source": self.source,
                "tau_ns": self.tau, **{c: str(e) for c, e in self.conditions.items()},
                "select": [[k, str(e)] for k, e in self.select],
                "where": None if self.where is None else str(self.where)}

    @cached_property
    def version(self) -> str:
        blob = json.dumps(self.normalized(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def describe(self) -> str:
        parts = "; ".join(str(self.conditions[c]) for c in CONDITIONS)
        return f"{self.name} = At[PATTERN BY ({parts})], {self.within}"

    # the pattern-file interface the pipeline shares with SES patterns ---------------
    @property
    def alternatives(self) -> tuple:
        return ()


def _items(e: Expr, op: str) -> list[Expr]:
    if isinstance(e, BoolOp) and e.op == op:
        return [x for item in e.items for x in _items(item, op)]
    return [e]


def _same(e: Expr, attr: str, op: str) -> bool:
    """Whether ``e`` is ``attr op first(attr)`` (either side)."""
    return isinstance(e, Cmp) and e.op == op and {e.left, e.right} == {
        Seq("cur", attr), Seq("first", attr)}


# -- what can affect a window: the filter of phase 1 -----------------------------------
def is_dynamic(e: Expr) -> bool:
    """Whether ``e`` reads anything but the tested event (first(), prev(), counters)."""
    return any(isinstance(a, Counter) or a.var != "cur" for a in attributes_of(e))


def possible(e: Expr, leaf, const, AND, OR, present=None):
    """Which truth values a condition can take for an event whatever the window, as three
    predicates (can be true, can be false, can be unknown) over the tested event only: a
    comparison that reads only the event is what it is; one that reads the window could
    be anything. ``leaf``/``const``/``AND``/``OR`` build the predicates (numpy arrays or
    Spark columns). Sound (every value that can occur is allowed), not always exact."""
    if isinstance(e, Truth):
        return const(e.value), const(not e.value), const(False)
    if not is_dynamic(e) and isinstance(e, (Cmp, In)):
        return leaf(e)
    if isinstance(e, (Cmp, In)):
        # it reads the window too; an event missing an attribute it reads makes it unknown
        known = present(e) if present is not None else const(True)
        return known, known, const(True)
    if isinstance(e, Not):
        t, f, u = possible(e.item, leaf, const, AND, OR, present)
        return f, t, u
    parts = [possible(x, leaf, const, AND, OR, present) for x in e.items]
    ts, fs, us = ([p[i] for p in parts] for i in range(3))
    either = [OR([t, u]) if e.op == "and" else OR([f, u]) for t, f, u in parts]
    if e.op == "and":
        return AND(ts), OR(fs), AND([AND(either), OR(us)])
    return OR(ts), AND(fs), AND([AND(either), OR(us)])


def relevance(pattern: WindowPattern, leaf, const, AND, OR, present=None):
    """Events that can affect some window: START holds, or TERMINATION can hold, or
    ITERATION can fail, or FILTER can hold (an event doing none of these leaves every
    window as it was; with iter() every event counts). ``present(e)``: the events that
    have every attribute a comparison reads of them."""
    if pattern.uses_iter:
        return const(True)
    start = possible(pattern.start, leaf, const, AND, OR, present)[0]
    term = possible(pattern.termination, leaf, const, AND, OR, present)[0]
    keep = possible(pattern.filter, leaf, const, AND, OR, present)[0]
    return OR([start, term, can_drop(pattern, leaf, const, AND, OR, present), keep])


def can_drop(pattern: WindowPattern, leaf, const, AND, OR, present=None):
    """Events that can fail ITERATION (and so drop a window)."""
    _, it_f, it_u = possible(pattern.iteration, leaf, const, AND, OR, present)
    return OR([it_f, it_u])


def current_attributes(e: Expr) -> set[str]:
    """The attributes a comparison reads of the tested event (not ``ts``)."""
    return {a.attr for a in attributes_of(e) if isinstance(a, Seq) and a.var == "cur"
            and a.attr != TS}


# -- the meaning: a brute-force oracle ----------------------------------------------------
@dataclass(frozen=True)
class Window:
    """One output window: its first event, buffered events and last event, and the
    ``select`` values (timestamps as ISO text)."""

    first: Event
    buffer: tuple[Event, ...]
    last: Event
    values: tuple = ()

    @property
    def key(self) -> tuple:
        return (self.first.id, tuple(e.id for e in self.buffer), self.last.id, self.values)

    def bindings(self) -> dict[str, list[str]]:
        return {"first": [self.first.id], "buffer": [e.id for e in self.buffer],
                "last": [self.last.id]}

    def to_json(self, pattern: WindowPattern) -> str:
        row = {"pattern": pattern.name, "start": format_ts(self.first.ts),
               "end": format_ts(self.last.ts), "bindings": self.bindings()}
        if pattern.select:
            row["values"] = dict(zip((k for k, _ in pattern.select), self.values))
        return json.dumps(row)


def select_value(e: Expr, env: dict, events: dict):
    """A select value: first(ts)/last(ts) alone is the event's timestamp (ISO text);
    counters are integers; the rest as the reference evaluator computes it."""
    if isinstance(e, Seq) and e.attr == TS:
        return format_ts(events[e.var].ts)
    out = value(e, env)
    return float(out) if isinstance(out, int) and not isinstance(e, (Counter, Lit)) else out


def oracle_windows(pattern: WindowPattern, events: list[Event]) -> list[Window]:
    """Every output window of ``pattern`` over ``events`` (in processing order), by the
    definition: one pass, every open window tested by every later event. No pruning."""
    out = []
    open_: list[list] = []  # [first, first values, buffer, tested]
    for e in events:
        ev = event_values(e)
        still = []
        for w in open_:
            first, fv, buffer, tested = w
            if e.ts > first.ts + pattern.tau:
                continue  # still open after first + τ: dropped
            tested += 1
            prev = event_values(buffer[-1]) if buffer else fv
            env = {"cur": ev, "first": fv, "prev": prev,
                   "#": {"iter": tested, "num": 1 + len(buffer)}}
            if holds(pattern.termination, env):
                window = _output(pattern, first, fv, tuple(buffer), e, ev, tested)
                if window is not None:
                    out.append(window)
            elif holds(pattern.iteration, env):
                if holds(pattern.filter, env):
                    buffer = buffer + [e]
                still.append([first, fv, buffer, tested])
        open_ = still
        if holds(pattern.start, {"cur": ev}):
            open_.append([e, ev, [], 0])
    return sorted(out, key=lambda w: (w.first.seq, w.last.seq))


def _output(pattern, first, fv, buffer, last, lv, tested) -> Window | None:
    env = {"first": fv, "last": lv, "#": {"iter": tested, "num": 2 + len(buffer)}}
    if pattern.where is not None and not holds(pattern.where, env):
        return None
    events = {"first": first, "last": last}
    return Window(first, buffer, last,
                  tuple(select_value(e, env, events) for _, e in pattern.select))


def select_types(pattern: WindowPattern, columns: dict[str, str]) -> dict[str, str]:
    """The type of each select value in the match table (string, double, integer or
    timestamp), from the source schema ``columns``."""
    out = {}
    for name, e in pattern.select:
        if isinstance(e, Seq) and e.attr == TS:
            out[name] = "timestamp"
        elif isinstance(e, Seq):  # other timestamp columns are read as text
            kind = columns.get(e.attr, "string")
            out[name] = {"number": "double", "timestamp": "string"}.get(kind, kind)
        elif isinstance(e, Counter):
            out[name] = "integer"
        elif isinstance(e, Lit):
            out[name] = "string" if isinstance(e.value, str) else "double"
        else:
            out[name] = "double"
    return out
