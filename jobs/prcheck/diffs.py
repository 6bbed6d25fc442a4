"""What pr-check found, as data: per changed pattern and model, the base and the new
version's runs and the rows that differ. ``check`` fills it in, ``report`` renders it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from jobs.project.changes import Changes, ModelChange, PatternChange
from jobs.runrecord import RunRecord
from jobs.status import FAILED


@dataclass
class Side:
    """One version of a pattern, run in a scratch lake: its runs row and published rows."""

    status: str  # success | failed
    row: RunRecord | dict = field(default_factory=dict)  # the run's record (empty: not run)
    matches: pa.Table | None = None
    message: str = ""
    error_type: str | None = None  # the failure's class (``PatternOutcome.error_type``)


@dataclass
class PatternDiff:
    change: PatternChange
    problems: list[str] = field(default_factory=list)  # validation and examples (the head's)
    before: Side | None = None
    after: Side | None = None
    n_added: int = 0
    n_removed: int = 0
    added: list[dict] = field(default_factory=list)  # the first SHOWN, by start
    removed: list[dict] = field(default_factory=list)
    months: list[tuple[str, int, int]] = field(default_factory=list)  # month, before, after
    chart: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.problems) or (self.after is not None and self.after.status == FAILED)


@dataclass
class ModelDiff:
    change: ModelChange
    before: dict | None = None  # run_models' row
    after: dict | None = None
    n_added: int = 0
    n_removed: int = 0
    added: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.after is not None and self.after.get("status") == FAILED


@dataclass
class PrCheck:
    changes: Changes
    data: str  # what the runs read, in words
    patterns: list[PatternDiff]
    models: list[ModelDiff]
    events: dict = field(default_factory=dict)  # event id -> (time, label) of shown matches
    seconds: float = 0.0
    scratch: str | None = None  # where the scratch lakes were

    @property
    def ok(self) -> bool:
        return not any(p.failed for p in self.patterns) and not any(m.failed for m in self.models)
