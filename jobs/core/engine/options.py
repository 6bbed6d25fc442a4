"""What a caller may choose about one matching run (``MatchOptions``) and the limits'
defaults, apart from the engine so that reading a profile loads no engine."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_MATCHES = 1_000_000
DEFAULT_MEMORY_BUDGET = 2 * 1024**3  # bytes per matcher call
CLI_LIMITS = "--max-matches-per-window N and --memory-budget SIZE"


@dataclass(frozen=True)
class MatchOptions:
    matcher: str | None = None  # None: the pattern's own
    strategy: str = "lazy"
    filter: bool = True
    partition: bool = True
    conditions: bool = True
    plan: str | object | None = None  # zstream: the plan generator (None: the pattern's
    # ``plan:``, else the default), or a Planner such as the driver's FixedPlan
    plan_alpha: float = 0.0  # the latency weight α of the plan's cost (section 6.1)
    max_matches_per_window: int = DEFAULT_MAX_MATCHES
    memory_budget: int = DEFAULT_MEMORY_BUDGET  # bytes: instances, matches, events
    limits: str = CLI_LIMITS  # where a user raises the two limits (named in errors)
    describe_plan: bool = True  # the stats name the plan and its cost (phase 2 keeps neither)
    funnel: bool = True  # a run also counts how far each window got (engine.funnel)
