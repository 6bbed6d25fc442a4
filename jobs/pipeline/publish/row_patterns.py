"""A ``.sql`` row pattern's night: its source's events read by Spark, each partition
(PARTITION BY) matched on an executor by the row-pattern matcher (``applyInArrow``), the
new rows checked by their suite (``matches_<name>``, on the driver), and published as
``matches/NAME`` with typed measures, in one commit that carries the run's row (as a YAML
pattern's publish does), then its row in the runs table.

Which partitions a night takes again:

* the first run of a version, or a night after a commit of the events table that was not
  an append (a retraction, a rewrite): every partition (a full recompute);
* otherwise the partitions that the files ingested since the last successful run touch
  (a partition with no new event is not read, and its matches stay as published), or
  none: an idle night, with no Spark job;
* without PARTITION BY, the source is one partition: any new event takes it again.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties

from jobs.config import current_project
from jobs.core.errors import UserError
from jobs.core.language.events import events_from_arrow
from jobs.core.local.row_patterns import RowPatternFile
from jobs.core.rowpattern.checks import columns_read
from jobs.core.rowpattern.output import event_rows
from jobs.core.rowpattern.table import match_schema, match_table
from jobs.lake.extent import files_ingested_after, only_appends_since
from jobs.lake.match_commits import RUN_KEY
from jobs.lake.runs import RunsLog, log_run, previous_runs
from jobs.lake.views import KIND_KEY, ROW_PER_EVENT, SOURCE_KEY
from jobs.pipeline.context import RunContext
from jobs.pipeline.outcome import PatternOutcome
from jobs.pipeline.publish.matches import key_text
from jobs.pipeline.publish.steps import log_failure
from jobs.pipeline.validate.quality import ValidationFailed, validate_row_matches
from jobs.progress import progress, say
from jobs.runrecord import RunRecord
from jobs.spark.tables import read_spark
from jobs.status import SUCCESS

ALL = "__all"  # the one partition of a statement without PARTITION BY


def read_columns(pf: RowPatternFile, available: list[str]) -> list[str]:
    """The events' columns the statement reads (by their names in the table), with
    ``event_id`` and ``ts``; a name the source lacks is the pattern's error."""
    by_lower = {c.lower(): c for c in available}
    out = ["event_id", "ts"]
    for name, _ in columns_read(pf.query):
        column = by_lower.get(name.lower())
        if column is None:
            raise UserError(f"{pf.path}: {name} is not a column of source {pf.source!r} "
                            f"(columns: {', '.join(c for c in available if c not in _LINEAGE)})")
        if column not in out:
            out.append(column)
    return out


_LINEAGE = {"event_date", "source_file", "ingest_run", "ingested_at"}


def matcher_of(pf: RowPatternFile, schema: pa.Schema):
    """The function each executor runs on one partition's rows (an Arrow table)."""
    query = pf.query

    def match_partition(table: pa.Table) -> pa.Table:
        if ALL in table.column_names:
            table = table.drop_columns([ALL])
        return match_table(query, event_rows(events_from_arrow(table)), schema)

    return match_partition


def last_success(lake, pf: RowPatternFile) -> RunRecord | None:
    runs = [r for r in previous_runs(lake, pf.name)
            if r.status == SUCCESS and r.pattern_version == pf.version and r.started_at]
    return max(runs, key=lambda r: r.started_at) if runs else None


def touched(lake, pf: RowPatternFile, since: RunRecord | None) -> set[str] | None:
    """The data files of the source to read for the partitions they touch; None: take
    every partition (no earlier run, or a commit since that was not an append)."""
    if since is None or not only_appends_since(lake, pf.source, since.started_at):
        return None
    return files_ingested_after(lake, pf.source, since.started_at)


