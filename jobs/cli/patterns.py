"""Commands on pattern files, without a lake: ``validate``, ``new-pattern`` and ``match``
(one pattern over one events file, the engine alone)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.common import (
    pattern_files,
    process_seconds,
    size,
    spark_for,
    user_errors,
    write_bytes,
)
from jobs.config import ConfigError, check_pipeline_file, current_project, load_sources
from jobs.config.references import reference_files
from jobs.config.suites import check_suites
from jobs.core.engine.columns import read_columns
from jobs.core.engine.marks import with_marks
from jobs.core.engine.options import DEFAULT_MEMORY_BUDGET
from jobs.core.engine.runtime import MatchStats, aot, compile_pattern
from jobs.core.engine.window_matcher import execute_windows, json_rows, sorted_batches
from jobs.core.errors import InputError, UserError
from jobs.core.language.events import EventFileError, read_events
from jobs.core.language.patternfile import PatternError, check_schema, load_pattern
from jobs.core.language.window import oracle_windows
from jobs.core.local.runner import (
    DEFAULT_MAX_MATCHES,
    MATCHER_CHOICES,
    MatchCapExceeded,
    MatchOptions,
    run,
    write_matches,
)
from jobs.core.plans.planners import ALIASES, PLANNERS, planner
from jobs.core.plans.planners import DEFAULT as DEFAULT_PLAN
from jobs.lake.store import Lake
from jobs.pipeline.ingest import IngestError, typed_file
from jobs.project.models import ModelError, load_model, models_folder
from jobs.project.patterns import lint
from jobs.spark.diagnostics import unsatisfiable, variable_counts
from jobs.tools.scaffold import scaffold

RAW_ONLY = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv.gz")  # what only ingest reads


def cmd_validate(args) -> int:
    """Lint pattern files: schema, safe YAML, examples; the keys of conf/pipeline.yaml and
    the expectation suites, the reference tables; with --data, on the lake too."""
    try:
        check_pipeline_file()
        check_suites()
        reference_files()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = pattern_files(args.paths or [str(current_project().patterns)])
    if not files:
        print(f"no pattern files (*.yaml, *.yml) in {' '.join(args.paths or ['patterns/'])}",
              file=sys.stderr)
        return 1
    sources_file = Path(args.sources) if args.sources else current_project().sources_file
    catalog, problems, n_examples = lint(files, sources_file)
    models = [] if args.paths else sorted(models_folder().glob("*.sql"))
    model_problems = [str(exc) for exc in map(_model_problem, models) if exc is not None]
    for p in [*problems, *model_problems]:
        print(p, file=sys.stderr)
    if problems or model_problems:
        print(f"{len(problems)} problem(s) in {len(files)} pattern file(s)"
              + (f", {len(model_problems)} in {len(models)} model(s)" if models else ""),
              file=sys.stderr)
        return 1
    print(f"ok: {len(files)} pattern file(s) valid, {n_examples} example(s) pass"
          + (f"; {len(models)} model(s) valid" if models else ""))
    if args.data:
        return _validate_data(args, catalog.patterns)
    return 0


def _model_problem(path: Path) -> ModelError | None:
    """What makes a model file unloadable: not one query, a bad name or tests file."""
    try:
        load_model(path)
    except ModelError as exc:
        return exc
    return None


@user_errors
def _validate_data(args, patterns) -> int:
    """Warnings from the lake's events: variables no event can bind."""
    profile, spark = spark_for(args)
    lake = Lake.of_profile(profile)
    n = 0
    for f, pattern in patterns:
        if pattern.kind == "window":
            continue
        if not lake.exists(lake.events(pattern.source)):
            print(f"warning: {f}: no events of source {pattern.source!r} in {profile.lake} "
                  "yet (run `make run` or `ses ingest`): not checked on data")
            continue
        for warning in unsatisfiable(variable_counts(lake.read_spark(spark, lake.events(
                pattern.source)), pattern)):
            print(f"warning: {f}: {warning}")
            n += 1
    print(f"data: {n} warning(s) on the events of {profile.lake}")
    return 0


def cmd_new_pattern(args) -> int:
    """Write patterns/NAME.yaml to start from."""
    try:
        path = scaffold(args.name, args.source)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {current_project().relative(path)}: edit its "
          "conditions and examples, then `make validate`")
    return 0


