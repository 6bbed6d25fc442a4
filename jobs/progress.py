"""Progress lines inside long steps: a step that runs longer than a few seconds says what
Spark is doing (stage, tasks done of all) every few seconds, one plain line each, so that
a terminal and an Airflow task log both show a run that is alive."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

EVERY = 10.0  # seconds between two lines
_SAYING = threading.Lock()


def say(line: str) -> None:
    """Print one line whole: a step's threads (patterns matched side by side, progress
    lines) never run two lines together or split one, on a terminal or in a file."""
    with _SAYING:
        sys.stdout.write(f"{line}\n")
        sys.stdout.flush()


def spark_activity(spark) -> str:
    """``stage 12: 3/8 tasks`` for the running stages of the session's Spark context."""
    tracker = spark.sparkContext.statusTracker()
    parts = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
    return ", ".join(parts) or "driver work"


@contextmanager
def progress(label: str, spark=None, echo=say, every: float = EVERY):
    """While the block runs, print ``label … 20 s (stage 3: 2/4 tasks)`` every ``every``
    seconds (nothing for a block that ends sooner)."""
    done = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            what = ""
            if spark is not None and getattr(spark, "started", True):  # never starts one
                try:
                    what = f" ({spark_activity(spark)})"
                except Exception:  # noqa: BLE001 - a progress line never fails a step
                    what = ""
            echo(f"  {label} … {time.monotonic() - t0:.0f} s{what}")

    thread = threading.Thread(target=beat, name=f"progress {label}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1)
