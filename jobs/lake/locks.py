"""The lake lock: one writer of the lake at a time, and a clear refusal for the second.

``run``, ``backfill``, ``ingest`` and ``retract`` hold the lock *exclusively* for their
whole duration. The Airflow DAG's per-pattern steps (``match-job``, ``validate-run``,
``publish``) hold it *shared* (they run in parallel with each other) plus an exclusive
lock on their pattern. Locks are ``flock`` locks on files: the kernel releases them when
the holder dies, so a killed run never leaves a stale lock behind. For a local lake the
files are in ``<lake>/_locks``; for an object-store lake under the profile's ``lock_dir``
(default ``~/.cache/ses-lakehouse``), which then protects the runs started from this
machine (the scheduler's).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from jobs.core.errors import Transient
from jobs.lake.store import Lake


class LakeBusy(Transient, RuntimeError):
    """Another process holds the lock; the message says which (a rerun once it is done
    mends it: exit ``EXIT_RETRY``)."""


def lock_folder(lake_root: str, lock_dir: str | None = None) -> Path:
    """``<lake>/_locks``, or the lake's folder under ``lock_dir`` (``Lake.local_home``)."""
    folder = Lake(lake_root).local_home(lock_dir) / "_locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.with_suffix(".holder").read_text())
        return (f"{info['what']} (pid {info['pid']} on {info['host']}, since "
                f"{info['since']})")
    except (OSError, ValueError, KeyError):
        return "another process"


@contextmanager
def _flock(path: Path, exclusive: bool, what: str):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LakeBusy(f"another run is in progress: {_holder(path)} holds {path}; "
                           "wait for it to finish (a killed run releases the lock at once)"
                           ) from None
        if exclusive:
            path.with_suffix(".holder").write_text(json.dumps({
                "what": what, "pid": os.getpid(), "host": socket.gethostname(),
                "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def lake_lock(lake_root: str, what: str, lock_dir: str | None = None):
    """Exclusive: nothing else writes the lake meanwhile."""
    with _flock(lock_folder(lake_root, lock_dir) / "lake.lock", True, what):
        yield


@contextmanager
def pattern_lock(lake_root: str, pattern: str, what: str, lock_dir: str | None = None):
    """Shared on the lake (other patterns' steps may run), exclusive on ``pattern``."""
    folder = lock_folder(lake_root, lock_dir)
    with _flock(folder / "lake.lock", False, what), \
            _flock(folder / f"pattern-{pattern}.lock", True, what):
        yield
