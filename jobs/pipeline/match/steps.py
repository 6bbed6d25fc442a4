"""The match steps of one pattern: its range for the night (``planned_range``: after the
previous horizon, back to where late events and retractions reach), its ZStream join plan
(``choose_join_plan``), phases 1 and 2 on Spark into staging (``match_step``), and what
its author should hear (late events, variables nothing binds, zero matches).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from jobs.config import load_sources
from jobs.core.language.pattern import Pattern
from jobs.lake.extent import EventsExtent, files_ingested_after, only_appends_since
from jobs.lake.match_commits import unchanged_since
from jobs.lake.runs import planning_runs
from jobs.pipeline.context import RunContext
from jobs.pipeline.match.episode_seeds import EpisodePlan, plan_episodes
from jobs.pipeline.match.first_ever import FirstEverPlan, plan_first_ever
from jobs.pipeline.match.horizons import RunRange, as_ns, plan_range, reopened_low
from jobs.pipeline.match.partition_state import (
    HistoryPlan,
    counts_within_partitions,
    plan_history_state,
    state_after,
    stateful,
)
from jobs.pipeline.match.phase1 import MatchJob, run_match_job
from jobs.pipeline.match.planning import (
    SmallSources,
    choose_plan,
    driver_planned,
    needs_replan,
    needs_spark_sample,
    sample_from,
)
from jobs.pipeline.match.source_pass import PassItem, numbered, run_source_pass
from jobs.pipeline.match.staged import StagedRun
from jobs.pipeline.outcome import short_error
from jobs.progress import progress, say
from jobs.runrecord import COUNTERS, NIGHTLY, RunRecord
from jobs.spark.diagnostics import unsatisfiable, variable_counts, variable_counts_many
from jobs.spark.predicates import filter_column
from jobs.spark.tables import read_spark
from jobs.status import SUCCESS


@dataclass
class PlannedRun:
    path: Path
    pattern: Pattern
    text: str
    rng: RunRange
    runs: list[RunRecord]  # the pattern's earlier records in the runs table
    idle: bool = False  # nothing can change its matches tonight (``is_idle``): no Spark
    first_ever: FirstEverPlan | None = None  # a first_ever pattern's state tonight
    history: HistoryPlan | None = None  # a history or facts pattern's state tonight
    episodes: EpisodePlan | None = None  # an after_match pattern's walks tonight


def is_idle(rng: RunRange, last_success: datetime | None, extent: EventsExtent | None) -> bool:
    """Whether a run over ``rng`` can only match nothing and delete nothing: the range is
    incremental, the source's events table was not written since the last successful
    run of this version started (no new, late, retracted or re-ingested event), and no
    event of it lies in [low, high), where every match of the range would start."""
    return (extent is not None and last_success is not None and not rng.full
            and extent.written_at <= last_success
            and not extent.holds_between(rng.low, rng.high))


def repeats_last_run(lake, pattern, rng: RunRange, logical_date: str | None,
                     runs: list[RunRecord], extent: EventsExtent | None) -> bool:
    """Whether a full recompute over ``rng`` can only publish again what the table holds:
    the pattern's latest successful run (of any version or kind) was a nightly full
    recompute of this version for the same logical date and range, the source's events
    table had no commit that changed rows since that run started, and the match table no
    commit that changed rows since that run's own (``unchanged_since``). A rerun of a
    night with nothing new is then idle, as an incremental night is (``is_idle``)."""
    if extent is None or not rng.full or not runs or not logical_date:
        return False
    last = max(runs, key=lambda r: (r["started_at"] is not None, r["started_at"] or 0))
    return (last["status"] == SUCCESS and last["pattern_version"] == pattern.version
            and (last["run_kind"] or NIGHTLY) == NIGHTLY
            and (last["logical_date"] or "")[:10] == logical_date[:10]
            and bool(last["full_recompute"]) and last["horizon_low"] is None
            and last["horizon_high"] is not None and as_ns(last["horizon_high"]) == rng.high
            and last["started_at"] is not None and extent.written_at <= last["started_at"]
            and unchanged_since(lake, pattern.name, last))


def planned_range(ctx: RunContext, rng: RunRange | None = None,
         runs: list[RunRecord] | None = None, extent: EventsExtent | None = None
                  ) -> PlannedRun:
    """The run's start range: after the previous run's horizon, and back to where
    retractions since that run could change matches. ``runs``: the pattern's records
    of the runs table, when the caller read them already (one read per night);
    ``extent``: the source's ``EventsExtent`` (a nightly run with nothing new is then
    ``idle``)."""
    pattern = ctx.pattern
    text = ctx.path.read_text(encoding="utf-8")
    if runs is None:
        runs = planning_runs(ctx.lake, {pattern.name}, ctx.logical_date)[pattern.name]
    idle = False
    history = episodes = None
    if rng is None:
        rng = plan_range(ctx.logical_date, pattern.tau, ctx.profile.allowed_lateness,
                         pattern.version, runs)
        ok = [r["started_at"] for r in runs if r["status"] == SUCCESS
              and r["pattern_version"] == pattern.version]
        last_success = max(ok) if ok else None
        reopen = reopened_low(ctx.lake, pattern.source, last_success, pattern.tau)
        if reopen is not None and rng.low is not None and reopen < rng.low:
            rng = RunRange(reopen, rng.high, rng.full)
        if not rng.full and not ctx.lake.exists(ctx.lake.matches(pattern.name)):
            rng = RunRange(None, rng.high, True)  # the table is gone: recompute it in full
        idle = is_idle(rng, last_success, extent) or \
            repeats_last_run(ctx.lake, pattern, rng, ctx.logical_date, runs, extent)
        if idle:  # a broken match table fails its pattern, as the publish would have
            ctx.lake.check_files(ctx.lake.matches(pattern.name))
        if not rng.full and (pattern.after_match != "all" or pattern.whole_history) \
                and not idle:
            appends = last_success is not None and \
                only_appends_since(ctx.lake, pattern.source, last_success)
            if stateful(pattern) and appends and state_after(ctx.lake, pattern, last_success):
                # history conditions, partition facts: the state says which partitions
                # changed and from where (docs/semantics.md)
                history = plan_history_state(ctx.lake, pattern, False)
                if history.state is not None:
                    rng = history.range_from(rng, pattern.partition_attributes)
            if pattern.after_match != "all" and not pattern.marks_needed and appends \
                    and isinstance(pattern, Pattern):
                # episodes: each partition's walk resumes from its last kept match
                episodes = plan_episodes(ctx.lake, pattern, rng.low, last_success)
                rng = episodes.range_from(rng, pattern.partition_attributes)
            elif history is None or history.state is None:
                # which episodes are taken depends on every earlier one of the partition,
                # and a history condition on every event of it: a late event may change
                # all that follow in its partition, so a night matches again, over the
                # whole history, the partitions that got an event since the last success
                # or may start a match in the night's range (a retraction or a rewrite of
                # the events: every partition; docs/semantics.md)
                since = as_ns(last_success) if partition_scoped(pattern) and appends else None
                rng = RunRange(None, rng.high, True, since, opened=rng.low)
    first = None
    if pattern.first_ever and not pattern.whole_history \
            and not idle:
        first = plan_first_ever(ctx.lake, pattern, rng.full)
        if first.reopen is not None and rng.low is not None and first.reopen < rng.low:
            rng = RunRange(first.reopen, rng.high, rng.full)  # a late first: its window
    if stateful(pattern) and not idle and history is None:
        history = HistoryPlan()  # the match job builds the state
    return PlannedRun(ctx.path, pattern, text, rng, runs, idle, first, history, episodes)


def partition_scoped(pattern) -> bool:
    """Whether a night may match such a pattern again in the partitions (values of its X)
    that got an event, the others kept: it has partition attributes, and each history
    condition counts events of the anchor's partition or a finer one."""
    return bool(pattern.partition_attributes) and counts_within_partitions(pattern)


