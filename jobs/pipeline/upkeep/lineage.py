"""OpenLineage events of a run: for each pattern, a ``START`` and a ``COMPLETE`` (or
``FAIL``) run event of the job ``<pattern>`` (namespace ``ses``): its input, the events
table of its source at the version the run read, its output, the match table at the
version the run left, with the facets other tools read (dataset versions, the output's
row counts, the nominal time of the logical date, the error of a failure) and one facet
of the project's own, ``ses``: the pattern version, the matcher and the counts.

Written as JSON files under ``<lake>/_lineage/<logical date>/`` by default (one event per
file, the shape of OpenLineage's file transport), and sent over HTTP to
``alerts.lineage_url`` when the profile sets it (OpenLineage's HTTP transport, e.g. to
Marquez). Lineage never fails a night: a write or a send that fails is one line.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime, timezone

from jobs.lake.store import Lake, join
from jobs.progress import say

PRODUCER = "https://github.com/ses-lakehouse/ses-pipeline"
NAMESPACE = "ses"
SES_FACET_SCHEMA = "https://ses-lakehouse.invalid/spec/facets/SesPatternRunFacet.json"


def _ses_facet_class():
    import attr
    from openlineage.client.facet_v2 import RunFacet

    @attr.define
    class SesPatternRunFacet(RunFacet):
        """The project's own facet: what the run did with the pattern."""

        pattern_version: str | None = attr.field(default=None)
        matcher: str | None = attr.field(default=None)
        logical_date: str | None = attr.field(default=None)
        matches: int | None = attr.field(default=None)
        inserted: int | None = attr.field(default=None)
        deleted: int | None = attr.field(default=None)
        late_events: int | None = attr.field(default=None)

        @staticmethod
        def _get_schema() -> str:
            return SES_FACET_SCHEMA

    return SesPatternRunFacet


def run_uuid(run_id: str, pattern: str) -> str:
    """OpenLineage's run id (a UUID) of one pattern in one run, the same on a retry."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"ses:{run_id}:{pattern}"))


def dataset_namespace(lake: Lake) -> str:
    return lake.root if "://" in lake.root else f"file://{lake.root}"


def _version(lake: Lake, path: str, seen: dict | None = None) -> str | None:
    """A table's current version (``seen``: the versions read already by this run's
    events: each table's log is read once)."""
    if seen is not None and path in seen:
        return seen[path]
    dt = lake.snapshot(path)
    version = None if dt is None else str(dt.version())
    if seen is not None:
        seen[path] = version
    return version


def _iso(t) -> str:
    if t is None:
        t = datetime.now(timezone.utc)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.isoformat()


