"""The ``funnels`` table: how far each pattern's windows got, step by step, one row per
step per pattern per run (docs/semantics.md, "Funnels"). A night's rows count the
windows whose first event lies in the night's range (a first night: the whole history),
so the windows and stops of a pattern version's nights add up; its partitions do not
(a partition may reach a step on several nights). Appended once per night."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake.store import Lake

SCHEMA = pa.schema([
    ("run_id", pa.string()), ("logical_date", pa.string()), ("pattern", pa.string()),
    ("pattern_version", pa.string()), ("alternative", pa.int32()), ("step", pa.int32()),
    ("variables", pa.string()), ("negations", pa.string()), ("partitions", pa.int64()),
    ("windows", pa.int64()), ("stopped", pa.string()), ("full_recompute", pa.bool_()),
    ("incomplete_groups", pa.int64()),
])


@dataclass(frozen=True)
class FunnelStepRow:
    run_id: str
    logical_date: str
    pattern: str
    pattern_version: str
    alternative: int | None
    step: int
    variables: str  # the step's positive set, comma separated
    negations: str  # the negated sets it tests
    partitions: int
    windows: int
    stopped: str  # JSON {what stopped: windows} of the windows that reached no further
    full_recompute: bool = False
    incomplete_groups: int = 0

    @property
    def stops(self) -> dict[str, int]:
        return json.loads(self.stopped or "{}")


def append_funnels(lake: Lake, rows: list[FunnelStepRow]) -> None:
    """One commit for a night's funnels."""
    if rows:
        lake.append(lake.funnels(), pa.Table.from_pylist([asdict(r) for r in rows], SCHEMA))


def read_funnels(lake: Lake, pattern: str | None = None, since: str | None = None
                 ) -> list[FunnelStepRow]:
    """The funnel rows (of one pattern; of the logical dates from ``since``), in the
    order of their runs, then steps."""
    flt = None if pattern is None else pc.field("pattern") == pattern
    if since is not None:
        later = pc.field("logical_date") >= since
        flt = later if flt is None else flt & later
    t = lake.read_arrow(lake.funnels(), filter=flt)
    if t is None or t.num_rows == 0:
        return []
    t = t.sort_by([("run_id", "ascending"), ("alternative", "ascending"),
                   ("step", "ascending")])
    return [FunnelStepRow(**{f: r[f] for f in SCHEMA.names}) for r in t.to_pylist()]


def latest(rows: list[FunnelStepRow]) -> list[FunnelStepRow]:
    """The rows of the newest run among ``rows``."""
    if not rows:
        return []
    newest = max(r.run_id for r in rows)
    return [r for r in rows if r.run_id == newest]