def late_events(spark, ctx: RunContext, planned: PlannedRun) -> int:
    """Events that arrived after the previous run of this pattern although their start
    range was already closed (ts < low): counted in the run log, never silently dropped."""
    return late_events_many(spark, ctx.lake, [planned])[planned.pattern.name]


def late_events_many(spark, lake, planned: list[PlannedRun]) -> dict[str, int]:
    """``late_events`` of several patterns, one aggregate per source over the files that
    may hold an event ingested since the earliest of their last runs."""
    from pyspark.sql import functions as F

    out, terms, since = {}, {}, {}
    for one in planned:
        pattern = one.pattern
        out[pattern.name] = 0
        runs = [r for r in one.runs
                if r["pattern_version"] == pattern.version and r["status"] == SUCCESS]
        if one.rng.low is None or not runs:
            continue
        last_start = max(r["started_at"] for r in runs)
        cond = (F.col("ingested_at") > F.lit(last_start)) & (F.col("ts") < F.lit(
            datetime.fromtimestamp(one.rng.low / 1e9, tz=timezone.utc)))
        keep = filter_column(pattern)
        if keep is not None:
            cond &= keep
        terms.setdefault(pattern.source, []).append(
            (pattern.name, F.sum(F.when(cond, 1).otherwise(0)).alias(f"n{len(out)}")))
        since[pattern.source] = min(last_start, since.get(pattern.source, last_start))
    for source, columns in terms.items():
        files = files_ingested_after(lake, source, since[source])
        if files is not None and not files:
            continue  # nothing ingested since the last runs: no late event
        row = read_spark(spark, lake, lake.events(source), only=files) \
            .agg(*[c for _, c in columns]).first()
        for (name, _), value in zip(columns, row):
            out[name] = int(value or 0)
    return out


