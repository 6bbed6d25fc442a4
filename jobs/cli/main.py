"""The command line: ``python -m jobs validate|match …``.

Exit codes: 0 success; 1 invalid pattern files (``validate``); 2 bad input or usage;
3 a ZStream window exceeded its cap on partial matches.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jobs.config import CONF, ROOT, ConfigError, load_profile, load_sources, parse_bytes
from jobs.core.columns import read_columns
from jobs.core.engine import DEFAULT_MEMORY_BUDGET, MatchStats, compile_pattern, execute
from jobs.core.events import EventFileError, events_from_arrow, format_ts, parse_ts, read_events
from jobs.core.output import bindings_of, json_lines, sort_batch
from jobs.core.patternfile import PatternError, check_schema, load_pattern
from jobs.core.planners import ALIASES, PLANNERS, planner
from jobs.core.planners import DEFAULT as DEFAULT_PLAN
from jobs.core.runner import (
    DEFAULT_MAX_MATCHES,
    MATCHER_CHOICES,
    MatchCapExceeded,
    MatchOptions,
    run,
)
from jobs.core.window import oracle_windows
from jobs.core.window_engine import execute_windows, json_rows, sorted_batches
from jobs.lake.locks import LakeBusy, lake_lock, pattern_lock
from jobs.lake.store import Lake, storage_error
from jobs.lake.views import duckdb_connection, register_spark
from jobs.ops import cluster
from jobs.ops.session import serve
from jobs.pipeline.context import RunContext
from jobs.pipeline.ingest import IngestError, typed_file
from jobs.pipeline.planning import choose_plan, explain_text
from jobs.pipeline.reconcile import reconcile
from jobs.pipeline.retract import retract
from jobs.pipeline.run import (
    ValidationFailed,
    backfill,
    ingest_sources,
    log_failure,
    match_step,
    models_step,
    plan,
    publish_step,
    run_all,
    run_pattern,
    short_error,
    staged_run,
    summary,
    validate_events_step,
    validate_step,
)
from jobs.prcheck.check import PrCheck, pr_check
from jobs.prcheck.report import pytest_filter, terminal, write_report
from jobs.project.changes import ChangesError, find_changes
from jobs.project.models import ModelError, load_models
from jobs.project.patterns import lint, load_catalog
from jobs.site.build import build_site
from jobs.spark.diagnostics import unsatisfiable, variable_counts
from jobs.spark.session import JavaMissing, build_session
from jobs.status import SUCCESS, new_run_id
from jobs.tools.explain import describe_range, why_not
from jobs.tools.output_formats import write_rows
from jobs.tools.scaffold import scaffold


def pattern_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(list(path.glob("*.yaml")) + list(path.glob("*.yml"))))
        else:
            out.append(path)
    return out


def cmd_validate(args) -> int:

    files = pattern_files(args.paths or [str(ROOT / "patterns")])
    if not files:
        print(f"no pattern files (*.yaml, *.yml) in {' '.join(args.paths or ['patterns/'])}",
              file=sys.stderr)
        return 1
    sources_file = Path(args.sources) if args.sources else CONF / "sources.yaml"
    catalog, problems, n_examples = lint(files, sources_file)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) in {len(files)} pattern file(s)", file=sys.stderr)
        return 1
    print(f"ok: {len(files)} pattern file(s) valid, {n_examples} example(s) pass")
    if args.data:
        args.patterns = catalog.patterns
        return _validate_data(args)
    return 0


def cmd_match(args) -> int:

    try:
        pattern = load_pattern(args.pattern)
    except PatternError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        args.events = _events_file(args, pattern)
    except (EventFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if pattern.kind == "window":
        return _match_windows(args, pattern)
    compiled = compile_pattern(pattern)
    try:
        cols, schema = read_columns(args.events, compiled.attributes,
                                    id_column=args.id_column, time_column=args.time_column)
    except EventFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cols.n:
        problems = check_schema(pattern, schema)
        if problems:
            for p in problems:
                print(f"{p} [against {args.events}]", file=sys.stderr)
            return 2
    options = MatchOptions(matcher=args.matcher, strategy=args.strategy,
                           filter=not args.no_filter, partition=not args.no_partition,
                           conditions=not args.no_conditions,
                           plan=None if args.plan in (None, "auto") else args.plan,
                           plan_alpha=args.plan_alpha,
                           max_matches_per_window=args.max_matches_per_window,
                           memory_budget=args.memory_budget)
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    if options.matcher == "bruteforce":

        matches, stats = run(pattern, read_events(args.events, args.id_column,
                                                  args.time_column), options)
        text = "".join(m.to_json() + "\n" for m in matches)
        _write(out, text.encode())
    else:
        st = MatchStats()
        id_rank = cols.id_rank()
        try:
            for batch in execute(compiled, cols, options, st):
                alt = compiled.alternatives[batch.alternative]
                names = [v.name for v in alt.variables]
                batch = sort_batch(batch, cols, len(names), id_rank)
                _write(out, json_lines(pattern.name, batch, bindings_of(batch, cols, names),
                                       alt.pattern.alternative))
        except MatchCapExceeded as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 3
        stats = st.as_dict()
    if args.plan and "plan" in stats:
        name = options.plan or pattern.plan or DEFAULT_PLAN
        what = "Cost_ord" if planner(name).kind == "order" else "Cost_tree"
        print(f"plan ({name}): {stats['plan']}  estimated {what} = "
              f"{stats['plan_cost']:,}", file=sys.stderr)
    if args.stats:
        print(json.dumps(stats, ensure_ascii=False), file=sys.stderr)
    return 0


RAW_ONLY = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv.gz")  # what only ingest reads


def _events_file(args, pattern) -> str:
    """The file ``match`` reads: as given, or, for a landing file (a format only ingest
    reads, or ``--source``), typed by the source's schema as ingest types it (the same ids
    and times as in the lake), in a temporary Parquet file."""
    import atexit
    import tempfile

    import pyarrow.parquet as pq


    path = Path(args.events)
    name = args.source or (pattern.source if path.name.endswith(RAW_ONLY) else None)
    if name is None:
        return args.events
    sources = load_sources()
    if name not in sources:
        raise ValueError(f"{path}: source {name!r} is not in conf/sources.yaml (sources: "
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
    args.id_column, args.time_column = "event_id", "ts"
    return out.name


def cmd_serve(args) -> int:
    """One warm Spark application for the steps of a DAG run (``jobs.ops.session``)."""

    return serve(Path(args.socket), main, args.idle, args.profile)


def cmd_new_pattern(args) -> int:

    try:
        path = scaffold(args.name, args.source)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: edit its "
          "conditions and examples, then `make validate`")
    return 0


def _match_windows(args, pattern) -> int:
    """``match`` for a ``kind: window`` file: one JSON line per output window."""

    if args.matcher not in (None, "bruteforce"):
        print(f"error: {pattern.name} is a window pattern: --matcher applies to sequence "
              "patterns only (use bruteforce for the oracle)", file=sys.stderr)
        return 2
    try:
        cols, schema = read_columns(args.events, sorted(pattern.attributes),
                                    id_column=args.id_column, time_column=args.time_column)
    except EventFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = check_schema(pattern, schema) if cols.n else []
    for p in problems:
        print(f"{p} [against {args.events}]", file=sys.stderr)
    if problems:
        return 2
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    st = MatchStats()
    if args.matcher == "bruteforce":

        found = oracle_windows(pattern, read_events(args.events, args.id_column,
                                                    args.time_column))
        _write(out, "".join(w.to_json(pattern) + "\n" for w in found).encode())
        st.matcher, st.matches = "bruteforce", len(found)
    else:
        options = MatchOptions(filter=not args.no_filter, partition=not args.no_partition)
        batch = sorted_batches(list(execute_windows(pattern, cols, options, st)))
        _write(out, json_rows(pattern, batch, cols))
    if args.stats:
        print(json.dumps(st.as_dict(), ensure_ascii=False), file=sys.stderr)
    return 0


def _write(out, data: bytes) -> None:
    if out is None:  # a text stream (tests capture stdout as text)
        sys.stdout.write(data.decode())
    else:
        out.write(data)
        out.flush()


def _spark(args):

    profile = load_profile(args.profile)
    return profile, build_session(profile)


def _pipeline_errors(fn):
    """Clear one-line errors for what a user can fix (Java, config, missing input)."""
    def wrapper(args) -> int:

        try:
            return fn(args)
        except (JavaMissing, ConfigError, IngestError, FileNotFoundError, PatternError,
                ValueError, ValidationFailed, LakeBusy) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # the lake's storage (an object store's errors from delta-rs)

            print(f"error: {storage_error(exc)}", file=sys.stderr)
            return 2
        except Exception as exc:
            from deltalake.exceptions import CommitFailedError

            if isinstance(exc, CommitFailedError):
                print(f"error: another process committed to the same Delta table at the same "
                      f"time ({str(exc).splitlines()[0][:200]}); another run is in progress: "
                      "wait for it, then rerun (reruns are idempotent)", file=sys.stderr)
                return 2
            raise
    return wrapper


@_pipeline_errors
def _validate_data(args) -> int:
    """Warnings from the lake's events: variables no event can bind (``jobs.tools.explain``)."""
    profile, spark = _spark(args)
    lake = Lake.of_profile(profile)
    n = 0
    for f, pattern in args.patterns:
        if pattern.kind == "window":
            continue
        if not lake.exists(lake.events(pattern.source)):
            print(f"warning: {f}: no events of source {pattern.source!r} in {profile.lake} "
                  "yet (run `make run` or `python -m jobs ingest`): not checked on data")
            continue
        for warning in unsatisfiable(variable_counts(lake.read_spark(spark, lake.events(
                pattern.source)), pattern)):
            print(f"warning: {f}: {warning}")
            n += 1
    print(f"data: {n} warning(s) on the events of {profile.lake}")
    return 0


