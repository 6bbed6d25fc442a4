"""The driver JVM's start with and without the archive of Spark's classes
(``jobs/spark/cds.py``): fresh processes, one after another, alternating, each timing
``build_session`` and its first two jobs (a count; a ``mapInArrow`` through a Python
worker), with the profile's own JVM settings.

    python bench/jvm_start.py [--runs 5]

Writes bench/out/jvm_start.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.spark import cds  # noqa: E402

ONE = r"""
import json, sys, time
t0 = time.perf_counter()
from jobs.config import load_profile
from jobs.spark.session import build_session
import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
spark = build_session(load_profile())
t1 = time.perf_counter()
spark.range(0, 4, 1, numPartitions=2).count()
t2 = time.perf_counter()
schema = pa.schema([("x", pa.int64())])
def task(it):
    for b in it:
        yield pa.RecordBatch.from_pylist([{"x": 1}], schema=schema)
spark.range(0, 4, 1, numPartitions=2).mapInArrow(task, from_arrow_schema(schema)).collect()
t3 = time.perf_counter()
print(json.dumps({"session": t1 - t0, "count": t2 - t1, "arrow": t3 - t2, "total": t3 - t0}))
"""


def once(archive: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "SPARK_SUBMIT_OPTS")}
    if not archive:  # the project's conf folder on the class path: the archive cannot map
        env["SPARK_CONF_DIR"] = str(ROOT / "conf" / "spark")
    out = subprocess.run([sys.executable, "-c", ONE], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if not cds.ARCHIVE.is_file():
        sys.exit("no archive of Spark's classes in this venv: run `make` (or "
                 "`python -m jobs.spark.cds`) first")
    runs: dict[str, list[dict]] = {"without": [], "with": []}
    for k in range(args.runs):
        for name in ("without", "with"):
            runs[name].append(once(name == "with"))
            r = runs[name][-1]
            print(f"run {k + 1} {name:>7} the archive: session {r['session']:.2f} s, "
                  f"count {r['count']:.2f} s, mapInArrow {r['arrow']:.2f} s", flush=True)
    median = {name: {step: round(statistics.median(r[step] for r in rs), 2)
                     for step in ("session", "count", "arrow", "total")}
              for name, rs in runs.items()}
    out = {"runs": args.runs, "archive_mb": round(cds.ARCHIVE.stat().st_size / 1e6, 1),
           "median_s": median}
    (ROOT / "bench" / "out").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "out" / "jvm_start.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