def row_pattern_step(spark, ctx: RunContext, pf: RowPatternFile, log=None) -> PatternOutcome:
    """Match and publish one row pattern; its runs row appended (``log``: the batch's)."""
    lake, name = ctx.lake, pf.name
    started, t0 = datetime.now(timezone.utc), time.perf_counter()
    events_path = lake.events(pf.source)
    if not lake.exists(events_path):
        raise UserError(f"no events of source {pf.source!r} in the lake yet: ingest it first")
    since = last_success(lake, pf)
    files = touched(lake, pf, since)
    table_path = lake.matches(name)
    full = files is None or not lake.exists(table_path)
    row = RunRecord(ctx.run_id, logical_date=ctx.logical_date or None, run_kind=ctx.run_kind,
                    pattern=name, pattern_version=pf.version, source=pf.source,
                    matcher=pf.matcher, full_recompute=full, status=SUCCESS,
                    started_at=started, late_events=0, events=0, events_after_filter=0,
                    partitions=0, matches=0, inserted=0, deleted=0)
    if not full and not files:  # nothing arrived: nothing can change
        row.match_detail = {"idle": True}
        row.seconds = row.match_seconds = round(time.perf_counter() - t0, 3)
        row.finished_at = datetime.now(timezone.utc)
        _log(lake, row, log, hold=True)
        document(lake, pf)  # (a run killed before its documentation: written now)
        return PatternOutcome.published(row)
    df = read_spark(spark, lake, events_path)
    columns = read_columns(pf, df.columns)
    df = df.select(*columns)
    keys = None
    if not full:
        keys = _touched_keys(spark, lake, pf, files)
        df = _only(df, pf, keys)
    schema = match_schema(pf.query, {f.name: f.dataType.simpleString() for f in df.schema})
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    grouped = df.groupBy(*pf.query.partition_by) if pf.query.partition_by else \
        df.withColumn(ALL, F.lit(0)).groupBy(ALL)
    found = grouped.applyInArrow(matcher_of(pf, schema), from_arrow_schema(schema)).toArrow()
    found = _typed(found, schema)
    row.match_seconds = round(time.perf_counter() - t0, 3)
    row.matches = found.num_rows
    checked = time.perf_counter()
    verdict = validate_row_matches(lake, pf.query, found, ctx.run_id)
    row.validate_seconds = round(time.perf_counter() - checked, 3)
    if not verdict.success:
        raise ValidationFailed(f"matches of {name}: {verdict.describe()}; nothing was "
                               "published (the table keeps its rows)")
    t1 = time.perf_counter()
    kept, old = _kept(lake, table_path, pf, keys)
    found = found.append_column("pattern_version", pa.array([pf.version] * found.num_rows,
                                                            pa.string()))
    found = found.append_column("run_id", pa.array([ctx.run_id] * found.num_rows, pa.string()))
    out = pa.concat_tables([kept.cast(found.schema), found]) if kept is not None else found
    row.inserted, row.deleted = found.num_rows, old - (kept.num_rows if kept is not None else 0)
    meta = {RUN_KEY: json.dumps(row.as_row(), default=str),
            "ses.inserted": str(row.inserted), "ses.deleted": str(row.deleted)}
    lake.write(table_path, out, mode="overwrite", schema_mode="overwrite",
               commit_properties=CommitProperties(custom_metadata=meta))
    row.publish_seconds = round(time.perf_counter() - t1, 3)
    row.seconds = round(time.perf_counter() - t0, 3)
    row.finished_at = datetime.now(timezone.utc)
    _log(lake, row, log, hold=False)
    document(lake, pf)  # after the runs row: reconcile reads the data commit
    return PatternOutcome.published(row)


def document(lake, pf: RowPatternFile) -> None:
    """The table's name, description and properties (its file, version, kind and source:
    what the views and the catalogue read), where they differ."""
    dt = lake.table(lake.matches(pf.name))
    meta = dt.metadata()
    description = (pf.query.description or f"matches of row pattern {pf.name}").strip()
    if meta.name != pf.name:
        dt.alter.set_table_name(pf.name)
    if meta.description != description:
        dt.alter.set_table_description(description)
    props = {"ses.pattern.path": current_project().relative(pf.path),
             "ses.pattern.version": pf.version, SOURCE_KEY: pf.source,
             KIND_KEY: ROW_PER_EVENT if pf.query.all_rows else pf.kind,
             "ses.pattern.matcher": pf.matcher}
    if any(meta.configuration.get(k) != v for k, v in props.items()):
        dt.alter.set_table_properties(props, raise_if_not_exists=False)


