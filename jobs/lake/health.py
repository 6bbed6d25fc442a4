"""The ``health`` table: what each night's checks found, one row per check and subject
(a source's freshness and volume, a pattern's volume; a held pattern change is its run's
failed row in ``runs``). It is the history the volume rule reads
(``jobs.pipeline.upkeep.health_checks``) and what ``ses runs``, the summary, the catalogue and
the alerts show."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake.store import Lake

FRESHNESS, VOLUME = "freshness", "volume"  # the checks
OK, WARN, ERROR, NEW = "ok", "warn", "error", "new"  # NEW: too few nights to judge
FLAGGED = (WARN, ERROR)  # the statuses a person is told of
SCHEMA = pa.schema([
    ("run_id", pa.string()), ("logical_date", pa.string()),
    ("checked_at", pa.timestamp("us", tz="UTC")), ("check", pa.string()),
    ("subject_kind", pa.string()), ("subject", pa.string()), ("status", pa.string()),
    ("value", pa.float64()), ("low", pa.float64()), ("high", pa.float64()),
    ("since", pa.timestamp("us", tz="UTC")), ("message", pa.string()),
])


@dataclass(frozen=True)
class Check:
    """One check's outcome. ``value``: what was measured (new events or matches, the age
    in hours); ``low``/``high``: the band it was judged against (None: none); ``since``:
    when the condition began (freshness: the newest arrival)."""

    run_id: str
    logical_date: str
    check: str
    subject_kind: str  # source | pattern
    subject: str
    status: str
    value: float | None = None
    low: float | None = None
    high: float | None = None
    since: datetime | None = None
    message: str = ""
    checked_at: datetime | None = None

    @property
    def flagged(self) -> bool:
        return self.status in FLAGGED


def append_checks(lake: Lake, checks: list[Check]) -> None:
    """One commit for a night's checks."""
    if not checks:
        return
    now = datetime.now(timezone.utc)
    rows = [{**asdict(c), "checked_at": c.checked_at or now} for c in checks]
    lake.append(lake.health(), pa.Table.from_pylist(rows, SCHEMA))


def read_checks(lake: Lake, check: str | None = None, run_ids: set[str] | None = None
                ) -> list[Check]:
    """The checks (of one kind, of some runs), oldest first."""
    flt = None
    if check is not None:
        flt = pc.field("check") == check
    if run_ids is not None:
        one = pc.field("run_id").isin(sorted(run_ids))
        flt = one if flt is None else flt & one
    t = lake.read_arrow(lake.health(), filter=flt)
    if t is None or t.num_rows == 0:
        return []
    t = t.sort_by([("checked_at", "ascending")])
    names = {f.name for f in fields(Check)}
    return [Check(**{k: v for k, v in r.items() if k in names}) for r in t.to_pylist()]


def history(lake: Lake, check: str, subject_kind: str, before: str, nights: int
            ) -> dict[str, list[float]]:
    """Per subject, the values of its last ``nights`` nightly checks before the logical
    date ``before`` (one per logical date: the latest run's), oldest first."""
    flt = ((pc.field("check") == check) & (pc.field("subject_kind") == subject_kind)
           & (pc.field("logical_date") < before))
    t = lake.read_arrow(lake.health(), columns=["logical_date", "checked_at", "subject",
                                                "value"], filter=flt)
    if t is None or t.num_rows == 0:
        return {}
    t = t.sort_by([("subject", "ascending"), ("logical_date", "ascending"),
                   ("checked_at", "ascending")])
    out: dict[str, dict[str, float]] = {}
    for subject, day, value in zip(t.column("subject").to_pylist(),
                                   t.column("logical_date").to_pylist(),
                                   t.column("value").to_pylist()):
        if value is not None:
            out.setdefault(subject, {})[day] = value  # the day's last run wins
    return {s: list(days.values())[-nights:] for s, days in out.items()}
