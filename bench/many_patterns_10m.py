"""Many patterns over 10M events (docs/benchmarks.md): a night of 1, 5 and 20 patterns.

The events are the 10M events of ``bench/spark_pipeline.py``'s ``10m`` set (the BPI 2011
hospital log 67 times, with shifted patient ids), with the ingest's ``ingested_at``
column: ``bench/out/lake/events/hospital10m_night``, written once. The patterns are the committed hospital sequence patterns and variations of them
with another ``within`` (``bench/many_patterns.py``'s ``variants``), on that table. Each N
runs the night's own code after its ingest (``pipeline.run.run_patterns``: one pass per
source, one validation, publish) in one warm Spark session, on a lake whose matches and
runs tables are emptied before each N (every pattern a full recompute); the statistics
are built once, as the ingest would. A first N=1 night warms the JVM and the workers and
is not reported.

    python bench/many_patterns_10m.py [--n 1,5,20] [--repeat 3] [--conf KEY=VALUE ...]

Each N runs ``--repeat`` nights; the median one is reported, with every night's wall.

Writes bench/out/many_patterns_10m.json; the figures go into docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from many_patterns import variants  # noqa: E402
from spark_pipeline import OUT, SCALE, hospital_copies  # noqa: E402

from jobs.config import load_profile  # noqa: E402
from jobs.core.language.patternfile import load_pattern  # noqa: E402
from jobs.lake import store as lk  # noqa: E402
from jobs.pipeline.context import RunContext  # noqa: E402
from jobs.pipeline.run import run_patterns  # noqa: E402
from jobs.spark.session import build_session  # noqa: E402
from jobs.spark.stats import update_stats  # noqa: E402
from jobs.status import new_run_id  # noqa: E402

DAY = "2026-11-24"
SOURCE = "hospital10m_night"


def ensure_events(lake: lk.Lake) -> int:
    """events/hospital10m_night: the 10M events of ``spark_pipeline``'s ``10m`` set, with
    the ingest's lineage column ``ingested_at`` (the statistics read it), written once."""
    import pyarrow as pa

    path = lake.events(SOURCE)
    if not lake.exists(path):
        now = pa.scalar(time.time_ns() // 1000, pa.timestamp("us", tz="UTC"))
        for month in hospital_copies(SCALE["10m"]):
            month = month.append_column("ingested_at", pa.array([now.value] * month.num_rows,
                                                                pa.timestamp("us", tz="UTC")))
            lake.write(path, month, partition_by=["event_date"], mode="append")
    return lake.table(path).count()
COLUMNS = {"patient": "string", "event_type": "string", "activity_code": "string"}


def pattern_files(n: int, source: str, folder: Path) -> list[Path]:
    """n hospital patterns on ``source``: the committed sequence patterns of the hospital,
    then their variations."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    hospital = [(name, text) for name, text in variants(400)
                if name.startswith("hospital_") and "\nsets:" in text]
    files = []
    for name, text in hospital[:n]:
        text = text.split("\nexamples:")[0] + "\n"
        path = folder / name
        path.write_text(text.replace("source: hospital\n", f"source: {source}\n"))
        files.append(path)
    if len(files) < n:
        raise SystemExit(f"only {len(files)} hospital variants")
    return files


def night(spark, profile, lake: lk.Lake, files: list[Path]) -> dict:
    """run_patterns over ``files`` on a lake without matches and runs: wall time and the
    runs rows' step sums."""
    for folder in ("matches", "runs", "staging"):
        shutil.rmtree(Path(lake.root) / folder, ignore_errors=True)
    ctx = RunContext.start(profile, new_run_id(), DAY)
    ctxs = [ctx.for_pattern(f, load_pattern(f)) for f in files]
    lines = []
    t0 = time.perf_counter()
    rows = run_patterns(spark, ctxs, {}, echo=lines.append)
    wall = time.perf_counter() - t0
    failed = [r for r in rows if r.get("status") != "success"]
    if failed:
        raise SystemExit(f"failed: {failed[0]}")
    out = {"n": len(files), "wall": round(wall, 1),
           "matches": sum(r["matches"] for r in rows),
           "events_read": sum(r["events"] for r in rows),
           "passes": sum(1 for line in lines if " in one pass: " in line)}
    for step in ("match", "validate", "publish"):
        out[step] = round(sum(r.get(f"{step}_seconds") or 0 for r in rows), 1)
    out["other"] = round(out["wall"] - out["match"] - out["validate"] - out["publish"], 1)
    out["driver_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1,5,20", help="numbers of patterns, comma-separated")
    ap.add_argument("--repeat", type=int, default=3,
                    help="nights per N; the median night is reported (the machine is noisy)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting over the local profile's (repeatable)")
    ap.add_argument("--out", default="many_patterns_10m.json", help="file in bench/out")
    args = ap.parse_args(argv)
    root = OUT / "lake"
    lake = lk.Lake(str(root))
    source, events = SOURCE, ensure_events(lake)
    profile = load_profile("local")
    profile = replace(profile, lake=str(root), site=None, spark_conf={
        **profile.spark_conf, **dict(kv.split("=", 1) for kv in args.conf)})
    spark = build_session(profile, "ses-bench-many-10m")
    work = OUT / "many_10m"
    ns = [int(x) for x in args.n.split(",")]
    biggest = pattern_files(max(ns), source, work / "patterns")
    t0 = time.perf_counter()
    shutil.rmtree(root / "stats" / source, ignore_errors=True)
    update_stats(spark, lake, source, [load_pattern(f) for f in biggest], COLUMNS,
                 lambda *_: None)
    print(f"statistics of {events:,} events: {time.perf_counter() - t0:.1f} s", flush=True)
    print("warm-up night (N=1) ...", flush=True)
    night(spark, profile, lake, biggest[:1])
    results = []
    for n in ns:
        tries = []
        for _ in range(args.repeat):
            tries.append(night(spark, profile, lake, biggest[:n]))
            print(f"N={n}: {tries[-1]}", flush=True)
        r = sorted(tries, key=lambda t: t["wall"])[len(tries) // 2]  # the median night
        r.update(events=events, walls=[t["wall"] for t in tries])
        results.append(r)
    spark.stop()
    one = next((r for r in results if r["n"] == 1), None)
    for r in results:
        r["vs_one"] = round(r["wall"] / one["wall"], 2) if one else None
    path = OUT / args.out
    path.write_text(json.dumps(results, indent=1))
    print("| N | wall | match | validate | publish | other | matches | passes | vs N=1 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['n']} | {r['wall']} s | {r['match']} | {r['validate']} | {r['publish']} "
              f"| {r['other']} | {r['matches']:,} | {r['passes']} | {r['vs_one']}× |")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
