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
import importlib
import sys

from jobs.cli.commands import COMMANDS, PROJECT_HELP, SUMMARIES, Registry, epilog
from jobs.config.project import Project, use_project
from jobs.core.errors import EXIT_INPUT, UserError


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``ses``. Only the group of ``command`` is imported and declares its
    options (None: every group, as the tests check them all); any other argv (``--help``,
    an unknown or missing command) gets the commands by name, which is all argparse needs
    to answer it."""
    parser = argparse.ArgumentParser(
        prog="ses", usage="ses [-h] [--version] [--project-dir DIR] COMMAND ...",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="SES pattern matching over event histories (also `python -m jobs`).")
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--project-dir", metavar="DIR", help=PROJECT_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help=argparse.SUPPRESS, prog="ses")
    registry = Registry(sub)
    groups = dict.fromkeys(COMMANDS.values()) if command is None else (
        [COMMANDS[command]] if command in COMMANDS else [])
    for group in groups:  # the command's own group: a lazily loaded command group
        module = importlib.import_module(f"jobs.cli.{group}")
        if group == "steps":
            module.register(registry, main)  # serve runs each step's argv with main
        else:
            module.register(registry)
    if not groups:
        for name in COMMANDS:
            sub.add_parser(name, help=SUMMARIES[name])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    args = build_parser(command if command in COMMANDS else "").parse_args(argv)
    if args.project_dir:
        try:
            use_project(Project.find(args.project_dir))
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_INPUT
    return args.func(args)


def _command(argv: list[str]) -> str | None:
    """The command's name: the first word that is neither an option nor its value."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--project-dir":
            skip = True
        elif not a.startswith("-"):
            return a
    return None


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"ses {_version()}")
        parser.exit()


def exit_now(code: int) -> None:
    """Exit with ``code``, running ``atexit`` handlers as usual, except once delta-rs is
    loaded: its runtime threads can abort the interpreter's shutdown (``terminate called
    without an active exception``, exit 134) after the work is done, so then the process
    leaves at once (output flushed; every table write has committed by now)."""
    if "deltalake" not in sys.modules:
        sys.exit(code)
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
