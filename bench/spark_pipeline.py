"""Benchmark of the whole Spark match job (issue 5): events per second end to end, the time
split between phase 1 (read, Theorem 1 filter, repartition by X, sort: measured alone with
a no-op sink) and phase 2 (the matcher on the executors: the rest), and the driver's
memory (resident set of the Python driver and its JVM, sampled every 0.2 s).

Data sets, written once as Delta tables under bench/out/lake (git ignores it):
  hospital  BPI 2011 hospital log, 150,291 events
  loans     BPIC 2012 loan applications, 262,200 events
  10m       the hospital log replicated with shifted patient ids: 10,070,000 events

    python bench/spark_pipeline.py [--sets hospital,loans,10m] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from jobs import lake as lk  # noqa: E402
from jobs.config import load_profile  # noqa: E402
from jobs.core.loader import parse_pattern  # noqa: E402
from jobs.match_job import run_match_job  # noqa: E402
from jobs.spark import build_session  # noqa: E402

REAL = ROOT.parent / "shared" / "data" / "real"
OUT = ROOT / "bench" / "out"

PATTERNS = {
    "hospital": (ROOT / "patterns" / "hospital_ca125_blood_then_consult.yaml").read_text(),
    "loans": """\
name: loan_offer_accepted
source: loans
within: 30d
sets: [[s], [o, c], [a]]
conditions:
  - s.activity = 'A_SUBMITTED'
  - o.activity = 'O_SENT'
  - c.activity = 'W_Completeren aanvraag'
  - a.activity = 'A_APPROVED'
  - s.case_id = o.case_id
  - o.case_id = c.case_id
  - c.case_id = a.case_id
""",
}


def events_table(name: str) -> pa.Table:
    if name in ("hospital", "10m"):
        t = pq.read_table(REAL / "bpi2011_hospital.parquet",
                          columns=["patient", "event_type", "timestamp", "activity_code"])
        t = t.rename_columns(["patient", "event_type", "ts", "activity_code"])
        copies = 67 if name == "10m" else 1
        parts = []
        for i in range(copies):
            part = t
            if copies > 1:
                patient = part.column("patient").cast(pa.string())
                part = part.set_column(0, "patient", pc.binary_join_element_wise(
                    patient, pa.scalar(f"_{i:02d}"), pa.scalar("")))
            ids = pa.array([f"{i:02d}-{j:06d}" for j in range(part.num_rows)])
            parts.append(part.append_column("event_id", ids))
        t = pa.concat_tables(parts)
    else:
        t = pq.read_table(REAL / "bpic2012_loans.parquet",
                          columns=["case:concept:name", "concept:name", "lifecycle:transition",
                                   "time:timestamp"])
        t = t.rename_columns(["case_id", "activity", "lifecycle", "ts"])
        t = t.append_column("event_id", pa.array([f"l{j:06d}" for j in range(t.num_rows)]))
    ts = t.column("ts").cast(pa.timestamp("us", tz="UTC"))
    t = t.set_column(t.column_names.index("ts"), "ts", ts)
    return t.append_column("event_date", pc.strftime(ts, format="%Y-%m-%d"))


SOURCES = {"hospital": "hospital", "10m": "hospital10m", "loans": "loans"}


def ensure_table(lake: lk.Lake, name: str) -> tuple[str, int]:
    source = SOURCES[name]
    path = lake.events(source)
    if not lk.exists(path):
        t0 = time.perf_counter()
        t = events_table(name)
        lk.write_deltalake(path, t, partition_by=["event_date"])
        print(f"  wrote {path}: {t.num_rows:,} events in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    return source, lk.table(path).count()


class MemorySampler:
    """Peak resident memory of the Python driver, and of the JVM (in local mode the JVM is
    the Spark driver *and* the executors, capped by spark.driver.memory)."""

    def __init__(self):
        import psutil

        self.proc = psutil.Process(os.getpid())
        self.peak = self.jvm_peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _jvm(self) -> int:
        total = 0
        for child in self.proc.children(recursive=False):  # not the Python workers
            try:
                if "java" in child.name():
                    total += child.memory_info().rss
            except Exception:
                pass
        return total

    def _sample(self):
        self.peak = max(self.peak, self.proc.memory_info().rss)
        self.jvm_peak = max(self.jvm_peak, self._jvm())

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.2)

    def __enter__(self):
        self._sample()
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="hospital,loans,10m")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    profile = load_profile("local")
    lake = lk.Lake(str(OUT / "lake"))
    spark = build_session(profile, "ses-bench")
    rows = []
    for name in args.sets.split(","):
        source, n = ensure_table(lake, name)
        text = PATTERNS["loans" if name == "loans" else "hospital"].replace(
            "source: hospital\n", f"source: {source}\n")
        pattern = parse_pattern(text, f"<{name}>")
        kw = dict(low=None, high=None, slice_length=profile.slice_length,
                  max_partition_events=profile.max_partition_events,
                  max_matches_per_window=profile.max_matches_per_window)
        run_match_job(spark, pattern, text, lake, "warmup", sink="noop", **kw)  # JIT, caches
        best = None
        for _ in range(args.repeat):
            with MemorySampler() as mem1:
                p1 = run_match_job(spark, pattern, text, lake, "phase1", sink="noop", **kw)
            with MemorySampler() as mem2:
                full = run_match_job(spark, pattern, text, lake, "bench", **kw)
            row = {"set": name, "events": n, "kept": full.stats["events_after_filter"],
                   "matches": full.stats["matches"], "groups": full.stats["groups"],
                   "total_s": full.stats["seconds"], "phase1_s": p1.stats["seconds"],
                   "phase2_s": max(full.stats["seconds"] - p1.stats["seconds"], 0.0),
                   "phase2_cpu_s": full.stats["phase2_seconds"],
                   "driver_peak_mb": max(mem1.peak, mem2.peak) / 2**20,
                   "jvm_peak_mb": max(mem1.jvm_peak, mem2.jvm_peak) / 2**20}
            if best is None or row["total_s"] < best["total_s"]:
                best = row
        best["events_per_s"] = best["events"] / best["total_s"]
        rows.append(best)
        print(f"  {name}: {json.dumps(best)}", file=sys.stderr, flush=True)
    spark.stop()
    lines = ["| data set | events | kept by the filter | matches | end to end | events/s "
             "| phase 1 | phase 2 | phase 2 / phase 1 | Python driver peak RSS "
             "| JVM peak RSS (driver + local executors) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["phase2_s"] / r["phase1_s"] if r["phase1_s"] else float("nan")
        lines.append(f"| {r['set']} | {r['events']:,} | {r['kept']:,} | {r['matches']:,} "
                     f"| {r['total_s']:.1f} s | {r['events_per_s']:,.0f} | {r['phase1_s']:.1f} s "
                     f"| {r['phase2_s']:.1f} s | {ratio:.2f} | {r['driver_peak_mb']:,.0f} MB "
                     f"| {r['jvm_peak_mb']:,.0f} MB |")
    table = "\n".join(lines)
    print(table)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "spark_pipeline.md").write_text(table + "\n")
    (OUT / "spark_pipeline.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
