"""The night's own checks, beside its patterns' outcomes (docs/operations.md, "What the
night tells you"):

* **freshness** of a source with ``freshness: {warn_after, error_after}`` in
  ``conf/sources.yaml``: the age of its newest landing file (when data last *arrived*) and
  of its newest event (how recent what arrived is), at the end of the logical date (or now,
  if earlier); the worse of the two decides;
* **volume**: per source its new events, per pattern its new matches, against the same
  subject's last ``alerts.nights`` nights (``volume_band``);
* the alerts of a night (``alerts_of``): failed patterns, held changes, freshness
  warnings and errors, volume anomalies.
"""

from __future__ import annotations

import statistics
from datetime import date, datetime, timedelta, timezone

from jobs.config import load_sources
from jobs.config.profiles import AlertSettings
from jobs.config.sources import Source
from jobs.lake.extent import events_extent
from jobs.lake.health import (
    ERROR,
    FRESHNESS,
    NEW,
    OK,
    VOLUME,
    WARN,
    Check,
    append_checks,
    history,
)
from jobs.lake.store import Lake
from jobs.notify import ANOMALY, FAILURE, HELD, Alert, send
from jobs.notify import ERROR as SEV_ERROR
from jobs.notify import FRESHNESS as FRESH_ALERT
from jobs.notify import WARNING as SEV_WARNING
from jobs.pipeline.ingest import IngestError, landing_files
from jobs.progress import say
from jobs.runrecord import NIGHTLY
from jobs.status import FAILED

MAD_SCALE = 1.4826  # the MAD of a normal distribution times this is its standard deviation
FLOOR = 0.25  # the robust deviation is at least this share of the median


def reference_time(logical_date: str, now: datetime | None = None) -> datetime:
    """What freshness is measured at: the end of the logical date, or now when that is
    earlier (a night's run is judged as of its night, a rerun of an old date as of it)."""
    now = now or datetime.now(timezone.utc)
    if not logical_date:
        return now
    end = datetime.combine(date.fromisoformat(logical_date) + timedelta(days=1),
                           datetime.min.time(), tzinfo=timezone.utc)
    return min(now, end)


def _ago(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.1f} d" if days >= 1 else f"{seconds / 3600:.1f} h"


def _level(age: float, source: Source) -> str:
    f = source.freshness
    if f.error_after is not None and age > f.error_after / 1e9:
        return ERROR
    if f.warn_after is not None and age > f.warn_after / 1e9:
        return WARN
    return OK


