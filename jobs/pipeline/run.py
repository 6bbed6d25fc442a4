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
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from jobs.config import Profile, load_sources
from jobs.core.errors import InputError, UserError
from jobs.core.events import format_ts
from jobs.core.pattern import Pattern
from jobs.failpoints import reached
from jobs.lake.locks import lake_lock
from jobs.lake.stats import update_stats
from jobs.lake.table_docs import document_match_table
from jobs.pipeline.context import RunContext
from jobs.pipeline.horizons import RunRange, backfill_range, plan_range
from jobs.pipeline.ingest import describe, ingest
from jobs.pipeline.models import run_models
from jobs.pipeline.phase1 import run_match_job
from jobs.pipeline.planning import choose_plan, needs_replan
from jobs.pipeline.publish import log_run, previous_runs, publish
from jobs.pipeline.quality import validate_events, validate_events_frame, validate_matches
from jobs.pipeline.reconcile import finish_run, reconcile, start_run
from jobs.pipeline.retract import reopened_low
from jobs.progress import progress
from jobs.project.models import ModelError, models_folder
from jobs.project.patterns import PatternCatalog, load_catalog
from jobs.runrecord import BACKFILL, COUNTERS, RunRecord
from jobs.site.build import build_site
from jobs.spark.diagnostics import unsatisfiable, variable_counts
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


def events_gate(spark, ctx: RunContext):
    """The events suite on a typed batch before it is committed (``ingest``'s gate)."""
    def gate(source, events) -> None:

        outcome = validate_events_frame(spark, ctx.lake, source, events,
                                        ctx.profile.ts_range())
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
    gate = events_gate(spark, ctx) if spark is not None else None
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
        results.append(r)
        if spark is not None:
            if patterns is None:  # the whole catalogue's: stats serve every pattern
                patterns = [p for _, p in pipeline_catalog()[1]]
            stats_step(spark, ctx, name, source, patterns, echo)
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


def plan(ctx: RunContext, rng: RunRange | None = None) -> PlannedRun:
    """The run's start range: after the previous run's horizon, and back to where
    retractions since that run could change matches."""
    pattern = ctx.pattern
    text = ctx.path.read_text(encoding="utf-8")
    if rng is None:
        runs = previous_runs(ctx.lake, pattern.name)
        rng = plan_range(ctx.logical_date, pattern.tau, ctx.profile.allowed_lateness,
                         pattern.version, runs)
        ok = [r["started_at"] for r in runs if r["status"] == SUCCESS
              and r["pattern_version"] == pattern.version]
        reopen = reopened_low(ctx.lake, pattern.source, max(ok) if ok else None, pattern.tau)
        if reopen is not None and rng.low is not None and reopen < rng.low:
            rng = RunRange(reopen, rng.high, rng.full)
        if not rng.full and not ctx.lake.exists(ctx.lake.matches(pattern.name)):
            rng = RunRange(None, rng.high, True)  # the table is gone: recompute it in full
    return PlannedRun(ctx.path, pattern, text, rng)


def late_events(spark, ctx: RunContext, planned: PlannedRun) -> int:
    """Events that arrived after the previous run of this pattern although their start
    range was already closed (ts < low): counted in the run log, never silently dropped."""
    from pyspark.sql import functions as F


    lake = ctx.lake
    runs = [r for r in previous_runs(lake, planned.pattern.name)
            if r["pattern_version"] == planned.pattern.version and r["status"] == SUCCESS]
    if planned.rng.low is None or not runs:
        return 0
    last_start = max(r["started_at"] for r in runs)
    df = lake.read_spark(spark, lake.events(planned.pattern.source))
    df = df.where((F.col("ingested_at") > F.lit(last_start))
                  & (F.col("ts") < F.lit(datetime.fromtimestamp(planned.rng.low / 1e9,
                                                                  tz=timezone.utc))))
    keep = filter_column(planned.pattern)
    if keep is not None:
        df = df.where(keep)
    return df.count()


def run_plan(spark, ctx: RunContext, planned: PlannedRun):
    """The one plan of a ZStream pattern for this run (``jobs.pipeline.planning``), chosen on the
    driver; None for the SES automaton (it follows the sets' order)."""

    pattern = planned.pattern
    if pattern.matcher != "zstream":
        return None
    source = load_sources().get(pattern.source)
    kinds = dict(source.columns) if source else {}
    observed = needs_replan(previous_runs(ctx.lake, pattern.name), pattern.version)
    return choose_plan(spark, ctx.lake, pattern, planned.rng.low, planned.rng.high, kinds,
                       observed=observed)