def cmd_match(args) -> int:
    """One pattern over one events file, without Spark: one JSON line per match."""
    try:
        pattern = load_pattern(args.pattern)
    except PatternError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        events, id_column, time_column = _events_file(args, pattern)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if pattern.kind == "window":
        return _match_windows(args, pattern, events, id_column, time_column)
    compiled = compile_pattern(pattern)
    kernels = aot.load() if args.matcher != "bruteforce" else None
    loaded_before = kernels.loaded.seconds if kernels else 0.0
    startup = process_seconds()
    read_started = time.perf_counter()
    try:
        marks = getattr(pattern, "marks_needed", False)  # computed, not read: facts, marks
        cols, schema = read_columns(events, pattern.stored_attributes if marks
                                    else compiled.attributes,
                                    id_column=id_column, time_column=time_column)
    except EventFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    read_seconds = time.perf_counter() - read_started
    if cols.n:
        problems = check_schema(pattern, schema)
        if problems:
            for p in problems:
                print(f"{p} [against {events}]", file=sys.stderr)
            return 2
    if getattr(pattern, "marks_needed", False) and args.matcher != "bruteforce":
        pattern, cols = with_marks(pattern, cols)  # the file is the whole history
        compiled = compile_pattern(pattern, cols.names)
    options = MatchOptions(matcher=args.matcher, strategy=args.strategy,
                           filter=not args.no_filter, partition=not args.no_partition,
                           conditions=not args.no_conditions,
                           plan=None if args.plan in (None, "auto") else args.plan,
                           plan_alpha=args.plan_alpha,
                           max_matches_per_window=args.max_matches_per_window,
                           memory_budget=args.memory_budget)
    if options.matcher == "bruteforce":
        matches, stats = run(pattern, read_events(events, id_column, time_column), options)
        write_bytes("".join(m.to_json() + "\n" for m in matches).encode())
    else:
        try:
            stats = write_matches(pattern, compiled, cols, options, write_bytes)
        except MatchCapExceeded as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 3
    if args.plan and "plan" in stats:
        name = options.plan or pattern.plan or DEFAULT_PLAN
        what = "Cost_ord" if planner(name).kind == "order" else "Cost_tree"
        print(f"plan ({name}): {stats['plan']}  estimated {what} = "
              f"{stats['plan_cost']:,}", file=sys.stderr)
    if args.stats:
        if kernels is not None:  # loading the kernels apart from matching
            lazy = kernels.loaded.seconds - loaded_before  # first calls (just in time)
            stats["seconds"] = round(max(0.0, stats["seconds"] - lazy), 6)
            stats |= {"kernels": kernels.loaded.mode,
                      "kernel_load_seconds": round(kernels.loaded.seconds, 6),
                      "kernel_fallback_calls": kernels.loaded.fallback_calls}
        stats |= {"read_seconds": round(read_seconds, 6),
                  "startup_seconds": None if startup is None else round(startup, 3)}
        print(json.dumps(stats, ensure_ascii=False), file=sys.stderr)
    return 0


def _events_file(args, pattern) -> tuple[str, str, str]:
    """The file ``match`` reads with its id and time columns: as given, or, for a landing
    file (a format only ingest reads, or ``--source``), typed by the source's schema as
    ingest types it (the same ids and times as in the lake), in a temporary Parquet file."""
    import atexit
    import tempfile

    import pyarrow.parquet as pq

    path = Path(args.events)
    name = args.source or (pattern.source if path.name.endswith(RAW_ONLY) else None)
    if name is None:
        return args.events, args.id_column, args.time_column
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
    return out.name, "event_id", "ts"


def _match_windows(args, pattern, events: str, id_column: str, time_column: str) -> int:
    """``match`` for a ``kind: window`` file: one JSON line per output window."""
    if args.matcher not in (None, "bruteforce"):
        print(f"error: {pattern.name} is a window pattern: --matcher applies to sequence "
              "patterns only (use bruteforce for the oracle)", file=sys.stderr)
        return 2
    try:
        cols, schema = read_columns(events, sorted(pattern.attributes),
                                    id_column=id_column, time_column=time_column)
    except EventFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = check_schema(pattern, schema) if cols.n else []
    for p in problems:
        print(f"{p} [against {events}]", file=sys.stderr)
    if problems:
        return 2
    st = MatchStats()
    if args.matcher == "bruteforce":
        found = oracle_windows(pattern, read_events(events, id_column, time_column))
        write_bytes("".join(w.to_json(pattern) + "\n" for w in found).encode())
        st.matcher, st.matches = "bruteforce", len(found)
    else:
        options = MatchOptions(filter=not args.no_filter, partition=not args.no_partition)
        batch = sorted_batches(list(execute_windows(pattern, cols, options, st)))
        write_bytes(json_rows(pattern, batch, cols))
    if args.stats:
        print(json.dumps(st.as_dict(), ensure_ascii=False), file=sys.stderr)
    return 0


def register(r: Registry) -> None:
    v = r.add("patterns", "validate", "lint pattern files (default: patterns/)", cmd_validate,
              profile=False)
    v.add_argument("paths", nargs="*", help="pattern files or folders")
    v.add_argument("--sources", help="sources file with schemas (default: conf/sources.yaml)")
    v.add_argument("--data", action="store_true",
                   help="also check the patterns on the lake's events (starts Spark): warn "
                        "about variables no event can bind")
    v.add_argument("--profile", help="the profile whose lake --data reads (default: local)")

    n = r.add("patterns", "new-pattern", "write patterns/NAME.yaml to start from (with an "
              "examples block); make new-pattern NAME=... SOURCE=...", cmd_new_pattern,
              profile=False)
    n.add_argument("name", help="the pattern's name (lower case, digits, _)")
    n.add_argument("--source", required=True, help="a source of conf/sources.yaml")

    m = r.add("patterns", "match", "run one pattern over one CSV or Parquet file, without "
              "Spark", cmd_match, profile=False)
    m.add_argument("pattern", help="a pattern file (YAML)")
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
