"""A billion events in slices: the match job over ten slices of 100M events each, one after
the other in one warm Spark session, with the time, the memory and the lake's sizes of
each slice: the figures behind "what a 1B-event history needs" in docs/benchmarks.md.

The history is the BPI 2011 hospital log replicated 6,660 times with shifted patient ids
(1.0B events); slice ``k`` holds the copies ``666 k .. 666 k + 665`` (100.1M events): a
partition-disjoint tenth of the history. For a pattern partitioned by patient, the
history's matches are the union of the slices' matches (no window crosses two slices),
so the slices are what a cluster would run as ten tasks of one job, run here one by one.
Each slice is written as its own Delta table (one file per day, month by month, never
whole in memory), matched (``hospital_ca125_blood_then_consult``, a full recompute),
published into a match table of its own (``<pattern>_slice<k>``), and then deleted (the
disk holds one slice's events at a time).

    .venv/bin/python bench/billion_slices.py [--slices 10] [--copies 666] [--ingest]

``--ingest``: each slice is written as landing CSV files (one a month) and loaded through
ingest on the session's executors, behind the events suite, as ``ses ingest`` loads
them; the row then has the ingest's seconds, rows per second, steps and peak memory.

Writes bench/out/billion_slices.json and docs/benchmarks/billion_slices.png
(``--ingest``: billion_slices_ingest.json and .png).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from spark_pipeline import PATTERNS, MemorySampler, hospital_copies  # noqa: E402

from jobs.config import Source, load_profile  # noqa: E402
from jobs.core.language.patternfile import parse_pattern  # noqa: E402
from jobs.lake import store as lk  # noqa: E402
from jobs.pipeline.ingest import ingest  # noqa: E402
from jobs.pipeline.match.horizons import RunRange  # noqa: E402
from jobs.pipeline.match.phase1 import MatchJob, run_match_job  # noqa: E402
from jobs.pipeline.publish.matches import publish  # noqa: E402
from jobs.pipeline.validate.quality import validate_events_frame  # noqa: E402
from jobs.spark.session import build_session  # noqa: E402

OUT = ROOT / "bench" / "out"


def folder_bytes(path: Path, pattern: str = "*") -> int:
    return sum(f.stat().st_size for f in path.rglob(pattern) if f.is_file())


SLICE = Source(name="slice", columns={"patient": "string", "event_type": "string",
                                      "ts": "timestamp", "activity_code": "string",
                                      "event_id": "string"},
               time_column="ts", id_column="event_id", landing="slice", format="csv")


def load_through_ingest(spark, profile, lake: lk.Lake, landing: Path, k: int,
                        copies: int) -> dict:
    """The slice as landing CSV files (one a month), loaded by ingest on the session's
    executors behind the events suite, as ``ses ingest`` loads them; returns the ingest's
    counts, seconds and peak memory."""
    import pyarrow.csv as pcsv

    folder = landing / "slice"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    for m, month in enumerate(hospital_copies(copies, first=k * copies)):
        pcsv.write_csv(month.drop_columns(["event_date"]), folder / f"m{m:03d}.csv")
    landing_s = time.perf_counter() - t0
    size = folder_bytes(folder)

    def gate(source, batch) -> None:
        outcome = validate_events_frame(spark, lake, source, batch, profile.ts_range(),
                                        docs=False)
        assert outcome.success, outcome.describe()

    with MemorySampler() as mem:
        t1 = time.perf_counter()
        r = ingest(SLICE, str(landing), lake, f"ingest{k}", ts_range=profile.ts_range(),
                   gate=gate, spark=spark)
        seconds = time.perf_counter() - t1
    shutil.rmtree(folder, ignore_errors=True)
    return {"landing_s": round(landing_s, 1), "landing_mb": round(size / 2**20),
            "ingest_s": round(seconds, 1), "ingest_rows_per_s": round(r.rows / seconds),
            "ingest_steps": {k: round(v, 1) for k, v in r.seconds.items()},
            "ingest_peaks": mem.peaks()}


def one_slice(spark, profile, lake: lk.Lake, text: str, k: int, copies: int,
              landing: Path | None = None) -> dict:
    name = parse_pattern(text, "<slices>").name
    text = text.replace(f"name: {name}\n", f"name: {name}_slice{k}\n")
    pattern = parse_pattern(text, f"<slice {k}>")
    path = lake.events("slice")
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    ingested = {}
    if landing is None:
        for month in hospital_copies(copies, first=k * copies):
            lake.write(path, month, partition_by=["event_date"], mode="append")
    else:
        ingested = load_through_ingest(spark, profile, lake, landing, k, copies)
    write_s = time.perf_counter() - t0
    dt = lake.table(path)
    events = dt.count()
    kw = dict(low=None, high=None, slice_length=profile.slice_length,
              max_partition_events=profile.max_partition_events,
              options=profile.match_options())
    if k == 0:  # warm the JVM and every Python worker (they load the kernels) first
        run_match_job(spark, lake, MatchJob(pattern, text, "warmup", **kw))
    with MemorySampler() as mem:
        job = run_match_job(spark, lake, MatchJob(pattern, text, f"slice{k}", **kw))
        t1 = time.perf_counter()
        published = publish(spark, lake, pattern, f"slice{k}", job.staging,
                            RunRange(None, 2**62, True))
        publish_s = time.perf_counter() - t1
    row = {"slice": k, "events": events, "write_s": round(write_s, 1),
           "match_s": round(job.stats["seconds"], 1), "publish_s": round(publish_s, 1),
           "kept": job.stats["events_after_filter"], "matches": job.stats["matches"],
           "inserted": published["inserted"],
           "data_files": len(dt.file_uris()),
           "parquet_mb": round(folder_bytes(Path(path), "*.parquet") / 2**20, 1),
           "log_kb": round(folder_bytes(Path(path) / "_delta_log") / 2**10, 1),
           **mem.peaks(), **ingested}
    shutil.rmtree(path, ignore_errors=True)
    return row


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    xs = [r["slice"] + 1 for r in rows]
    a.bar(xs, [r["match_s"] for r in rows], label="match job")
    a.bar(xs, [r["publish_s"] for r in rows], bottom=[r["match_s"] for r in rows],
          label="publish")
    a.set(xlabel="slice (100M events each)", ylabel="seconds", title="time per slice")
    a.legend()
    for key, label in (("jvm_peak_mb", "driver JVM"), ("worker_peak_mb", "Python worker"),
                       ("driver_peak_mb", "Python driver")):
        b.plot(xs, [r[key] for r in rows], marker="o", label=label)
    b.set(xlabel="slice", ylabel="peak RSS (MB)", title="memory per slice", ylim=(0, None))
    b.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slices", type=int, default=10)
    ap.add_argument("--copies", type=int, default=666, help="hospital log copies per slice")
    ap.add_argument("--lake", default=str(OUT / "billion_lake"))
    ap.add_argument("--ingest", action="store_true",
                    help="write each slice as landing CSV files and load it through ingest "
                         "(the events suite included) instead of writing it with pyarrow")
    args = ap.parse_args(argv)
    name = "billion_slices_ingest" if args.ingest else "billion_slices"
    profile = load_profile("local")
    shutil.rmtree(args.lake, ignore_errors=True)
    lake = lk.Lake(args.lake)
    text = PATTERNS["hospital"].replace("source: hospital\n", "source: slice\n")
    spark = build_session(profile, "ses-billion-slices")
    rows = []
    try:
        for k in range(args.slices):
            rows.append(one_slice(spark, profile, lake, text, k, args.copies,
                                  OUT / "billion_landing" if args.ingest else None))
            print(json.dumps(rows[-1]), flush=True)
            OUT.mkdir(parents=True, exist_ok=True)
            (OUT / f"{name}.json").write_text(json.dumps(rows, indent=1))
    finally:
        spark.stop()
    plot(rows, ROOT / "docs" / "benchmarks" / f"{name}.png")
    total = sum(r["events"] for r in rows)
    print(f"{total:,} events in {len(rows)} slices: match {sum(r['match_s'] for r in rows):.0f} s, "
          f"publish {sum(r['publish_s'] for r in rows):.0f} s, "
          f"write {sum(r['write_s'] for r in rows):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
