"""The runs' shared words: one status vocabulary for the runs table, the run summary,
``runs``, the models and the catalogue (a pattern run or a model is ``success`` or
``failed``; a model whose parent failed is ``skipped``; a run that a crash left half-done
and ``reconcile`` closed is ``aborted``), and one run-id shape. No heavy imports: the
DAG's tasks read this module."""

import hashlib
import uuid
from datetime import datetime, timezone

SUCCESS = "success"
FAILED = "failed"
SKIPPED = "skipped"
ABORTED = "aborted"


def new_run_id(started: datetime | None = None, seed: str | None = None) -> str:
    """The one run-id shape of every run (``make run``, Airflow, backfill, ingest): its
    start time in UTC, so that ids sort by time as text, and six hex digits, from ``seed``
    where every task of one run must derive the same id (an Airflow run's own id), else
    random. The logical date is a column of its own in the runs table."""
    t = (started or datetime.now(timezone.utc)).astimezone(timezone.utc)
    tail = hashlib.sha1(seed.encode()).hexdigest()[:6] if seed else uuid.uuid4().hex[:6]
    return f"{t:%Y%m%dT%H%M%SZ}-{tail}"