def night_diagnostics(spark, ctxs: list[RunContext], planned: dict) -> tuple[dict, dict]:
    """The late events of every pattern and the variable counts of every fully
    recomputed sequence pattern of a night, one Spark aggregate per source each
    (``match_step`` then runs no job of its own for them)."""
    ok = [p for p in planned.values() if not isinstance(p, Exception) and not p.idle]
    late = late_events_many(spark, ctxs[0].lake, ok) if ok else {}
    counts: dict[str, list] = {}
    by_source: dict[str, list] = {}
    for one in ok:
        if one.rng.full and one.pattern.kind != "window":
            by_source.setdefault(one.pattern.source, []).append(one.pattern)
    lake = ctxs[0].lake if ctxs else None
    for source, patterns in by_source.items():
        if lake.exists(lake.events(source)):
            counts.update(variable_counts_many(read_spark(spark, lake, lake.events(source)),
                                               patterns))
    return late, counts


def choose_join_plan(spark, ctx: RunContext, planned: PlannedRun, small: SmallSources | None = None):
    """The one plan of a ZStream pattern for this run (``jobs.pipeline.match.planning``), chosen on the
    driver; None for the SES automaton (it follows the sets' order). ``small``: the night's
    small sources, sampled on the driver."""

    pattern = planned.pattern
    if not driver_planned(pattern):
        return None
    source = load_sources().get(pattern.source)
    kinds = dict(source.columns) if source else {}
    observed = needs_replan(planned.runs, pattern.version)
    return choose_plan(spark, ctx.lake, pattern, planned.rng.low, planned.rng.high, kinds,
                       observed=observed, small=small)


def match_step(spark, ctx: RunContext, planned: PlannedRun, force_slices: bool = False,
               shared: tuple | None = None, diagnostics: tuple | None = None,
               small: SmallSources | None = None) -> StagedRun:
    """Phase 1 + 2 on Spark into staging: the staged run, with its range, counters and the
    step's wall time (``match_seconds``). ``shared``: the pattern's result of a
    source pass and its plan (``source_passes``), when one matched it already;
    ``diagnostics``: the night's ``night_diagnostics``; ``small``: the night's
    ``SmallSources`` (for a plan)."""
    profile = ctx.profile
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    if planned.rng.empty or planned.idle:
        stats = {**dict.fromkeys(COUNTERS, 0), "seconds": 0.0, "idle": planned.idle or None}
        staging = ctx.staging
    elif shared is not None:
        result, choice = shared
        staging, stats = result.staging, dict(result.stats)
    else:
        choice = choose_join_plan(spark, ctx, planned, small)
        result = run_match_job(spark, ctx.lake, MatchJob(
            planned.pattern, planned.text, ctx.run_id, planned.rng.low, planned.rng.high,
            profile.slice_length, profile.max_partition_events, profile.match_options(),
            force_slices=force_slices, plan_json=choice.to_json() if choice else None,
            first_ever=planned.first_ever, since=planned.rng.since,
            opened=planned.rng.opened, history=planned.history, lows=planned.rng.lows,
            episodes=planned.episodes))
        staging, stats = result.staging, result.stats
    if not planned.rng.empty and not planned.idle:
        if choice is not None:
            stats.update(plan=choice.text, plan_generator=choice.generator,
                         estimated_pm=round(choice.estimated, 6),
                         actual_pm=round(stats.get("work", 0) / max(stats.get("matcher_calls", 0), 1), 6),
                         replanned=choice.replanned or None)
    late, counts = diagnostics or ({}, {})
    name = planned.pattern.name
    stats["late_events"] = 0 if planned.idle else \
        late[name] if name in late else late_events(spark, ctx, planned)
    stats["warnings"] = match_warnings(spark, ctx, planned, stats, counts.get(name))
    stats.update(match_seconds=round(time.perf_counter() - t0 + stats.get("pass_seconds", 0), 3),
                 low=planned.rng.low, high=planned.rng.high, full=planned.rng.full,
                 since=planned.rng.since if "touched" in stats else None,
                 opened=planned.rng.opened,
                 lows=None if planned.rng.lows is None else {
                     "keys": list(planned.rng.lows[0]),
                     "values": [[list(v), low] for v, low in planned.rng.lows[1]]},
                 logical_date=ctx.logical_date, started_at=started.isoformat(),
                 pattern_version=planned.pattern.version)
    return StagedRun(staging, stats)


