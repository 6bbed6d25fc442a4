"""The night: every source ingested, then every pattern matched, validated and published,
for one logical date (``run_all``), or a range recomputed (``backfill``); the patterns of a
run go through a ``Night``, one method per phase. Each phase's steps are in its package
(``ingest``, ``match``, ``validate``, ``publish``, ``upkeep``) and are ``ses`` step commands
for a scheduler too; every pattern's result is a ``PatternOutcome``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from jobs.config import Profile
from jobs.core.language.patternfile import PatternError
from jobs.failpoints import reached
from jobs.lake.extent import events_extent
from jobs.lake.locks import lake_lock, pattern_lock
from jobs.lake.runs import RunsLog, planning_runs, published_by
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.ingest.steps import ingest_sources, pipeline_catalog
from jobs.pipeline.match.horizons import RunRange, backfill_range, check_logical_date
from jobs.pipeline.match.planning import SmallSources, sample_many
from jobs.pipeline.match.source_pass import (
    PassItem,
    pass_groups,
    shareable,
)
from jobs.pipeline.match.staged import StagedRun
from jobs.pipeline.match.steps import (
    PlannedRun,
    match_passes,
    match_step,
    night_diagnostics,
    pass_samples,
    planned_range,
)
from jobs.pipeline.outcome import PatternOutcome
from jobs.pipeline.publish.models import models_step
from jobs.pipeline.publish.row_patterns import run_row_patterns
from jobs.pipeline.publish.steps import (
    log_failure,
    publish_step,
    record_funnels,
    validate_steps,
)
from jobs.pipeline.report import describe_range, summary
from jobs.pipeline.upkeep.health_checks import (
    freshness_failures,
    pattern_checks,
    report_checks,
    source_checks,
)
from jobs.pipeline.upkeep.lineage import emit as emit_lineage
from jobs.pipeline.upkeep.reconcile import finish_run, reconcile, start_run
from jobs.pipeline.upkeep.steps import maintenance_step, site_step
from jobs.pipeline.validate.gx import one_docs_build
from jobs.pipeline.validate.quality import ValidationFailed
from jobs.progress import progress, say
from jobs.project.patterns import PatternCatalog, load_catalog
from jobs.runrecord import BACKFILL
from jobs.status import new_run_id


def run_all(spark, profile: Profile, logical_date: str | None = None,
            paths: list[str] | None = None, force_slices: bool = False,
            echo=say, accept_changes=()) -> list[PatternOutcome | dict]:
    """Ingest every source, then match, validate and publish every pattern, for one
    logical date. Holds the lake lock; repairs what a killed run left first. A bad pattern
    file or source fails its own patterns (a row in ``runs`` each), never the others.
    Then the night's checks (freshness, volume) and its alerts. Returns each pattern's
    outcome, then a row per source whose freshness is an error, then the models' rows.
    ``accept_changes``: patterns whose new version is published however much it removes."""
    logical_date = check_logical_date(profile, logical_date)
    ctx = RunContext.start(profile, new_run_id(), logical_date, accept_changes=accept_changes)
    run_id, lake = ctx.run_id, ctx.lake
    t0 = time.perf_counter()
    with lake_lock(profile.lake, f"run {run_id}", profile.lock_dir):
        reconcile(lake, echo)
        catalog, patterns = pipeline_catalog(paths)
        every = [*patterns, *catalog.row_patterns]
        start_run(lake, run_id, logical_date,
                  [{"pattern": p.name, "pattern_version": p.version, "source": p.source,
                    "matcher": p.matcher} for _, p in every])
        names = sorted({p.source for _, p in every})
        with one_docs_build(lake):  # the night's Data Docs in one build, after the models
            ingested, bad_sources = ingest_sources(spark, ctx, names, echo)
            outcomes = run_catalog(spark, ctx, catalog, patterns, bad_sources, force_slices,
                                   echo)
            finish_run(lake, run_id)
            echo(summary(profile, outcomes, run_id, time.perf_counter() - t0))
            checks = source_checks(ctx, ingested, names) + pattern_checks(ctx, outcomes)
            report_checks(ctx, checks, outcomes, echo)
            emit_lineage(lake, outcomes, {p.name: p for _, p in patterns}, logical_date,
                         profile.lineage_url, echo)
            stale = freshness_failures(checks)
            model_rows = models_step(spark, ctx, echo) if paths is None else []
        maintenance_step(ctx, echo)
        site_step(ctx, echo)
    return outcomes + stale + model_rows


def backfill(spark, profile: Profile, start: str, end: str, paths: list[str] | None = None,
             echo=say) -> list[PatternOutcome]:
    """Recompute the matches whose first event lies in [start, end) for each pattern, by
    the rules of ``run``: the range checked first; the lake lock, a repair of what a killed
    writer left and the run's plan file (a killed backfill is repaired like a run); each
    pattern that fails (its file, its budget, Spark) gets its ``failed`` row and the others
    go on; the staging of failed patterns is removed."""
    rng = backfill_range(start, end)  # a reversed range: one line, nothing touched
    ctx = RunContext.start(profile, new_run_id(), run_kind=BACKFILL)
    run_id, lake = ctx.run_id, ctx.lake
    with lake_lock(profile.lake, f"backfill {run_id}", profile.lock_dir):
        reconcile(lake, echo)
        catalog, patterns = pipeline_catalog(paths)
        start_run(lake, run_id, "",
                  [{"pattern": p.name, "pattern_version": p.version, "source": p.source,
                    "matcher": p.matcher, "run_kind": BACKFILL} for _, p in patterns])
        outcomes = run_catalog(spark, ctx, catalog, patterns, {},
                               ranges={pattern.name: rng for _, pattern in patterns}, echo=echo)
        failed = {o.pattern for o in outcomes if not o.ok}
        for _, pattern in patterns:
            if pattern.name in failed:
                lake.remove(lake.staging(pattern.name, run_id))
        finish_run(lake, run_id)
    echo(summary(profile, outcomes, run_id, None))
    emit_lineage(lake, outcomes, {p.name: p for _, p in patterns}, "", profile.lineage_url,
                 echo)
    return outcomes


def run_catalog(spark, ctx: RunContext, catalog: PatternCatalog, patterns: list,
                bad_sources: dict[str, str], force_slices: bool = False, echo=say,
                ranges: dict[str, RunRange] | None = None) -> list[PatternOutcome]:
    """The files of ``catalog`` that did not load get a failed row each; ``patterns``
    ((path, pattern) pairs) are matched, validated and published together
    (``run_patterns``). What ``run`` and ``backfill`` do after their ingest, and the DAG's
    task per source."""
    rejected = []
    for r in catalog.rejected:
        log_failure(ctx, r.message, name=r.name)
        echo(f"FAILED {r.name}: {r.message}")
        rejected.append(PatternOutcome.failed(ctx.run_id, r.name, PatternError(list(r.problems)),
                                              message=r.message))
    ctxs = [ctx.for_pattern(path, pattern) for path, pattern in patterns]
    log = RunsLog(ctx.lake)  # the rows of runs that committed nothing: one append for all
    try:
        outcomes = run_patterns(spark, ctxs, bad_sources, force_slices, echo, ranges=ranges,
                                log=log)
        return rejected + outcomes + run_row_patterns(spark, ctx, catalog.row_patterns,
                                                      bad_sources, echo, log)
    finally:
        log.flush()


def run_task(spark_of: Callable[[], object], profile: Profile, run_id: str,
             logical_date: str | None, paths: list[Path], force_slices: bool = False,
             echo=say, accept_changes=(), lineage_parent: str | None = None
             ) -> tuple[list[PatternOutcome], list[dict]]:
    """The nightly DAG's task per source (``run-patterns``): the pattern files ``paths``
    of run ``run_id`` matched, validated and published together. Patterns this run
    published already (a retried task) are skipped, each with a line; the others' locks
    are taken in one order (two tasks never wait for each other) before Spark starts
    (``spark_of``). Returns the outcomes of the patterns it ran and of the files that did
    not load, and a row per source of theirs whose freshness is an error (the night's
    checks of these patterns and their sources are recorded, and their alerts sent; a
    failed task is Airflow's to tell)."""
    lake = Lake.of_profile(profile)
    ctx = RunContext(profile, lake, run_id, check_logical_date(profile, logical_date),
                     accept_changes=frozenset(accept_changes))
    catalog = load_catalog(paths)
    done = published_by(lake, run_id)
    patterns = [(path, p) for path, p in catalog.patterns if p.name not in done]
    for name in sorted(done & {p.name for _, p in catalog.patterns}):
        echo(f"{name}: already published by run {run_id}, skipped")
    rows = [(path, p) for path, p in catalog.row_patterns if p.name not in done]
    catalog = replace(catalog, row_patterns=tuple(rows))
    names = sorted({p.name for _, p in [*patterns, *rows]} | {r.name for r in catalog.rejected})
    with contextlib.ExitStack() as locks:
        for name in names:
            locks.enter_context(pattern_lock(profile.lake, name, f"run-patterns {run_id}",
                                             profile.lock_dir))
        outcomes = run_catalog(spark_of(), ctx, catalog, patterns, {}, force_slices, echo)
    sources = sorted({p.source for _, p in catalog.patterns})
    checks = source_checks(ctx, [], sources) + pattern_checks(ctx, outcomes)
    report_checks(ctx, checks, [], echo, command="the DAG's task (or ses run)")
    emit_lineage(lake, outcomes, {p.name: p for _, p in catalog.patterns}, ctx.logical_date,
                 profile.lineage_url, echo, parent=lineage_parent)
    return outcomes, freshness_failures(checks)


def run_pattern(spark, ctx: RunContext, force_slices: bool = False, echo=say
                ) -> PatternOutcome:
    """Match, validate and publish one pattern in one go (``run-pattern``, ``pr-check``);
    a failure is its outcome, with its row in the run log."""
    return run_patterns(spark, [ctx], {}, force_slices, echo)[0]


def run_patterns(spark, ctxs: list[RunContext], bad_sources: dict[str, str],
                 force_slices: bool = False, echo=say,
                 ranges: dict[str, RunRange] | None = None,
                 log: RunsLog | None = None) -> list[PatternOutcome]:
    """The ``Night`` of ``ctxs``: every pattern matched, then all staged runs validated in
    one pass, then each one that passed published. A pattern that fails (its file, its
    source, its match, its suite, its publish) fails alone, with a row in ``runs``.
    ``ranges``: a fixed range per pattern (backfill). The rows of runs that committed
    nothing are appended together at the end (``RunsLog``)."""
    if not ctxs:
        return []
    own = log is None  # (a caller's log is flushed by the caller)
    log = RunsLog(ctxs[0].lake) if own else log
    try:
        return Night(spark, ctxs, bad_sources, force_slices=force_slices, echo=echo,
                     ranges=ranges, log=log).run()
    finally:
        if own:
            log.flush()


@dataclass
class PatternNight:
    """One pattern of a night, filled in phase by phase: its range (``planned``, or the
    error that stops it), its share of a source pass (``shared``: result and plan), its
    staged run (``staged``) and its ``outcome``."""

    ctx: RunContext
    planned: PlannedRun | Exception | None = None
    shared: tuple | None = None
    staged: StagedRun | None = None
    outcome: PatternOutcome | None = None

    @property
    def name(self) -> str:
        return self.ctx.pattern.name

    @property
    def ready(self) -> bool:
        """It has new events to match tonight."""
        one = self.planned
        return isinstance(one, PlannedRun) and not one.rng.empty and not one.idle


class Night:
    """The patterns of one run, phase by phase: ``plan`` (each one's range), ``share`` (the
    source passes and plan samples they share, the night's diagnostics), ``match``,
    ``validate`` (one pass for all), ``publish``. Each pattern is a ``PatternNight``; a
    failure anywhere is its ``PatternOutcome`` (``fail``), and the others go on."""

    def __init__(self, spark, ctxs: list[RunContext], bad_sources: dict[str, str], *,
                 force_slices: bool = False, echo=say,
                 ranges: dict[str, RunRange] | None = None, log: RunsLog | None = None):
        self.spark, self.bad_sources = spark, bad_sources
        self.force_slices, self.echo, self.ranges, self.log = force_slices, echo, ranges or {}, log
        self.lake, self.profile = ctxs[0].lake, ctxs[0].profile
        self.patterns = [PatternNight(ctx) for ctx in ctxs]
        self.small: SmallSources | None = None
        self.diagnostics: tuple | None = None

    def run(self) -> list[PatternOutcome]:
        self.plan()
        self.share()
        self.publish(self.validate(self.match()))
        return [one.outcome for one in self.patterns]

    def fail(self, one: PatternNight, exc: Exception) -> None:
        """The pattern's failed outcome, its row in the run log and one line."""
        one.outcome = PatternOutcome.failed(one.ctx.run_id, one.name, exc)
        log_failure(one.ctx, one.outcome.message, log=self.log)
        self.echo(f"FAILED {one.name}: {one.outcome.message}")

    def _planned(self) -> dict:
        return {one.name: one.planned for one in self.patterns}

    def plan(self) -> None:
        """Each pattern's range (``planned_range``), from one read of the runs table (the
        rows it needs: ``jobs.lake.runs.planning_runs``)."""
        history: dict[str, list] = {}
        for ld in {one.ctx.logical_date for one in self.patterns}:
            history.update(planning_runs(self.lake, {one.name for one in self.patterns
                                                     if one.ctx.logical_date == ld}, ld))
        extents: dict = {}  # each source's EventsExtent, read once: idle patterns
        for one in self.patterns:
            name, source = one.name, one.ctx.pattern.source
            try:
                if source in self.bad_sources:
                    raise ValidationFailed(self.bad_sources[source])
                if source not in extents and name not in self.ranges:
                    extents[source] = events_extent(self.lake, source)
                one.planned = planned_range(one.ctx, self.ranges.get(name), history[name],
                                            extents.get(source))
            except Exception as exc:  # noqa: BLE001 - reported with its pattern when matched
                one.planned = exc

    def share(self) -> None:
        """What the patterns share: the small sources read once, the source passes (one
        Spark job for the patterns of a source and partition), the plans' samples, and the
        late-event counts and variable counts of the night."""
        self.small = SmallSources(self.lake)
        ready = [one.planned for one in self.patterns if one.ready]
        groups = [] if self.force_slices else pass_groups([
            PassItem(p.pattern, p.text, p.rng.low, p.rng.high) for p in ready
            if shareable(p.pattern)])
        by_pass = [pass_samples(group, self.small) for group in groups]
        try:  # the Spark samples of the plans no pass samples, two jobs per source
            sample_many(self.spark, self.lake, self.small, [
                (p.pattern, p.rng.low, p.rng.high) for p in ready
                if not any(p.pattern.name in names for names in by_pass)])
        except Exception:  # noqa: BLE001 - each plan then samples alone (and reports it)
            self.small.samples.clear()
        shared = match_passes(self.spark, [one.ctx for one in self.patterns], self._planned(),
                              groups, by_pass, self.small, self.echo)
        for one in self.patterns:
            one.shared = shared.get(one.name)
        try:
            self.diagnostics = night_diagnostics(self.spark, [one.ctx for one in self.patterns],
                                                 self._planned())
        except Exception:  # noqa: BLE001 - each pattern then counts its own (and reports it)
            self.diagnostics = None

    def match(self) -> list[PatternNight]:
        """Each pattern's match step (its share of a source pass, or a job of its own: up
        to ``match.parallel_jobs`` at once on threads of this driver, which Spark runs side
        by side); those that matched."""
        alone = [one for one in self.patterns if one.shared is None and one.ready]
        workers = min(self.profile.parallel_jobs, len(alone))
        matched = []
        with ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="match") as pool:
            running = {one.name: pool.submit(self._match_one, one)
                       for one in alone} if workers > 1 else {}
            try:
                for one in self.patterns:
                    try:
                        if one.name in running:
                            running[one.name].result()
                        else:
                            self._match_one(one)
                        matched.append(one)
                    except Exception as exc:  # noqa: BLE001 - one failing pattern does not stop the others
                        self.fail(one, exc)
            finally:  # an interrupt does not wait for jobs not started
                pool.shutdown(wait=True, cancel_futures=True)
        return matched

    def validate(self, matched: list[PatternNight]) -> list[PatternNight]:
        """The matches suites of every staged run, in one pass; each run that passed gets
        its verdict, each that did not its failed outcome. Those that passed."""
        if not matched:
            return []
        with progress(f"validate {len(matched)} pattern(s)", self.spark, self.echo):
            verdicts = validate_steps(self.spark, [(one.ctx, one.staged) for one in matched])
        passed = []
        for one in matched:
            if isinstance(verdicts[one.name], Exception):
                self.fail(one, verdicts[one.name])
            else:
                one.staged = verdicts[one.name]
                passed.append(one)
        return passed

    def publish(self, passed: list[PatternNight]) -> None:
        """Each run that passed its suite into its match table, with its runs row; then
        the funnels of the published ones, in one commit."""
        funnels: list = []
        for one in passed:
            try:
                with progress(f"publish {one.name}", None, self.echo):
                    row = publish_step(self.spark, one.ctx, one.staged, log=self.log,
                                       funnels=funnels)
                one.outcome = PatternOutcome.published(row)
            except Exception as exc:  # noqa: BLE001 - one failing pattern does not stop the others
                self.fail(one, exc)
            reached("run:after-pattern")
        record_funnels(self.lake, funnels, self.echo)

    def _match_one(self, one: PatternNight) -> None:
        pattern, planned = one.ctx.pattern, one.planned
        if isinstance(planned, Exception):
            raise planned
        if not planned.idle:  # (an idle one: its row of the summary says "nothing new")
            self.echo(f"match {pattern.name} ({pattern.matcher}, source {pattern.source}, "
                      f"{describe_range(planned.rng)}) ...")
        with progress(f"match {pattern.name}", self.spark, self.echo):
            one.staged = match_step(self.spark, one.ctx, planned, self.force_slices,
                                    one.shared, self.diagnostics, self.small)
        for warning in one.staged.stats.get("warnings") or []:
            self.echo(f"warning: {pattern.name}: {warning}")
