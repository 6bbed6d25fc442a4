"""Commands that read the lake: ``query`` (SQL over its views), ``runs`` (the run log) and
``explain`` (what a pattern can bind there, its plan, and why a partition did not match).
The logic lives in ``jobs.tools``; these handlers parse, call and print."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.common import spark_for, user_errors
from jobs.config import load_profile, load_sources
from jobs.core.errors import InputError
from jobs.core.plans.planners import ALIASES, PLANNERS
from jobs.core.plans.planners import DEFAULT as DEFAULT_PLAN
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.match_steps import planned_range
from jobs.pipeline.planning import choose_plan, explain_text
from jobs.project.patterns import load_catalog
from jobs.spark.diagnostics import unsatisfiable, variable_counts
from jobs.spark.session import build_session
from jobs.spark.sql import check_read_only
from jobs.tools.explain import describe_range, whole_match_lines, why_not, why_not_events
from jobs.tools.output_formats import write_rows
from jobs.tools.query import READS, QueryFailed, duckdb_views, run_duckdb, run_spark, spark_views
from jobs.tools.runlog import HEADER, all_succeeded, published, run_line, run_rows


@user_errors
def cmd_query(args) -> int:
    """SQL over the lake's views: DuckDB over delta-rs answers without starting Spark;
    ``--engine spark`` (or a query DuckDB cannot run, with ``auto``) uses Spark SQL, the
    dialect of the models."""
    profile = load_profile(args.profile)
    lake = Lake.of_profile(profile)
    limit = args.limit if args.limit is not None else (20 if args.format == "table" else None)
    if args.engine in ("auto", "duckdb"):
        if not args.sql:
            print("tables: " + ", ".join(duckdb_views(lake)))
            return 0
        try:
            table = run_duckdb(lake, args.sql, limit)
        except QueryFailed as exc:
            if args.engine == "duckdb":
                raise
            spark = build_session(profile)
            check_read_only(spark, args.sql, catalogue=True, what=READS)  # says no first
            print(f"note: DuckDB cannot run this query ({exc.args[0][:160]}); running it on "
                  "Spark", file=sys.stderr)
        else:
            if table is not None:
                write_rows(table, args.format, sys.stdout, shown=limit)
            return 0
    spark = build_session(profile)
    if not args.sql:
        print("tables: " + ", ".join(spark_views(spark, lake)))
        return 0
    write_rows(run_spark(spark, lake, args.sql, limit), args.format, sys.stdout, shown=limit)
    return 0


@user_errors
def cmd_runs(args) -> int:
    """The run log, without Spark (delta-rs)."""
    rows = run_rows(Lake.of_profile(load_profile(args.profile)), args.run_id, args.last)
    if not rows:
        print("no runs logged yet")
    print(HEADER)
    for r in rows:
        print(run_line(r))
    if args.expect is not None:
        ok = published(rows)
        if len(ok) < args.expect:
            print(f"error: {len(ok)} of {args.expect} pattern(s) published", file=sys.stderr)
            return 1
        return 0
    return 0 if all_succeeded(rows) else 1


@user_errors
def cmd_explain(args) -> int:
    """What each variable can bind on the lake's events, the plan a run would use, and,
    with --partition or --at, which step of the lazy strategy removed the windows there."""
    profile, spark = spark_for(args)
    path = Path(args.pattern)
    pattern = load_catalog([path]).get(path)
    lake = Lake.of_profile(profile)
    events = lake.read_spark(spark, lake.events(pattern.source))
    print(f"{pattern.name} ({pattern.kind}, matcher {pattern.matcher}) on events_{pattern.source}")
    if pattern.kind == "window":
        print(f"  a window pattern: partition attributes "
              f"{', '.join(pattern.partition_attributes) or 'none'}; "
              f"{'one event at a time' if pattern.sequential else 'whole ranges at once'}")
        if args.partition or args.at:
            raise InputError("explain --partition/--at replays the steps of sequence "
                             "patterns only; for a window pattern run `match` on its events")
        return 0
    counts = variable_counts(events, pattern)
    print("variables (events of the whole table that satisfy the properties):")
    for c in counts:
        print(f"  {c.describe()}")
    for warning in unsatisfiable(counts):
        print(f"warning: {warning}")
    source = load_sources().get(pattern.source)
    for line in whole_match_lines(pattern, dict(source.columns) if source else {}):
        print(line)
    if args.partition or args.at:
        return _why_not(args, pattern, events)
    if pattern.matcher != "zstream":
        print("plan: the SES automaton follows the order of the sets (no plan to choose)")
        return 0
    ctx = RunContext.start(profile, "explain", args.logical_date or date.today().isoformat())
    planned = planned_range(ctx.for_pattern(path, pattern))
    source = load_sources().get(pattern.source)
    kinds = dict(source.columns) if source else {}
    choice = choose_plan(spark, ctx.lake, pattern, planned.rng.low, planned.rng.high,
                         kinds, generator=args.generator)
    print(explain_text(pattern, choice))
    return 0


def _why_not(args, pattern, events) -> int:
    rows, low, high = why_not_events(events, pattern, args.partition, args.at)
    label = ", ".join(filter(None, [args.partition and f"partition {args.partition}",
                                    args.at and f"around {args.at}"]))
    print(f"why not ({label}: {len(rows):,} event(s); {describe_range(low, high)}):")
    if not rows:
        print("  no event of the table is in this partition and time: check the value "
              f"(`query \"SELECT DISTINCT ... FROM events_{pattern.source}\"`)")
        return 0
    for report in why_not(pattern, rows, low, high):
        for line in report.lines():
            print(f"  {line}")
    return 0


def register(r: Registry) -> None:
    q = r.add("tables", "query", "SQL over the lake's tables (DuckDB, or Spark; no SQL: list "
              "them)", cmd_query)
    q.add_argument("sql", nargs="?", help="a SQL query over the lake's views (without one: "
                   "list the views)")
    q.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (default, for people), csv (with a header) or json (one "
                        "object per line)")
    q.add_argument("--limit", type=int, default=None, metavar="N",
                   help="at most N rows (default: 20 for table, every row for csv and json)")
    q.add_argument("--engine", choices=("auto", "duckdb", "spark"), default="auto",
                   help="auto (default): DuckDB over delta-rs, no Spark start; Spark SQL for "
                        "a query DuckDB cannot run. spark: Spark SQL, the models' dialect")

    g = r.add("tables", "runs", "show the run log (no Spark)", cmd_runs)
    g.add_argument("--run-id")
    g.add_argument("--last", type=int, default=20)
    g.add_argument("--expect", type=int, help="exit 1 unless this many patterns succeeded")

    x = r.add("tables", "explain", "what each variable of a pattern can bind on the lake's "
              "events, the plan a run would choose (ZStream), and with --partition or --at "
              "which step removed the windows there", cmd_explain)
    x.add_argument("pattern")
    x.add_argument("--generator", choices=(*PLANNERS, *ALIASES),
                   help="default: the pattern's plan:, else " + DEFAULT_PLAN)
    x.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
    x.add_argument("--partition", metavar="VALUE",
                   help="why not in this partition: the value of the partition attribute "
                        "(ATTR=VALUE,... when there are several)")
    x.add_argument("--at", metavar="TIME",
                   help="why not around this time (ISO 8601): the windows that cover it")
