"""The nightly pipeline: ingest -> match (per pattern) -> publish, and its run log.

Each step is also a ``ses`` subcommand (``ingest``, ``match-job``, ``publish``)
so that a scheduler can run them as separate tasks; ``run`` does all of them for one
logical date and prints a summary, ``backfill`` recomputes a range of start dates. Every
step gets one ``RunContext`` (``jobs.pipeline.context``): the profile, the lake it reads and writes,
the run and, per pattern, the pattern and its file.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from jobs.config import Profile, load_sources
from jobs.core.errors import InputError, UserError
from jobs.core.language.events import format_ts
from jobs.core.language.pattern import Pattern
from jobs.core.language.patternfile import PatternError
from jobs.failpoints import reached
from jobs.lake.locks import lake_lock
from jobs.lake.stats import update_stats
from jobs.lake.store import BrokenTable, broken_in
from jobs.lake.table_docs import document_match_table
from jobs.pipeline.check_frames import StagedMatches
from jobs.pipeline.context import RunContext
from jobs.pipeline.horizons import RunRange, backfill_range, check_logical_date, plan_range
from jobs.pipeline.ingest import describe, ingest
from jobs.pipeline.models import run_models
from jobs.pipeline.phase1 import run_match_job
from jobs.pipeline.planning import (
    SmallSources,
    choose_plan,
    needs_replan,
    needs_spark_sample,
    sample_from,
    sample_many,
)
from jobs.pipeline.publish import RunsLog, all_runs, log_run, previous_runs, publish
from jobs.pipeline.quality import (
    build_docs,
    validate_events,
    validate_events_frame,
    validate_staged,
)
from jobs.pipeline.reconcile import finish_run, reconcile, start_run
from jobs.pipeline.retract import reopened_low
from jobs.pipeline.source_pass import PassItem, numbered, pass_groups, run_source_pass, shareable
from jobs.progress import progress
from jobs.project.models import ModelError, models_folder
from jobs.project.patterns import PatternCatalog, load_catalog
from jobs.runrecord import BACKFILL, COUNTERS, RunRecord
from jobs.site.build import build_site
from jobs.spark.diagnostics import unsatisfiable, variable_counts, variable_counts_many
from jobs.spark.predicates import filter_column
from jobs.status import FAILED, SUCCESS, new_run_id


def pipeline_catalog(paths: list[str] | None = None) -> tuple[PatternCatalog, list]:
    """The catalogue, and its patterns whose source the pipeline ingests (has a landing
    folder)."""
    catalog = load_catalog(paths)
    sources = load_sources()
    runnable = [(p, pattern) for p, pattern in catalog.patterns
                if (src := sources.get(pattern.source)) is not None and src.landing]
    return catalog, runnable


def events_gate(spark, ctx: RunContext, results: list):
    """The events suite on a typed batch before it is committed (``ingest``'s gate); each
    result's id goes to ``results``, for one build of the Data Docs after the ingest."""
    def gate(source, batch) -> None:

        outcome = validate_events_frame(spark, ctx.lake, source, batch,
                                        ctx.profile.ts_range(), docs=False)
        results.append(outcome.result_id)
        if not outcome.success:
            raise ValidationFailed(f"events of {source.name}: {outcome.describe()}; nothing of "
                                   "this batch was committed: fix or retract the bad rows' "
                                   "files and rerun")
    return gate


def ingest_sources(spark, ctx: RunContext, names: list[str] | None = None,
                   echo=print) -> tuple[list, dict[str, str]]:
    """Ingest each source on its own: a source whose files cannot be read or whose batch
    fails the events suite is reported in the returned {source: message} and nothing of it
    is written; the others are ingested."""
    checked: list = []  # the events suites' results
    gate = events_gate(spark, ctx, checked) if spark is not None else None
    results, failed = [], {}
    ts_range = ctx.profile.ts_range()
    patterns = None  # the catalogue, loaded once for the statistics
    for name, source in load_sources().items():
        if not source.landing or (names and name not in names):
            continue
        try:
            with progress(f"ingest {name}", spark, echo):
                r = ingest(source, ctx.profile.landing, ctx.lake, ctx.run_id, ts_range=ts_range,
                           gate=gate)
        except Exception as exc:  # noqa: BLE001 - one source's failure is reported, not fatal
            failed[name] = f"ingest of {name} failed: {exc}"
            echo(f"FAILED {failed[name]}")
            continue
        echo("ingest " + describe(r))
        reached("ingest:after-log")  # before the statistics' commit
        results.append(r)
        if spark is not None:
            if patterns is None:  # the whole catalogue's: stats serve every pattern
                patterns = [p for _, p in pipeline_catalog()[1]]
            stats_step(spark, ctx, name, source, patterns, echo)
    build_docs(ctx.lake, checked)
    return results, failed


def stats_step(spark, ctx: RunContext, name: str, source, patterns: list,
               echo=print) -> dict | None:
    """``stats/<source>`` after an ingest (``jobs.lake.stats``), for the attributes the
    ``patterns`` of the source read. Statistics only steer plans: a failure is reported
    and the run goes on (plans then come from the sampled events alone)."""

    try:
        mine = [p for p in patterns if p.source == name]
        with progress(f"stats {name}", spark, echo):
            out = update_stats(spark, ctx.lake, name, mine, source.columns, echo)
        if out["dates"]:
            echo(f"stats {name}: {out['dates']} date(s), {out['rows']} row(s)")
        return out
    except Exception as exc:  # noqa: BLE001 - advisory: never fails the ingest
        echo(f"warning: stats of {name} not updated ({short_error(exc)}); plans use samples")
        return None


@dataclass
class PlannedRun:
    path: Path
    pattern: Pattern
    text: str
    rng: RunRange
    runs: list[RunRecord]  # the pattern's earlier records in the runs table


def plan(ctx: RunContext, rng: RunRange | None = None,
         runs: list[RunRecord] | None = None) -> PlannedRun:
    """The run's start range: after the previous run's horizon, and back to where
    retractions since that run could change matches. ``runs``: the pattern's records
    of the runs table, when the caller read them already (one read per night)."""
    pattern = ctx.pattern
    text = ctx.path.read_text(encoding="utf-8")
    if runs is None:
        runs = previous_runs(ctx.lake, pattern.name)
    if rng is None:
        rng = plan_range(ctx.logical_date, pattern.tau, ctx.profile.allowed_lateness,
                         pattern.version, runs)
        ok = [r["started_at"] for r in runs if r["status"] == SUCCESS
              and r["pattern_version"] == pattern.version]
        reopen = reopened_low(ctx.lake, pattern.source, max(ok) if ok else None, pattern.tau)
        if reopen is not None and rng.low is not None and reopen < rng.low:
            rng = RunRange(reopen, rng.high, rng.full)
        if not rng.full and not ctx.lake.exists(ctx.lake.matches(pattern.name)):
            rng = RunRange(None, rng.high, True)  # the table is gone: recompute it in full
    return PlannedRun(ctx.path, pattern, text, rng, runs)


def late_events(spark, ctx: RunContext, planned: PlannedRun) -> int:
    """Events that arrived after the previous run of this pattern although their start
    range was already closed (ts < low): counted in the run log, never silently dropped."""
    return late_events_many(spark, ctx.lake, [planned])[planned.pattern.name]


def late_events_many(spark, lake, planned: list[PlannedRun]) -> dict[str, int]:
    """``late_events`` of several patterns, one aggregate per source."""
    from pyspark.sql import functions as F

    out, terms = {}, {}
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
    for source, columns in terms.items():
        row = lake.read_spark(spark, lake.events(source)).agg(*[c for _, c in columns]).first()
        for (name, _), value in zip(columns, row):
            out[name] = int(value or 0)
    return out


def night_diagnostics(spark, ctxs: list[RunContext], planned: dict) -> tuple[dict, dict]:
    """The late events of every pattern and the variable counts of every fully
    recomputed sequence pattern of a night, one Spark aggregate per source each
    (``match_step`` then runs no job of its own for them)."""
    ok = [p for p in planned.values() if not isinstance(p, Exception)]
    late = late_events_many(spark, ctxs[0].lake, ok) if ok else {}
    counts: dict[str, list] = {}
    by_source: dict[str, list] = {}
    for one in ok:
        if one.rng.full and one.pattern.kind != "window":
            by_source.setdefault(one.pattern.source, []).append(one.pattern)
    lake = ctxs[0].lake if ctxs else None
    for source, patterns in by_source.items():
        if lake.exists(lake.events(source)):
            counts.update(variable_counts_many(lake.read_spark(spark, lake.events(source)),
                                               patterns))
    return late, counts


def run_plan(spark, ctx: RunContext, planned: PlannedRun, small: SmallSources | None = None):
    """The one plan of a ZStream pattern for this run (``jobs.pipeline.planning``), chosen on the
    driver; None for the SES automaton (it follows the sets' order). ``small``: the night's
    small sources, sampled on the driver."""

    pattern = planned.pattern
    if pattern.matcher != "zstream":
        return None
    source = load_sources().get(pattern.source)
    kinds = dict(source.columns) if source else {}
    observed = needs_replan(planned.runs, pattern.version)
    return choose_plan(spark, ctx.lake, pattern, planned.rng.low, planned.rng.high, kinds,
                       observed=observed, small=small)


def match_step(spark, ctx: RunContext, planned: PlannedRun, force_slices: bool = False,
               shared: tuple | None = None, diagnostics: tuple | None = None,
               small: SmallSources | None = None) -> dict:
    """Phase 1 + 2 on Spark into staging; the range, counters and the step's wall time
    (``match_seconds``) go to ``_stats.json``. ``shared``: the pattern's result of a
    source pass and its plan (``source_passes``), when one matched it already;
    ``diagnostics``: the night's ``night_diagnostics``; ``small``: the night's
    ``SmallSources`` (for a plan)."""
    profile = ctx.profile
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    if planned.rng.empty:
        stats = {**dict.fromkeys(COUNTERS, 0), "seconds": 0.0}
        staging = ctx.staging
    elif shared is not None:
        result, choice = shared
        staging, stats = result.staging, dict(result.stats)
    else:
        choice = run_plan(spark, ctx, planned, small)
        result = run_match_job(spark, planned.pattern, planned.text, ctx.lake, ctx.run_id,
                               planned.rng.low, planned.rng.high, profile.slice_length,
                               profile.max_partition_events, profile.max_matches_per_window,
                               force_slices=force_slices, memory_budget=profile.memory_budget,
                               limits=f"match.max_matches_per_window and match.memory_budget "
                                      f"in conf/pipeline.yaml (profile {profile.name})",
                               plan_json=choice.to_json() if choice else None)
        staging, stats = result.staging, result.stats
    if not planned.rng.empty:
        if choice is not None:
            stats.update(plan=choice.text, plan_generator=choice.generator,
                         estimated_pm=round(choice.estimated, 6),
                         actual_pm=round(stats.get("work", 0) / max(stats.get("matcher_calls", 0), 1), 6),
                         replanned=choice.replanned or None)
    late, counts = diagnostics or ({}, {})
    name = planned.pattern.name
    stats["late_events"] = late[name] if name in late else late_events(spark, ctx, planned)
    stats["warnings"] = match_warnings(spark, ctx, planned, stats, counts.get(name))
    stats.update(match_seconds=round(time.perf_counter() - t0 + stats.get("pass_seconds", 0), 3),
                 low=planned.rng.low, high=planned.rng.high, full=planned.rng.full,
                 logical_date=ctx.logical_date, started_at=started.isoformat(),
                 pattern_version=planned.pattern.version)
    ctx.lake.write_text(f"{staging}/_stats.json", json.dumps(stats))
    return stats


def match_warnings(spark, ctx: RunContext, planned: PlannedRun, stats: dict,
                   counts: list | None = None) -> list[str]:
    """What a pattern's author should hear about a full recompute (a new or changed
    pattern): variables no event of the source can bind (``counts``: its variable counts,
    when the night counted them already), and zero matches."""

    if not planned.rng.full:
        return []
    pattern = planned.pattern
    out = []
    events_path = ctx.lake.events(pattern.source)
    if counts is not None:
        out += unsatisfiable(counts)
    elif pattern.kind != "window" and ctx.lake.exists(events_path):
        events = ctx.lake.read_spark(spark, events_path)
        out += unsatisfiable(variable_counts(events, pattern))
    if stats.get("matches", 0) == 0:
        out.append(f"the new version of {pattern.name} matches nothing in the whole history")
    return out


class ValidationFailed(UserError, RuntimeError):
    """A quality gate failed: nothing is published; the message names the expectations."""


def _staged_stats(ctx: RunContext) -> dict:
    try:
        return json.loads(ctx.lake.read_text(f"{ctx.staging}/_stats.json"))
    except (FileNotFoundError, OSError):
        raise FileNotFoundError(f"no staged run {ctx.run_id!r} for pattern "
                                f"{ctx.pattern.name!r} at {ctx.staging}: run `match-job` for "
                                "it first") from None


def validate_step(spark, ctx: RunContext) -> dict:
    """The matches suite on one staged run (``validate_steps`` with one run); raises
    ``ValidationFailed``."""
    verdict = validate_steps(spark, [ctx])[ctx.pattern.name]
    if isinstance(verdict, Exception):
        raise verdict
    return verdict


def validate_steps(spark, ctxs: list[RunContext]) -> dict[str, dict | Exception]:
    """The matches suite on the staged runs of a night in one pass
    (``quality.validate_staged``); each outcome, with its pattern's share of the pass's
    wall time, goes to its run's ``_validation.json``. Per pattern: the outcome, or the
    error that stops its publish (a failed suite is logged in ``runs`` here)."""
    t0 = time.perf_counter()
    verdicts: dict[str, dict | Exception] = {}
    staged = []
    for ctx in ctxs:
        try:
            stats = _staged_stats(ctx)
        except Exception as exc:  # noqa: BLE001 - this pattern's own failure
            verdicts[ctx.pattern.name] = exc
            continue
        if stats.get("matches", 0) == 0:
            verdicts[ctx.pattern.name] = {"success": True, "failed": [], "docs": None,
                                          "summary": "no matches to check"}
        else:
            staged.append((ctx, StagedMatches(ctx.pattern, ctx.run_id, stats["low"],
                                              stats["high"], stats["matches"])))
    outcomes = validate_staged(spark, ctxs[0].lake, [s for _, s in staged]) if staged else {}
    share = round((time.perf_counter() - t0) / max(len(ctxs), 1), 3)
    for ctx, _ in staged:
        o = outcomes[ctx.pattern.name]
        verdicts[ctx.pattern.name] = o if isinstance(o, Exception) else {
            "success": o.success, "failed": o.failed, "docs": o.docs, "summary": o.describe()}
    for ctx in ctxs:
        outcome = verdicts[ctx.pattern.name]
        if isinstance(outcome, Exception):
            continue
        outcome["seconds"] = share
        ctx.lake.write_text(f"{ctx.staging}/_validation.json", json.dumps(outcome))
        if not outcome["success"]:
            exc = ValidationFailed(f"{ctx.pattern.name}: {outcome['summary']}")
            log_failure(ctx, str(exc), logical_date=_staged_stats(ctx).get("logical_date", ""))
            exc.logged = True
            verdicts[ctx.pattern.name] = exc
    return verdicts


def staged_run(ctx: RunContext) -> tuple[dict, dict]:
    """The staged run's counters and validation verdict, once it may be published: raises
    when it was not staged, not validated or failed validation, or when its pattern file
    changed since it was matched."""
    pattern, run_id, lake, staging = ctx.pattern, ctx.run_id, ctx.lake, ctx.staging
    stats = _staged_stats(ctx)
    try:
        verdict = json.loads(lake.read_text(f"{staging}/_validation.json"))
    except (FileNotFoundError, OSError):
        raise ValidationFailed(f"run {run_id!r} of {pattern.name!r} was not validated: run "
                               "`validate-run` for it first") from None
    if not verdict["success"]:
        raise ValidationFailed(f"run {run_id!r} of {pattern.name!r} failed validation, "
                               f"nothing published: {verdict['summary']}")
    if stats["pattern_version"] != pattern.version:
        raise InputError(f"{ctx.path} changed since run {run_id} was staged (version "
                         f"{stats['pattern_version']} -> {pattern.version}): match it again")
    return stats, verdict


def publish_step(spark, ctx: RunContext, staged: tuple[dict, dict] | None = None,
                 log: RunsLog | None = None) -> RunRecord:
    """Publish a staged, validated run (``staged``: its ``staged_run``, when the caller
    checked it already) and append its record to the runs log (``log``: the batch's
    ``RunsLog``, which holds back the row of a run that committed nothing)."""
    pattern, run_id, lake, staging = ctx.pattern, ctx.run_id, ctx.lake, ctx.staging
    stats, verdict = staged or staged_run(ctx)
    rng = RunRange(stats["low"], stats["high"], stats["full"])
    t0 = time.perf_counter()
    row = RunRecord.of_match(
        stats, run_id=run_id, logical_date=ctx.logical_date or None, run_kind=ctx.run_kind,
        pattern=pattern.name, source=pattern.source, matcher=pattern.matcher,
        horizon_low=rng.low, horizon_high=rng.high, full_recompute=rng.full, status=SUCCESS,
        message="; ".join(f"warning: {w}" for w in stats.get("warnings") or []) or None,
        validate_seconds=verdict.get("seconds"),
        started_at=datetime.fromisoformat(stats["started_at"]))
    if stats.get("matches", 0) == 0 and rng.empty:
        outcome = {"inserted": 0, "deleted": 0, "committed": False}
    else:
        outcome = publish(spark, lake, pattern, run_id, staging, rng, run_row=row.as_row())
        reached("publish:after-merge")
    row.inserted, row.deleted = outcome["inserted"], outcome["deleted"]
    row.seconds = float(stats.get("seconds", 0.0)) + time.perf_counter() - t0
    row.publish_seconds = round(time.perf_counter() - t0, 3)
    row.finished_at = datetime.now(timezone.utc)
    if log is not None:
        log.append(row, hold=not outcome["committed"])
    else:
        log_run(lake, row)
    if lake.exists(lake.matches(pattern.name)):  # after the runs row: reconcile reads the merge
        document_match_table(lake, pattern)
    lake.remove(staging)
    return row


def log_failure(ctx: RunContext, message: str, name: str | None = None,
                logical_date: str | None = None, log: RunsLog | None = None) -> None:
    """A failed row in the run log for the context's pattern (None: a file that did not
    load; ``name`` then names it)."""
    now = datetime.now(timezone.utc)
    pattern = ctx.pattern
    row = RunRecord(
        ctx.run_id, run_kind=ctx.run_kind,
        logical_date=(ctx.logical_date if logical_date is None else logical_date) or None,
        pattern=pattern.name if pattern else name,
        pattern_version=pattern.version if pattern else None,
        source=pattern.source if pattern else None,
        matcher=pattern.matcher if pattern else None, status=FAILED,
        message=message[:2000], started_at=now, finished_at=now)
    if log is not None:
        log.append(row)
    else:
        log_run(ctx.lake, row)


def validate_events_step(spark, ctx: RunContext, source: str, ingest_run: str | None):
    """The events suite on one ingest batch; raises ``ValidationFailed``."""

    outcome = validate_events(spark, ctx.lake, load_sources()[source],
                              ctx.profile.ts_range(), ingest_run)
    if not outcome.success:
        raise ValidationFailed(f"events of {source}: {outcome.describe()}")
    return outcome


def run_all(spark, profile: Profile, logical_date: str | None = None,
            paths: list[str] | None = None, force_slices: bool = False,
            echo=print) -> list[RunRecord | dict]:
    """Ingest every source, then match, validate and publish every pattern, for one
    logical date. Holds the lake lock; repairs what a killed run left first. A bad pattern
    file or source fails its own patterns (a row in ``runs`` each), never the others."""
    logical_date = check_logical_date(profile, logical_date)
    ctx = RunContext.start(profile, new_run_id(), logical_date)
    run_id, lake = ctx.run_id, ctx.lake
    t0 = time.perf_counter()
    with lake_lock(profile.lake, f"run {run_id}", profile.lock_dir):
        reconcile(lake, echo)
        catalog, patterns = pipeline_catalog(paths)
        start_run(lake, run_id, logical_date,
                  [{"pattern": p.name, "pattern_version": p.version, "source": p.source,
                    "matcher": p.matcher} for _, p in patterns])
        ingested, bad_sources = ingest_sources(spark, ctx, sorted({p.source for _, p in patterns}),
                                               echo)
        rows = run_catalog(spark, ctx, catalog, patterns, bad_sources, force_slices, echo)
        finish_run(lake, run_id)
        echo(summary(profile, rows, run_id, time.perf_counter() - t0))
        model_rows = models_step(spark, ctx, echo) if paths is None else []
        site_step(ctx, echo)
    return rows + model_rows


def site_step(ctx: RunContext, echo=print) -> None:
    """The catalogue site after a run (when the profile names its folder); a failure is
    reported, never fails the run."""

    if not ctx.profile.site:
        return
    try:
        with progress("catalogue", None, echo):
            build_site(ctx.lake, Path(ctx.profile.site), echo=echo)
    except Exception as exc:  # noqa: BLE001 - the site is a view of the run, not the run
        echo(f"warning: catalogue site not built ({short_error(exc)}); `make docs` retries")


def models_step(spark, ctx: RunContext, echo=print, select: list[str] | None = None
                ) -> list[dict]:
    """The SQL models (``models/``), after publish, in dependency order."""

    if not any(models_folder().glob("*.sql")):
        return []
    try:
        return run_models(spark, ctx.lake, select, echo=echo)
    except ModelError as exc:
        echo(f"FAILED models: {exc}")
        return [{"model": "*", "status": FAILED, "message": str(exc)}]


def run_catalog(spark, ctx: RunContext, catalog: PatternCatalog, patterns: list,
                bad_sources: dict[str, str], force_slices: bool = False, echo=print,
                errors: dict[str, Exception] | None = None) -> list[RunRecord]:
    """The files of ``catalog`` that did not load get a failed row each; ``patterns``
    ((path, pattern) pairs) are matched, validated and published together
    (``run_patterns``). What ``run`` does after its ingest, and the DAG's task per source."""
    rows = []
    for r in catalog.rejected:
        log_failure(ctx, r.message, name=r.name)
        echo(f"FAILED {r.name}: {r.message}")
        rows.append(RunRecord(ctx.run_id, pattern=r.name, status=FAILED, message=r.message))
        if errors is not None:
            errors[r.name] = PatternError(list(r.problems))
    return rows + run_patterns(spark, [ctx.for_pattern(path, pattern) for path, pattern in patterns],
                               bad_sources, force_slices, echo, errors=errors)


def run_pattern(spark, ctx: RunContext, force_slices: bool = False, echo=print) -> RunRecord:
    """Match, validate and publish one pattern in one go (``run-pattern``, ``pr-check``);
    raises when it fails."""
    row = run_patterns(spark, [ctx], {}, force_slices, echo, isolate=False)[0]
    return row


def run_patterns(spark, ctxs: list[RunContext], bad_sources: dict[str, str],
                 force_slices: bool = False, echo=print, isolate: bool = True,
                 ranges: dict[str, RunRange] | None = None,
                 errors: dict[str, Exception] | None = None) -> list[RunRecord]:
    """Match every pattern, validate all staged runs in one pass (``validate_steps``),
    then publish each one that passed. A pattern that fails (its file, its source, its
    match, its suite, its publish) fails alone with a row in ``runs`` (and its exception
    in ``errors``, when given); ``isolate=False`` raises its error instead. ``ranges``: a
    fixed range per pattern (backfill). The rows of runs that committed nothing are
    appended together at the end (``RunsLog``)."""
    log = RunsLog(ctxs[0].lake) if ctxs else None
    try:
        return _run_patterns(spark, ctxs, bad_sources, force_slices, echo, isolate, ranges,
                             errors, log)
    finally:
        if log is not None:
            log.flush()


def _run_patterns(spark, ctxs: list[RunContext], bad_sources: dict[str, str],
                  force_slices: bool, echo, isolate: bool, ranges: dict[str, RunRange] | None,
                  errors: dict[str, Exception] | None, log: RunsLog | None
                  ) -> list[RunRecord]:
    rows: dict[str, RunRecord] = {}
    matched = []
    history: dict[str, list[RunRecord]] = {ctx.pattern.name: [] for ctx in ctxs}
    if ctxs:
        for record in all_runs(ctxs[0].lake):  # one read of the runs table per night
            if record.pattern in history:
                history[record.pattern].append(record)

    def failed(ctx: RunContext, exc: Exception) -> None:
        if not isolate:
            raise exc
        message = short_error(exc)
        if errors is not None:
            errors[ctx.pattern.name] = exc
        if not getattr(exc, "logged", False):
            log_failure(ctx, message, log=log)
        echo(f"FAILED {ctx.pattern.name}: {message}")
        rows[ctx.pattern.name] = RunRecord(ctx.run_id, pattern=ctx.pattern.name,
                                           status=FAILED, message=message)

    planned: dict[str, PlannedRun | Exception] = {}
    for ctx in ctxs:
        pattern = ctx.pattern
        try:
            if pattern.source in bad_sources:
                raise ValidationFailed(bad_sources[pattern.source])
            planned[pattern.name] = plan(ctx, rng=(ranges or {}).get(pattern.name),
                                         runs=history[pattern.name])
        except Exception as exc:  # noqa: BLE001 - reported with its pattern below
            planned[pattern.name] = exc
    small = SmallSources(ctxs[0].lake) if ctxs else None  # read once, for every plan
    groups = [] if force_slices else pass_groups([
        PassItem(one.pattern, one.text, one.rng.low, one.rng.high) for one in planned.values()
        if not isinstance(one, Exception) and not one.rng.empty and shareable(one.pattern)])
    by_pass = [pass_samples(group, small) for group in groups]
    if small is not None:
        try:  # the Spark samples of the plans no pass samples, two jobs per source
            sample_many(spark, small.lake, small, [
                (one.pattern, one.rng.low, one.rng.high) for one in planned.values()
                if not isinstance(one, Exception) and not one.rng.empty
                and not any(one.pattern.name in names for names in by_pass)])
        except Exception:  # noqa: BLE001 - each plan then samples alone (and reports it)
            small.samples.clear()
    shared = source_passes(spark, ctxs, planned, small, groups, by_pass, echo)
    try:
        diagnostics = night_diagnostics(spark, ctxs, planned) if ctxs else None
    except Exception:  # noqa: BLE001 - each pattern then counts its own (and reports it)
        diagnostics = None

    def match_one(ctx: RunContext) -> None:
        pattern = ctx.pattern
        if isinstance(planned[pattern.name], Exception):
            raise planned[pattern.name]
        one = planned[pattern.name]
        echo(f"match {pattern.name} ({pattern.matcher}, source {pattern.source}, "
             f"{describe_range(one.rng)}) ...")
        with progress(f"match {pattern.name}", spark, echo):
            stats = match_step(spark, ctx, one, force_slices, shared.get(pattern.name),
                               diagnostics, small)
        for warning in stats.get("warnings") or []:
            echo(f"warning: {pattern.name}: {warning}")

    # the patterns outside a source pass each run a Spark job of their own: up to
    # ``match.parallel_jobs`` of them at once, on threads of this driver (Spark schedules
    # jobs of several threads side by side), while this thread takes the others in order
    alone = [ctx for ctx in ctxs if ctx.pattern.name not in shared
             and not isinstance(planned[ctx.pattern.name], Exception)
             and not planned[ctx.pattern.name].rng.empty]
    workers = min(ctxs[0].profile.parallel_jobs, len(alone)) if ctxs else 0
    with ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="match") as pool:
        running = {ctx.pattern.name: pool.submit(match_one, ctx)
                   for ctx in alone} if workers > 1 else {}
        try:
            for ctx in ctxs:
                try:
                    if ctx.pattern.name in running:
                        running[ctx.pattern.name].result()
                    else:
                        match_one(ctx)
                    matched.append(ctx)
                except Exception as exc:  # noqa: BLE001 - one failing pattern does not stop the others
                    failed(ctx, exc)
        finally:  # a raised error (isolate=False) does not wait for jobs not started
            pool.shutdown(wait=True, cancel_futures=True)
    if matched:
        with progress(f"validate {len(matched)} pattern(s)", spark, echo):
            verdicts = validate_steps(spark, matched)
    for ctx in matched:
        try:
            if isinstance(verdicts[ctx.pattern.name], Exception):
                raise verdicts[ctx.pattern.name]
            with progress(f"publish {ctx.pattern.name}", None, echo):
                rows[ctx.pattern.name] = publish_step(spark, ctx, log=log)
        except Exception as exc:  # noqa: BLE001 - one failing pattern does not stop the others
            failed(ctx, exc)
        reached("run:after-pattern")
    return [rows[ctx.pattern.name] for ctx in ctxs]


