"""The internal step commands: what the nightly DAG runs as its tasks (``run-pattern``,
``match-job``, ``validate-run``, ``validate-events``, ``publish``) and the warm session
that serves them (``serve``). ``run`` does all of them for a user."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

from jobs.cli.common import Registry, pattern_step, spark_for, user_errors
from jobs.ops.session import serve
from jobs.pipeline.context import RunContext
from jobs.pipeline.run import (
    ValidationFailed,
    match_step,
    plan,
    publish_step,
    run_pattern,
    staged_run,
    summary,
    validate_events_step,
    validate_step,
)
from jobs.spark.session import build_session


@user_errors
@pattern_step
def cmd_match_job(args, ctx) -> int:
    """One pattern on Spark into staging (phases 1 and 2)."""
    spark = build_session(ctx.profile)
    ctx = replace(ctx, logical_date=ctx.logical_date or date.today().isoformat())
    stats = match_step(spark, ctx, plan(ctx), args.slices)
    print(json.dumps(stats, ensure_ascii=False))
    return 0


@user_errors
@pattern_step
def cmd_run_pattern(args, ctx) -> int:
    """Match, validate and publish one pattern in one Spark application (the DAG's task)."""
    ctx = replace(ctx, logical_date=ctx.logical_date or date.today().isoformat())
    row = run_pattern(build_session(ctx.profile), ctx, args.slices)
    print(summary(ctx.profile, [row], ctx.run_id, None))
    return 0


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
    staged = staged_run(ctx)  # a run that may not be published fails before Spark starts
    row = publish_step(build_session(ctx.profile), ctx, staged)
    print(f"published {row['pattern']}: {row['inserted']} new match(es), "
          f"{row['deleted'] or 0} removed, {row['matches']} in this run's range")
    return 0


def register(r: Registry, main) -> None:
    """``main`` runs one step's argv: ``serve`` hands it to the session server."""
    for name, help_text, func in (
            ("run-pattern", "match, validate and publish one pattern in one Spark application "
                            "(the nightly DAG's task per pattern)", cmd_run_pattern),
            ("match-job", "one pattern on Spark into staging (phases 1 and 2)", cmd_match_job)):
        j = r.add("internal", name, help_text, func)
        j.add_argument("pattern")
        j.add_argument("--run-id", required=True)
        j.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
        j.add_argument("--slices", action="store_true", help="cut time into slices even with "
                                                             "partition attributes")

    w = r.add("internal", "validate-run", "Great Expectations on a staged run (before "
              "publish)", cmd_validate_run)
    w.add_argument("pattern")
    w.add_argument("--run-id", required=True)

    e = r.add("internal", "validate-events", "Great Expectations on a source's events",
              cmd_validate_events)
    e.add_argument("--source", required=True)
    e.add_argument("--ingest-run", help="only the events of this ingest run")

    u = r.add("internal", "publish", "staged matches -> matches/<pattern>, and the runs log",
              cmd_publish)
    u.add_argument("pattern")
    u.add_argument("--run-id", required=True)

    def cmd_serve(args) -> int:
        """One warm Spark application for the steps of a DAG run (``jobs.ops.session``)."""
        return serve(Path(args.socket), main, args.idle, args.profile)

    sv = r.add("internal", "serve", "run the steps sent to SOCKET in one warm Spark "
               "application (the nightly DAG's session; stops when idle)", cmd_serve)
    sv.add_argument("--socket", required=True, help="the Unix socket to listen on")
    sv.add_argument("--idle", type=float, default=900.0,
                    help="stop after this many seconds without a step (default 900)")
