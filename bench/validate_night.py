"""Benchmark of the validate step of a night (docs/benchmarks.md): the committed patterns on the
committed data, in a fresh lake, two nights (the first a full recompute, the second a
rerun of the same logical date). Prints each night's wall time, the time of
``quality.validate_staged`` (check frames and Great Expectations for every staged run) and
of ingest (with the events suite of each new batch). ``--events-on-spark`` runs the events
suite on Spark whatever the batch's size (the path before the driver's).

    python bench/validate_night.py [--nights 2] [--events-on-spark]

Run it in a checkout of an earlier commit for the figure before a change; the figures go
into docs/quality.md by hand.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import jobs.pipeline.ingest.steps as ingest_steps
import jobs.pipeline.publish.steps as publish_steps
import jobs.pipeline.run as run
from jobs.config import Profile
from jobs.spark.session import build_session

ROOT = Path(__file__).resolve().parent.parent
SPARK_CONF = {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "4",
              "spark.default.parallelism": "2", "spark.ui.enabled": "false",
              "spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=2)
    parser.add_argument("--events-on-spark", action="store_true")
    args = parser.parse_args()
    if args.events_on_spark:
        from jobs.pipeline.validate import quality

        def on_spark(spark, lake, source, events, ts_range):
            return quality._events_suite(lake, source, spark.createDataFrame(events), ts_range)
        ingest_steps.validate_events_frame = on_spark
    tmp = Path(tempfile.mkdtemp(prefix="validate-night-"))
    try:
        shutil.copytree(ROOT / "data" / "landing", tmp / "landing")
        profile = Profile(name="bench", landing=str(tmp / "landing"), lake=str(tmp / "lake"),
                          spark_master="local[2]", spark_conf=SPARK_CONF, allowed_lateness=0)
        spark = build_session(profile, "validate-night")
        seconds = {"validate_staged": 0.0, "ingest_sources": 0.0}

        where = {"validate_staged": publish_steps, "ingest_sources": run}  # where it is called

        def timed(name):
            step = getattr(where[name], name)

            def step_timed(*a, **kw):
                t = time.perf_counter()
                try:
                    return step(*a, **kw)
                finally:
                    seconds[name] += time.perf_counter() - t
            setattr(where[name], name, step_timed)

        for name in seconds:
            timed(name)
        for night in range(1, args.nights + 1):
            seconds.update(dict.fromkeys(seconds, 0.0))
            t = time.perf_counter()
            run.run_all(spark, profile, "2026-11-20", echo=lambda *_: None)
            print(f"night {night}: {time.perf_counter() - t:.1f} s, validate "
                  f"{seconds['validate_staged']:.1f} s, ingest "
                  f"{seconds['ingest_sources']:.1f} s", flush=True)
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
