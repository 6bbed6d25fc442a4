"""A source's landing files (regular files only), and the splits their reading is cut into
(one task each when Spark reads them).

A plain CSV or JSONL file larger than ``SPLIT_BYTES`` is cut at line ends into splits of
about that size, each read by its own task; one pass over the file counts the line ends
before each cut, so every task knows its first line's number and the ids and quarantine
lines are those of one reader of the whole file. A file the columnar reader cannot take
(a CSV with a quote character, a lone carriage return, a NUL byte) and a compressed file
are one split, read by Python's readers. A Parquet file is cut by row groups.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from jobs.config import Source
from jobs.core.inputs import refusal
from jobs.landing.reading import NOT_READ, IngestError, csv_header, unreadable

SUFFIXES = {"csv": (".csv", ".csv.gz"), "jsonl": (".jsonl", ".jsonl.gz", ".json", ".json.gz"),
            "parquet": (".parquet",)}
SPLIT_BYTES = 64 << 20  # bytes of a landing file one task reads, at most about
TASK_BYTES = SPLIT_BYTES  # small files' splits are packed into tasks of about this much
MIN_SPLIT = 8 << 20  # a file under twice this is read by one task
SCAN_BYTES = 8 << 20
ROW_BYTES = 100  # about a text landing row's bytes, for a guess of a batch's rows
GZIP_RATIO = 6  # about how much a compressed landing file grows when read


def landing_files(source: Source, landing_root: str) -> list[Path]:
    """The source's landing files (its folder and sub-folders, by suffix). A file or
    sub-folder that is a symbolic link, a device or a FIFO fails the source, named: it is
    never opened (``jobs.core.inputs``)."""
    folder = Path(landing_root) / (source.landing or source.name)
    if not folder.is_dir():
        raise IngestError(f"source {source.name!r}: landing folder {folder} does not exist")
    found = []
    for here, dirs, files in os.walk(folder):  # does not descend into linked folders
        for name in sorted(dirs) + sorted(files):
            path = Path(here) / name
            wanted = name in files and name.endswith(SUFFIXES[source.format])
            refused = refusal(path)
            if refused and (wanted or path.is_symlink()):
                raise IngestError(f"{path}: {refused} (source {source.name!r} is not "
                                  "ingested until it is replaced or removed)")
            if wanted:
                found.append(path)
    return sorted(found)


def estimated_rows(paths: list[Path]) -> int:
    """About how many rows ``paths`` hold, before they are read: a Parquet file's own count,
    a text file's bytes over ``ROW_BYTES`` (a compressed one's times ``GZIP_RATIO``). It
    decides only what to prepare while the tasks run, never a result."""
    import pyarrow.parquet as pq

    rows = 0
    for path in paths:
        if path.name.endswith(".parquet"):
            try:
                rows += pq.ParquetFile(path).metadata.num_rows
            except (OSError, pa.ArrowInvalid):  # the task names the unreadable file
                pass
            continue
        size = path.stat().st_size * (GZIP_RATIO if path.name.endswith(".gz") else 1)
        rows += size // ROW_BYTES
    return rows


def file_format(path: Path, default: str) -> str:
    return next((f for f, suffixes in SUFFIXES.items() if path.name.endswith(suffixes)),
                default)


@dataclass(frozen=True)
class Split:
    """A part of one pending landing file that one task reads. ``start``/``end``: bytes
    (``end`` -1: to the end; for Parquet: row groups); ``first_line``: the lines (Parquet:
    rows) before ``start``; ``columnar``: read on columns, else by Python's readers (a whole
    file); ``header``: a CSV file's column names."""

    index: int
    file_index: int
    path: str
    label: str
    fmt: str
    start: int = 0
    end: int = -1
    first_line: int = 0
    columnar: bool = False
    header: tuple[str, ...] | None = None
    last: bool = True  # the file's last split
    run_id: str = ""
    now: datetime | None = None


