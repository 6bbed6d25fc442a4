"""One entry point for every matcher, with the ``--stats`` counters.

``bruteforce`` computes what the pattern's own matcher means with the oracle:
earliest-maximal matches (SESExec) for ``ses``, all matches (Definition 2) for ``zstream``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

from . import oracle, zstream
from .automaton import SESAutomaton
from .events import Event
from .matches import Match, sorted_matches
from .pattern import Pattern
from .plans import cost_tree
from .windows import Pruning, match_windows
from .zstream import DEFAULT_MAX_MATCHES

MATCHERS = ("ses", "zstream", "bruteforce")
STRATEGIES = ("lazy", "eager")


@dataclass(frozen=True)
class MatchOptions:
    matcher: str | None = None  # None: the pattern's own
    strategy: str = "lazy"
    filter: bool = True
    partition: bool = True
    conditions: bool = True
    plan: str = "zstream"  # zstream only: the plan generator
    max_matches_per_window: int = DEFAULT_MAX_MATCHES


def new_stats(events: list[Event]) -> dict:
    return {"events": len(events), "events_after_filter": len(events), "partitions": 1,
            "windows": 0, "candidate_windows": 0, "matcher_calls": 0, "matches": 0,
            "seconds": 0.0}


def run(pattern: Pattern, events: list[Event], options: MatchOptions = MatchOptions()):
    """Match ``pattern`` over ``events`` (processing order); returns (matches, stats)."""
    matcher = options.matcher or pattern.matcher
    if matcher not in MATCHERS:
        raise ValueError(f"unknown matcher {matcher!r}: use one of {', '.join(MATCHERS)}")
    if options.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {options.strategy!r}: use lazy or eager")
    stats = new_stats(events)
    started = time.perf_counter()
    if matcher == "bruteforce":
        stats["windows"] = stats["candidate_windows"] = stats["matcher_calls"] = len(events)
        if pattern.matcher == "ses":
            matches = oracle.ses_exec(pattern, events, stats)
        else:
            matches = oracle.all_matches(pattern, events)
    elif matcher == "ses":
        matches = _ses(pattern, events, options, stats)
    else:
        matches = _zstream(pattern, events, options, stats)
    matches = sorted_matches(matches)
    stats["matches"] = len(matches)
    stats["seconds"] = round(time.perf_counter() - started, 6)
    return matches, stats


@lru_cache(maxsize=64)
def compile_ses(pattern: Pattern, partitioned: bool) -> SESAutomaton:
    """The SES automaton of a pattern, built once and reused for every window."""
    return SESAutomaton(pattern, partitioned=partitioned)


def _ses(pattern, events, options, stats) -> list[Match]:
    if options.strategy == "eager":
        stats["windows"] = stats["candidate_windows"] = 0
        return compile_ses(pattern, False).run_eager(events, stats)
    partitioned = options.partition and bool(pattern.partition_attributes)
    automaton = compile_ses(pattern, partitioned)
    pruning = Pruning(filter=options.filter, partition=options.partition,
                      conditions=options.conditions)
    return match_windows(pattern, events, automaton.run_from_first,
                         automaton.event_mask.batch(events), pruning, stats)


def _zstream(pattern, events, options, stats) -> list[Match]:
    partitioned = options.partition and bool(pattern.partition_attributes) \
        and options.strategy == "lazy"
    evaluator, plan_stats, masks = zstream.build(pattern, events, options.plan, partitioned,
                                          options.max_matches_per_window)
    stats["plan"] = str(evaluator.plan)
    stats["plan_cost"] = round(cost_tree(evaluator.plan, plan_stats), 3)
    if options.strategy == "eager":  # the tree over the whole stream, no windows
        stats["windows"] = stats["candidate_windows"] = 0
        stats["matcher_calls"] = 1
        found, peak = evaluator.evaluate(events, masks)
        stats["max_partial_matches"] = peak
        stats["partial_matches"] = evaluator.work
        return found
    pruning = Pruning(filter=options.filter, partition=options.partition,
                      conditions=options.conditions)
    found = match_windows(pattern, events,
                          lambda window, masks: evaluator.evaluate(window, masks, first=window[0]),
                          masks, pruning, stats, peak_key="max_partial_matches")
    stats["partial_matches"] = evaluator.work
    return found
