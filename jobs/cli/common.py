"""What the command groups' handlers share: the one place that turns a ``UserError`` into
one line and exit code 2, and the wrappers of the Spark steps (the profile's session, a
pattern's lock and its failed runs row)."""

from __future__ import annotations

import sys

from jobs.config import load_profile
from jobs.core.errors import EXIT_INPUT, EXIT_RETRY, Transient, UserError
from jobs.lake.paths import storage_error
from jobs.spark.session import LazySession


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
