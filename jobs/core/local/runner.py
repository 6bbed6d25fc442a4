"""``run``: a pattern over a list of ``Event`` objects, returning ``Match`` objects.

For tests, pattern examples and the oracle comparisons: the events become columns, the
engine (``engine.execute``) matches them, and the match columns become ``Match`` objects
again. ``bruteforce`` computes what the pattern's own matcher means with the oracle:
earliest-maximal matches (SESExec) for ``ses``, all matches (Definition 2) for ``zstream``.
Large inputs go through ``engine.execute`` directly (the CLI and phase 2 do).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jobs.core.engine.batches import MatchCapExceeded, MatchStats
from jobs.core.engine.columns import from_events
from jobs.core.engine.marks import marked_compiled
from jobs.core.engine.measures import measure_columns
from jobs.core.engine.options import DEFAULT_MAX_MATCHES, MatchOptions
from jobs.core.engine.output import bindings_of, json_lines, sort_batch
from jobs.core.engine.runtime import STRATEGIES, compile_pattern, execute
from jobs.core.language.events import Event, order
from jobs.core.language.pattern import MATCHER_NAMES, Disjunction, Pattern
from jobs.core.language.patternfile import parse_pattern
from jobs.core.reference import oracle
from jobs.core.reference.matches import Match, sorted_matches

MATCHER_CHOICES = (*MATCHER_NAMES, "bruteforce")  # what `match --matcher` accepts
__all__ = ["MATCHER_CHOICES", "MatchOptions", "MatchCapExceeded", "DEFAULT_MAX_MATCHES", "run",
           "warm_up"]


def run(pattern: Pattern | Disjunction, events: list[Event], options: MatchOptions = MatchOptions()):
    """Match ``pattern`` over ``events`` (processing order); returns (matches, stats)."""
    matcher = options.matcher or pattern.matcher
    if matcher not in MATCHER_CHOICES:
        raise ValueError(f"unknown matcher {matcher!r}: use one of {', '.join(MATCHER_CHOICES)}")
    if matcher == "bruteforce":
        started = time.perf_counter()
        n = len(events)
        st = MatchStats(events=n, events_after_filter=n, partitions=1, windows=n,
                        candidate_windows=n, matcher_calls=n, matcher="bruteforce")
        matches = sorted_matches(oracle.meaning(pattern, events))
        st.matches = len(matches)
        st.seconds = time.perf_counter() - started
        return matches, st.as_dict()
    # the events given are the whole history: a pattern that needs marks gets them here
    pattern, compiled, cols = marked_compiled(pattern, lambda names: from_events(events, names))
    st = MatchStats()
    found = []
    columns = pattern.measure_names
    for batch in execute(compiled, cols, options, st):
        alt = compiled.alternatives[batch.alternative]
        names = [v.name for v in alt.variables]
        measures = measure_columns(alt.pattern, batch, cols, columns) if columns else {}
        for k in range(len(batch)):
            a, b = batch.offsets[k], batch.offsets[k + 1]
            per_var: list[list[Event]] = [[] for _ in names]
            for row, var in zip(batch.rows[a:b], batch.variables[a:b]):
                per_var[var].append(events[row])
            found.append(Match(pattern.name, tuple(zip(names, map(tuple, per_var))),
                               alt.pattern.alternative,
                               tuple((n, measures[n][k]) for n in columns)
                               if columns else None))
    matches = sorted_matches(found)
    st.matches = len(matches)
    return matches, st.as_dict()


def warm_up() -> float:
    """Run a tiny pattern through each matcher and strategy, so that the kernels this
    process uses are compiled (Numba's just-in-time ones, into its cache) or loaded;
    returns the seconds it took. ``aot_build.exercise`` starts with it."""
    started = time.perf_counter()
    events = order([Event(f"e{i}", i, {"t": "AB"[i % 2], "k": 1}) for i in range(4)])
    for matcher in MATCHER_NAMES:
        pattern = parse_pattern(f"name: warm\nsource: s\nwithin: 1s\nsets: [[a], [b+]]\n"
                                f"conditions:\n  - a.t = 'A'\n  - b.t = 'B'\n"
                                f"  - a.k = b.k\nmatcher: {matcher}\n", "<warm-up>")
        compiled = compile_pattern(pattern)
        cols = from_events(events, compiled.attributes)
        for strategy in STRATEGIES:
            list(execute(compiled, cols, MatchOptions(strategy=strategy)))
    return time.perf_counter() - started


def write_matches(pattern: Pattern | Disjunction, compiled, cols, options: MatchOptions,
                  write: Callable[[bytes], object]) -> dict:
    """``ses match``: the matches of ``compiled`` over the columns ``cols``, written as JSON
    lines (``write``) batch by batch, each batch in the order of its first events; returns
    the run's counters."""
    st = MatchStats()
    id_rank = cols.id_rank()
    columns = pattern.measure_names
    for batch in execute(compiled, cols, options, st):
        alt = compiled.alternatives[batch.alternative]
        names = [v.name for v in alt.variables]
        batch = sort_batch(batch, cols, len(names), id_rank)
        measures = measure_columns(alt.pattern, batch, cols, columns) if columns else None
        write(json_lines(pattern.name, batch, bindings_of(batch, cols, names),
                         alt.pattern.alternative, measures))
    return st.as_dict()
