"""The upkeep steps: after publish, the lake's table maintenance when it is due and the
catalogue site (each reports its failure and never fails the night); and ``ses retract``
under the lake lock."""

from __future__ import annotations

from pathlib import Path

from jobs.config import Profile
from jobs.lake.locks import lake_lock
from jobs.lake.maintenance import compact_logs, due, maintain
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.outcome import short_error
from jobs.pipeline.upkeep.reconcile import reconcile
from jobs.pipeline.upkeep.retract import retract
from jobs.progress import progress, say
from jobs.site.build import build_site


def maintenance_step(ctx: RunContext, echo=say) -> list:
    """The lake's table maintenance when due (``maintenance.every`` since the last one, by
    logical date; ``jobs.lake.maintenance``), else the run logs compacted when a week of
    nights has fragmented them (``compact_logs``); inside the run's lake lock; a failure
    is reported and never fails the run (the next run tries again)."""
    profile = ctx.profile
    try:
        if not ctx.logical_date or not due(ctx.lake, profile.maintain_every, ctx.logical_date):
            compact_logs(ctx.lake)  # the run logs between two maintenances
            return []
        with progress("maintenance", None, echo):
            return maintain(ctx.lake, profile.retention, ctx.logical_date, echo)
    except Exception as exc:  # noqa: BLE001 - maintenance is upkeep, not the night's result
        echo(f"warning: table maintenance not done ({short_error(exc)}); the next run or "
             "`ses maintain` retries")
        return []


def site_step(ctx: RunContext, echo=say) -> None:
    """The catalogue site after a run (when the profile names its folder); a failure is
    reported, never fails the run."""
    if not ctx.profile.site:
        return
    try:
        with progress("catalogue", None, echo):
            build_site(ctx.lake, Path(ctx.profile.site), echo=echo)
    except Exception as exc:  # noqa: BLE001 - the site is a view of the run, not the run
        echo(f"warning: catalogue site not built ({short_error(exc)}); `make docs` retries")


def retract_task(profile: Profile, source: str, event_ids: list[str] | None,
                 source_file: str | None, reason: str = "") -> dict:
    """``ses retract`` under the lake lock, after the repair of a retract killed before
    (its row is logged first): ``retract.retract``'s row."""
    lake = Lake.of_profile(profile)
    with lake_lock(profile.lake, "retract", profile.lock_dir):
        reconcile(lake)
        return retract(lake, source, event_ids, source_file, reason)