def _pattern_step(step):
    """A per-pattern step (match-job, validate-run, publish) on its run context: under the
    pattern's lock, with a failed row in the run log when it fails."""
    def wrapper(args) -> int:

        profile = load_profile(args.profile)
        path = Path(args.pattern)
        catalog = load_catalog([path])
        rejected = [r for r in catalog.rejected if r.path.resolve() == path.resolve()]
        pattern = None if rejected else catalog.get(path)
        name = rejected[0].name if rejected else pattern.name
        ctx = RunContext(profile, Lake.of_profile(profile), args.run_id,
                         getattr(args, "logical_date", None) or "", path, pattern)
        with pattern_lock(profile.lake, name, f"{args.command} {name} {args.run_id}",
                          profile.lock_dir):
            try:
                if rejected:
                    raise PatternError(list(rejected[0].problems))
                return step(args, ctx)
            except Exception as exc:
                if not getattr(exc, "logged", False):
                    log_failure(ctx, short_error(exc), name=name)
                raise
    return wrapper


@_pipeline_errors
def cmd_ingest(args) -> int:

    profile = load_profile(args.profile)
    ctx = RunContext.start(profile, args.run_id or new_run_id())
    spark = build_session(profile)  # a Spark that cannot read the lake stops before it
    with lake_lock(profile.lake, f"ingest {ctx.run_id}", profile.lock_dir):
        reconcile(ctx.lake)
        _, failed = ingest_sources(spark, ctx, args.source or None,
                                   echo=lambda line: None if line.startswith("FAILED")
                                   else print(line))
    for message in failed.values():
        print(f"error: {message}", file=sys.stderr)
    return 1 if failed else 0