def match_step(spark, ctx: RunContext, planned: PlannedRun, force_slices: bool = False) -> dict:
    """Phase 1 + 2 on Spark into staging; the range, counters and the step's wall time
    (``match_seconds``) go to ``_stats.json``."""
    profile = ctx.profile
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    if planned.rng.empty:
        stats = {**dict.fromkeys(COUNTERS, 0), "seconds": 0.0}
        staging = ctx.staging
    else:
        choice = run_plan(spark, ctx, planned)
        result = run_match_job(spark, planned.pattern, planned.text, ctx.lake, ctx.run_id,
                               planned.rng.low, planned.rng.high, profile.slice_length,
                               profile.max_partition_events, profile.max_matches_per_window,
                               force_slices=force_slices, memory_budget=profile.memory_budget,
                               limits=f"match.max_matches_per_window and match.memory_budget "
                                      f"in conf/pipeline.yaml (profile {profile.name})",
                               plan_json=choice.to_json() if choice else None)
        staging, stats = result.staging, result.stats
        if choice is not None:
            stats.update(plan=choice.text, plan_generator=choice.generator,
                         estimated_pm=round(choice.estimated, 6),
                         actual_pm=round(stats.get("work", 0) / max(stats.get("matcher_calls", 0), 1), 6),
                         replanned=choice.replanned or None)
    stats["late_events"] = late_events(spark, ctx, planned)
    stats["warnings"] = match_warnings(spark, ctx, planned, stats)
    stats.update(match_seconds=round(time.perf_counter() - t0, 3), low=planned.rng.low, high=planned.rng.high, full=planned.rng.full,
                 logical_date=ctx.logical_date, started_at=started.isoformat(),
                 pattern_version=planned.pattern.version)
    ctx.lake.write_text(f"{staging}/_stats.json", json.dumps(stats))
    return stats


def match_warnings(spark, ctx: RunContext, planned: PlannedRun, stats: dict) -> list[str]:
    """What a pattern's author should hear about a full recompute (a new or changed
    pattern): variables no event of the source can bind, and zero matches."""

    if not planned.rng.full:
        return []
    pattern = planned.pattern
    out = []
    events_path = ctx.lake.events(pattern.source)
    if pattern.kind != "window" and ctx.lake.exists(events_path):
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
    """The matches suite on a staged run; the outcome (and the step's wall time) goes to
    ``_validation.json``."""

    t0 = time.perf_counter()
    pattern, run_id = ctx.pattern, ctx.run_id
    stats = _staged_stats(ctx)
    if stats.get("matches", 0) == 0:
        outcome = {"success": True, "failed": [], "docs": None, "summary": "no matches to check"}
    else:
        o = validate_matches(spark, ctx.lake, pattern, run_id, stats["low"], stats["high"])
        outcome = {"success": o.success, "failed": o.failed, "docs": o.docs,
                   "summary": o.describe()}
    outcome["seconds"] = round(time.perf_counter() - t0, 3)
    ctx.lake.write_text(f"{ctx.staging}/_validation.json", json.dumps(outcome))
    if not outcome["success"]:
        exc = ValidationFailed(f"{pattern.name}: {outcome['summary']}")
        log_failure(ctx, str(exc), logical_date=stats.get("logical_date", ""))
        exc.logged = True
        raise exc
    return outcome


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


def publish_step(spark, ctx: RunContext, staged: tuple[dict, dict] | None = None
                 ) -> RunRecord:
    """Publish a staged, validated run (``staged``: its ``staged_run``, when the caller
    checked it already) and append its record to the runs log."""
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
        outcome = {"inserted": 0, "deleted": 0}
    else:
        outcome = publish(spark, lake, pattern, run_id, staging, rng, run_row=row.as_row())
        reached("publish:after-merge")
    row.inserted, row.deleted = outcome["inserted"], outcome["deleted"]
    row.seconds = float(stats.get("seconds", 0.0)) + time.perf_counter() - t0
    row.publish_seconds = round(time.perf_counter() - t0, 3)
    row.finished_at = datetime.now(timezone.utc)
    log_run(lake, row)
    if lake.exists(lake.matches(pattern.name)):  # after the runs row: reconcile reads the merge
        document_match_table(lake, pattern)
    lake.remove(staging)
    return row


