"""A table summarised data file by data file, for the catalogue: of a match table its rows,
matches per month and first matches by start; of a statistics table its counts per value;
kept per file in the site's ``pages.json``.

A Delta data file never changes once written (a commit adds and removes whole files), so
a build reads only the files added since the previous one and drops the summaries of the
files removed: the table's totals are sums over its current files, and its first matches
are the first among each file's own first matches. A night's build then reads what the
night published, not the pattern's whole history (after a compaction, the compacted files
once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake.store import file_name, scan

T = TypeVar("T")


@dataclass(frozen=True)
class FileSummary:
    rows: int
    months: dict[str, int]
    first: list[tuple[int, str]]  # (start in µs since the epoch, match_id), the file's first

    def to_json(self) -> dict:
        return {"rows": self.rows, "months": self.months, "first": self.first}

    @staticmethod
    def from_json(data: dict) -> FileSummary:
        return FileSummary(int(data["rows"]), {str(k): int(v) for k, v in data["months"].items()},
                           [(int(s), str(m)) for s, m in data["first"]])


def summarise(t: pa.Table, shown: int) -> FileSummary:
    """One file's rows (its ``match_id`` and ``start_ts`` columns)."""
    if t.num_rows == 0:
        return FileSummary(0, {}, [])
    months = pc.value_counts(pc.strftime(t.column("start_ts"), format="%Y-%m")).to_pylist()
    micros = pc.cast(pc.cast(t.column("start_ts"), pa.timestamp("us", "UTC")), pa.int64())
    first = pa.table({"s": micros, "m": t.column("match_id")}).sort_by(
        [("s", "ascending"), ("m", "ascending")]).slice(0, shown).to_pylist()
    return FileSummary(t.num_rows, {c["values"]: c["counts"] for c in months},
                       [(r["s"], r["m"]) for r in first])


def by_file(dataset, kept: dict[str, T], summarise: Callable[[object], T]
            ) -> tuple[dict[str, T], int]:
    """A summary per current data file of a Delta table's Arrow ``dataset``: those in
    ``kept`` (by file name) as they are, ``summarise(fragment)`` for the others. Returns
    them and how many files were read."""
    fragments = {file_name(f.path): f for f in dataset.get_fragments()}
    files = {name: kept[name] for name in fragments if name in kept}
    new = [name for name in fragments if name not in files]
    for name in new:
        files[name] = summarise(fragments[name])
    return files, len(new)


@dataclass
class TableSummary:
    rows: int
    per_month: list[tuple[str, int]]
    first: list[tuple[int, str]]  # the table's first matches: (start µs, match_id)
    files: dict[str, FileSummary]  # by data file name
    read: int  # files read by this build


def summarise_table(dataset, kept: dict[str, FileSummary], shown: int) -> TableSummary:
    """The summary of a table's ``dataset`` (delta-rs' Arrow dataset of its current files),
    reading only the files not in ``kept``."""
    files, new = by_file(dataset, kept, lambda frag: summarise(frag.to_table(
        columns=["match_id", "start_ts"], schema=dataset.schema), shown))
    months: dict[str, int] = {}
    for s in files.values():
        for m, c in s.months.items():
            months[m] = months.get(m, 0) + c
    first = sorted(x for s in files.values() for x in s.first)[:shown]
    return TableSummary(sum(s.rows for s in files.values()), sorted(months.items()), first,
                        files, new)


def read_first(dataset, summary: TableSummary, columns: list[str]) -> pa.Table | None:
    """The rows of the table's first matches, read from the files that hold them only."""
    import pyarrow.dataset as pads

    ids = {m for _, m in summary.first}
    if not ids:
        return None
    holding = {name for name, s in summary.files.items() if ids & {m for _, m in s.first}}
    part = pads.FileSystemDataset([f for f in dataset.get_fragments()
                                   if file_name(f.path) in holding],
                                  dataset.schema, dataset.format, dataset.filesystem)
    return scan(part, columns, pc.field("match_id").isin(pa.array(sorted(ids), pa.string())))
