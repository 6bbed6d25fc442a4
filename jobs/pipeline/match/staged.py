"""A pattern's run between its match and its publish (``StagedRun``): where its matches
are staged, the match job's counters and range, and, once the matches suite ran, its
verdict. A night hands it from step to step in memory; the step commands a scheduler runs
one by one (``match-job``, ``validate-run``, ``publish``) keep it beside the staged
matches (``_stats.json``, ``_validation.json``), and so does a run whose suite failed
(its staging is kept for the person who reads why)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from jobs.lake import store as lk
from jobs.pipeline.match.horizons import RunRange

STATS_FILE, VERDICT_FILE = "_stats.json", "_validation.json"


@dataclass(frozen=True)
class StagedRun:
    staging: str  # the folder of its staged match rows
    stats: Mapping  # the match job's counters, range, warnings, pattern version, start
    verdict: Mapping | None = None  # the matches suite's outcome (None: not validated)

    @property
    def rng(self) -> RunRange:
        touched, lows = self.stats.get("touched"), self.stats.get("lows")
        return RunRange(self.stats["low"], self.stats["high"], self.stats["full"],
                        self.stats.get("since"), None if touched is None else (
                            tuple(touched["keys"]), tuple(map(tuple, touched["values"]))),
                        None if lows is None else (tuple(lows["keys"]), tuple(
                            (tuple(v), int(low)) for v, low in lows["values"])),
                        self.stats.get("opened"))

    @property
    def matches(self) -> int:
        return int(self.stats.get("matches", 0) or 0)

    def validated(self, verdict: Mapping) -> StagedRun:
        return replace(self, verdict=verdict)

    def save(self, lake: lk.Lake) -> None:
        """Beside the staged matches, for a step that runs in another process."""
        lake.write_text(lk.join(self.staging, STATS_FILE), json.dumps(dict(self.stats)))
        if self.verdict is not None:
            lake.write_text(lk.join(self.staging, VERDICT_FILE), json.dumps(dict(self.verdict)))

    @classmethod
    def load(cls, lake: lk.Lake, staging: str, what: str) -> StagedRun:
        """The run ``save`` kept in ``staging`` (``what``: the run and pattern, for the
        error when there is none)."""
        try:
            stats = json.loads(lake.read_text(lk.join(staging, STATS_FILE)))
        except (FileNotFoundError, OSError):
            raise FileNotFoundError(f"no staged run {what} at {staging}: run `match-job` "
                                    "for it first") from None
        try:
            verdict = json.loads(lake.read_text(lk.join(staging, VERDICT_FILE)))
        except (FileNotFoundError, OSError):
            verdict = None
        return cls(staging, stats, verdict)


def stage_table(lake: lk.Lake, staging: str, name: str, table) -> None:
    """A night's new state (``first_ever``'s, a partition state) beside its staged
    matches, as the Parquet file ``name``."""
    import pyarrow.parquet as pq

    fs, folder = lake.filesystem(staging)
    fs.create_dir(folder, recursive=True)
    pq.write_table(table, f"{folder}/{name}", filesystem=fs)


def publish_table(lake: lk.Lake, staging: str, name: str, path: str) -> bool:
    """The staged state ``name`` as the Delta table at ``path`` (after the matches'
    publish: a run killed before it keeps the old state); False: none staged."""
    import pyarrow.parquet as pq

    fs, folder = lake.filesystem(staging)
    if fs.get_file_info(f"{folder}/{name}").type.name == "NotFound":
        return False
    lake.write(path, pq.read_table(f"{folder}/{name}", filesystem=fs), mode="overwrite",
               schema_mode="overwrite")
    return True