def pass_samples(group: list[PassItem], small: SmallSources | None) -> frozenset[str]:
    """The patterns of a pass whose plan samples come from the pass's own events (ZStream
    patterns a Spark sample is needed for; not in a pass that numbers positions, whose
    range the samples' earlier reach would change)."""
    if small is None or numbered(group[0].pattern):
        return frozenset()
    return frozenset(i.pattern.name for i in group
                     if needs_spark_sample(i.pattern, i.low, i.high, small))


def source_passes(spark, ctxs: list[RunContext], planned: dict, small: SmallSources | None,
                  groups: list[list[PassItem]], by_pass: list[frozenset[str]],
                  echo=print) -> dict:
    """Match each of ``groups`` (``source_pass.pass_groups``: patterns that share a source
    and its partition attributes) in one Spark job (``jobs.pipeline.source_pass``):
    {pattern: (result, plan)}. The plans of a pass's patterns are chosen between its
    phase 1 and its phase 2; those named in its ``by_pass`` (``pass_samples``) are
    sampled from the pass's cached events, with no job over the source of their own. A
    pattern whose plan fails runs alone and reports it. A pass that fails is reported and
    its patterns run alone, so that an error stays with its own pattern. ``small``: the
    night's ``SmallSources`` (for the plans)."""
    by_name = {ctx.pattern.name: ctx for ctx in ctxs}
    choices: dict = {}

    def prepare(group: list[PassItem], sampled: frozenset[str], events) -> list[PassItem]:
        """The group's plans (the ``sampled`` ones' samples from the pass's ``events``),
        and the items whose plan was chosen."""
        try:
            sample_from(events, small, [(i.pattern, i.low, i.high) for i in group
                                        if i.pattern.name in sampled])
        except Exception:  # noqa: BLE001 - each plan then samples alone (and reports it)
            pass
        chosen = []
        for item in group:
            name = item.pattern.name
            try:
                choice = run_plan(spark, by_name[name], planned[name], small)
            except Exception:  # noqa: BLE001 - the pattern runs alone and reports it
                continue
            choices[name] = choice
            chosen.append(replace(item, plan_json=choice.to_json() if choice else None))
        return chosen

    out = {}
    profile = ctxs[0].profile if ctxs else None
    for n, (group, sampled) in enumerate(zip(groups, by_pass)):
        source = group[0].pattern.source
        label = f"match {len(group)} patterns of {source} in one pass"
        echo(f"{label}: {', '.join(i.pattern.name for i in group)} ...")
        t0 = time.perf_counter()
        try:
            with progress(label, spark, echo):
                results = run_source_pass(
                    spark, ctxs[0].lake, group, ctxs[0].run_id, n,
                    profile.max_partition_events, profile.max_matches_per_window,
                    profile.memory_budget,
                    limits=f"match.max_matches_per_window and match.memory_budget in "
                           f"conf/pipeline.yaml (profile {profile.name})",
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


def short_error(exc: BaseException) -> str:
    """One line for people: a Spark task's error is reduced to the Python error it
    carries."""
    if isinstance(exc, BrokenTable):
        return str(exc)[:1000]
    text = str(exc)
    broken = broken_in(text)  # a data file of the lake that Spark cannot read: the table
    if broken is not None:
        return str(broken)
    for marker in ("MatchCapExceeded: ", "MatchBudgetExceeded: ", "ArrowInvalid: ",
                   "MemoryError", "Python worker exited unexpectedly"):
        if marker in text:
            tail = text[text.index(marker):].splitlines()[0]
            return tail[:1000]
    if "Traceback (most recent call last)" in text:  # an executor's Python error: its cause
        trace = text[text.rindex("Traceback (most recent call last)"):]
        trace = trace.split("JVM stacktrace")[0]
        causes = [line for line in trace.splitlines()[1:] if line.strip()
                  and not line.startswith((" ", "\t"))]
        if causes:
            return causes[-1][:1000]
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}"[:1000]