@_pipeline_errors
def cmd_retract(args) -> int:

    profile = load_profile(args.profile)
    lake = Lake.of_profile(profile)
    with lake_lock(profile.lake, "retract", profile.lock_dir):
        row = retract(lake, args.source, args.event_id, args.file, args.reason)
    print(f"retracted {row['events']} event(s) of {args.source} "
          f"({row['ts_min']} .. {row['ts_max']}); logged in {lake.retractions()} "
          f"as {row['retraction_id']}; the next run re-matches what they touched")
    return 0


@_pipeline_errors
@_pattern_step
def cmd_match_job(args, ctx) -> int:
    from dataclasses import replace
    from datetime import date


    spark = build_session(ctx.profile)
    ctx = replace(ctx, logical_date=ctx.logical_date or date.today().isoformat())
    stats = match_step(spark, ctx, plan(ctx), args.slices)
    print(json.dumps(stats, ensure_ascii=False))
    return 0


@_pipeline_errors
@_pattern_step
def cmd_run_pattern(args, ctx) -> int:
    """Match, validate and publish one pattern in one Spark application (the DAG's task)."""
    from dataclasses import replace
    from datetime import date


    ctx = replace(ctx, logical_date=ctx.logical_date or date.today().isoformat())
    row = run_pattern(build_session(ctx.profile), ctx, args.slices)
    print(summary(ctx.profile, [row], ctx.run_id, None))
    return 0


