"""The run context: what one step of a run works on, built once and handed to each step.

A step (ingest, match, validate, publish, models, site) gets the project (its ``conf/``,
patterns, models and expectations: ``jobs.config.Project``), the profile's settings, the
lake it reads and writes (the store, ``jobs.lake.store.Lake``, with the lake's storage options),
the run it belongs to and, for the per-pattern steps, the pattern and its file. No step
builds a path or a ``Lake`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from jobs.config import Profile, Project, current_project
from jobs.core.language.pattern import Pattern
from jobs.lake.store import Lake
from jobs.project.patterns import load_catalog
from jobs.runrecord import NIGHTLY


@dataclass(frozen=True)
class RunContext:
    profile: Profile
    lake: Lake
    run_id: str
    logical_date: str = ""
    path: Path | None = None
    pattern: Pattern | None = None
    run_kind: str = NIGHTLY  # jobs.runrecord.RUN_KINDS
    project: Project = field(default_factory=current_project)
    # patterns whose new version may be published however much of its table it removes
    # (``--accept-changes``; ``jobs.pipeline.publish.steps.held_change``)
    accept_changes: frozenset[str] = frozenset()

    @classmethod
    def start(cls, profile: Profile, run_id: str, logical_date: str = "",
              run_kind: str = NIGHTLY, accept_changes=()) -> "RunContext":
        return cls(profile, Lake.of_profile(profile), run_id, logical_date,
                   run_kind=run_kind, accept_changes=frozenset(accept_changes))

    def for_pattern(self, path: Path | str, pattern: Pattern | None = None) -> "RunContext":
        """The context of one pattern's steps (``pattern``: the file's pattern when the
        caller has loaded it already)."""

        pattern = pattern or load_catalog([path]).get(path)
        return replace(self, path=Path(path), pattern=pattern)

    @property
    def staging(self) -> str:
        """The pattern's staged artifacts of this run."""
        return self.lake.staging(self.pattern.name, self.run_id)
