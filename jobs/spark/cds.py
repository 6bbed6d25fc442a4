"""Class data sharing for the driver's JVM: the classes a Spark session loads (about
10,000, from Spark's jars), archived once per virtual environment and mapped by every
later JVM start of that environment instead of read, verified and parsed again. A
session starts in about 3 s instead of 5, its first job in 1.2 s instead of 2.3
(``bench/jvm_start.py``).

The archive is JDK 17's dynamic archive (``-XX:ArchiveClassesAtExit`` at the end of a
session that runs what the pipeline runs, ``build``; ``make`` builds it after the
venv). A JVM maps it only with the class path it was made with, and a class path may
not hold a folder with files in it: Spark puts ``SPARK_CONF_DIR`` on it, so a session
that uses the archive gets an empty ``SPARK_CONF_DIR`` and finds the project's
``conf/spark/log4j2.properties`` through ``-Dlog4j2.configurationFile`` instead
(``session.spark_environment``). A JVM that cannot map it (another Java, other jars)
starts as it would without it, silently (``-Xshare:auto``, CDS's log off).

    python -m jobs.spark.cds        # make runs it once per venv
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jobs.config import current_project
from jobs.config.project import CHECKOUT

ARCHIVE = Path(sys.prefix) / "spark-classes.jsa"
MANIFEST = Path(sys.prefix) / "spark-classes.json"  # make's target: what was built, or why not
EMPTY_CONF = Path(sys.prefix) / "spark-conf"  # SPARK_CONF_DIR of a session that maps it
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def log_settings() -> Path | None:
    """Spark's log settings: the project's ``conf/spark/log4j2.properties``, else those of
    this checkout (a project made without them), else none (Spark's defaults)."""
    for conf in (current_project().conf, CHECKOUT / "conf"):
        if (conf / "spark" / "log4j2.properties").is_file():
            return conf / "spark" / "log4j2.properties"
    return None


def java_options(log_config: Path | None, archive: Path | None = None) -> str | None:
    """The driver JVM's options that map ``archive`` (default ``ARCHIVE``), with the log
    settings Spark would otherwise find in ``SPARK_CONF_DIR``; None when there is no
    archive, or ``EMPTY_CONF`` is not an empty folder (the archive maps only with no file
    on the class path)."""
    archive = archive or ARCHIVE
    if not archive.is_file() or not EMPTY_CONF.is_dir() or any(EMPTY_CONF.iterdir()):
        return None
    return f"-XX:SharedArchiveFile={archive} {QUIET} {_log_option(log_config)}".strip()


def _log_option(log_config: Path | None) -> str:
    return f"-Dlog4j2.configurationFile={log_config.resolve().as_uri()}" if log_config else ""


# What the archive is made from: a session that does what ingest, the match jobs and the
# suites do (Arrow to and from Python workers, Parquet, shuffles, a window, SQL
# functions, Python partition functions of an RDD), so that their classes are in it. Run
# in a process of its own that waits for its JVM to exit: the archive is written then,
# and only a whole one is moved in place.
WORKLOAD = r"""
import sys
from jobs.config import load_profile
from jobs.spark.session import build_session
import pyarrow as pa
from pyspark.sql import Window, functions as F
from pyspark.sql.pandas.types import from_arrow_schema

spark = build_session(load_profile())
out = sys.argv[1]
schema = pa.schema([("k", pa.int64()), ("s", pa.string())])

def task(batches):
    for b in batches:
        yield pa.RecordBatch.from_pylist([{"k": 1, "s": "a"}], schema=schema)

df = spark.range(0, 1000, 1, numPartitions=2).withColumn("s", F.sha2(F.col("id").cast("string"), 256))
df = df.withColumn("d", F.to_date(F.timestamp_seconds(F.col("id") % 10 * 86400)))
df.write.mode("overwrite").partitionBy("d").parquet(out)
back = spark.read.parquet(out)
back.groupBy("d").agg(F.count("*"), F.countDistinct("s"), F.min("id"), F.max("id")).collect()
back.select(F.count(F.lit(1)).over(Window.partitionBy("s")).alias("n")).where("n > 1").count()
back.mapInArrow(task, from_arrow_schema(schema)).toArrow()
spark.sparkContext.parallelize(range(2), 2).mapPartitions(lambda it: [sum(it)]).collect()
spark.createDataFrame(back.limit(10).toPandas()).selectExpr("count(*)").collect()
spark.sql("SELECT 1 AS x").collect()
jvm = spark.sparkContext._gateway.proc  # the JVM writes the archive as it exits: wait for it
spark.stop()
jvm.stdin.close()
jvm.wait(timeout=300)
"""


def build(archive: Path = ARCHIVE, manifest: Path = MANIFEST, echo=print) -> dict:
    """Make ``archive`` from a session running ``WORKLOAD`` (about 30 s); the manifest
    says what was built, or why it was not. A failure leaves no archive (sessions then
    start without one) and is not an error."""
    EMPTY_CONF.mkdir(parents=True, exist_ok=True)
    log_config = log_settings()
    temp = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
    env = dict(os.environ, SPARK_CONF_DIR=str(EMPTY_CONF),
               SPARK_SUBMIT_OPTS=f"-XX:ArchiveClassesAtExit={temp} {QUIET} "
                                 f"{_log_option(log_config)}".strip())
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        run = subprocess.run([sys.executable, "-c", WORKLOAD, str(Path(scratch) / "out")],
                             env=env, capture_output=True, text=True)
    made = run.returncode == 0 and temp.is_file() and temp.stat().st_size > 0
    if made:
        temp.replace(archive)
    else:
        temp.unlink(missing_ok=True)
        archive.unlink(missing_ok=True)
    said = (run.stderr.strip().splitlines() or [""])[-1][:300]
    out = {"archive": str(archive) if made else None,
           "megabytes": round(archive.stat().st_size / 1e6, 1) if made else 0,
           "seconds": round(time.perf_counter() - started, 1),
           "why_not": None if made else f"the archiving session failed: {said}"}
    manifest.write_text(json.dumps(out, indent=1) + "\n")
    echo(f"Spark's classes archived: {archive} ({out['megabytes']} MB)" if made else
         f"no archive of Spark's classes ({out['why_not']}); sessions start without it")
    return out


if __name__ == "__main__":
    build()
