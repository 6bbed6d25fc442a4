"""``ingest``: raw landing files -> ``events/<source>`` (Delta, typed, partitioned by
``event_date``) and ``quarantine/<source>`` (rows that did not parse, with the reason).

The driver lists the landing folder, finds the pending files (``listing``) and plans
their splits (``jobs.landing.splits``); Spark's executors read and type each split on
columns as the landing format says (``jobs.landing``: ``reading``, ``typing``, ``ids``)
and write it to the staging (``tasks``); the driver settles what needs the whole batch
on integer columns (``staging``), runs the events suite on the batch, and commits events
(data files the executors write, ``load``), quarantine and ingest log, in that order
(``commit``).
"""

from __future__ import annotations

from jobs.landing.files import Typed, type_rows, typed_file
from jobs.landing.reading import IngestError, Refused, excerpt, read_raw
from jobs.landing.splits import landing_files
from jobs.landing.typing import QUARANTINE_SCHEMA, events_schema
from jobs.pipeline.ingest.commit import INGEST_LOG_SCHEMA, commit, describe, ingest
from jobs.pipeline.ingest.staging import INGEST_FOLDER, Batch, IngestResult, stage

__all__ = ["INGEST_FOLDER", "INGEST_LOG_SCHEMA", "QUARANTINE_SCHEMA", "Batch", "IngestError",
           "IngestResult", "Refused", "Typed", "commit", "describe", "events_schema",
           "excerpt", "ingest", "landing_files", "read_raw", "stage", "type_rows",
           "typed_file"]
