"""Which files the project reads as its inputs: regular files only.

A landing file, a pattern file or a model file that is a symbolic link, a device, a FIFO or
a socket is refused, named, and never opened: a link in a landing folder to a file outside
the project would be ingested (or quarantined, its lines then readable by ``query``), a
link in ``patterns/`` to another pattern would run that pattern twice, and a FIFO would
block the reader for ever.
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
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


# -- names given twice: JSON, YAML and CSV readers keep one of them without a word -------

def repeated(names) -> list[str]:
    """The names that occur more than once in ``names`` (a header, a schema), sorted."""
    return sorted(n for n, k in Counter(names).items() if k > 1)


def json_keys_twice(text: str) -> tuple[object, list[str]]:
    """``text`` parsed as JSON, and every key an object in it writes twice (``json.loads``
    keeps the last value of those); raises ``json.JSONDecodeError`` as it does."""
    doubled: list[str] = []

    def pairs(items: list[tuple]) -> dict:
        seen: set = set()
        for key, _ in items:
            if key in seen:
                doubled.append(key)
            seen.add(key)
        return dict(items)

    return json.loads(text, object_pairs_hook=pairs), doubled
