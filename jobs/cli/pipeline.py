"""The pipeline's user commands: ``run`` (the night), ``ingest``, ``backfill``, ``models``,
``retract`` and ``docs``. Each is one call into ``jobs.pipeline`` on the profile's lake."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.common import spark_for, user_errors
from jobs.config import load_profile
from jobs.lake.locks import lake_lock
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.ingest.steps import ingest_sources
from jobs.pipeline.match.horizons import backfill_range, check_logical_date
from jobs.pipeline.publish.models import models_task
from jobs.pipeline.run import backfill, run_all
from jobs.pipeline.upkeep.health_checks import report_checks, volume_of_sources
from jobs.pipeline.upkeep.reconcile import reconcile
from jobs.pipeline.upkeep.steps import retract_task
from jobs.project.models import ModelError, load_models
from jobs.site.build import build_site
from jobs.spark.session import LazySession
from jobs.status import FAILED, SUCCESS, new_run_id


@user_errors
def cmd_run(args) -> int:
    """Ingest, match, validate and publish every pattern for a logical date."""
    check_logical_date(load_profile(args.profile), args.logical_date)  # before Spark starts
    profile, spark = spark_for(args)
    rows = run_all(spark, profile, args.logical_date, args.pattern or None, args.slices,
                   accept_changes=args.accept_changes or ())
    return 1 if any(r.get("status") == FAILED for r in rows) else 0


@user_errors
def cmd_ingest(args) -> int:
    """Raw landing files into events/<source>."""
    profile = load_profile(args.profile)
    ctx = RunContext.start(profile, args.run_id or new_run_id())
    if args.logical_date:
        ctx = replace(ctx, logical_date=check_logical_date(profile, args.logical_date))
    spark = LazySession(profile)  # started by the first batch with new events
    with lake_lock(profile.lake, f"ingest {ctx.run_id}", profile.lock_dir):
        reconcile(ctx.lake)
        ingested, failed = ingest_sources(spark, ctx, args.source or None,
                                          echo=lambda line: None if line.startswith("FAILED")
                                          else print(line))
        # the volume of new events per source (the DAG's ingest; freshness is checked by
        # each source's task, which it fails)
        report_checks(ctx, volume_of_sources(ctx, ingested), [], command="the DAG's ingest")
    for message in failed.values():
        print(f"error: {message}", file=sys.stderr)
    return 1 if failed else 0


@user_errors
def cmd_backfill(args) -> int:
    """Recompute the matches that start in [start, end)."""
    backfill_range(args.start, args.end)  # a reversed range: one line before Spark starts
    profile, spark = spark_for(args)
    rows = backfill(spark, profile, args.start, args.end, args.pattern or None)
    return 1 if any(r.get("status") == FAILED for r in rows) else 0


@user_errors
def cmd_models(args) -> int:
    """Build, test and publish the SQL models (all, or only those --select names)."""
    if args.list:
        try:
            for m in load_models(select=args.select or None):
                deps = f" (after {', '.join(m.depends_on)})" if m.depends_on else ""
                print(f"{m.name}: reads {', '.join(m.tables)}{deps}")
        except ModelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    profile, spark = spark_for(args)
    rows = models_task(spark, profile, args.select or None)
    return 1 if any(r["status"] != SUCCESS for r in rows) else 0


@user_errors
def cmd_retract(args) -> int:
    """Remove events by id or by landing file; the next run re-matches what they touched."""
    profile = load_profile(args.profile)
    lake = Lake.of_profile(profile)
    row = retract_task(profile, args.source, args.event_id, args.file, args.reason)
    if row.get("already"):
        print(f"already retracted: {row['events']} event(s) of {args.source} by retraction "
              f"{row['retraction_id']} ({row['retracted_at']:%Y-%m-%d %H:%M} UTC); nothing to do")
        return 0
    print(f"retracted {row['events']} event(s) of {args.source} "
          f"({row['ts_min']} .. {row['ts_max']}); logged in {lake.retractions()} "
          f"as {row['retraction_id']}; the next run re-matches what they touched")
    return 0


@user_errors
def cmd_docs(args) -> int:
    """The catalogue site of the profile's lake; no Spark."""
    profile = load_profile(args.profile)
    out = args.out or profile.site
    build_site(Lake.of_profile(profile), Path(out) if out else None)
    return 0


def register(r: Registry) -> None:
    p = r.add("pipeline", "run", "ingest, match and publish every pattern for a logical date",
              cmd_run)
    p.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
    p.add_argument("--pattern", action="append", help="only this pattern file (repeatable)")
    p.add_argument("--slices", action="store_true", help="cut time into slices everywhere")
    p.add_argument("--accept-changes", action="append", metavar="PATTERN",
                   help="publish this pattern's new version even when it would remove most "
                        "of its published matches or a variable can never bind (repeatable)")

    i = r.add("pipeline", "ingest", "raw landing files -> events/<source> Delta tables",
              cmd_ingest)
    i.add_argument("--source", action="append", help="only this source (repeatable)")
    i.add_argument("--logical-date", help="names the ingest run")
    i.add_argument("--run-id", help="the ingest run id (default: from the date and time)")

    b = r.add("pipeline", "backfill", "recompute the matches starting in [start, end)",
              cmd_backfill)
    b.add_argument("--start", required=True, help="YYYY-MM-DD")
    b.add_argument("--end", required=True, help="YYYY-MM-DD (exclusive)")
    b.add_argument("--pattern", action="append", help="only this pattern file (repeatable)")

    md = r.add("pipeline", "models", "build, test and publish the SQL models of models/",
               cmd_models)
    md.add_argument("--select", action="append",
                    help="only this model (repeatable; the tables it reads must exist)")
    md.add_argument("--list", action="store_true",
                    help="list the models in dependency order (no Spark)")

    x = r.add("pipeline", "retract", "remove events by id or by landing file (logged; the "
              "next run re-matches what they touched)", cmd_retract)
    x.add_argument("--source", required=True)
    what = x.add_mutually_exclusive_group(required=True)
    what.add_argument("--event-id", action="append", help="an event id (repeatable)")
    what.add_argument("--file", help="every event of this landing file (as in source_file, "
                                     "e.g. sepsis/sepsis_3.jsonl.gz)")
    x.add_argument("--reason", required=True, help="why (kept in the retractions table)")

    dc = r.add("pipeline", "docs", "build the catalogue site (static HTML and pictures beside "
               "the lake; also after every run)", cmd_docs)
    dc.add_argument("--out", help="the site's folder (default: the profile's site, else site/ "
                                  "beside the lake)")