def pattern_events(lake: Lake, record, logical_date: str, failed_message: str | None = None,
                   parent: str | None = None, seen: dict | None = None) -> list:
    """The START and COMPLETE (or FAIL) events of one pattern's run (``record``: its
    ``RunRecord``; ``parent``: ``namespace/job/run id`` of the run it belongs to, such as
    the Airflow task's, from the OpenLineage provider's ``lineage_parent_id``)."""
    from openlineage.client.event_v2 import (
        InputDataset,
        Job,
        OutputDataset,
        Run,
        RunEvent,
        RunState,
    )
    from openlineage.client.facet_v2 import (
        dataset_version_dataset,
        error_message_run,
        job_type_job,
        nominal_time_run,
        output_statistics_output_dataset,
    )

    ns = dataset_namespace(lake)
    facets = {"ses": _ses_facet_class()(
        pattern_version=record.pattern_version, matcher=record.matcher,
        logical_date=logical_date or None, matches=record.matches, inserted=record.inserted,
        deleted=record.deleted, late_events=record.late_events)}
    if logical_date:
        facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=f"{logical_date}T00:00:00Z")
    if parent and parent.count("/") >= 2:
        from openlineage.client.facet_v2 import parent_run

        namespace, rest = parent.split("/", 1)
        job_name, parent_id = rest.rsplit("/", 1)
        facets["parent"] = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=parent_id), job=parent_run.Job(namespace=namespace,
                                                                    name=job_name))
    if failed_message:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=failed_message[:2000], programmingLanguage="python")
    run = Run(runId=run_uuid(record.run_id, record.pattern), facets=facets)
    job = Job(namespace=NAMESPACE, name=record.pattern, facets={
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SES",
                                                jobType="PATTERN")})
    inputs, outputs = [], []
    if record.source:
        path = lake.events(record.source)
        version = _version(lake, path, seen)
        inputs.append(InputDataset(namespace=ns, name=f"events/{record.source}", facets={
            "version": dataset_version_dataset.DatasetVersionDatasetFacet(
                datasetVersion=version)} if version else {}))
    out_path = lake.matches(record.pattern)
    version = _version(lake, out_path, seen)
    if version is not None:
        outputs.append(OutputDataset(
            namespace=ns, name=f"matches/{record.pattern}",
            facets={"version": dataset_version_dataset.DatasetVersionDatasetFacet(
                datasetVersion=version)},
            outputFacets={} if failed_message else {
                "outputStatistics": output_statistics_output_dataset
                .OutputStatisticsOutputDatasetFacet(rowCount=record.inserted or 0)}))
    start = RunEvent(eventType=RunState.START, eventTime=_iso(record.started_at), run=run,
                     job=job, producer=PRODUCER, inputs=inputs, outputs=[])
    end = RunEvent(eventType=RunState.FAIL if failed_message else RunState.COMPLETE,
                   eventTime=_iso(record.finished_at), run=run, job=job, producer=PRODUCER,
                   inputs=inputs, outputs=outputs)
    return [start, end]


def emit(lake: Lake, outcomes: list, patterns: dict, logical_date: str,
         url: str | None = None, echo=say, parent: str | None = None) -> int:
    """The events of a run's ``outcomes`` (``PatternOutcome``s; ``patterns``: name ->
    ``Pattern``, for the source and version of a pattern that failed) into
    ``<lake>/_lineage/``, and to ``url`` (an OpenLineage HTTP endpoint) when given;
    returns the events written."""
    try:
        from openlineage.client.serde import Serde

        events, seen = [], {}
        for o in outcomes:
            record, pattern = o.record, patterns.get(o.pattern)
            if not o.ok:
                if pattern is None:
                    continue  # a file that did not load: no job to speak of
                record = replace(record, source=pattern.source, matcher=pattern.matcher,
                                 pattern_version=pattern.version)
            events += pattern_events(lake, record, logical_date,
                                     None if o.ok else (o.message or "failed"), parent, seen)
        folder = join(lake.lineage(), logical_date or "no-date")
        for n, event in enumerate(events):
            name = (f"{event.eventTime[:19].replace(':', '')}-{event.job.name}-"
                    f"{event.eventType.value}-{event.run.runId[:8]}-{n}.json")
            lake.write_text(join(folder, name), Serde.to_json(event))
        if url and events:
            from openlineage.client.transport.http import HttpConfig, HttpTransport

            transport = HttpTransport(HttpConfig(url=url, timeout=5.0, retry={"total": 1}))
            for event in events:
                transport.emit(event)
        return len(events)
    except Exception as exc:  # noqa: BLE001 - lineage is a record of the run, not the run
        echo(f"warning: lineage events not written ({type(exc).__name__}: {str(exc)[:200]})")
        return 0


def read_events(lake: Lake, logical_date: str | None = None) -> list[dict]:
    """The events written under ``<lake>/_lineage/`` (of one logical date), as JSON, in
    the order they happened: by event time, a run's START before its end (the file names
    give the time to the second only)."""
    root = lake.lineage()
    folders = [logical_date] if logical_date else lake.children(root)
    out = []
    for folder in folders:
        for name in sorted(lake.children(join(root, folder), files=True)):
            if name.endswith(".json"):
                out.append(json.loads(lake.read_text(join(root, folder, name))))
    return sorted(out, key=lambda e: (datetime.fromisoformat(e["eventTime"]),
                                      e["eventType"] != "START"))
