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


class InputError(UserError, ValueError):
    """A bad value given by the user (an argument, a name, a date, a size)."""


class NotAQuery(UserError):
    """SQL that is not one read-only query where only a query may run (``query``, a
    model): refused before anything runs. ``kind`` names the statement (``INSERT``,
    ``COPY``, ...)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind
