"""The steps after matching: the matches suite on a night's staged runs in one pass
(``validate_steps``), the checks that a staged run may be published (``publishable``), its
publish and runs row (``publish_step``), and a failed row (``log_failure``). A night hands
them each pattern's ``StagedRun`` in memory; the step commands find it beside the staging.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pyarrow as pa

from jobs.core.errors import InputError, UserError
from jobs.core.language.funnel_steps import funnel_steps
from jobs.failpoints import reached
from jobs.lake.funnels import FunnelStepRow, append_funnels
from jobs.lake.runs import RunsLog, log_run
from jobs.lake.table_docs import document_match_table
from jobs.pipeline.context import RunContext
from jobs.pipeline.match.first_ever import publish_state
from jobs.pipeline.match.partition_state import publish_state as publish_history_state
from jobs.pipeline.match.partition_state import stateful
from jobs.pipeline.match.staged import StagedRun
from jobs.pipeline.publish.matches import publish
from jobs.pipeline.validate.check_frames import StagedMatches
from jobs.pipeline.validate.quality import ValidationFailed, validate_staged
from jobs.progress import say
from jobs.runrecord import RunRecord
from jobs.status import FAILED, SUCCESS


def staged_of(ctx: RunContext) -> StagedRun:
    """The staged run a separate step command (``validate-run``, ``publish``) finds beside
    its matches."""
    return StagedRun.load(ctx.lake, ctx.staging,
                          f"{ctx.run_id!r} for pattern {ctx.pattern.name!r}")


def validate_step(spark, ctx: RunContext) -> dict:
    """The matches suite on one staged run (``validate-run``), its verdict kept beside it:
    the verdict, or ``ValidationFailed`` once its failed row is in the run log."""
    staged = staged_of(ctx)
    result = validate_steps(spark, [(ctx, staged)])[ctx.pattern.name]
    if isinstance(result, ValidationFailed):
        log_failure(ctx, str(result), logical_date=staged.stats.get("logical_date", ""))
    if isinstance(result, Exception):
        raise result
    result.save(ctx.lake)  # for the ``publish`` step command
    return result.verdict


def validate_steps(spark, runs: list[tuple[RunContext, StagedRun]]
                   ) -> dict[str, StagedRun | Exception]:
    """The matches suite on the staged runs of a night in one pass
    (``quality.validate_staged``). Per pattern: its run with the verdict (and the pattern's
    share of the pass's wall time), or the error that stops its publish
    (``ValidationFailed`` for a failed suite: the caller logs it; that run is kept beside
    its staging, for the person who reads why)."""
    t0 = time.perf_counter()
    verdicts: dict[str, dict | Exception] = {}
    checked = []
    for ctx, staged in runs:
        if staged.matches == 0:
            verdicts[ctx.pattern.name] = {"success": True, "failed": [], "docs": None,
                                          "summary": "no matches to check"}
        else:
            checked.append(StagedMatches(ctx.pattern, ctx.run_id, staged.rng.read_low,
                                         staged.rng.high, staged.matches))
    outcomes = validate_staged(spark, runs[0][0].lake, checked) if checked else {}
    for name, o in outcomes.items():
        verdicts[name] = o if isinstance(o, Exception) else {
            "success": o.success, "failed": o.failed, "docs": o.docs, "summary": o.describe()}
    share = round((time.perf_counter() - t0) / max(len(runs), 1), 3)
    out: dict[str, StagedRun | Exception] = {}
    for ctx, staged in runs:
        outcome = verdicts[ctx.pattern.name]
        if isinstance(outcome, Exception):
            out[ctx.pattern.name] = outcome
            continue
        staged = staged.validated({**outcome, "seconds": share})
        out[ctx.pattern.name] = staged
        if not outcome["success"]:
            staged.save(ctx.lake)
            out[ctx.pattern.name] = ValidationFailed(f"{ctx.pattern.name}: "
                                                     f"{outcome['summary']}")
    return out


def publishable(ctx: RunContext, staged: StagedRun) -> StagedRun:
    """``staged``, once it may be published: raises when it was not validated or failed
    validation, or when its pattern file changed since it was matched."""
    pattern, run_id = ctx.pattern, ctx.run_id
    if staged.verdict is None:
        raise ValidationFailed(f"run {run_id!r} of {pattern.name!r} was not validated: run "
                               "`validate-run` for it first")
    if not staged.verdict["success"]:
        raise ValidationFailed(f"run {run_id!r} of {pattern.name!r} failed validation, "
                               f"nothing published: {staged.verdict['summary']}")
    if staged.stats["pattern_version"] != pattern.version:
        raise InputError(f"{ctx.path} changed since run {run_id} was staged (version "
                         f"{staged.stats['pattern_version']} -> {pattern.version}): match it "
                         "again")
    return staged


class HeldChange(UserError):
    """A new version of a pattern that was not published: it would remove most of its
    published matches, or one of its variables can never bind. The old table stays; the
    run says how to accept it (``--accept-changes PATTERN``)."""


def held_change(ctx: RunContext, stats: dict) -> str | None:
    """Why the staged run of a new pattern version is held back (None: publish it). Only
    a *new version* over a published table of another version is held: a first version
    has nothing to protect, and a nightly run of the same version removes only what the
    night's events decide. The rule: some variable can never bind, or the table would keep
    fewer than ``1 - alerts.max_removed`` of its matches."""
    pattern, lake = ctx.pattern, ctx.lake
    if pattern.name in ctx.accept_changes or not stats.get("full"):
        return None
    table = lake.snapshot(lake.matches(pattern.name))
    if table is None:
        return None
    files = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    versions = set(files.get("min.pattern_version", [])) | set(files.get("max.pattern_version", []))
    if not versions or versions == {pattern.version}:
        return None
    before = sum(int(n or 0) for n in files.get("num_records", []))
    after = int(stats.get("matches", 0))
    why = [w for w in stats.get("warnings") or [] if "can never bind" in w]
    limit = ctx.profile.alerts.max_removed
    if before and (before - after) / before > limit:
        why.insert(0, f"it would leave {after:,} of the {before:,} published matches "
                      f"({(after - before) / before:+.0%}; more than alerts.max_removed "
                      f"{limit:.0%} removed)")
    if not why:
        return None
    return (f"new version {pattern.version} of {pattern.name} not published: "
            f"{'; '.join(why)}. The published table stays as it is. If the change is "
            f"intended: ses run --accept-changes {pattern.name}")


def publish_step(spark, ctx: RunContext, staged: StagedRun | None = None,
                 log: RunsLog | None = None, funnels: list | None = None) -> RunRecord:
    """Publish a staged, validated run (``staged``: the night's, in memory; None: the one
    kept beside the staging, for the ``publish`` step command) and append its record to
    the runs log (``log``: the batch's ``RunsLog``, which holds back the row of a run that
    committed nothing) and its funnel to the ``funnels`` table (``funnels``: the batch's
    list of rows, appended together by the caller)."""
    pattern, run_id, lake = ctx.pattern, ctx.run_id, ctx.lake
    staged = publishable(ctx, staged or staged_of(ctx))
    stats, verdict, staging = staged.stats, staged.verdict, staged.staging
    held = held_change(ctx, stats)
    if held:
        raise HeldChange(held)
    rng = staged.rng
    t0 = time.perf_counter()
    row = RunRecord.of_match(
        stats, run_id=run_id, logical_date=ctx.logical_date or None, run_kind=ctx.run_kind,
        pattern=pattern.name, source=pattern.source, matcher=pattern.matcher,
        horizon_low=rng.low, horizon_high=rng.high, full_recompute=rng.full, status=SUCCESS,
        message="; ".join(f"warning: {w}" for w in stats.get("warnings") or []) or None,
        validate_seconds=verdict.get("seconds"),
        started_at=datetime.fromisoformat(stats["started_at"]))
    unchanged = stats.get("matches", 0) == 0 and (rng.empty or stats.get("idle"))
    if unchanged:  # nothing to insert, nothing published in the range to delete
        outcome = {"inserted": 0, "deleted": 0, "committed": False}
    else:
        outcome = publish(spark, lake, pattern, run_id, staging, rng, run_row=row.as_row())
        reached("publish:after-merge")
    row.inserted, row.deleted = outcome["inserted"], outcome["deleted"]
    row.seconds = float(stats.get("seconds", 0.0)) + time.perf_counter() - t0
    row.publish_seconds = round(time.perf_counter() - t0, 3)
    row.finished_at = datetime.now(timezone.utc)
    if log is not None:
        log.append(row, hold=not outcome["committed"])
    else:
        log_run(lake, row)
    if pattern.first_ever:
        publish_state(lake, pattern, staging)  # after the matches: a kill keeps the old one
    if stateful(pattern):
        publish_history_state(lake, pattern, staging)  # the same
    steps = funnel_rows_of(ctx, stats)
    if funnels is not None:
        funnels.extend(steps)
    else:
        append_funnels(lake, steps)
    if not unchanged and lake.exists(lake.matches(pattern.name)):  # after the runs row:
        # reconcile reads the merge
        document_match_table(lake, pattern)
    lake.remove(staging)
    return row


def funnel_rows_of(ctx: RunContext, stats: dict) -> list[FunnelStepRow]:
    """The run's funnel (the match job's added-up groups) as rows of the ``funnels``
    table, each step with its variables and negated sets."""
    funnel = stats.get("funnel")
    if not funnel or stats.get("idle"):
        return []
    pattern = ctx.pattern
    named = {(s.alternative or 0, s.step): s for s in funnel_steps(pattern)}
    out = []
    for f in funnel["steps"]:
        step = named.get((f["alternative"] or 0, f["step"]))
        if step is None:
            continue
        out.append(FunnelStepRow(
            ctx.run_id, stats.get("logical_date") or "", pattern.name, pattern.version,
            f["alternative"], f["step"], ", ".join(step.variables), ", ".join(step.negations),
            int(f["partitions"]), int(f["windows"]), json.dumps(f["stopped"], sort_keys=True),
            bool(stats.get("full")), int(funnel.get("incomplete_groups", 0))))
    return out


def record_funnels(lake, rows: list[FunnelStepRow], echo=say) -> None:
    """A night's funnels in one commit to the ``funnels`` table. A failure to write them
    is a warning: the matches are published already, and a rerun counts them again."""
    try:
        append_funnels(lake, rows)
    except Exception as exc:  # noqa: BLE001 - a report, never the night's outcome
        echo(f"warning: the funnels of this night were not recorded in {lake.funnels()}: "
             f"{str(exc).splitlines()[0][:200]}")


def log_failure(ctx: RunContext, message: str, name: str | None = None,
                logical_date: str | None = None, log: RunsLog | None = None) -> None:
    """A failed row in the run log for the context's pattern (None: a file that did not
    load; ``name`` then names it)."""
    now = datetime.now(timezone.utc)
    pattern = ctx.pattern
    row = RunRecord(
        ctx.run_id, run_kind=ctx.run_kind,
        logical_date=(ctx.logical_date if logical_date is None else logical_date) or None,
        pattern=pattern.name if pattern else name,
        pattern_version=pattern.version if pattern else None,
        source=pattern.source if pattern else None,
        matcher=pattern.matcher if pattern else None, status=FAILED,
        message=message[:2000], started_at=now, finished_at=now)
    if log is not None:
        log.append(row)
    else:
        log_run(ctx.lake, row)
