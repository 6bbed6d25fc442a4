"""Commands on pattern files: ``validate`` (with ``--data``, on the lake's events too) and
``new-pattern``. ``match`` has a module of its own (``jobs.cli.match``)."""

from __future__ import annotations

import sys
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.common import spark_for, user_errors
from jobs.cli.terminal import pattern_files
from jobs.config import ConfigError, check_pipeline_file, current_project
from jobs.config.references import reference_files
from jobs.config.suites import check_suites
from jobs.core.errors import UserError
from jobs.lake.store import Lake
from jobs.project.models import ModelError, load_model, models_folder
from jobs.project.patterns import lint
from jobs.spark.diagnostics import unsatisfiable, variable_counts
from jobs.spark.tables import read_spark
from jobs.tools.scaffold import scaffold


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
        for warning in unsatisfiable(variable_counts(read_spark(spark, lake, lake.events(
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

