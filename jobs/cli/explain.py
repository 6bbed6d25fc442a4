"""``explain``: what a pattern can bind on the lake's events, its plan, and why a partition
did not match (``jobs.tools.explain``). A group of its own: it loads the pipeline's
planning, which ``query`` and ``runs`` never need."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.common import spark_for, user_errors
from jobs.config import load_sources
from jobs.core.local.row_patterns import explain_lines, load_row_pattern
from jobs.core.plans.planners import ALIASES, PLANNERS
from jobs.core.plans.planners import DEFAULT as DEFAULT_PLAN
from jobs.tools.explain import explain_pattern
from jobs.tools.funnel import funnel_lines, funnel_of, stored_funnel


@user_errors
def cmd_explain(args) -> int:
    """What each variable can bind on the lake's events, the plan a run would use, and,
    with --partition or --at, which step of the lazy strategy removed the windows there.
    A ``.sql`` row pattern: how it is matched, without Spark."""
    if str(args.pattern).endswith(".sql"):
        pf = load_row_pattern(args.pattern)
        source = load_sources().get(pf.source)
        for line in explain_lines(pf, dict(source.columns) if source else {}):
            print(line)
        return 0
    profile, spark = spark_for(args)
    for line in explain_pattern(spark, profile, Path(args.pattern), args.partition, args.at,
                                args.logical_date, args.generator):
        print(line)
    return 0


@user_errors
def cmd_funnel(args) -> int:
    """How many partitions and windows reached each step of a pattern, and what stopped
    the others (docs/semantics.md, "Funnels"); as JSON, a list of the steps in order."""
    profile, spark = spark_for(args)
    if args.run:  # a night's funnel from the funnels table: no Spark
        pattern, rows = stored_funnel(profile, args.pattern, args.run)
    else:
        pattern, rows = funnel_of(spark, profile, args.pattern, args.partition)
    if args.format == "json":
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        for line in funnel_lines(pattern, rows):
            print(line)
    return 0


def register(r: Registry) -> None:
    x = r.add("explain", "explain", "what each variable of a pattern can bind on the lake's "
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
                   help="why not on this day (2013-11-23: the windows that cover any time of it) "
                        "or at this time (ISO 8601: the windows that cover it)")
    f = r.add("explain", "funnel", "how many partitions and windows reached each step of a "
              "pattern on the lake's events, and what stopped the others", cmd_funnel)
    f.add_argument("pattern", help="a pattern's name (patterns/NAME.yaml) or its file")
    f.add_argument("--partition", metavar="VALUE",
                   help="one partition only: the value of the partition attribute "
                        "(ATTR=VALUE,... when there are several)")
    f.add_argument("--run", metavar="RUN_ID",
                   help="the funnel a night recorded (the funnels table; 'latest': the "
                        "newest): the windows that started in that night's range")
    f.add_argument("--format", choices=("table", "json"), default="table")