def backfill(spark, profile: Profile, start: str, end: str, paths: list[str] | None = None,
             echo=print) -> list[RunRecord]:
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
        rows = []
        for r in catalog.rejected:
            log_failure(ctx, r.message, name=r.name)
            echo(f"FAILED {r.name}: {r.message}")
            rows.append(RunRecord(run_id, pattern=r.name, status=FAILED, message=r.message))
        ctxs = [ctx.for_pattern(path, pattern) for path, pattern in patterns]
        rows += run_patterns(spark, ctxs, {}, echo=echo,
                             ranges={pattern.name: rng for _, pattern in patterns})
        for one in ctxs:
            if any(r.get("pattern") == one.pattern.name and r.get("status") == FAILED
                   for r in rows):
                lake.remove(one.staging)
        finish_run(lake, run_id)
    echo(summary(profile, rows, run_id, None))
    return rows


def describe_range(rng: RunRange) -> str:

    low = "the beginning" if rng.low is None else format_ts(rng.low)
    kind = "full recompute" if rng.full else "incremental"
    return f"{kind}, first events from {low} to {format_ts(rng.high)}"


def summary(profile: Profile, rows: list[RunRecord], run_id: str, seconds: float | None) -> str:
    """The run's table: per pattern its counters, the wall time of match, validate and
    publish (seconds), and its status in the runs table's words (success, failed)."""
    def secs(v) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [f"\nrun {run_id}" + (f" ({seconds:.1f} s)" if seconds is not None else ""),
             f"{'pattern':40} {'matches':>8} {'new':>6} {'events read':>12} {'kept':>8} "
             f"{'late':>5} {'match':>6} {'valid.':>6} {'publ.':>6}  status"]
    for r in rows:
        if r.get("status") == FAILED:
            lines.append(f"{r['pattern']:40} {'-':>8} {'-':>6} {'-':>12} {'-':>8} {'-':>5} "
                         f"{'-':>6} {'-':>6} {'-':>6}  {FAILED}: {r['message'][:80]}")
            continue
        lines.append(f"{r['pattern']:40} {r['matches']:>8} {r['inserted']:>6} {r['events']:>12} "
                     f"{r['events_after_filter']:>8} {r.get('late_events', 0):>5} "
                     f"{secs(r.get('match_seconds')):>6} {secs(r.get('validate_seconds')):>6} "
                     f"{secs(r.get('publish_seconds')):>6}  {r['status']}")
    lake = profile.lake
    lines.append(f"\ntables: {lake}/matches/<pattern>, {lake}/runs, {lake}/events/<source>, "
                 f"{lake}/quarantine/<source> (Delta)")
    return "\n".join(lines)