def match_warnings(spark, ctx: RunContext, planned: PlannedRun, stats: dict,
                   counts: list | None = None) -> list[str]:
    """What a pattern's author should hear about a full recompute (a new or changed
    pattern): variables no event of the source can bind (``counts``: its variable counts,
    when the night counted them already), and zero matches. An idle rerun of a full
    night has nothing new to say (the run it repeats said it)."""

    if not planned.rng.full or planned.idle:
        return []
    pattern = planned.pattern
    out = []
    events_path = ctx.lake.events(pattern.source)
    if counts is not None:
        out += unsatisfiable(counts)
    elif pattern.kind != "window" and ctx.lake.exists(events_path):
        events = read_spark(spark, ctx.lake, events_path)
        out += unsatisfiable(variable_counts(events, pattern))
    if stats.get("matches", 0) == 0:
        out.append(f"the new version of {pattern.name} matches nothing in the whole history")
    return out


def pass_samples(group: list[PassItem], small: SmallSources | None) -> frozenset[str]:
    """The patterns of a pass whose plan samples come from the pass's own events
    (ZStream patterns a Spark sample is needed for; not in a pass that numbers
    positions, whose range the samples' earlier reach would change)."""
    if numbered(group[0].pattern):
        return frozenset()
    return frozenset(i.pattern.name for i in group
                     if needs_spark_sample(i.pattern, i.low, i.high, small))


def match_passes(spark, ctxs: list[RunContext], planned: dict, groups: list[list[PassItem]],
                 by_pass: list[frozenset[str]], small: SmallSources | None, echo=say) -> dict:
    """Match each of ``groups`` (``source_pass.pass_groups``: patterns that share a
    source and its partition attributes) in one Spark job: {pattern: (result, plan)}.
    The plans of a pass's patterns are chosen between its phase 1 and its phase 2;
    those named in its ``by_pass`` are sampled from the pass's cached events. A pattern
    whose plan fails runs alone and reports it; a pass that fails is reported and its
    patterns run alone, so that an error stays with its own pattern."""
    by_name = {ctx.pattern.name: ctx for ctx in ctxs}
    choices: dict = {}

    def prepare(group: list[PassItem], sampled: frozenset[str], events) -> list[PassItem]:
        try:
            sample_from(events, small, [(i.pattern, i.low, i.high) for i in group
                                        if i.pattern.name in sampled])
        except Exception:  # noqa: BLE001 - each plan then samples alone (and reports it)
            pass
        chosen = []
        for item in group:
            name = item.pattern.name
            try:
                choice = choose_join_plan(spark, by_name[name], planned[name], small)
            except Exception:  # noqa: BLE001 - the pattern runs alone and reports it
                continue
            choices[name] = choice
            chosen.append(replace(item, plan_json=choice.to_json() if choice else None))
        return chosen

    out = {}
    profile = ctxs[0].profile
    lake = ctxs[0].lake
    for n, (group, sampled) in enumerate(zip(groups, by_pass)):
        source = group[0].pattern.source
        label = f"match {len(group)} patterns of {source} in one pass"
        echo(f"{label}: {', '.join(i.pattern.name for i in group)} ...")
        t0 = time.perf_counter()
        try:
            with progress(label, spark, echo):
                results = run_source_pass(
                    spark, lake, group, ctxs[0].run_id, n,
                    profile.max_partition_events, profile.match_options(),
                    slice_length=profile.slice_length,
                    prepare=lambda events, g=group, names=sampled: prepare(g, names, events),
                    sampled=sampled)
        except Exception as exc:  # noqa: BLE001 - retried pattern by pattern
            echo(f"warning: the pass over {source} did not finish ({short_error(exc)}); "
                 "its patterns are matched one by one")
            continue
        share = (time.perf_counter() - t0) / max(len(results), 1)
        for name, result in results.items():
            result.stats["pass_seconds"] = round(share, 3)
            out[name] = (result, choices[name])
    return out
