"""Commands that read the lake: ``query`` (SQL over its views) and ``runs`` (the run log).
The logic lives in ``jobs.tools``; these handlers parse, call and print. Neither loads a
module of the pipeline (``explain``, which does, is a group of its own)."""

from __future__ import annotations

import sys

from jobs.cli.commands import Registry
from jobs.cli.common import user_errors
from jobs.config import load_profile
from jobs.core.errors import InputError
from jobs.lake.changes import changes, parse_point
from jobs.lake.store import Lake
from jobs.spark.session import build_session
from jobs.spark.sql import check_read_only
from jobs.tools.output_formats import write_rows
from jobs.tools.query import READS, QueryFailed, duckdb_views, run_duckdb, run_spark, spark_views
from jobs.tools.runlog import all_succeeded, check_lines, lines, published, run_rows


@user_errors
def cmd_query(args) -> int:
    """SQL over the lake's views: DuckDB over delta-rs answers without starting Spark;
    ``--engine spark`` (or a query DuckDB cannot run, with ``auto``) uses Spark SQL, the
    dialect of the models."""
    profile = load_profile(args.profile)
    lake = Lake.of_profile(profile)
    limit = args.limit if args.limit is not None else (20 if args.format == "table" else None)
    as_of = parse_point(args.as_of) if args.as_of else None
    if as_of is not None and args.engine == "spark":
        raise InputError("--as-of reads the tables with DuckDB: leave out --engine spark")
    if args.engine in ("auto", "duckdb"):
        if not args.sql:
            print("tables: " + ", ".join(duckdb_views(lake)))
            return 0
        try:
            table = run_duckdb(lake, args.sql, limit, as_of)
        except QueryFailed as exc:
            if args.engine == "duckdb" or as_of is not None:
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
def cmd_changes(args) -> int:
    """What changed in a match table (or a model) since a point: one row per match
    inserted, deleted or updated, with its ``match_id``; a summary line on stderr."""
    lake = Lake.of_profile(load_profile(args.profile))
    path = next((p for p in (lake.matches(args.pattern), lake.model(args.pattern))
                 if lake.exists(p)), None)
    if path is None:
        raise InputError(f"no match table or model {args.pattern!r} in {lake.root} (ses query "
                         "lists the tables)")
    rows, summary = changes(lake, path, parse_point(args.since))
    since = summary["from_version"]
    print(f"{lake.name_of(path)}: since {args.since} (version "
          f"{'-' if since is None else since} -> {summary['to_version']}): "
          f"{summary['inserted']} inserted, {summary['deleted']} deleted, "
          f"{summary['updated']} updated", file=sys.stderr)
    if "pattern_versions" in summary:
        old, new = summary["pattern_versions"]
        print(f"the pattern's version changed ({', '.join(v[:12] for v in old)} -> "
              f"{', '.join(v[:12] for v in new)}): {summary['unchanged']} match(es) bind the "
              "same events as before and are not listed (their match_id changed with the "
              "version)", file=sys.stderr)
    limit = args.limit if args.limit is not None else (50 if args.format == "table" else None)
    write_rows(rows, args.format, sys.stdout, limit=limit)
    return 0


@user_errors
def cmd_runs(args) -> int:
    """The run log, without Spark (delta-rs), and the checks of the runs shown."""
    lake = Lake.of_profile(load_profile(args.profile))
    rows, total = run_rows(lake, args.run_id, args.last)
    if not rows:
        print("no runs logged yet" if not args.run_id else f"no run {args.run_id!r} logged")
        return 0 if args.expect is None else 1
    for line in lines(rows, total):
        print(line)
    checks = check_lines(lake, {r.run_id for r in rows})
    if checks:
        print("\nchecks (freshness; volume anomalies; docs/operations.md, "
              "\"What the night tells you\"):")
        for line in checks:
            print(line)
    if args.expect is not None:
        ok = published(rows)
        if len(ok) < args.expect:
            print(f"error: {len(ok)} of {args.expect} pattern(s) published", file=sys.stderr)
            return 1
        return 0
    return 0 if all_succeeded(rows) else 1


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
    q.add_argument("--as-of", metavar="RUN_ID|VERSION|TIME",
                   help="every table as it was then: as a run left it, at a time (ISO, UTC "
                        "unless given), or one table's version (DuckDB)")

    c = r.add("tables", "changes", "the matches inserted, deleted and updated in a match "
              "table (or a model) since a run, a time or a version (no Spark)", cmd_changes)
    c.add_argument("pattern", help="a pattern (its match table) or a model")
    c.add_argument("--since", required=True, metavar="RUN_ID|TIME|VERSION",
                   help="a run id (the table as that run left it), a time (ISO, UTC unless "
                        "given) or a version of the table")
    c.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (default), csv or json (one object per line)")
    c.add_argument("--limit", type=int, default=None, metavar="N",
                   help="at most N rows (default: 50 for table, every row for csv and json)")

    g = r.add("tables", "runs", "show the run log (no Spark)", cmd_runs)
    g.add_argument("--run-id")
    g.add_argument("--last", type=int, default=20, metavar="N",
                   help="the newest N records (default 20; the table says how many it left out)")
    g.add_argument("--expect", type=int, help="exit 1 unless this many patterns succeeded")
