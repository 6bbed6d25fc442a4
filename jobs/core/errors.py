"""The one base class of errors a user can fix.

A ``UserError`` says what is wrong with the input (a pattern file, a landing file, the
configuration, a command's arguments) or with the lake's state (busy, missing a table), in
one line that names the file, line, row or table and what to do. The command line prints
its message and exits 2. Any other exception is a bug of the project: it keeps its
traceback, so it is never mistaken for the user's fault.
"""

from __future__ import annotations


class UserError(Exception):
    """An error the user can fix; its message is the whole story."""


class Transient(UserError):
    """An error a rerun can mend without any change (the lake busy, a commit conflict, a
    storage error): the command line exits ``EXIT_RETRY`` and the DAG retries its task."""


# exit codes of every ses command: 0 done, 1 some patterns or models failed (a retry may
# mend it), 2 the input is wrong (a retry cannot mend it: fix the file, the argument),
# 75 (sysexits' EX_TEMPFAIL) a transient failure (rerun as it is)
EXIT_FAILED, EXIT_INPUT, EXIT_RETRY = 1, 2, 75


class InputError(UserError, ValueError):
    """A bad value given by the user (an argument, a name, a date, a size)."""


class NotAQuery(UserError):
    """SQL that is not one read-only query where only a query may run (``query``, a
    model): refused before anything runs. ``kind`` names the statement (``INSERT``,
    ``COPY``, ...)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind
