"""The internal step commands: what the nightly DAG runs as its tasks (``run-patterns``,
one per source; ``run-pattern``, ``match-job``, ``validate-run``, ``validate-events``,
``publish`` for one pattern) and the warm session that serves them (``serve``). ``run``
does all of them for a user."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.common import spark_for, user_errors
from jobs.config import load_profile
from jobs.core.errors import EXIT_INPUT
from jobs.core.language.patternfile import PatternError
from jobs.lake.locks import pattern_lock
from jobs.lake.store import Lake
from jobs.ops.session import serve
from jobs.pipeline.context import RunContext
from jobs.pipeline.ingest.steps import validate_events_step
from jobs.pipeline.match.horizons import check_logical_date
from jobs.pipeline.match.steps import match_step, planned_range
from jobs.pipeline.outcome import exit_code, short_error
from jobs.pipeline.publish.steps import (
    log_failure,
    publish_step,
    publishable,
    staged_of,
    validate_step,
)
from jobs.pipeline.report import summary
from jobs.pipeline.run import run_pattern, run_task
from jobs.pipeline.validate.quality import ValidationFailed
from jobs.project.patterns import load_catalog
from jobs.spark.session import LazySession, build_session


def pattern_step(step):
    """A per-pattern step (match-job, validate-run, publish, run-pattern) on its run
    context: under the pattern's lock, with a failed row in the run log when it fails."""
    def wrapper(args) -> int:
        profile = load_profile(args.profile)
        path = Path(args.pattern)
        catalog = load_catalog([path])
        rejected = [r for r in catalog.rejected if r.path.resolve() == path.resolve()]
        pattern = None if rejected else catalog.get(path)
        name = rejected[0].name if rejected else pattern.name
        given = getattr(args, "logical_date", None)
        ctx = RunContext(profile, Lake.of_profile(profile), args.run_id,
                         check_logical_date(profile, given) if given else "", path, pattern)
        with pattern_lock(profile.lake, name, f"{args.command} {name} {args.run_id}",
                          profile.lock_dir):
            try:
                if rejected:
                    raise PatternError(list(rejected[0].problems))
                return step(args, ctx)
            except Exception as exc:
                log_failure(ctx, short_error(exc), name=name)
                raise
    wrapper.__doc__ = step.__doc__
    return wrapper


@user_errors
@pattern_step
def cmd_match_job(args, ctx) -> int:
    """One pattern on Spark into staging (phases 1 and 2)."""
    spark = build_session(ctx.profile)
    ctx = replace(ctx, logical_date=ctx.logical_date or date.today().isoformat())
    staged = match_step(spark, ctx, planned_range(ctx), args.slices)
    staged.save(ctx.lake)  # for the ``validate-run`` and ``publish`` step commands
    print(json.dumps(dict(staged.stats), ensure_ascii=False))
    return 0


@user_errors
@pattern_step
def cmd_run_pattern(args, ctx) -> int:
    """Match, validate and publish one pattern in one Spark application."""
    ctx = replace(ctx, logical_date=ctx.logical_date or date.today().isoformat())
    outcome = run_pattern(build_session(ctx.profile), ctx, args.slices)
    print(summary(ctx.profile, [outcome], ctx.run_id, None))
    if not outcome.ok:
        print(f"error: {outcome.message}", file=sys.stderr)
    return exit_code([outcome])


@user_errors
def cmd_run_patterns(args) -> int:
    """Match, validate and publish several pattern files together in one Spark application:
    one pass per source and one validation for them all, as ``run`` does after its ingest
    (the nightly DAG's task per source; ``pipeline.run.run_task``). Exit 0 when every
    pattern was published, 2 when those that failed cannot be mended by a retry (their
    file, their events, their suite, their limits), 1 otherwise."""
    profile = load_profile(args.profile)
    outcomes, stale = run_task(lambda: LazySession(profile), profile, args.run_id,
                               args.logical_date, [Path(p) for p in args.patterns],
                               args.slices, accept_changes=args.accept_changes or (),
                               lineage_parent=args.lineage_parent)
    print(summary(profile, outcomes, args.run_id, None))
    failed = [o for o in outcomes if not o.ok]
    if failed:
        rest = len(outcomes) - len(failed)
        print(f"error: {len(failed)} of {len(outcomes)} pattern(s) failed"
              + (f", the other {rest} were published" if rest else ""), file=sys.stderr)
        for o in failed:  # each whole, on a line of its own: its file, line and hint
            print(f"error: {o.pattern}: {o.message}", file=sys.stderr)
    for row in stale:  # the patterns were run; the source's data is stale: a final failure
        print(f"error: freshness: {row['message']}", file=sys.stderr)
    code = exit_code(outcomes)
    return code if code or not stale else EXIT_INPUT


