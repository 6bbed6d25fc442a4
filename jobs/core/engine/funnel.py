"""The funnel of a pattern on event columns, with the engine (docs/semantics.md,
"Funnels"; ``language.funnel_steps`` defines the steps and the order of the stops).

Each step's pattern runs as ZStream runs it (Definition 2: every binding), so a window
reached step k exactly when the step has a match whose first event is the window's; the
reference (``reference.funnel``) computes the same by brute force.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.core.engine.columns import EventColumns
from jobs.core.engine.options import MatchOptions
from jobs.core.engine.runtime import compile_pattern, execute
from jobs.core.language.funnel_steps import (
    FunnelRow,
    WindowOutcome,
    classify,
    funnel_rows,
    funnel_steps,
)


def _by_identity(cache: dict, most: int, obj, extra: tuple, build):
    """``build()``, kept in ``cache`` for ``obj`` itself (and ``extra``), at most ``most``
    entries: phase 2 asks for the same pattern object's steps and compiled steps in every
    group it matches, and hashing a pattern costs as much as building them."""
    key = (id(obj), *extra)
    hit = cache.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    if len(cache) >= most:
        cache.clear()
    value = build()
    cache[key] = (obj, value)
    return value


_STEPS: dict[tuple, tuple] = {}  # (id(pattern),) -> (pattern, its steps)
_COMPILED: dict[tuple, tuple] = {}  # (id(step pattern), attributes) -> (it, compiled)


def steps_of(pattern) -> tuple:
    """``funnel_steps(pattern)``, built once per pattern object."""
    return _by_identity(_STEPS, 64, pattern, (), lambda: funnel_steps(pattern))


def _compiled(p, names: tuple[str, ...]):
    """``compile_pattern(p, names)`` for a step of ``steps_of``, once per step object."""
    names = tuple(names)
    return _by_identity(_COMPILED, 256, p, names, lambda: compile_pattern(p, names))


def window_outcomes(pattern, cols: EventColumns, options: MatchOptions = MatchOptions(),
                    positions=None, candidates=()) -> list[WindowOutcome]:
    """Each window's outcome (``start``: the row of its first event in ``cols``, which
    hold the events in processing order); ``candidates``: rows whose windows get an
    outcome also when they did not reach step 1; ``positions``: the contiguity positions
    (a list, one per alternative, for a disjunction)."""
    every = replace(options, matcher="zstream", plan=None)
    numbers = [a.alternative for a in pattern.alternatives]

    def starts(p) -> set[int]:
        rows: set[int] = set()
        at = positions[numbers.index(p.alternative)] if isinstance(positions, list) \
            else positions
        for batch in execute(_compiled(p, cols.names), cols, every, None,
                             positions=at):
            rows.update(batch.first.tolist())
        return rows

    return classify(steps_of(pattern), starts, candidates,
                    skipped(pattern, cols, options, positions))


_ALL: dict[tuple, tuple] = {}  # (id(pattern),) -> (pattern, it without after_match)


def skipped(pattern, cols: EventColumns, options: MatchOptions = MatchOptions(),
            positions=None) -> set[int]:
    """The windows (rows of their first events) where the pattern's own matcher finds a
    match but ``after_match`` keeps none (empty for a pattern that keeps every match)."""
    if pattern.after_match == "all":
        return set()
    own = replace(options, matcher=None, plan=None)
    every = _by_identity(_ALL, 64, pattern, (), lambda: replace(pattern, after_match="all"))

    def firsts(p) -> set[int]:
        return {int(r) for batch in execute(_compiled(p, cols.names), cols, own, None,
                                            positions=positions) for r in batch.first}

    return firsts(every) - firsts(pattern)


def funnel(pattern, cols: EventColumns, options: MatchOptions = MatchOptions(),
           positions=None) -> list[FunnelRow]:
    """The funnel of ``pattern`` over ``cols``: one row per step of each alternative."""
    return funnel_rows(steps_of(pattern), window_outcomes(pattern, cols, options, positions),
                       partition_key(pattern, cols))


def partition_key(pattern, cols: EventColumns):
    """outcome -> its window's partition: the first event's values of its alternative's
    partition attributes (encoded)."""
    at = {alt.alternative: [cols.row(a) for a in alt.partition_attributes]
          for alt in pattern.alternatives}
    return lambda o: tuple((float(cols.values[i, o.start]), int(cols.kinds[i, o.start]))
                           for i in at[o.alternative])


def funnel_counts(pattern, cols: EventColumns, options: MatchOptions = MatchOptions(),
                  positions=None, low: int | None = None, high: int | None = None,
                  key_of=None) -> list:
    """The funnel of the windows whose first event lies in [low, high) (None: open), as
    the stats row of a phase-2 group carries it: ``[alternative, step, partitions,
    windows, {stop: windows}, keys]`` per step; ``keys``: with ``key_of(alternative,
    row)`` (the partition's values as text), the sorted keys of the partitions that
    reached the step, for a caller that adds up groups one partition may span."""
    outcomes = [o for o in window_outcomes(pattern, cols, options, positions)
                if (low is None or cols.ts[o.start] >= low)
                and (high is None or cols.ts[o.start] < high)]
    rows = funnel_rows(steps_of(pattern), outcomes, partition_key(pattern, cols))
    out = []
    for r in rows:
        keys = None
        if key_of is not None:
            keys = sorted({key_of(o.alternative, o.start) for o in outcomes
                           if o.alternative == r.alternative and o.reached >= r.step})
        out.append([r.alternative, r.step, r.partitions, r.windows, dict(r.stopped), keys])
    return out
