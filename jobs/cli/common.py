"""What the command groups share: the registry that lays out ``ses --help`` by group, the
one place that turns a ``UserError`` into one line and exit code 2, and the wrappers of
the Spark steps (the profile's session, a pattern's lock and its failed runs row)."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from jobs.config import load_profile, parse_bytes
from jobs.core.errors import UserError
from jobs.core.patternfile import PatternError
from jobs.lake.locks import pattern_lock
from jobs.lake.store import Lake, storage_error
from jobs.pipeline.context import RunContext
from jobs.pipeline.run import log_failure, short_error
from jobs.project.patterns import load_catalog
from jobs.spark.session import build_session

GROUPS = (
    ("patterns", "pattern files"),
    ("pipeline", "the pipeline"),
    ("lake", "the lake's tables"),
    ("operate", "operating"),
    ("internal", "internal steps (the nightly DAG's tasks; `make run` runs them for you)"),
)


@dataclass(frozen=True)
class Command:
    group: str
    name: str
    help: str


class Registry:
    """The subcommands, each under its group; ``epilog`` lists them by group."""

    def __init__(self, sub):
        self.sub = sub
        self.commands: list[Command] = []

    def add(self, group: str, name: str, help_text: str, func, profile: bool = True
            ) -> argparse.ArgumentParser:
        assert group in dict(GROUPS), group
        p = self.sub.add_parser(name, help=help_text, description=help_text)
        if profile:
            p.add_argument("--profile", help="conf/pipeline.yaml profile (default: local, or "
                                             "$SES_PROFILE)")
        p.set_defaults(func=func)
        self.commands.append(Command(group, name, help_text))
        return p

    def epilog(self) -> str:
        width = max(len(c.name) for c in self.commands) + 2
        out = []
        for key, title in GROUPS:
            out.append(f"{title}:")
            for c in self.commands:
                if c.group == key:
                    first = re.split(r" \(|; |: ", c.help)[0]
                    lines = textwrap.wrap(first, 96 - width - 2) or [""]
                    out.append(f"  {c.name:{width}}{lines[0]}")
                    out.extend(f"  {'':{width}}{line}" for line in lines[1:])
            out.append("")
        out.append("`ses COMMAND --help` describes one command.")
        return "\n".join(out)


def pattern_files(paths: list[str]) -> list[Path]:
    """Files as given, folders as their *.yaml and *.yml files."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(list(path.glob("*.yaml")) + list(path.glob("*.yml"))))
        else:
            out.append(path)
    return out


def size(text: str) -> int:
    """An argparse type: a size such as 512MB."""
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def write_bytes(data: bytes) -> None:
    """Bytes to stdout (as text when stdout is a text stream, as in the tests)."""
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    if out is None:
        sys.stdout.write(data.decode())
    else:
        out.write(data)
        out.flush()


def spark_for(args):
    """The profile of ``--profile`` and its Spark session."""
    profile = load_profile(args.profile)
    return profile, build_session(profile)


def user_errors(fn):
    """One line and exit 2 for what the user can fix: a ``UserError``, a missing file, the
    lake's storage, a concurrent commit. Anything else is a bug and keeps its traceback."""
    def wrapper(*args, **kw) -> int:
        try:
            return fn(*args, **kw)
        except (UserError, FileNotFoundError) as exc:
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
    wrapper.__doc__ = fn.__doc__
    return wrapper


def pattern_step(step):
    """A per-pattern step (match-job, validate-run, publish, run-pattern) on its run
    context: under the pattern's lock, with a failed row in the run log when it fails."""
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
    wrapper.__doc__ = step.__doc__
    return wrapper
