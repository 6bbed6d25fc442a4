"""Benchmark of the whole Spark match job (issues 5 and 13): events per second end to end,
the time split between phase 1 (read, Theorem 1 filter, repartition by X, sort: measured
alone with a no-op sink) and phase 2 (the matcher on the executors: the rest), the publish
of the matches, and peak memory: the Python driver, the JVMs, and the Python workers
(resident sets, sampled every 0.2 s).

Data sets, written once as Delta tables under bench/out/lake (git ignores it):
  hospital  BPI 2011 hospital log, 150,291 events
  loans     BPIC 2012 loan applications, 262,200 events
  1m, 10m, 30m, 100m
            the hospital log replicated 7, 67, 200 and 666 times with shifted patient
            ids (1.05M to 100.1M events), streamed to disk copy by copy, never whole in
            memory

    python bench/spark_pipeline.py [--sets hospital,loans,10m] [--repeat 1]
                                   [--profile local|standalone]

``--profile standalone`` starts the standalone cluster (``make cluster-up``) if it is not
running, and stops it again afterwards.
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

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from jobs.config import load_profile  # noqa: E402
from jobs.core.language.patternfile import parse_pattern  # noqa: E402
from jobs.lake import store as lk  # noqa: E402
from jobs.pipeline.match.phase1 import MatchJob, run_match_job  # noqa: E402
from jobs.spark.session import build_session  # noqa: E402

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


SCALE = {"1m": 7, "10m": 67, "30m": 200, "100m": 666}  # copies of the hospital log
SOURCES = {"hospital": "hospital", "loans": "loans", **{k: f"hospital{k}" for k in SCALE}}


def _dated(t: pa.Table) -> pa.Table:
    ts = t.column("ts").cast(pa.timestamp("us", tz="UTC"))
    t = t.set_column(t.column_names.index("ts"), "ts", ts)
    return t.append_column("event_date", pc.strftime(ts, format="%Y-%m-%d"))


def hospital_log() -> pa.Table:
    t = pq.read_table(REAL / "bpi2011_hospital.parquet",
                      columns=["patient", "event_type", "timestamp", "activity_code"])
    return _dated(t.rename_columns(["patient", "event_type", "ts", "activity_code"]))


def loans_log() -> pa.Table:
    t = pq.read_table(REAL / "bpic2012_loans.parquet",
                      columns=["case:concept:name", "concept:name", "lifecycle:transition",
                               "time:timestamp"])
    t = t.rename_columns(["case_id", "activity", "lifecycle", "ts"])
    t = t.append_column("event_id", pa.array([f"l{j:06d}" for j in range(t.num_rows)]))
    return _dated(t)


def hospital_copies(copies: int, first: int = 0):
    """The hospital log ``copies`` times, copy ``i`` (from ``first``) with patients
    ``<patient>_<i>`` and event ids ``<i>-<j>``, one month of every copy at a time (so that
    each append holds a month and writes one file per day): yields one Arrow table per
    month."""
    base = hospital_log()
    base = base.append_column("serial", pa.array([f"{j:06d}" for j in range(base.num_rows)]))
    months = pc.utf8_slice_codeunits(base.column("event_date"), 0, 7)
    for k, month in enumerate(pc.unique(months).sort().to_pylist()):
        rows = base.filter(pc.equal(months, month))
        patient = rows.column("patient").cast(pa.string())
        parts = []
        for i in range(first, first + copies):
            part = rows.set_column(rows.column_names.index("patient"), "patient",
                                   pc.binary_join_element_wise(patient, f"_{i:03d}", ""))
            parts.append(part.append_column("event_id", pc.binary_join_element_wise(
                pa.scalar(f"{i:03d}-"), rows.column("serial"), "")).drop_columns("serial"))
        if k % 6 == 0:
            print(f"    {month}", file=sys.stderr, flush=True)
        yield pa.concat_tables(parts)


def ensure_table(lake: lk.Lake, name: str) -> tuple[str, int]:
    source = SOURCES[name]
    path = lake.events(source)
    if not lake.exists(path):
        t0 = time.perf_counter()
        if name in SCALE:
            for month in hospital_copies(SCALE[name]):
                lake.write(path, month, partition_by=["event_date"], mode="append")
        else:
            data = hospital_log() if name == "hospital" else loans_log()
            if name == "hospital":
                data = data.append_column("event_id", pa.array(
                    [f"00-{j:06d}" for j in range(data.num_rows)]))
            lake.write(path, data, partition_by=["event_date"])
        print(f"  wrote {path}: {lake.table(path).count():,} events in "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return source, lake.table(path).count()


class MemorySampler:
    """Peak resident memory of the Python driver, of the JVMs (in local mode one JVM is
    the Spark driver *and* the executors; on the standalone cluster the executors are
    JVMs of their own) and of the Python workers of the executors."""

    def __init__(self):
        import psutil

        self.psutil = psutil
        self.proc = psutil.Process(os.getpid())
        self.peak = self.jvm_peak = self.executor_peak = self.worker_peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        self.peak = max(self.peak, self.proc.memory_info().rss)
        for p in self.psutil.process_iter(["name", "cmdline"]):
            try:
                cmd = " ".join(p.info["cmdline"] or [])
                if "java" in (p.info["name"] or "") and "CoarseGrainedExecutorBackend" in cmd:
                    self.executor_peak = max(self.executor_peak, p.memory_info().rss)
                elif "java" in (p.info["name"] or "") and p.ppid() == self.proc.pid:
                    self.jvm_peak = max(self.jvm_peak, p.memory_info().rss)
                elif "pyspark.daemon" in cmd or "pyspark/daemon" in cmd:
                    self.worker_peak = max(self.worker_peak, p.memory_info().rss)
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                pass

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

    def peaks(self, other: "MemorySampler | None" = None) -> dict:
        both = [self] + ([other] if other else [])
        return {k: round(max(getattr(m, a) for m in both) / 2**20) for k, a in
                (("driver_peak_mb", "peak"), ("jvm_peak_mb", "jvm_peak"),
                 ("executor_peak_mb", "executor_peak"), ("worker_peak_mb", "worker_peak"))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="hospital,loans,10m")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--profile", default="local", choices=["local", "standalone"])
    args = ap.parse_args(argv)
    profile = load_profile(args.profile)
    started_cluster = False
    if args.profile == "standalone":
        from jobs.ops import cluster

        started_cluster = cluster.status() is None
        cluster.up(echo=lambda m: print(m, file=sys.stderr))
    lake = lk.Lake(str(OUT / "lake"))
    spark = build_session(profile, "ses-bench")
    rows = []
    try:
        for name in args.sets.split(","):
            rows.append(measure(spark, profile, lake, name, args.repeat))
            print(f"  {name}: {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    finally:
        spark.stop()
        if started_cluster:
            cluster.down(echo=lambda m: print(m, file=sys.stderr))
    lines = ["| data set | events | kept by the filter | matches | match job | events/s "
             "| phase 1 | phase 2 | publish | Python driver peak RSS | driver JVM peak RSS "
             "| executor JVM peak RSS | Python worker peak RSS |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        executors = f"{r['executor_peak_mb']:,} MB" if r["executor_peak_mb"] else "(in the driver JVM)"
        lines.append(f"| {r['set']} | {r['events']:,} | {r['kept']:,} | {r['matches']:,} "
                     f"| {r['total_s']:.1f} s | {r['events_per_s']:,.0f} | {r['phase1_s']:.1f} s "
                     f"| {r['phase2_s']:.1f} s | {r['publish_s']:.1f} s "
                     f"| {r['driver_peak_mb']:,} MB | {r['jvm_peak_mb']:,} MB | {executors} "
                     f"| {r['worker_peak_mb']:,} MB |")
    table = "\n".join(lines)
    print(table)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"spark_pipeline-{args.profile}.md").write_text(table + "\n")
    (OUT / f"spark_pipeline-{args.profile}.json").write_text(json.dumps(rows, indent=1))
    return 0


def measure(spark, profile, lake: lk.Lake, name: str, repeat: int) -> dict:
    """Best of ``repeat``: the match job alone with a no-op sink (phase 1), the whole match
    job into staging, and the publish of its matches into a fresh table."""
    import shutil

    from jobs.pipeline.match.horizons import RunRange
    from jobs.pipeline.publish.matches import publish

    source, n = ensure_table(lake, name)
    text = PATTERNS["loans" if name == "loans" else "hospital"].replace(
        "source: hospital\n", f"source: {source}\n")
    pattern = parse_pattern(text, f"<{name}>")
    kw = dict(low=None, high=None, slice_length=profile.slice_length,
              max_partition_events=profile.max_partition_events,
              options=profile.match_options())
    # warm up the JVM's caches and every executor's Python workers (they load the compiled
    # matching kernels once): phase 2 included
    run_match_job(spark, lake, MatchJob(pattern, text, "warmup", **kw))
    best = None
    for _ in range(repeat):
        with MemorySampler() as mem1:
            p1 = run_match_job(spark, lake, MatchJob(pattern, text, "phase1", sink="noop", **kw))
        with MemorySampler() as mem2:
            full = run_match_job(spark, lake, MatchJob(pattern, text, "bench", **kw))
            shutil.rmtree(lake.matches(pattern.name), ignore_errors=True)
            t0 = time.perf_counter()
            publish(spark, lake, pattern, "bench", full.staging,
                    RunRange(None, 2**62, True))
            publish_s = time.perf_counter() - t0
        row = {"set": name, "profile": profile.name, "events": n,
               "kept": full.stats["events_after_filter"], "matches": full.stats["matches"],
               "groups": full.stats["groups"], "total_s": full.stats["seconds"],
               "phase1_s": p1.stats["seconds"],
               "phase2_s": max(full.stats["seconds"] - p1.stats["seconds"], 0.0),
               "phase2_cpu_s": full.stats["phase2_seconds"], "publish_s": publish_s,
               **mem1.peaks(mem2)}
        if best is None or row["total_s"] < best["total_s"]:
            best = row
    best["events_per_s"] = best["events"] / best["total_s"]
    return best


if __name__ == "__main__":
    sys.exit(main())