@_pipeline_errors
@_pattern_step
def cmd_validate_run(args, ctx) -> int:

    try:
        outcome = validate_step(build_session(ctx.profile), ctx)
    except ValidationFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(outcome["summary"])
    return 0


@_pipeline_errors
def cmd_validate_events(args) -> int:

    profile, spark = _spark(args)
    ctx = RunContext.start(profile, args.ingest_run or "")
    try:
        print(validate_events_step(spark, ctx, args.source, args.ingest_run).describe())
    except ValidationFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


@_pipeline_errors
@_pattern_step
def cmd_publish(args, ctx) -> int:

    staged = staged_run(ctx)  # a run that may not be published fails before Spark starts
    row = publish_step(build_session(ctx.profile), ctx, staged)
    print(f"published {row['pattern']}: {row['inserted']} new match(es), "
          f"{row['deleted'] or 0} removed, {row['matches']} in this run's range")
    return 0


@_pipeline_errors
def cmd_run(args) -> int:

    profile, spark = _spark(args)
    rows = run_all(spark, profile, args.logical_date, args.pattern or None, args.slices)
    return 1 if any(r.get("status") == "failed" for r in rows) else 0


@_pipeline_errors
def cmd_runs(args) -> int:
    """The run log, without Spark (delta-rs)."""

    lake = Lake.of_profile(load_profile(args.profile))
    t = lake.read_arrow(lake.runs())
    rows = t.to_pylist() if t is not None else []
    if not rows:
        print("no runs logged yet")
    if args.run_id:
        rows = [r for r in rows if r["run_id"] == args.run_id]
    rows = sorted(rows, key=lambda r: (str(r["started_at"]), r["pattern"]))[-args.last:]
    print(f"{'run_id':34} {'pattern':36} {'status':8} {'matches':>8} {'new':>6} {'del':>5} "
          f"{'late':>5} {'seconds':>8}  message")
    for r in rows:
        def n(k, r=r):
            return "-" if r.get(k) is None else r[k]
        secs = "-" if r.get("seconds") is None else f"{r['seconds']:.1f}"
        print(f"{r['run_id'][:34]:34} {r['pattern'][:36]:36} {r['status']:8} {n('matches'):>8} "
              f"{n('inserted'):>6} {n('deleted'):>5} {n('late_events'):>5} {secs:>8}  "
              f"{(r.get('message') or '')[:200]}")
    if args.expect is not None:
        ok = {r["pattern"] for r in rows if r["status"] == SUCCESS}
        if len(ok) < args.expect:
            print(f"error: {len(ok)} of {args.expect} pattern(s) published", file=sys.stderr)
            return 1
        return 0  # a retried step's failed attempt does not count against the run
    return 1 if any(r["status"] != SUCCESS for r in rows) else 0


@_pipeline_errors
def cmd_explain(args) -> int:
    """What each variable can bind on the lake's events, the plan a run would use, and,
    with --partition or --at, which step of the lazy strategy removed the windows there."""

    profile, spark = _spark(args)
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
            raise ValueError("explain --partition/--at replays the steps of sequence patterns "
                             "only; for a window pattern run `match` on its events")
        return 0

    counts = variable_counts(events, pattern)
    print("variables (events of the whole table that satisfy the properties):")
    for c in counts:
        print(f"  {c.describe()}")
    for warning in unsatisfiable(counts):
        print(f"warning: {warning}")
    if args.partition or args.at:
        return _why_not(args, pattern, events)
    _explain_plan(args, profile, spark, path, pattern)
    return 0


def _explain_plan(args, profile, spark, path, pattern) -> None:
    from datetime import date


    if pattern.matcher != "zstream":
        print("plan: the SES automaton follows the order of the sets (no plan to choose)")
        return
    ctx = RunContext.start(profile, "explain", args.logical_date or date.today().isoformat())
    planned = plan(ctx.for_pattern(path, pattern))
    source = load_sources().get(pattern.source)
    kinds = dict(source.columns) if source else {}
    choice = choose_plan(spark, ctx.lake, pattern, planned.rng.low, planned.rng.high,
                         kinds, generator=args.generator)
    print(explain_text(pattern, choice))


def _why_not(args, pattern, events) -> int:
    """The steps on one partition (``--partition``) and/or around one time (``--at``)."""
    from pyspark.sql import functions as F


    where, low, high = [], None, None
    if args.partition:
        attrs = pattern.partition_attributes
        if not attrs:
            raise ValueError(f"{pattern.name} has no partition attributes (its windows span "
                             "every event): use --at alone")
        values = dict(kv.split("=", 1) for kv in args.partition.split(",")) \
            if "=" in args.partition else {attrs[0]: args.partition}
        unknown = set(values) - set(attrs)
        if unknown or (len(attrs) > 1 and set(values) != set(attrs)):
            raise ValueError(f"--partition: give {' and '.join(attrs)} as "
                             f"{','.join(a + '=VALUE' for a in attrs)}")
        for a, v in values.items():
            where.append(F.col(a).cast("string") == F.lit(v))
    if args.at:
        try:
            at = parse_ts(args.at)
        except ValueError as exc:
            raise ValueError(f"--at {args.at!r}: {exc}") from None
        low, high = at - pattern.tau, at
        where.append(F.col("ts").between(F.lit(format_ts(low)).cast("timestamp"),
                                         F.lit(format_ts(at + pattern.tau)).cast("timestamp")))
    df = events
    for w in where:
        df = df.where(w)
    rows = events_from_arrow(df.toArrow())
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


@_pipeline_errors
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

    profile, spark = _spark(args)
    rows = models_step(spark, RunContext.start(profile, "models"), select=args.select or None)
    return 1 if any(r["status"] != SUCCESS for r in rows) else 0


@_pipeline_errors
def cmd_backfill(args) -> int:

    profile, spark = _spark(args)
    backfill(spark, profile, args.start, args.end, args.pattern or None)
    return 0


@_pipeline_errors
def cmd_query(args) -> int:
    """SQL over the lake's views (``jobs.lake.views``): DuckDB over delta-rs answers without
    starting Spark; ``--engine spark`` (or a query DuckDB cannot run, with ``auto``) uses
    Spark SQL, the dialect of the models."""

    profile = load_profile(args.profile)
    lake = Lake.of_profile(profile)
    limit = args.limit if args.limit is not None else (20 if args.format == "table" else None)
    if args.engine in ("auto", "duckdb"):
        import duckdb


        con, views = duckdb_connection(lake, args.sql)
        if not args.sql:
            print("tables: " + ", ".join(views))
            return 0
        try:
            rel = con.sql(args.sql)
            if rel is None:  # a statement without rows
                return 0
            table = (rel.limit(limit) if limit is not None else rel).to_arrow_table()
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            if args.engine == "duckdb":
                print(f"error: {first}\n(tables: {', '.join(views)})", file=sys.stderr)
                return 2
            print(f"note: DuckDB cannot run this query ({first[:160]}); running it on Spark",
                  file=sys.stderr)
        else:
            write_rows(table, args.format, sys.stdout, shown=limit)
            return 0
    return _query_spark(args, profile, lake, limit)


def _query_spark(args, profile, lake, limit) -> int:
    import logging

    from pyspark.errors import AnalysisException, ParseException


    spark = build_session(profile)
    views = register_spark(spark, lake)
    if not args.sql:
        print("tables: " + ", ".join(views))
        return 0
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # we say it shorter
    try:
        df = spark.sql(args.sql)
        table = (df.limit(limit) if limit is not None else df).toArrow()
    except (AnalysisException, ParseException) as exc:
        first = str(exc).strip().splitlines()[0]
        print(f"error: {first}\n(tables: {', '.join(views)})", file=sys.stderr)
        return 2
    write_rows(table, args.format, sys.stdout, shown=limit)
    return 0


@_pipeline_errors
def cmd_docs(args) -> int:
    """The catalogue site of the profile's lake (``jobs.site.build``); no Spark."""

    profile = load_profile(args.profile)
    out = args.out or profile.site
    build_site(Lake.of_profile(profile), Path(out) if out else None)
    return 0


@_pipeline_errors
def cmd_pr_check(args) -> int:
    """What the branch changes in the published tables (``jobs.prcheck.check``)."""

    root = Path(args.root).resolve() if args.root else ROOT
    try:
        changes = find_changes(root, args.base)
    except ChangesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    changed = changes.changed_patterns
    if args.list:
        for c in changed:
            print(f"{c.status:9} pattern {c.name:36} {(c.head or c.base).path}")
        for m in changes.affected_models:
            print(f"{m.status:9} model   {m.name:36} {m.reason}")
        return 0
    if args.pytest_k:
        print(pytest_filter([Path(c.head.path).stem for c in changed if c.head is not None]))
        return 0
    out = Path(args.out)
    for old in list(out.glob("*.png")) + list(out.glob("report.*")) + list(out.glob("summary.json")):
        old.unlink()
    if not changes.changed_patterns and not changes.affected_models:
        check = PrCheck(changes, "nothing run", [], [])
    else:
        profile, spark = _spark(args)
        sample = None if args.data == "auto" else args.data == "sample"
        if sample and profile.pr_sample is None:
            print(f"error: profile {profile.name} names no pr_check.sample in "
                  "conf/pipeline.yaml (e.g. pr_check: {sample: 90d})", file=sys.stderr)
            return 2
        check = pr_check(spark, profile, root, args.base,
                         Path(args.scratch) if args.scratch else None, sample, charts=out,
                         changes=changes)
    paths = write_report(check, out)
    print(terminal(check), end="")
    print(f"report: {paths['markdown']} (Markdown, for the pull request), {paths['json']}")
    return 0 if check.ok else 1


