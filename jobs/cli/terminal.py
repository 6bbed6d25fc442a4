"""What a command's handler needs of the terminal and nothing heavier (standard library and
the configuration's size parser): file arguments, a size argument, bytes to stdout, this
process's age. ``ses match`` and ``validate`` use it without loading the lake or Spark."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from jobs.config import parse_bytes


def pattern_files(paths: list[str]) -> list[Path]:
    """Files as given, folders as their pattern files: *.yaml, *.yml and *.sql, a YAML file
    beside a .sql file of its stem being that pattern's sidecar, not a pattern."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            sql = sorted(path.glob("*.sql"))
            stems = {f.stem for f in sql}  # NAME.yaml beside NAME.sql: its sidecar
            out.extend(sorted([f for f in [*path.glob("*.yaml"), *path.glob("*.yml")]
                               if f.stem not in stems] + sql))
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
