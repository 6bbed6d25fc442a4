"""Which files the project reads as its inputs: regular files only.

A landing file, a pattern file or a model file that is a symbolic link, a device, a FIFO or
a socket is refused, named, and never opened: a link in a landing folder to a file outside
the project would be ingested (or quarantined, its lines then readable by ``query``), a
link in ``patterns/`` to another pattern would run that pattern twice, and a FIFO would
block the reader for ever.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def refusal(path: str | Path) -> str | None:
    """Why ``path`` is not read (one phrase), or None for a regular file (or none at all:
    opening it then says so)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return (f"is a symbolic link (to {target[:200]!r}); only regular files are read: "
                "put the file itself there")
    for test, kind in KINDS:
        if test(mode):
            return f"is {kind}, not a regular file; only regular files are read"
    return None