def cmd_cluster(args) -> int:
    """The standalone cluster on this machine (``jobs.ops.cluster``)."""

    try:
        if args.action == "up":
            cluster.up()
        elif args.action == "down":
            cluster.down()
        else:
            now = cluster.status()
            print("no cluster running" if now is None else
                  f"{cluster.master_url()}: {now.get('aliveworkers', 0)} worker(s) alive, "
                  f"{len(now.get('activeapps') or [])} application(s) running")
    except cluster.ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _size(text: str) -> int:

    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ses",
                                     description="SES pattern matching over event histories "
                                     "(also `python -m jobs`).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="lint pattern files (default: patterns/)")
    v.add_argument("paths", nargs="*", help="pattern files or folders")
    v.add_argument("--sources", help="sources file with schemas (default: conf/sources.yaml)")
    v.add_argument("--data", action="store_true",
                   help="also check the patterns on the lake's events (starts Spark): warn "
                        "about variables no event can bind")
    v.add_argument("--profile", help="the profile whose lake --data reads (default: local)")
    v.set_defaults(func=cmd_validate)

    n = sub.add_parser("new-pattern", help="write patterns/NAME.yaml to start from (with an "
                       "examples block); make new-pattern NAME=... SOURCE=...")
    n.add_argument("name", help="the pattern's name (lower case, digits, _)")
    n.add_argument("--source", required=True, help="a source of conf/sources.yaml")
    n.set_defaults(func=cmd_new_pattern)

    m = sub.add_parser("match", help="run one pattern over one CSV or Parquet file, without Spark")
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
    m.add_argument("--memory-budget", type=_size, default=DEFAULT_MEMORY_BUDGET, metavar="SIZE",
                   help="memory a matcher may use for instances, matches and events, e.g. "
                        "512MB (default 2GB)")
    m.add_argument("--stats", action="store_true", help="print counters as JSON on stderr")
    m.set_defaults(func=cmd_match)

    def pipeline_parser(name, help_text, func):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--profile", help="conf/pipeline.yaml profile (default: local, or "
                                          "$SES_PROFILE)")
        p.set_defaults(func=func)
        return p

    i = pipeline_parser("ingest", "raw landing files -> events/<source> Delta tables", cmd_ingest)
    i.add_argument("--source", action="append", help="only this source (repeatable)")
    i.add_argument("--logical-date", help="names the ingest run")
    i.add_argument("--run-id", help="the ingest run id (default: from the date and time)")

    x = pipeline_parser("retract", "remove events by id or by landing file (logged; the "
                        "next run re-matches what they touched)", cmd_retract)
    x.add_argument("--source", required=True)
    what = x.add_mutually_exclusive_group(required=True)
    what.add_argument("--event-id", action="append", help="an event id (repeatable)")
    what.add_argument("--file", help="every event of this landing file (as in source_file, "
                                     "e.g. sepsis/sepsis_3.jsonl.gz)")
    x.add_argument("--reason", required=True, help="why (kept in the retractions table)")

    for name, help_text, func in (
            ("match-job", "one pattern on Spark into staging (phases 1 and 2)", cmd_match_job),
            ("run-pattern", "match, validate and publish one pattern in one Spark application "
                            "(the nightly DAG's task per pattern)", cmd_run_pattern)):
        j = pipeline_parser(name, help_text, func)
        j.add_argument("pattern")
        j.add_argument("--run-id", required=True)
        j.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
        j.add_argument("--slices", action="store_true", help="cut time into slices even with "
                                                             "partition attributes")

    w = pipeline_parser("validate-run", "Great Expectations on a staged run (before publish)",
                        cmd_validate_run)
    w.add_argument("pattern")
    w.add_argument("--run-id", required=True)

    e = pipeline_parser("validate-events", "Great Expectations on a source's events",
                        cmd_validate_events)
    e.add_argument("--source", required=True)
    e.add_argument("--ingest-run", help="only the events of this ingest run")

    u = pipeline_parser("publish", "staged matches -> matches/<pattern>, and the runs log",
                        cmd_publish)
    u.add_argument("pattern")
    u.add_argument("--run-id", required=True)

    r = pipeline_parser("run", "ingest, match and publish every pattern for a logical date",
                        cmd_run)
    r.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
    r.add_argument("--pattern", action="append", help="only this pattern file (repeatable)")
    r.add_argument("--slices", action="store_true", help="cut time into slices everywhere")

    q = pipeline_parser("query", "SQL over the lake's tables (DuckDB, or Spark; no SQL: list them)",
                        cmd_query)
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

    g = pipeline_parser("runs", "show the run log (no Spark)", cmd_runs)
    g.add_argument("--run-id")
    g.add_argument("--last", type=int, default=20)
    g.add_argument("--expect", type=int, help="exit 1 unless this many patterns succeeded")

    x = pipeline_parser("explain", "what each variable of a pattern can bind on the lake's "
                        "events, the plan a run would choose (ZStream), and with --partition "
                        "or --at which step removed the windows there", cmd_explain)
    x.add_argument("pattern")
    x.add_argument("--generator", choices=(*PLANNERS, *ALIASES),
                   help="default: the pattern's plan:, else " + DEFAULT_PLAN)
    x.add_argument("--logical-date", help="YYYY-MM-DD (default: today)")
    x.add_argument("--partition", metavar="VALUE",
                   help="why not in this partition: the value of the partition attribute "
                        "(ATTR=VALUE,... when there are several)")
    x.add_argument("--at", metavar="TIME",
                   help="why not around this time (ISO 8601): the windows that cover it")

    b = pipeline_parser("backfill", "recompute the matches starting in [start, end)",
                        cmd_backfill)
    b.add_argument("--start", required=True, help="YYYY-MM-DD")
    b.add_argument("--end", required=True, help="YYYY-MM-DD (exclusive)")
    b.add_argument("--pattern", action="append", help="only this pattern file (repeatable)")
    sv = pipeline_parser("serve", "run the steps sent to SOCKET in one warm Spark "
                         "application (the nightly DAG's session; stops when idle)", cmd_serve)
    sv.add_argument("--socket", required=True, help="the Unix socket to listen on")
    sv.add_argument("--idle", type=float, default=900.0,
                    help="stop after this many seconds without a step (default 900)")

    dc = pipeline_parser("docs", "build the catalogue site (static HTML and pictures beside "
                         "the lake; also after every run)", cmd_docs)
    dc.add_argument("--out", help="the site's folder (default: the profile's site, else site/ "
                                  "beside the lake)")

    md = pipeline_parser("models", "build, test and publish the SQL models of models/",
                         cmd_models)
    md.add_argument("--select", action="append",
                    help="only this model (repeatable; the tables it reads must exist)")
    md.add_argument("--list", action="store_true",
                    help="list the models in dependency order (no Spark)")
    pr = sub.add_parser("pr-check", help="what the branch's pattern and model changes do to "
                        "the published tables: validate, run base and new versions in a "
                        "scratch lake, report (make pr-check BASE=ref)")
    pr.add_argument("--base", help="the git ref to compare with (default: the merge base "
                    "with main)")
    pr.add_argument("--out", default=str(ROOT / "pr-check"),
                    help="folder of the report (report.md, report.txt, summary.json, PNGs); "
                         "default pr-check/")
    pr.add_argument("--data", choices=("auto", "committed", "sample"), default="auto",
                    help="the events: the committed data (data/landing) or the profile's "
                         "pr_check.sample of its lake (auto: the sample when the profile "
                         "names one)")
    pr.add_argument("--scratch", help="keep the scratch lake in this folder (default: a "
                    "temporary folder, removed)")
    pr.add_argument("--root", help=argparse.SUPPRESS)  # another checkout (tests)
    pr.add_argument("--profile", help="the profile (default: local)")
    pr.add_argument("--list", action="store_true", help="only list what changed (no Spark)")
    pr.add_argument("--pytest-k", action="store_true",
                    help="only print a pytest -k expression for the changed patterns' tests")
    pr.set_defaults(func=cmd_pr_check)

    cl = sub.add_parser("cluster", help="a Spark standalone cluster on this machine (master "
                        "and two workers on 127.0.0.1; profile standalone submits to it)")
    cl.add_argument("action", choices=("up", "down", "status"))
    cl.set_defaults(func=cmd_cluster)

    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


def exit_now(code: int) -> None:
    """Leave without the interpreter's shutdown: delta-rs' runtime threads can abort a
    normal exit (``terminate called without an active exception``, exit 134) after the
    work is done. Output is flushed first; every table write has committed by now."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ses-lakehouse")
    except PackageNotFoundError:  # a checkout that was not installed (make installs it)
        return "(not installed)"


def entry() -> None:
    """The installed command ``ses`` (pyproject.toml's console script)."""
    exit_now(main())
