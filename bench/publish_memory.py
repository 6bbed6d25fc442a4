"""Benchmark of publish at scale (docs/benchmarks.md): the driver's peak memory and the time to
publish a full recompute of a new pattern with 1M to 10M+ matches into a fresh match table.

The staged matches are synthetic but in the match job's own staging format (written by
Spark, once, under bench/out/publish/): the pattern is mw_chemo_p1 (partitioned by
patient), 100,000 patients, three bound events per match. The same script measures the
commit before the executor-written publish (delta-rs MERGE fed by the driver) when run
from a checkout of that commit (it adapts to the older ``publish`` signature):

    python bench/publish_memory.py [--matches 1000000,3000000,10000000] [--tag after]
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import sys
import time
from pathlib import Path

from spark_pipeline import MemorySampler  # bench/, the script's own folder

from jobs.config import load_profile
from jobs.core.language.patternfile import parse_pattern
from jobs.lake import store as lk
from jobs.pipeline.match.horizons import RunRange
from jobs.pipeline.publish.matches import publish
from jobs.spark.session import build_session

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out" / "publish"
PATTERN = parse_pattern((ROOT / "patterns" / "mw_chemo_p1.yaml").read_text())
END = 4_000_000_000 * 10**9  # a range that holds every synthetic match


def ensure_staging(spark, n: int) -> Path:
    """n staged match rows, as the match job writes them (kind = 'match')."""
    from pyspark.sql import functions as F

    path = OUT / f"staging-{n}"
    if (path / "_SUCCESS").exists():
        return path
    t0 = time.perf_counter()
    i = F.col("id")
    ev = F.concat(F.lit("e"), i.cast("string"))
    df = spark.range(n).select(
        F.lit("match").alias("kind"),
        F.sha2(F.concat(F.lit("m"), i.cast("string")), 256).substr(1, 32).alias("match_id"),
        F.concat(F.lit("p"), (i % 100_000).cast("string")).alias("patient"),
        F.timestamp_seconds(F.lit(1_500_000_000) + i * 7).alias("start_ts"),
        F.timestamp_seconds(F.lit(1_500_000_000) + i * 7 + 86_400).alias("end_ts"),
        F.lit(3).cast("long").alias("n_events"),
        F.concat(F.lit('{"c": ["'), ev, F.lit('c"], "p": ["'), ev, F.lit('p"], "b": ["'),
                 ev, F.lit('b"]}')).alias("bindings"),
        F.lit(None).cast("string").alias("stats"))
    df.write.mode("overwrite").parquet(str(path))
    print(f"  staged {n:,} matches in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return path


def run(spark, n: int) -> dict:
    staging = ensure_staging(spark, n)
    lake_root = OUT / f"lake-{n}"
    shutil.rmtree(lake_root, ignore_errors=True)
    lake = lk.Lake(str(lake_root))
    rng = RunRange(None, END, True)
    executors_write = "spark" in inspect.signature(publish).parameters
    args = (spark,) if executors_write else ()
    with MemorySampler() as mem:
        start_mb = mem.peak / 2**20
        t0 = time.perf_counter()
        out = publish(*args, lake, PATTERN, "bench", str(staging), rng)
        seconds = time.perf_counter() - t0
    assert out["inserted"] == n == lake.table(lake.matches(PATTERN.name)).count(), out
    shutil.rmtree(lake_root, ignore_errors=True)
    return {"matches": n, "publish": "executors write, driver commits" if executors_write
            else "driver MERGE (delta-rs)", "seconds": round(seconds, 1),
            "driver_start_mb": round(start_mb), "driver_peak_mb": round(mem.peak / 2**20),
            "jvm_peak_mb": round(mem.jvm_peak / 2**20)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matches", default="1000000,3000000,10000000")
    ap.add_argument("--tag", default="after")
    args = ap.parse_args(argv)
    spark = build_session(load_profile("local"), "ses-bench-publish")
    rows = []
    for n in (int(x) for x in args.matches.split(",")):
        row = run(spark, n)
        rows.append(row)
        print(f"  {json.dumps(row)}", file=sys.stderr, flush=True)
    spark.stop()
    lines = ["| matches | publish | seconds | Python driver RSS before | Python driver peak RSS "
             "| JVM peak RSS (driver + local executors) |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['matches']:,} | {r['publish']} | {r['seconds']} | "
              f"{r['driver_start_mb']:,} MB | {r['driver_peak_mb']:,} MB | "
              f"{r['jvm_peak_mb']:,} MB |" for r in rows]
    print("\n".join(lines))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"publish_memory-{args.tag}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