@user_errors
@pattern_step
def cmd_validate_run(args, ctx) -> int:
    """Great Expectations on a staged run (before publish)."""
    try:
        outcome = validate_step(build_session(ctx.profile), ctx)
    except ValidationFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(outcome["summary"])
    return 0


@user_errors
def cmd_validate_events(args) -> int:
    """Great Expectations on a source's events."""
    profile, spark = spark_for(args)
    ctx = RunContext.start(profile, args.ingest_run or "")
    try:
        print(validate_events_step(spark, ctx, args.source, args.ingest_run).describe())
    except ValidationFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


@user_errors
@pattern_step
def cmd_publish(args, ctx) -> int:
    """Staged matches into matches/<pattern>, and the runs log."""
    staged = publishable(ctx, staged_of(ctx))  # one that may not be published fails
    # before Spark starts
    row = publish_step(build_session(ctx.profile), ctx, staged)
    print(f"published {row['pattern']}: {row['inserted']} new match(es), "
          f"{row['deleted'] or 0} removed, {row['matches']} in this run's range")
    return 0


def register(r: Registry, main) -> None:
    """``main`` runs one step's argv: ``serve`` hands it to the session server."""
    for name, help_text, func in (
            ("run-pattern", "match, validate and publish one pattern in one Spark application",
             cmd_run_pattern),
            ("match-job", "one pattern on Spark into staging (phases 1 and 2)", cmd_match_job)):
        j = r.add("steps", name, help_text, func)
        j.add_argument("pattern")
        j.add_argument("--run-id", required=True)
        j.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
        j.add_argument("--slices", action="store_true", help="cut time into slices even with "
                                                             "partition attributes")

    g = r.add("steps", "run-patterns", "match, validate and publish several pattern files "
              "together: one pass per source (the nightly DAG's task per source)",
              cmd_run_patterns)
    g.add_argument("patterns", nargs="+", metavar="pattern")
    g.add_argument("--run-id", required=True)
    g.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
    g.add_argument("--accept-changes", action="append", metavar="PATTERN",
                   help="publish this pattern's new version however much of its table it "
                        "removes (repeatable)")
    g.add_argument("--lineage-parent", metavar="NAMESPACE/JOB/RUN_ID",
                   help="the OpenLineage run these patterns' events belong to (the DAG's "
                        "task, from the OpenLineage provider)")
    g.add_argument("--slices", action="store_true", help="cut time into slices even with "
                                                         "partition attributes")

    w = r.add("steps", "validate-run", "Great Expectations on a staged run (before "
              "publish)", cmd_validate_run)
    w.add_argument("pattern")
    w.add_argument("--run-id", required=True)

    e = r.add("steps", "validate-events", "Great Expectations on a source's events",
              cmd_validate_events)
    e.add_argument("--source", required=True)
    e.add_argument("--ingest-run", help="only the events of this ingest run")

    u = r.add("steps", "publish", "staged matches -> matches/<pattern>, and the runs log",
              cmd_publish)
    u.add_argument("pattern")
    u.add_argument("--run-id", required=True)

    def cmd_serve(args) -> int:
        """One warm Spark application for the steps of a DAG run (``jobs.ops.session``)."""
        return serve(Path(args.socket), main, args.idle, args.profile)

    sv = r.add("steps", "serve", "run the steps sent to SOCKET in one warm Spark "
               "application (the nightly DAG's session; stops when idle)", cmd_serve)
    sv.add_argument("--socket", required=True, help="the Unix socket to listen on")
    sv.add_argument("--idle", type=float, default=900.0,
                    help="stop after this many seconds without a step (default 900)")
