"""The ingest steps of a night: each source's landing files into its events table behind
the events suite (``events_gate``), one source failing alone; the statistics after it; the
events suite on one batch (``validate-events``); the catalogue the pipeline runs.
"""

from __future__ import annotations

from jobs.config import load_sources
from jobs.core.errors import UserError
from jobs.failpoints import reached
from jobs.pipeline.context import RunContext
from jobs.pipeline.ingest import describe, ingest
from jobs.pipeline.ingest.commit import timings
from jobs.pipeline.outcome import short_error
from jobs.pipeline.validate.gx import build_docs
from jobs.pipeline.validate.quality import (
    DRIVER_ROWS,
    ValidationFailed,
    validate_events,
    validate_events_frame,
    warm_up,
)
from jobs.progress import progress, say
from jobs.project.patterns import PatternCatalog, load_catalog
from jobs.spark.session import LazySession
from jobs.spark.stats import update_stats


def pipeline_catalog(paths: list[str] | None = None) -> tuple[PatternCatalog, list]:
    """The catalogue, and its patterns whose source the pipeline ingests (has a landing
    folder)."""
    sources = load_sources()
    catalog = load_catalog(paths, sources=sources)
    runnable = [(p, pattern) for p, pattern in catalog.patterns
                if (src := sources.get(pattern.source)) is not None and src.landing]
    return catalog, runnable


def events_gate(spark, ctx: RunContext, results: list, warming: list | None = None):
    """The events suite on a typed batch before it is committed (``ingest``'s gate); each
    result's id goes to ``results``, for one build of the Data Docs after the ingest.
    ``warming``: threads loading GX, waited for first."""
    def gate(source, batch) -> None:
        for thread in warming or ():
            thread.join()

        outcome = validate_events_frame(spark, ctx.lake, source, batch,
                                        ctx.profile.ts_range(), docs=False)
        results.append(outcome.result_id)
        if not outcome.success:
            raise ValidationFailed(f"events of {source.name}: {outcome.describe()}; nothing of "
                                   "this batch was committed: fix or retract the bad rows' "
                                   "files and rerun")
    return gate


def ingest_sources(spark, ctx: RunContext, names: list[str] | None = None,
                   echo=say) -> tuple[list, dict[str, str]]:
    """Ingest each source on its own: a source whose files cannot be read or whose batch
    fails the events suite is reported in the returned {source: message} and nothing of it
    is written; the others are ingested."""
    checked: list = []  # the events suites' results
    warming: list = []  # GX loads while the first batch's files are typed
    gate = events_gate(spark, ctx, checked, warming) if spark is not None else None

    def warm(source, rows: int) -> None:
        """GX loaded once; Spark's suite warmed for a batch the driver will not check.
        Called as soon as files are pending: a small batch's tasks are short, so GX loads
        while the JVM starts; a large batch's tasks are long enough to hide it, and its
        JVM starts sooner alone (the thread first waits for the session)."""
        if gate is not None and (not warming or rows > DRIVER_ROWS):
            large = rows > DRIVER_ROWS
            wait = spark.get if large and isinstance(spark, LazySession) else None
            warming.append(warm_up(ctx.lake, spark if large else None, source, ts_range,
                                   after=wait))
    results, failed = [], {}
    ts_range = ctx.profile.ts_range()
    patterns = None  # the catalogue, loaded once for the statistics
    for name, source in load_sources().items():
        if not source.landing or (names and name not in names):
            continue
        try:
            with progress(f"ingest {name}", spark, echo):
                r = ingest(source, ctx.profile.landing, ctx.lake, ctx.run_id, ts_range=ts_range,
                           gate=gate, spark=spark, echo=echo,
                           before_tasks=lambda rows, source=source: warm(source, rows))
        except Exception as exc:  # noqa: BLE001 - one source's failure is reported, not fatal
            # a file's or the suite's own words; a Spark job's error, its one line
            said = str(exc) if isinstance(exc, UserError) else short_error(exc)
            failed[name] = f"ingest of {name} failed: {said}"
            echo(f"FAILED {failed[name]}")
            continue
        echo("ingest " + describe(r, ctx.run_id))
        if r.files:
            echo("  time " + timings(r))
        reached("ingest:after-log")  # before the statistics' commit
        results.append(r)
        unchanged = not r.new_events and r.rebuilt is None \
            and ctx.lake.exists(ctx.lake.stats(name))
        if spark is not None and not unchanged:  # nothing new: no Spark work at all
            if patterns is None:  # the whole catalogue's: stats serve every pattern
                patterns = [p for _, p in pipeline_catalog()[1]]
            stats_step(spark, ctx, name, source, patterns, echo)
    for thread in warming:
        thread.join()
    build_docs(ctx.lake, checked)
    return results, failed


def stats_step(spark, ctx: RunContext, name: str, source, patterns: list,
               echo=say) -> dict | None:
    """``stats/<source>`` after an ingest (``jobs.lake.stats``), for the attributes the
    ``patterns`` of the source read. Statistics only steer plans: a failure is reported
    and the run goes on (plans then come from the sampled events alone)."""

    try:
        mine = [p for p in patterns if p.source == name]
        with progress(f"stats {name}", spark, echo):
            out = update_stats(spark, ctx.lake, name, mine, source.columns, echo)
        if out["dates"]:
            echo(f"stats {name}: {out['dates']} date(s), {out['rows']} row(s)")
        return out
    except Exception as exc:  # noqa: BLE001 - advisory: never fails the ingest
        echo(f"warning: stats of {name} not updated ({short_error(exc)}); plans use samples")
        return None


def validate_events_step(spark, ctx: RunContext, source: str, ingest_run: str | None):
    """The events suite on one ingest batch; raises ``ValidationFailed``."""

    outcome = validate_events(spark, ctx.lake, load_sources()[source],
                              ctx.profile.ts_range(), ingest_run)
    if not outcome.success:
        raise ValidationFailed(f"events of {source}: {outcome.describe()}")
    return outcome
