"""The nightly pipeline: ingest -> match (per pattern) -> publish, and its run log.

Each step is also a ``python -m jobs`` subcommand (``ingest``, ``match-job``, ``publish``)
so that a scheduler can run them as separate tasks; ``run`` does all of them for one
logical date and prints a summary, ``backfill`` recomputes a range of start dates.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from . import lake as lk
from .config import ROOT, Profile, load_sources
from .core.loader import load_pattern
from .core.pattern import Pattern
from .horizons import RunRange, backfill_range, plan_range
from .ingest import describe, ingest
from .match_job import read_text, run_match_job, write_text
from .publish import log_run, previous_runs, publish


def new_run_id(logical_date: str) -> str:
    now = datetime.now(timezone.utc)
    return f"{logical_date}_{now:%Y%m%dT%H%M%S}_{uuid.uuid4().hex[:6]}"


def pattern_paths(paths: list[str] | None = None) -> list[Path]:
    if paths:
        return [Path(p) for p in paths]
    folder = ROOT / "patterns"
    return sorted(list(folder.glob("*.yaml")) + list(folder.glob("*.yml")))


def pipeline_patterns(paths: list[str] | None = None) -> list[tuple[Path, Pattern]]:
    """Patterns whose source the pipeline ingests (has a landing folder)."""
    sources = load_sources()
    out = []
    for p in pattern_paths(paths):
        pattern = load_pattern(p)
        src = sources.get(pattern.source)
        if src is not None and src.landing:
            out.append((p, pattern))
    return out


def ingest_sources(profile: Profile, run_id: str, names: list[str] | None = None,
                   echo=print) -> list:
    lake = lk.Lake(profile.lake)
    results = []
    for name, source in load_sources().items():
        if not source.landing or (names and name not in names):
            continue
        r = ingest(source, profile.landing, lake, run_id)
        echo("ingest " + describe(r))
        results.append(r)
    return results


@dataclass
class Planned:
    path: Path
    pattern: Pattern
    text: str
    rng: RunRange


def plan(profile: Profile, path: Path, logical_date: str,
         rng: RunRange | None = None) -> Planned:
    pattern = load_pattern(path)
    text = path.read_text(encoding="utf-8")
    lake = lk.Lake(profile.lake)
    if rng is None:
        rng = plan_range(logical_date, pattern.tau, profile.allowed_lateness, pattern.version,
                         previous_runs(lake, pattern.name))
    return Planned(path, pattern, text, rng)


def late_events(spark, profile: Profile, planned: Planned) -> int:
    """Events that arrived after the previous run of this pattern although their start
    range was already closed (ts < low): counted in the run log, never silently dropped."""
    from pyspark.sql import functions as F

    from .match_job import filter_column

    lake = lk.Lake(profile.lake)
    runs = [r for r in previous_runs(lake, planned.pattern.name)
            if r["pattern_version"] == planned.pattern.version and r["status"] == "success"]
    if planned.rng.low is None or not runs:
        return 0
    last_start = max(r["started_at"] for r in runs)
    df = lk.read_spark(spark, lake.events(planned.pattern.source))
    df = df.where((F.col("ingested_at") > F.lit(last_start))
                  & (F.col("ts") < F.lit(datetime.fromtimestamp(planned.rng.low / 1e9,
                                                                  tz=timezone.utc))))
    keep = filter_column(planned.pattern)
    if keep is not None:
        df = df.where(keep)
    return df.count()


def match_step(spark, profile: Profile, planned: Planned, run_id: str, logical_date: str,
               force_slices: bool = False) -> dict:
    """Phase 1 + 2 on Spark into staging; the range and counters go to ``_stats.json``."""
    lake = lk.Lake(profile.lake)
    started = datetime.now(timezone.utc)
    if planned.rng.empty:
        stats = {"events": 0, "events_after_filter": 0, "partitions": 0, "windows": 0,
                 "candidate_windows": 0, "matcher_calls": 0, "matches": 0, "seconds": 0.0}
        staging = lake.staging(planned.pattern.name, run_id)
        Path(staging).mkdir(parents=True, exist_ok=True) if "://" not in staging else None
    else:
        result = run_match_job(spark, planned.pattern, planned.text, lake, run_id,
                               planned.rng.low, planned.rng.high, profile.slice_length,
                               profile.max_partition_events, profile.max_matches_per_window,
                               force_slices=force_slices)
        staging, stats = result.staging, result.stats
    stats["late_events"] = late_events(spark, profile, planned)
    stats.update(low=planned.rng.low, high=planned.rng.high, full=planned.rng.full,
                 logical_date=logical_date, started_at=started.isoformat(),
                 pattern_version=planned.pattern.version)
    write_text(f"{staging}/_stats.json", json.dumps(stats))
    return stats


class ValidationFailed(RuntimeError):
    """A quality gate failed: nothing is published; the message names the expectations."""


def _staged_stats(lake: lk.Lake, pattern: Pattern, run_id: str) -> dict:
    staging = lake.staging(pattern.name, run_id)
    try:
        return json.loads(read_text(f"{staging}/_stats.json"))
    except (FileNotFoundError, OSError):
        raise FileNotFoundError(f"no staged run {run_id!r} for pattern {pattern.name!r} at "
                                f"{staging}: run `match-job` for it first") from None


def validate_step(spark, profile: Profile, path: Path, run_id: str) -> dict:
    """The matches suite on a staged run; the outcome goes to ``_validation.json``."""
    from .quality import validate_matches

    pattern = load_pattern(path)
    lake = lk.Lake(profile.lake)
    stats = _staged_stats(lake, pattern, run_id)
    if stats.get("matches", 0) == 0:
        outcome = {"success": True, "failed": [], "docs": None, "summary": "no matches to check"}
    else:
        o = validate_matches(spark, lake, pattern, run_id, stats["low"], stats["high"])
        outcome = {"success": o.success, "failed": o.failed, "docs": o.docs,
                   "summary": o.describe()}
    write_text(f"{lake.staging(pattern.name, run_id)}/_validation.json", json.dumps(outcome))
    if not outcome["success"]:
        exc = ValidationFailed(f"{pattern.name}: {outcome['summary']}")
        log_failure(profile, pattern, run_id, stats.get("logical_date", ""), str(exc))
        exc.logged = True
        raise exc
    return outcome


def publish_step(profile: Profile, path: Path, run_id: str) -> dict:
    """Publish a staged, validated run and append its row to the runs log."""
    pattern = load_pattern(path)
    lake = lk.Lake(profile.lake)
    staging = lake.staging(pattern.name, run_id)
    stats = _staged_stats(lake, pattern, run_id)
    try:
        verdict = json.loads(read_text(f"{staging}/_validation.json"))
    except (FileNotFoundError, OSError):
        raise ValidationFailed(f"run {run_id!r} of {pattern.name!r} was not validated: run "
                               "`validate-run` for it first") from None
    if not verdict["success"]:
        raise ValidationFailed(f"run {run_id!r} of {pattern.name!r} failed validation, "
                               f"nothing published: {verdict['summary']}")
    if stats["pattern_version"] != pattern.version:
        raise ValueError(f"{path} changed since run {run_id} was staged (version "
                         f"{stats['pattern_version']} -> {pattern.version}): match it again")
    rng = RunRange(stats["low"], stats["high"], stats["full"])
    t0 = time.perf_counter()
    if stats.get("matches", 0) == 0 and rng.empty:
        outcome = {"inserted": 0, "deleted": 0}
    else:
        outcome = publish(lake, pattern, run_id, staging, rng)
    row = dict(stats, run_id=run_id, pattern=pattern.name, source=pattern.source,
               matcher=pattern.matcher, horizon_low=rng.low, horizon_high=rng.high,
               full_recompute=rng.full, inserted=outcome["inserted"],
               deleted=outcome["deleted"], status="success", message=None,
               seconds=float(stats.get("seconds", 0.0)) + time.perf_counter() - t0,
               started_at=datetime.fromisoformat(stats["started_at"]),
               finished_at=datetime.now(timezone.utc))
    log_run(lake, row)
    return row


def log_failure(profile: Profile, pattern: Pattern, run_id: str, logical_date: str,
                message: str) -> None:
    now = datetime.now(timezone.utc)
    log_run(lk.Lake(profile.lake), {
        "run_id": run_id, "logical_date": logical_date, "pattern": pattern.name,
        "pattern_version": pattern.version, "source": pattern.source,
        "matcher": pattern.matcher, "status": "failed", "message": message[:2000],
        "started_at": now, "finished_at": now})


def validate_events_step(spark, profile: Profile, source: str, ingest_run: str | None):
    """The events suite on one ingest batch; raises ``ValidationFailed``."""
    from .quality import validate_events

    outcome = validate_events(spark, lk.Lake(profile.lake), load_sources()[source], ingest_run)
    if not outcome.success:
        raise ValidationFailed(f"events of {source}: {outcome.describe()}")
    return outcome


def validate_new_events(spark, profile: Profile, ingested: list, ingest_run: str,
                        echo=print) -> dict[str, str]:
    """The events suite on every source that got new events in ``ingest_run``; returns
    {source: message} for the sources that failed."""
    failed = {}
    for r in ingested:
        if not r.new_events:
            continue
        try:
            echo("validate " + validate_events_step(spark, profile, r.source, ingest_run).describe())
        except ValidationFailed as exc:
            failed[r.source] = str(exc)
            echo(f"FAILED {exc}")
    return failed


def run_all(spark, profile: Profile, logical_date: str | None = None,
            paths: list[str] | None = None, force_slices: bool = False,
            echo=print) -> list[dict]:
    """Ingest every source, then match, validate and publish every pattern, for one
    logical date."""
    logical_date = logical_date or date.today().isoformat()
    run_id = new_run_id(logical_date)
    t0 = time.perf_counter()
    patterns = pipeline_patterns(paths)
    ingested = ingest_sources(profile, run_id, sorted({p.source for _, p in patterns}),
                              echo=echo)
    bad_sources = validate_new_events(spark, profile, ingested, run_id, echo)
    rows = []
    for path, _ in patterns:
        planned = plan(profile, path, logical_date)
        echo(f"match {planned.pattern.name} ({planned.pattern.matcher}, source "
             f"{planned.pattern.source}, {describe_range(planned.rng)}) ...")
        try:
            if planned.pattern.source in bad_sources:
                raise ValidationFailed(bad_sources[planned.pattern.source])
            match_step(spark, profile, planned, run_id, logical_date, force_slices)
            validate_step(spark, profile, path, run_id)
            rows.append(publish_step(profile, path, run_id))
        except Exception as exc:  # one failing pattern does not stop the others
            if not getattr(exc, "logged", False):
                log_failure(profile, planned.pattern, run_id, logical_date,
                            f"{type(exc).__name__}: {exc}")
            echo(f"FAILED {planned.pattern.name}: {type(exc).__name__}: {exc}")
            rows.append({"pattern": planned.pattern.name, "status": "failed", "message": str(exc)})
    echo(summary(profile, rows, run_id, time.perf_counter() - t0))
    return rows


def backfill(spark, profile: Profile, start: str, end: str, paths: list[str] | None = None,
             echo=print) -> list[dict]:
    """Recompute the matches whose first event lies in [start, end) for each pattern."""
    run_id = new_run_id(f"backfill-{start}-{end}")
    rows = []
    for path, _ in pipeline_patterns(paths):
        planned = plan(profile, path, end, rng=backfill_range(start, end))
        match_step(spark, profile, planned, run_id, f"backfill {start}..{end}")
        validate_step(spark, profile, path, run_id)
        rows.append(publish_step(profile, path, run_id))
    echo(summary(profile, rows, run_id, None))
    return rows


def describe_range(rng: RunRange) -> str:
    from .core.events import format_ts

    low = "the beginning" if rng.low is None else format_ts(rng.low)
    kind = "full recompute" if rng.full else "incremental"
    return f"{kind}, first events from {low} to {format_ts(rng.high)}"


def summary(profile: Profile, rows: list[dict], run_id: str, seconds: float | None) -> str:
    lines = [f"\nrun {run_id}" + (f" ({seconds:.1f} s)" if seconds is not None else ""),
             f"{'pattern':40} {'matches':>8} {'new':>6} {'events read':>12} "
             f"{'kept':>8} {'late':>5} {'seconds':>8}  status"]
    for r in rows:
        if r.get("status") == "failed":
            lines.append(f"{r['pattern']:40} {'-':>8} {'-':>6} {'-':>12} {'-':>8} {'-':>5} "
                         f"{'-':>8}  FAILED: {r['message'][:80]}")
            continue
        lines.append(f"{r['pattern']:40} {r['matches']:>8} {r['inserted']:>6} {r['events']:>12} "
                     f"{r['events_after_filter']:>8} {r.get('late_events', 0):>5} "
                     f"{r['seconds']:>8.1f}  ok")
    lake = profile.lake
    lines.append(f"\ntables: {lake}/matches/<pattern>, {lake}/runs, {lake}/events/<source>, "
                 f"{lake}/quarantine/<source> (Delta)")
    return "\n".join(lines)
