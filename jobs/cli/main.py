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

from jobs.cli.commands import COMMANDS, SUMMARIES, Registry, epilog


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``ses``. Only the group of ``command`` is imported and declares its
    options (None: every group, as the tests check them all); any other argv (``--help``,
    an unknown or missing command) gets the commands by name, which is all argparse needs
    to answer it."""
    parser = argparse.ArgumentParser(
        prog="ses", usage="ses [-h] [--version] COMMAND ...", epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="SES pattern matching over event histories (also `python -m jobs`).")
    parser.add_argument("--version", action=_Version)
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
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(command if command in COMMANDS else "").parse_args(argv)
    return args.func(args)


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"ses {_version()}")
        parser.exit()


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
