"""``ses match``: one pattern over one events file, without Spark (``core.local.files``).
A landing file (a format only ingest reads, or ``--source``) is first typed exactly as
ingest types it (``jobs.landing``). Loads no pipeline, lake, Spark or Delta module."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.terminal import process_seconds, size, write_bytes
from jobs.config import load_sources
from jobs.core.engine import aot
from jobs.core.engine.options import DEFAULT_MEMORY_BUDGET
from jobs.core.errors import InputError, UserError
from jobs.core.language.events import EventFileError
from jobs.core.language.patternfile import PatternError, load_pattern
from jobs.core.local.files import EventsFile, SchemaMismatch, match_file
from jobs.core.local.row_patterns import load_row_pattern, match_events
from jobs.core.local.runner import (
    DEFAULT_MAX_MATCHES,
    MATCHER_CHOICES,
    MatchCapExceeded,
    MatchOptions,
)
from jobs.core.plans.planners import ALIASES, PLANNERS, planner
from jobs.core.plans.planners import DEFAULT as DEFAULT_PLAN
from jobs.core.rowpattern.evaluate import EvaluationError
from jobs.landing.files import typed_file
from jobs.landing.reading import IngestError

RAW_ONLY = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv.gz")  # what only ingest reads


def cmd_match(args) -> int:
    """One pattern over one events file, without Spark: one JSON line per match."""
    if str(args.pattern).endswith(".sql"):
        return _match_row_pattern(args)
    try:
        pattern = load_pattern(args.pattern)
    except PatternError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        events = _events_file(args, pattern)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    window = pattern.kind == "window"
    options = MatchOptions(matcher=args.matcher, strategy=args.strategy,
                           filter=not args.no_filter, partition=not args.no_partition,
                           conditions=not args.no_conditions,
                           plan=None if args.plan in (None, "auto") else args.plan,
                           plan_alpha=args.plan_alpha,
                           max_matches_per_window=args.max_matches_per_window,
                           memory_budget=args.memory_budget)
    kernels = aot.load() if args.matcher != "bruteforce" and not window else None
    loaded_before = kernels.loaded.seconds if kernels else 0.0
    startup = process_seconds()
    try:
        stats = match_file(pattern, events, options, write_bytes)
    except SchemaMismatch as exc:
        print(exc, file=sys.stderr)
        return 2
    except EventFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MatchCapExceeded as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.plan and "plan" in stats:
        name = options.plan or pattern.plan or DEFAULT_PLAN
        what = "Cost_ord" if planner(name).kind == "order" else "Cost_tree"
        print(f"plan ({name}): {stats['plan']}  estimated {what} = "
              f"{stats['plan_cost']:,}", file=sys.stderr)
    if args.stats:
        if window:
            print(json.dumps(stats, ensure_ascii=False), file=sys.stderr)
            return 0
        if kernels is not None:  # loading the kernels apart from matching
            lazy = kernels.loaded.seconds - loaded_before  # first calls (just in time)
            stats["seconds"] = round(max(0.0, stats["seconds"] - lazy), 6)
            stats |= {"kernels": kernels.loaded.mode,
                      "kernel_load_seconds": round(kernels.loaded.seconds, 6),
                      "kernel_fallback_calls": kernels.loaded.fallback_calls}
        stats |= {"startup_seconds": None if startup is None else round(startup, 3)}
        print(json.dumps(stats, ensure_ascii=False), file=sys.stderr)
    return 0


def _match_row_pattern(args) -> int:
    """A ``.sql`` row pattern (MATCH_RECOGNIZE) over one events file: one JSON line per
    match, by the reference row-pattern matcher."""
    try:
        pf = load_row_pattern(args.pattern)
    except PatternError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.matcher not in (None, "bruteforce") or args.plan or args.no_filter or \
            args.no_partition or args.no_conditions or args.strategy != "lazy":
        print("error: --matcher, --plan, --strategy and the --no-* switches apply to YAML "
              "patterns; a .sql pattern runs the row-pattern matcher", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        events = _events_file(args, pf).events()
        n = match_events(pf.query, events, write_bytes)
    except EvaluationError as exc:  # a value SQL refuses: where in the statement
        print(f"error: {args.pattern}:{exc}", file=sys.stderr)
        return 2
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.stats:
        print(json.dumps({"matcher": "row_pattern", "events": len(events), "matches": n,
                          "seconds": round(time.perf_counter() - started, 6)}),
              file=sys.stderr)
    return 0


def _events_file(args, pattern) -> EventsFile:
    """The file ``match`` reads with its id and time columns: as given, or, for a landing
    file (a format only ingest reads, or ``--source``), typed by the source's schema as
    ingest types it (the same ids and times as in the lake), in a temporary Parquet file."""
    import atexit
    import tempfile

    import pyarrow.parquet as pq

    path = Path(args.events)
    name = args.source or (pattern.source if path.name.endswith(RAW_ONLY) else None)
    if name is None:
        return EventsFile(args.events, args.id_column, args.time_column)
    sources = load_sources()
    if name not in sources:
        raise InputError(f"{path}: source {name!r} is not in conf/sources.yaml (sources: "
                         f"{', '.join(sorted(sources))}); name one with --source")
    if not path.is_file():
        raise EventFileError(f"{path}: no such file")
    try:
        table, rejected = typed_file(sources[name], path)
    except IngestError as exc:
        raise EventFileError(str(exc)) from None
    if rejected:
        print(f"note: {len(rejected)} row(s) of {path} would be quarantined by ingest and are "
              f"left out (first: line {rejected[0]['line']}: {rejected[0]['reason']})",
              file=sys.stderr)
    out = tempfile.NamedTemporaryFile(suffix=".parquet", delete=False)
    atexit.register(Path(out.name).unlink, missing_ok=True)
    pq.write_table(table.drop_columns([c for c in ("event_date", "source_file", "ingest_run",
                                                   "ingested_at") if c in table.column_names]),
                   out.name)
    return EventsFile(out.name, "event_id", "ts")


def register(r: Registry) -> None:
    m = r.add("match", "match", "run one pattern over one CSV or Parquet file, without "
              "Spark", cmd_match, profile=False)
    m.add_argument("pattern", help="a pattern file (YAML, or .sql: MATCH_RECOGNIZE)")
    m.add_argument("events", help="events: CSV with a header, Parquet, or a landing file of "
                   "the pattern's source (.jsonl, .jsonl.gz, .csv.gz, ...)")
    m.add_argument("--matcher", choices=MATCHER_CHOICES, default=None,
                   help="default: the pattern's own; bruteforce = the test oracle")
    m.add_argument("--strategy", choices=("lazy", "eager"), default="lazy",
                   help="lazy match windows (default) or eager: ses runs SESExec, zstream "
                        "its tree, over the whole stream")
    m.add_argument("--source", help="type the file by this source of conf/sources.yaml, as "
                   "ingest does (default for .jsonl, .json and .gz landing files: the "
                   "pattern's source)")
    m.add_argument("--id-column", default="event_id")
    m.add_argument("--time-column", default="ts", help="ISO-8601 text or a timestamp type")
    m.add_argument("--no-filter", action="store_true", help="do not filter events (Theorem 1)")
    m.add_argument("--no-partition", action="store_true",
                   help="do not partition by the attributes X (Def. 6)")
    m.add_argument("--no-conditions", action="store_true",
                   help="do not test the necessary match conditions (Theorem 2)")
    m.add_argument("--plan", nargs="?", const="auto", metavar="GENERATOR",
                   choices=("auto", *PLANNERS, *ALIASES),
                   help="zstream: the plan generator (" + ", ".join(PLANNERS) + "; default: "
                        "the pattern's plan:, else " + DEFAULT_PLAN + "); prints the chosen "
                        "tree and its estimated cost on stderr")
    m.add_argument("--plan-alpha", type=float, default=0.0, metavar="A",
                   help="zstream: weight of the latency cost in the plan's cost, Cost_trpt + "
                        "A·Cost_lat (default 0: throughput only)")
    m.add_argument("--max-matches-per-window", type=int, default=DEFAULT_MAX_MATCHES,
                   metavar="N", help="zstream: cap on partial matches per window "
                                     f"(default {DEFAULT_MAX_MATCHES:,})")
    m.add_argument("--memory-budget", type=size, default=DEFAULT_MEMORY_BUDGET, metavar="SIZE",
                   help="memory a matcher may use for instances, matches and events, e.g. "
                        "512MB (default 2GB)")
    m.add_argument("--stats", action="store_true", help="print counters as JSON on stderr")
