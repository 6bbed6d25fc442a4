"""The command line, ``ses`` (also ``python -m jobs``), by command group: pattern files
(``jobs.cli.patterns``), the pipeline (``jobs.cli.pipeline``), the lake's tables
(``jobs.cli.tables``), operating (``jobs.cli.operate``) and the internal steps the nightly
DAG runs (``jobs.cli.steps``). Each group keeps its options next to its handlers.

Exit codes: 0 success; 1 invalid pattern files (``validate``), failed patterns or checks;
2 bad input or usage (a ``UserError``: one line saying what to fix); 3 a ZStream window
exceeded its cap on partial matches.
"""

from __future__ import annotations

import argparse
import sys

from jobs.cli import operate, patterns, pipeline, steps, tables
from jobs.cli.common import Registry


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ses", usage="ses [-h] [--version] COMMAND ...", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="SES pattern matching over event histories (also `python -m jobs`).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help=argparse.SUPPRESS)
    registry = Registry(sub)
    patterns.register(registry)
    pipeline.register(registry)
    tables.register(registry)
    operate.register(registry)
    steps.register(registry, main)
    parser.epilog = registry.epilog()
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