def _fmt(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def freshness_check(lake: Lake, source: Source, landing_root: str, run_id: str,
                    logical_date: str, now: datetime | None = None) -> Check | None:
    """A source's freshness (None: no ``freshness`` set for it). ``since``: when the
    stale measure last moved (the newest landing file's time, the newest event's, or
    the later of the two when both are stale)."""
    if source.freshness is None:
        return None
    at = reference_time(logical_date, now)
    try:
        files = landing_files(source, landing_root)
    except IngestError:
        files = []
    newest_file = max((datetime.fromtimestamp(p.stat().st_mtime, tz=timezone.utc)
                       for p in files), default=None)
    extent = events_extent(lake, source.name)
    newest_event = None
    if extent is not None and extent.complete and len(extent.highs):
        newest_event = datetime.fromtimestamp(int(extent.highs.max()) / 1e9, tz=timezone.utc)
    f = source.freshness
    limits = ", ".join(f"{k} {_ago(v / 1e9)}" for k, v in
                       (("warn_after", f.warn_after), ("error_after", f.error_after)) if v)
    if newest_file is None and newest_event is None:
        return Check(run_id, logical_date, FRESHNESS, "source", source.name, ERROR,
                     message=f"source {source.name}: no landing file and no event at all "
                             f"({limits})")
    parts, worst, ages, stale = [], OK, [], []
    for what, t in (("landing file", newest_file), ("event", newest_event)):
        if t is None:
            continue
        age = (at - t).total_seconds()
        level = _level(age, source)
        ages.append(age)
        if level != OK:
            parts.append(f"newest {what} {_fmt(t)} ({_ago(age)} old)")
            stale.append(t)
        worst = max(worst, level, key=[OK, WARN, ERROR].index)
    since = max(stale) if stale else (newest_file or newest_event)
    if worst == OK:
        message = f"source {source.name}: fresh (newest file {_fmt(newest_file) if newest_file else '-'}, " \
                  f"newest event {_fmt(newest_event) if newest_event else '-'})"
    else:
        message = (f"source {source.name}: nothing new since {_fmt(since)}: "
                   f"{'; '.join(parts)} ({limits}); check the upstream export into "
                   f"{landing_root}/{source.landing or source.name}")
    return Check(run_id, logical_date, FRESHNESS, "source", source.name, worst,
                 value=round(max(ages) / 3600, 2), since=since, message=message)


def volume_band(past: list[float], settings: AlertSettings) -> tuple[float, float] | None:
    """The band a night's count is expected in, from the subject's earlier nights: the
    median plus or minus ``alerts.threshold`` robust deviations (the MAD scaled to a
    standard deviation, at least a quarter of the median and at least 1, so that a steady
    count does not flag its first wobble, nor a busy weekday after quiet ones). None:
    fewer than ``alerts.min_nights`` nights."""
    if len(past) < settings.min_nights:
        return None
    median = statistics.median(past)
    mad = statistics.median(abs(x - median) for x in past)
    scale = max(MAD_SCALE * mad, FLOOR * median, 1.0)
    return max(median - settings.threshold * scale, 0.0), median + settings.threshold * scale


def judge(value: float, past: list[float], settings: AlertSettings) -> tuple[str, tuple | None]:
    """(status, band): ``new`` with too few nights; ``warn`` outside the band, or zero
    where the median of the earlier nights is at least one (always flagged)."""
    band = volume_band(past, settings)
    if band is None:
        return NEW, None
    median = statistics.median(past)
    if value == 0 and median >= 1:
        return WARN, band
    return (WARN if not band[0] <= value <= band[1] else OK), band


def volume_checks(lake: Lake, settings: AlertSettings, run_id: str, logical_date: str,
                  subject_kind: str, values: dict[str, float]) -> list[Check]:
    """Tonight's count per subject (new events of a source, new matches of a pattern)
    judged against its history in the ``health`` table."""
    if not values or not logical_date:
        return []
    past = history(lake, VOLUME, subject_kind, logical_date, settings.nights)
    what = "new events" if subject_kind == "source" else "new matches"
    out = []
    for subject, value in sorted(values.items()):
        mine = past.get(subject, [])
        status, band = judge(value, mine, settings)
        if status == NEW:
            message = f"{subject}: {value:,.0f} {what} ({len(mine)} earlier night(s): too few to judge)"
        else:
            median = statistics.median(mine)
            message = (f"{subject}: {value:,.0f} {what} tonight; the last {len(mine)} nights' "
                       f"median is {median:,.0f}, expected {band[0]:,.0f} to {band[1]:,.0f}")
        out.append(Check(run_id, logical_date, VOLUME, subject_kind, subject, status,
                         value=float(value), low=band[0] if band else None,
                         high=band[1] if band else None, message=message))
    return out


def alerts_of(checks: list[Check], outcomes: list, run_id: str, logical_date: str,
              command: str = "ses run") -> list[Alert]:
    """The night's alerts: one per failed pattern (a held change as its own kind), per
    freshness warning or error, per volume anomaly. None when all is well."""
    out = []
    for o in outcomes:
        if getattr(o, "ok", True):
            continue
        held = getattr(o, "error_type", None) == "HeldChange"
        action = (f"{command} --accept-changes {o.pattern} (if intended)" if held else
                  f"{command} --logical-date {logical_date}" if getattr(o, "kind", None) != "final"
                  else f"fix the cause, then {command} --logical-date {logical_date}")
        out.append(Alert(HELD if held else FAILURE, SEV_ERROR, o.pattern, o.message or "failed",
                         run_id, logical_date, action=action))
    for c in checks:
        if not c.flagged:
            continue
        severity = SEV_ERROR if c.status == ERROR else SEV_WARNING
        if c.check == FRESHNESS:
            out.append(Alert(FRESH_ALERT, severity, c.subject, c.message, run_id, logical_date,
                             since=c.since.isoformat() if c.since else None,
                             action="check the source's upstream export and landing folder"))
        elif c.check == VOLUME:
            out.append(Alert(ANOMALY, severity, c.subject, c.message, run_id, logical_date,
                             action=f"ses runs --pattern {c.subject}" if c.subject_kind == "pattern"
                             else f"ses query \"SELECT source_file, count(*) FROM events_{c.subject} "
                                  "GROUP BY 1\"",
                             details={"value": c.value, "low": c.low, "high": c.high}))
    return out


def source_checks(ctx, ingested: list, names: list[str]) -> list[Check]:
    """A nightly run's checks of its sources ``names``: freshness (where set) and the
    volume of new events (``ingested``: the ingest's ``IngestResult`` of each)."""
    if ctx.run_kind != NIGHTLY or not ctx.logical_date:
        return []
    sources = load_sources()
    out = [c for n in names if n in sources
           for c in [freshness_check(ctx.lake, sources[n], ctx.profile.landing, ctx.run_id,
                                     ctx.logical_date)] if c is not None]
    return out + volume_of_sources(ctx, ingested)


def volume_of_sources(ctx, ingested: list) -> list[Check]:
    """The volume of each ingested source's new events (a nightly run's)."""
    if ctx.run_kind != NIGHTLY or not ctx.logical_date:
        return []
    return volume_checks(ctx.lake, ctx.profile.alerts, ctx.run_id, ctx.logical_date,
                         "source", {r.source: r.new_events for r in ingested})


def pattern_checks(ctx, outcomes: list) -> list[Check]:
    """The volume of each published pattern's new matches (a full recompute, which
    publishes a whole history, is not a night's volume and is not judged)."""
    if ctx.run_kind != NIGHTLY or not ctx.logical_date:
        return []
    values = {o.pattern: o.record.inserted or 0 for o in outcomes
              if getattr(o, "ok", False) and not o.record.full_recompute}
    return volume_checks(ctx.lake, ctx.profile.alerts, ctx.run_id, ctx.logical_date,
                         "pattern", values)


def report_checks(ctx, checks: list[Check], outcomes: list, echo=say,
                  command: str = "ses run") -> list[Alert]:
    """The night's checks into the ``health`` table, a line for each flagged one, and the
    night's alerts sent (``jobs.notify``); returns the alerts. Recording or delivery
    failing is reported in a line, never fails the night."""
    try:
        append_checks(ctx.lake, checks)
    except Exception as exc:  # noqa: BLE001 - the checks are a report on the night
        echo(f"warning: the night's checks were not recorded in {ctx.lake.health()}: {exc}")
    for c in checks:
        if c.flagged:
            echo(f"{'ERROR' if c.status == ERROR else 'warning'}: {c.check}: {c.message}")
    alerts = alerts_of(checks, outcomes, ctx.run_id, ctx.logical_date, command)
    sent = send(alerts, ctx.profile.alerts, echo)
    if sent:
        echo(f"alerts: {len(alerts)} sent to " + ", ".join(f"{t} ({n})" for t, n in sent.items()))
    return alerts


def freshness_failures(checks: list[Check]) -> list[dict]:
    """A row per source whose freshness is an error: it fails the night (``ses run``
    exits 1; the DAG's task of the source fails), as a pattern's failure does."""
    return [{"source": c.subject, "status": FAILED, "message": c.message}
            for c in checks if c.check == FRESHNESS and c.status == ERROR]
