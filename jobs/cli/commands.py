"""The commands of ``ses``, by group, known without importing them: ``ses --help`` lists
this table, and ``ses COMMAND …`` imports only the module of COMMAND's group (the pattern
commands never load the pipeline, the lake or Spark's client). ``Registry`` collects the
parsers a group module declares; ``tests/cli/test_cli.py`` checks that they agree with
this table.

Standard library only: this module is what ``ses --help`` costs."""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass

GROUPS = (
    ("patterns", "pattern files"),
    ("match", "pattern files"),
    ("pipeline", "the pipeline"),
    ("tables", "the lake's tables"),
    ("explain", "the lake's tables"),
    ("operate", "operating"),
    ("steps", "internal steps (the nightly DAG's tasks; `make run` runs them for you)"),
)
# command -> its group (the module jobs.cli.<group> declares and handles it)
COMMANDS = {
    "validate": "patterns", "new-pattern": "patterns", "match": "match",
    "run": "pipeline", "ingest": "pipeline", "backfill": "pipeline", "models": "pipeline",
    "retract": "pipeline", "docs": "pipeline",
    "query": "tables", "runs": "tables", "changes": "tables", "explain": "explain",
    "funnel": "explain",
    "pr-check": "operate", "cluster": "operate", "check": "operate", "vacuum": "operate",
    "maintain": "operate",
    "run-patterns": "steps", "run-pattern": "steps", "match-job": "steps", "validate-run": "steps",
    "validate-events": "steps", "publish": "steps", "serve": "steps",
}
SUMMARIES = {
    "validate": "lint pattern files and models", "new-pattern": "write patterns/NAME.yaml to start from",
    "match": "run one pattern over one CSV or Parquet file, without Spark",
    "run": "ingest, match and publish every pattern for a logical date",
    "ingest": "raw landing files -> events/<source> Delta tables",
    "backfill": "recompute the matches starting in [start, end)",
    "models": "build, test and publish the SQL models of models/",
    "retract": "remove events by id or by landing file", "docs": "build the catalogue site",
    "query": "SQL over the lake's tables (read-only)", "runs": "show the run log",
    "changes": "the matches inserted, deleted, updated since a run or a time",
    "explain": "what a pattern can bind on the lake's events, its plan, why not",
    "funnel": "how many partitions reached each step of a pattern, what stopped the rest",
    "pr-check": "what the branch's pattern and model changes do to the published tables",
    "cluster": "a Spark standalone cluster on this machine",
    "check": "verify the lake's invariants (an fsck); exit 1 naming each violation",
    "vacuum": "delete the data files no recent snapshot names (killed writes, rewrites)",
    "maintain": "compact small files, checkpoint the Delta logs, vacuum: every table",
    "run-patterns": "match, validate and publish several pattern files: one pass per source",
    "run-pattern": "match, validate and publish one pattern in one Spark application",
    "match-job": "one pattern on Spark into staging",
    "validate-run": "Great Expectations on a staged run",
    "validate-events": "Great Expectations on a source's events",
    "publish": "staged matches -> matches/<pattern>, and the runs log",
    "serve": "run the steps sent to SOCKET in one warm Spark application",
}


PROJECT_HELP = ("the project (the folder with conf/pipeline.yaml; default: $SES_PROJECT_DIR, "
                "else the nearest one from the current folder upwards)")


@dataclass(frozen=True)
class Command:
    group: str
    name: str
    help: str


class Registry:
    """The subcommands a group module declares (``register``), each under its group."""

    def __init__(self, sub):
        self.sub = sub
        self.commands: list[Command] = []

    def add(self, group: str, name: str, help_text: str, func, profile: bool = True
            ) -> argparse.ArgumentParser:
        assert COMMANDS.get(name) == group, f"{name} belongs to {COMMANDS.get(name)}"
        p = self.sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--project-dir", metavar="DIR", default=argparse.SUPPRESS,
                       help=PROJECT_HELP)
        if profile:
            p.add_argument("--profile", help="conf/pipeline.yaml profile (default: local, or "
                                             "$SES_PROFILE)")
        p.set_defaults(func=func)
        self.commands.append(Command(group, name, help_text))
        return p


def epilog() -> str:
    """The commands by group, for ``ses --help``."""
    width = max(map(len, COMMANDS)) + 2
    out = []
    titles = list(dict.fromkeys(title for _, title in GROUPS))  # groups may share a title
    for title in titles:
        keys = {key for key, t in GROUPS if t == title}
        out.append(f"{title}:")
        for name, group in COMMANDS.items():
            if group in keys:
                lines = textwrap.wrap(SUMMARIES[name], 96 - width - 2) or [""]
                out.append(f"  {name:{width}}{lines[0]}")
                out.extend(f"  {'':{width}}{line}" for line in lines[1:])
        out.append("")
    out.append("`ses COMMAND --help` describes one command.")
    return "\n".join(out)