def _log(lake, row: RunRecord, log, hold: bool) -> None:
    if log is not None:
        log.append(row, hold=hold)
    else:
        log_run(lake, row)


def _touched_keys(spark, lake, pf: RowPatternFile, files: set[str]) -> list[tuple] | None:
    """The partition keys of the events in ``files`` (None: the statement has no
    PARTITION BY, its one partition is touched)."""
    part = list(pf.query.partition_by)
    if not part:
        return None
    df = read_spark(spark, lake, lake.events(pf.source), only=files)
    by_lower = {c.lower(): c for c in df.columns}
    rows = df.select(*[by_lower[c.lower()] for c in part]).distinct().collect()
    return [tuple(r) for r in rows]


def _only(df, pf: RowPatternFile, keys: list[tuple] | None):
    """The events of the touched partitions."""
    if keys is None:
        return df
    from pyspark.sql import functions as F

    by_lower = {c.lower(): c for c in df.columns}
    cols = [by_lower[c.lower()] for c in pf.query.partition_by]
    if not keys:
        return df.limit(0)
    if len(cols) == 1:
        values = [k[0] for k in keys]
        cond = F.col(cols[0]).isin([v for v in values if v is not None])
        if any(v is None for v in values):
            cond = cond | F.col(cols[0]).isNull()
        return df.where(cond)
    keyed = df.sparkSession.createDataFrame(keys, schema=df.select(*cols).schema)
    return df.join(keyed, on=cols, how="left_semi")


def _kept(lake, table_path: str, pf: RowPatternFile, keys: list[tuple] | None
          ) -> tuple[pa.Table | None, int]:
    """The published rows that stay (those of untouched partitions, of this version) and
    how many rows the table held. A full recompute keeps none."""
    if not lake.exists(table_path):
        return None, 0
    if keys is None:
        return None, lake.count_rows(table_path)
    old = lake.read_arrow(table_path)
    part = list(pf.query.partition_by)
    touched_keys = pa.table({c: pa.array([k[i] for k in keys], old.schema.field(c).type)
                             for i, c in enumerate(part)})
    stay = pc.invert(pc.is_in(key_text(old, part), value_set=key_text(touched_keys, part)))
    stay = pc.and_(stay, pc.equal(old.column("pattern_version"), pf.version))
    return old.filter(stay), old.num_rows


def _typed(found: pa.Table, schema: pa.Schema) -> pa.Table:
    """Spark's Arrow result in the schema the matcher wrote (the same columns; Spark may
    hand back timestamps in its session's zone)."""
    return pa.table([found.column(f.name).cast(f.type) for f in schema], schema=schema)


def run_row_patterns(spark, ctx: RunContext, row_patterns, bad_sources: dict[str, str],
                     echo=say, log: RunsLog | None = None) -> list[PatternOutcome]:
    """The ``.sql`` row patterns of a run, one after the other, each failing alone
    (``log``: the batch's runs log, which holds the rows of runs that committed nothing)."""
    outcomes = []
    for _, pf in row_patterns:
        try:
            if pf.source in bad_sources:
                raise ValidationFailed(bad_sources[pf.source])
            with progress(f"match {pf.name} (row pattern, source {pf.source})", spark, echo):
                outcome = row_pattern_step(spark, ctx, pf, log)
            echo(f"{pf.name}: {outcome.record.matches} row(s) "
                 + ("(a full recompute)" if outcome.record.full_recompute else
                    f"({outcome.record.inserted} new)"))
        except Exception as exc:  # noqa: BLE001 - one failing pattern does not stop the others
            outcome = PatternOutcome.failed(ctx.run_id, pf.name, exc)
            log_failure(ctx, outcome.message, name=pf.name, log=log)
            echo(f"FAILED {pf.name}: {outcome.message}")
        outcomes.append(outcome)
    return outcomes

