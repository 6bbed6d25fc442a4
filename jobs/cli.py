"""The command line: ``python -m jobs validate|match …``.

Exit codes: 0 success; 1 invalid pattern files (``validate``); 2 bad input or usage;
3 a ZStream window exceeded its cap on partial matches.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .config import CONF, ROOT, load_sources
from .core.events import EventFileError, read_events
from .core.loader import PatternError, Problem, check_schema, load_pattern
from .core.runner import MATCHERS, MatchOptions, run
from .core.zstream import DEFAULT_MAX_MATCHES, MatchCapExceeded


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
        print(f"no pattern files (*.yaml) in {' '.join(args.paths or ['patterns/'])}",
              file=sys.stderr)
        return 1
    sources_file = Path(args.sources) if args.sources else CONF / "sources.yaml"
    sources = load_sources(sources_file) if sources_file.exists() else {}
    problems: list[Problem] = []
    names: dict[str, str] = {}
    for f in files:
        try:
            pattern = load_pattern(f)
        except PatternError as exc:
            problems.extend(exc.problems)
            continue
        if pattern.name in names:
            problems.append(Problem(str(f), 1, f"pattern name {pattern.name!r} is already used "
                                    f"by {names[pattern.name]}: names must be unique"))
        names.setdefault(pattern.name, str(f))
        if sources:
            source = sources.get(pattern.source)
            if source is None:
                problems.append(Problem(str(f), 1, f"unknown source {pattern.source!r} "
                                        f"({sources_file} defines: {', '.join(sorted(sources))})"))
            elif source.columns:
                problems.extend(check_schema(pattern, source.columns))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) in {len(files)} pattern file(s)", file=sys.stderr)
        return 1
    print(f"ok: {len(files)} pattern file(s) valid")
    return 0


def _file_schema(events) -> dict[str, str | None]:
    """Column kinds seen in a file: 'number', 'string', 'mixed' or None (all missing)."""
    schema: dict[str, str | None] = dict.fromkeys(events[0].attrs) if events else {}
    for e in events:
        for k, v in e.attrs.items():
            if v is not None:
                kind = "number" if isinstance(v, (int, float)) and not isinstance(v, bool) \
                    else "string"
                schema[k] = kind if schema.get(k) in (None, kind) else "mixed"
    return schema


def cmd_match(args) -> int:
    try:
        pattern = load_pattern(args.pattern)
    except PatternError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        events = read_events(args.events, id_column=args.id_column, time_column=args.time_column)
    except EventFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if events:
        problems = check_schema(pattern, _file_schema(events))
        if problems:
            for p in problems:
                print(f"{p} [against {args.events}]", file=sys.stderr)
            return 2
    options = MatchOptions(matcher=args.matcher, strategy=args.strategy,
                           filter=not args.no_filter, partition=not args.no_partition,
                           conditions=not args.no_conditions, plan=args.plan or "zstream",
                           max_matches_per_window=args.max_matches_per_window)
    try:
        matches, stats = run(pattern, events, options)
    except MatchCapExceeded as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    if args.plan and "plan" in stats:
        print(f"plan ({options.plan}): {stats['plan']}  estimated Cost_tree = "
              f"{stats['plan_cost']:,}", file=sys.stderr)
    out = sys.stdout
    for m in matches:
        out.write(m.to_json() + "\n")
    if args.stats:
        print(json.dumps(stats, ensure_ascii=False), file=sys.stderr)
    return 0


def cmd_demo(args) -> int:
    """What ``make run`` does until the Spark pipeline exists: lint, then match every
    pattern over its source's example file locally, and say what is not built yet."""
    if cmd_validate(argparse.Namespace(paths=[], sources=None)) != 0:
        return 1
    sources = load_sources()
    for f in pattern_files([str(ROOT / "patterns")]):
        pattern = load_pattern(f)
        source = sources[pattern.source]
        if not source.example:
            print(f"{pattern.name}: source {source.name!r} has no local example file; skipped")
            continue
        events = read_events(ROOT / source.example, source.id_column, source.time_column)
        matches, stats = run(pattern, events)
        print(f"{pattern.name}: {len(matches)} match(es) in {stats['events']} events of "
              f"{source.example} ({stats['seconds']:.3f} s)")
        for m in matches:
            print("  " + m.to_json())
    print("\nnot built yet: the nightly Spark pipeline (ingest -> match -> validate -> publish "
          "to Delta) is issue 5; this run matched locally, without Spark, and wrote nothing.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs",
                                     description="SES pattern matching over event histories.")
    sub = parser.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="lint pattern files (default: patterns/)")
    v.add_argument("paths", nargs="*", help="pattern files or folders")
    v.add_argument("--sources", help="sources file with schemas (default: conf/sources.yaml)")
    v.set_defaults(func=cmd_validate)

    m = sub.add_parser("match", help="run one pattern over one CSV or Parquet file, without Spark")
    m.add_argument("pattern", help="a pattern file (YAML)")
    m.add_argument("events", help="events: CSV with a header, or Parquet")
    m.add_argument("--matcher", choices=MATCHERS, default=None,
                   help="default: the pattern's own; bruteforce = the test oracle")
    m.add_argument("--strategy", choices=("lazy", "eager"), default="lazy",
                   help="lazy match windows (default) or eager: ses runs SESExec, zstream "
                        "its tree, over the whole stream")
    m.add_argument("--id-column", default="event_id")
    m.add_argument("--time-column", default="ts", help="ISO-8601 text or a timestamp type")
    m.add_argument("--no-filter", action="store_true", help="do not filter events (Theorem 1)")
    m.add_argument("--no-partition", action="store_true",
                   help="do not partition by the attributes X (Def. 6)")
    m.add_argument("--no-conditions", action="store_true",
                   help="do not test the necessary match conditions (Theorem 2)")
    m.add_argument("--plan", nargs="?", const="zstream", choices=("zstream", "left-deep"),
                   help="zstream: the plan generator (default zstream); prints the chosen "
                        "tree and its estimated cost on stderr")
    m.add_argument("--max-matches-per-window", type=int, default=DEFAULT_MAX_MATCHES,
                   metavar="N", help="zstream: cap on partial matches per window "
                                     f"(default {DEFAULT_MAX_MATCHES:,})")
    m.add_argument("--stats", action="store_true", help="print counters as JSON on stderr")
    m.set_defaults(func=cmd_match)

    d = sub.add_parser("demo", help="what `make run` does for now: lint and match the examples")
    d.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)
