"""What the command groups' handlers share: the one place that turns a ``UserError`` into
one line and exit code 2, and the wrappers of the Spark steps (the profile's session, a
pattern's lock and its failed runs row)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from jobs.config import load_profile, parse_bytes
from jobs.core.errors import EXIT_INPUT, EXIT_RETRY, Transient, UserError
from jobs.lake.store import storage_error
from jobs.spark.session import LazySession


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


def process_seconds() -> float | None:
    """Seconds since this process started (Linux: /proc), or None where that is unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))


def spark_for(args):
    """The profile of ``--profile`` and its Spark session, started on first use
    (``LazySession``: a command with nothing for Spark to do never starts it)."""
    profile = load_profile(args.profile)
    return profile, LazySession(profile)


def user_errors(fn):
    """One line for what the user can fix or a rerun can mend, with an exit code that says
    which (``jobs.core.errors``): 2 for a ``UserError`` or a missing file (fix the input;
    a retry would fail the same way), 75 for a transient failure (the lake busy, a commit
    conflict, the storage: rerun as it is; the DAG retries it). Anything else is a bug and
    keeps its traceback."""
    def wrapper(*args, **kw) -> int:
        try:
            return fn(*args, **kw)
        except Transient as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_RETRY
        except (UserError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_INPUT
        except OSError as exc:  # the lake's storage (an object store's errors from delta-rs)
            print(f"error: {storage_error(exc)} (a transient failure: rerun)", file=sys.stderr)
            return EXIT_RETRY
        except Exception as exc:
            from deltalake.exceptions import CommitFailedError

            if isinstance(exc, CommitFailedError):
                print(f"error: another process committed to the same Delta table at the same "
                      f"time ({str(exc).splitlines()[0][:200]}); another run is in progress: "
                      "wait for it, then rerun (reruns are idempotent)", file=sys.stderr)
                return EXIT_RETRY
            raise
    wrapper.__doc__ = fn.__doc__
    return wrapper