def log_failure(ctx: RunContext, message: str, name: str | None = None,
                logical_date: str | None = None) -> None:
    """A failed row in the run log for the context's pattern (None: a file that did not
    load; ``name`` then names it)."""
    now = datetime.now(timezone.utc)
    pattern = ctx.pattern
    log_run(ctx.lake, RunRecord(
        ctx.run_id, run_kind=ctx.run_kind,
        logical_date=(ctx.logical_date if logical_date is None else logical_date) or None,
        pattern=pattern.name if pattern else name,
        pattern_version=pattern.version if pattern else None,
        source=pattern.source if pattern else None,
        matcher=pattern.matcher if pattern else None, status=FAILED,
        message=message[:2000], started_at=now, finished_at=now))


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
    logical_date = logical_date or date.today().isoformat()
    ctx = RunContext.start(profile, new_run_id(), logical_date)
    run_id, lake = ctx.run_id, ctx.lake
    t0 = time.perf_counter()
    with lake_lock(profile.lake, f"run {run_id}", profile.lock_dir):
        reconcile(lake, echo)
        catalog, patterns = pipeline_catalog(paths)
        start_run(lake, run_id, logical_date,
                  [{"pattern": p.name, "pattern_version": p.version, "source": p.source,
                    "matcher": p.matcher} for _, p in patterns])
        rows = []
        for r in catalog.rejected:
            log_failure(ctx, r.message, name=r.name)
            echo(f"FAILED {r.name}: {r.message}")
            rows.append(RunRecord(run_id, pattern=r.name, status=FAILED, message=r.message))
        ingested, bad_sources = ingest_sources(spark, ctx, sorted({p.source for _, p in patterns}),
                                               echo)
        for path, pattern in patterns:
            rows.append(_run_pattern(spark, ctx.for_pattern(path, pattern), bad_sources,
                                     force_slices, echo))
            reached("run:after-pattern")
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


def run_pattern(spark, ctx: RunContext, force_slices: bool = False, echo=print) -> RunRecord:
    """Match, validate and publish one pattern in one go (``run`` does it per pattern, the
    DAG's one task per pattern too): its matches are published as soon as they pass."""
    pattern = ctx.pattern
    planned = plan(ctx)
    echo(f"match {pattern.name} ({pattern.matcher}, source {pattern.source}, "
         f"{describe_range(planned.rng)}) ...")
    with progress(f"match {pattern.name}", spark, echo):
        stats = match_step(spark, ctx, planned, force_slices)
    for warning in stats.get("warnings") or []:
        echo(f"warning: {pattern.name}: {warning}")
    with progress(f"validate {pattern.name}", spark, echo):
        validate_step(spark, ctx)
    with progress(f"publish {pattern.name}", None, echo):
        return publish_step(spark, ctx)


def _run_pattern(spark, ctx: RunContext, bad_sources, force_slices, echo) -> RunRecord:
    pattern = ctx.pattern
    try:
        if pattern.source in bad_sources:
            raise ValidationFailed(bad_sources[pattern.source])
        return run_pattern(spark, ctx, force_slices, echo)
    except Exception as exc:  # noqa: BLE001 - one failing pattern does not stop the others
        message = short_error(exc)
        if not getattr(exc, "logged", False):
            log_failure(ctx, message)
        echo(f"FAILED {pattern.name}: {message}")
        return RunRecord(ctx.run_id, pattern=pattern.name, status=FAILED, message=message)


def short_error(exc: BaseException) -> str:
    """One line for people: a Spark task's error is reduced to the Python error it
    carries."""
    text = str(exc)
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
    """Recompute the matches whose first event lies in [start, end) for each pattern."""
    ctx = RunContext.start(profile, new_run_id(), run_kind=BACKFILL)
    run_id = ctx.run_id
    rows = []
    with lake_lock(profile.lake, f"backfill {run_id}", profile.lock_dir):
        reconcile(ctx.lake, echo)
        catalog, patterns = pipeline_catalog(paths)
        for r in catalog.rejected:
            echo(f"FAILED {r.name}: {r.message}")
            rows.append(RunRecord(run_id, pattern=r.name, status=FAILED, message=r.message))
        for path, pattern in patterns:
            one = ctx.for_pattern(path, pattern)
            planned = plan(one, rng=backfill_range(start, end))
            with progress(f"match {pattern.name}", spark, echo):
                match_step(spark, one, planned)
            with progress(f"validate {pattern.name}", spark, echo):
                validate_step(spark, one)
            rows.append(publish_step(spark, one))
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