def split_size(size: int, slots: int) -> int:
    """The bytes per split of a file of ``size``: at most about ``SPLIT_BYTES``, and as
    many splits as a multiple of the task ``slots`` (so the last wave is full)."""
    if size < 2 * MIN_SPLIT:
        return max(size, 1)
    n = -(-size // SPLIT_BYTES)
    n = -(-n // slots) * slots
    n = min(n, size // MIN_SPLIT)
    return -(-size // max(n, 1))


def _scan(path: Path, fmt: str, step: int) -> tuple[bool, list[tuple[int, int]]]:
    """Whether the columnar reader may read a plain file, and the cuts: (byte offset,
    line ends before it) at the first line end after every ``step`` bytes (in a CSV file:
    the first after which the quote characters so far are even, so no quoted field is
    open; the task that reads up to it checks that). A carriage return not before a line
    feed ends a line for Python's readers, and the csv module refuses a NUL byte: such a
    file is read whole by Python's readers."""
    size = path.stat().st_size
    plain, cuts = True, [(0, 0)]
    newlines, pos, prev_cr, quotes = 0, 0, False, 0
    target = step
    with open(path, "rb") as f:
        while data := f.read(SCAN_BYTES):
            if fmt == "csv" and b"\x00" in data:
                plain = False
            crs = data.count(b"\r")
            if crs and crs - data.count(b"\r\n") - data.endswith(b"\r") > 0:
                plain = False
            if prev_cr and not data.startswith(b"\n"):
                plain = False
            prev_cr = data.endswith(b"\r")
            if not plain:
                return False, [(0, 0)]
            while target < size and pos + len(data) > target:
                at = _cut(data, max(0, target - pos), quotes if fmt == "csv" else None)
                if at < 0:
                    break
                cut = pos + at + 1
                if cut < size:
                    cuts.append((cut, newlines + data.count(b"\n", 0, at + 1)))
                target = cut + step
            newlines += data.count(b"\n")
            quotes += data.count(b'"') if fmt == "csv" else 0
            pos += len(data)
    if prev_cr:
        return False, [(0, 0)]
    return True, cuts


def _cut(data: bytes, offset: int, quotes: int | None) -> int:
    """The first line end in ``data`` from ``offset`` (with ``quotes`` before ``data``:
    the first after which they are even), or -1. Line by line from ``offset``: a quoted
    field rarely holds a line end, so the first or second is the cut."""
    at = data.find(b"\n", offset)
    if quotes is None or at < 0:
        return at
    seen = quotes + data.count(b'"', 0, at)
    while seen % 2:
        nxt = data.find(b"\n", at + 1)
        if nxt < 0:
            return -1
        seen += data.count(b'"', at + 1, nxt)
        at = nxt
    return at


def splits_of(path: Path, fmt: str, time_column: str, file_index: int, label: str,
              first: int, run_id: str, now: datetime, slots: int = 1) -> list[Split]:
    """The splits of one pending landing file, numbered from ``first``. Raises
    ``IngestError`` for a CSV header that names a column twice or lacks the time column,
    and for a Parquet file that cannot be opened."""
    common = dict(file_index=file_index, path=str(path), label=label, fmt=fmt,
                  run_id=run_id, now=now)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(path).metadata
        except (OSError, pa.ArrowInvalid) as exc:
            raise unreadable(path, fmt, exc) from None
        out, rows, size, start, before = [], 0, 0, 0, 0
        for g in range(meta.num_row_groups):
            size += meta.row_group(g).total_byte_size
            rows += meta.row_group(g).num_rows
            if size >= SPLIT_BYTES or g == meta.num_row_groups - 1:
                out.append(Split(first + len(out), start=start, end=g + 1, first_line=before,
                                 columnar=True, **common))
                start, before, size = g + 1, rows, 0
        return out or [Split(first, columnar=True, end=0, **common)]
    if path.name.endswith(".gz"):  # one split, checked for plainness as it is read
        plain, cuts = True, [(0, 0)]
    else:
        plain, cuts = _scan(path, fmt, split_size(path.stat().st_size, slots))
    header = None
    if fmt == "csv" and plain:
        try:
            header = tuple(csv_header(path, time_column))
        except NOT_READ as exc:
            raise unreadable(path, fmt, exc) from None
        if not header:
            return [Split(first, **common)]
    size = path.stat().st_size
    ends = [c for c, _ in cuts[1:]] + [size]
    return [Split(first + i, start=c, end=e, first_line=n, columnar=plain, header=header,
                  last=i == len(cuts) - 1, **common)
            for i, ((c, n), e) in enumerate(zip(cuts, ends))]


def split_bytes(splits: list[Split]) -> list[int]:
    """About how many bytes of text each split holds: its byte range, or its file's size
    over the file's splits (a Parquet file's row groups), a compressed file's times
    ``GZIP_RATIO``. It packs splits into tasks, never decides a result."""
    per_file: dict[int, int] = {}
    for s in splits:
        per_file[s.file_index] = per_file.get(s.file_index, 0) + 1
    sizes = []
    for s in splits:
        try:
            size = os.stat(s.path).st_size
        except OSError:  # the task names the file that is gone
            size = 0
        if s.fmt != "parquet" and s.end >= 0:
            size = s.end - s.start
        elif per_file[s.file_index] > 1:
            size //= per_file[s.file_index]
        sizes.append(size * (GZIP_RATIO if s.path.endswith(".gz") else 1))
    return sizes


def packed(splits: list[Split], slots: int) -> list[list[Split]]:
    """The splits packed into tasks of about ``TASK_BYTES`` each (``balanced``): each
    Spark task costs about 60 ms of its own, and the year's 250 small daily files as 250
    tasks spent 7 s on that alone."""
    return [[splits[k] for k in task] for task in balanced(split_bytes(splits), slots)]


def balanced(sizes: list[int], slots: int) -> list[list[int]]:
    """The positions of ``sizes`` packed into tasks of about ``TASK_BYTES`` each, at least
    two per task slot while there are items enough: largest first into the lightest task,
    so the tasks take about the same time; each task's positions in order, the tasks in
    the order of their first."""
    if not sizes:
        return []
    count = min(len(sizes), max(2 * slots, -(-sum(sizes) // TASK_BYTES)))
    tasks: list[list[int]] = [[] for _ in range(count)]
    load = [(0, t) for t in range(count)]  # a heap: the lightest task first
    for k in sorted(range(len(sizes)), key=lambda k: -sizes[k]):
        size, lightest = heapq.heappop(load)
        tasks[lightest].append(k)
        heapq.heappush(load, (size + sizes[k], lightest))
    return sorted((sorted(t) for t in tasks if t), key=lambda t: t[0])


def whole(split: Split, index: int) -> Split:
    """The file of ``split`` as one split read by Python's readers."""
    return Split(index, split.file_index, split.path, split.label, split.fmt,
                 run_id=split.run_id, now=split.now)
