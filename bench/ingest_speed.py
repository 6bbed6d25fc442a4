"""The front door's speed: the whole `ses ingest` against Spark's own reader and against
pyarrow with delta-rs, on one file of each committed shape, side by side in one run.

Files: a hospital-shaped CSV and a sepsis-shaped JSONL of about MB megabytes each (the
committed logs replicated with shifted patient ids, so no row repeats another). For each
file, one after another on this machine:

* ``ses ingest``: the command as a user runs it (a fresh project and lake; JVM start, the
  events suite, the statistics and the commit included);
* ``spark``: Spark's own reader (``local[2]``, the profile's settings) -> Parquet
  partitioned by day, with an id from ``sha2`` of the row's values; JVM start included;
* ``arrow``: pyarrow's reader -> a Delta table through delta-rs in one process (ids: the
  row numbers; no typing rules, no quarantine): what the hardware gives without rules;
* ``duckdb``: DuckDB's reader -> Parquet partitioned by day with a sha256 id of the row.

Before these, ``ses ingest`` of a file of a hundred rows of the same shape: the command's
fixed cost (JVM start, the events suite, the statistics, the commit), which no work per
row can lower.

For ``ses ingest`` and ``spark``, the peak resident memory of the driver, the JVM and
Spark's Python workers (polled from /proc), and ``ses ingest``'s own account of where its
time went (its ``time`` line).

    python bench/ingest_speed.py [--mb 200] [--only csv|jsonl]

Writes bench/out/ingest_speed.json and docs/benchmarks/ingest_speed.png (rows per second).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "ingest_speed"
sys.path.insert(0, str(ROOT / "bench"))

from ingest_memory import make_csv  # noqa: E402 - the hospital-shaped CSV, as measured there

SPARK_JOB = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from jobs.config import load_profile
from jobs.spark.session import build_session
from pyspark.sql import functions as F
spark = build_session(load_profile())
fmt, path, out, time_column = {fmt!r}, {path!r}, {out!r}, {time_column!r}
reader = spark.read.option("header", True) if fmt == "csv" else spark.read
df = reader.format("csv" if fmt == "csv" else "json").load(path)
cols = [F.coalesce(F.col(c).cast("string"), F.lit("")) for c in df.columns]
df = (df.withColumn("event_id", F.sha2(F.concat_ws("\u0001", *cols), 256))
        .withColumn("ts", F.to_timestamp(F.col(time_column)))
        .withColumn("event_date", F.to_date("ts")))
df.write.mode("overwrite").partitionBy("event_date").parquet(out)
rows = spark.read.parquet(out).count()
print(rows, round(time.perf_counter() - t0, 2))
"""


def make_jsonl(path: Path, mb: float) -> int:
    """A sepsis-shaped JSONL of about ``mb`` MB; returns its rows."""
    lines = []
    for f in sorted((ROOT / "data" / "landing" / "sepsis").glob("*.jsonl.gz")):
        with gzip.open(f, "rt") as src:
            lines += [json.loads(x) for x in src if x.strip()]
    rows, copy = 0, 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as out:
        while out.tell() < mb * 1e6:
            for rec in lines:
                out.write(json.dumps({**rec, "patient": f"c{copy}-{rec.get('patient')}"}) + "\n")
                rows += 1
                if rows % 100 == 0 and out.tell() >= mb * 1e6:
                    break
            copy += 1
    return rows


def project(home: Path, source: str, file: Path) -> Path:
    """A project of its own: the committed conf/ and expectations/, a landing folder with
    the one file, a lake of its own."""
    proj = home / "project"
    shutil.copytree(ROOT / "conf", proj / "conf")
    shutil.copytree(ROOT / "expectations", proj / "expectations")
    (proj / "patterns").mkdir()
    (proj / "data" / "landing" / source).mkdir(parents=True)
    shutil.move(str(file), proj / "data" / "landing" / source / file.name)
    return proj


def _tree(root: int) -> dict[int, tuple[int, str]]:
    """{pid: (parent, command line)} of ``root`` and its descendants (/proc)."""
    procs = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            parent = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        procs[int(d.name)] = (parent, cmd)
    keep, grew = {root}, True
    while grew:
        more = {p for p, (parent, _) in procs.items() if parent in keep} - keep
        grew = bool(more)
        keep |= more
    return {p: procs[p] for p in keep if p in procs}


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Peaks(threading.Thread):
    """The peak resident memory of a command's process tree, by part: the driver (the
    command's own Python), the JVM, and Spark's Python workers (all of them at once)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.done = pid, threading.Event()
        self.peak = {"driver": 0.0, "jvm": 0.0, "python workers": 0.0}

    def run(self) -> None:
        while not self.done.is_set():
            now = {"driver": 0.0, "jvm": 0.0, "python workers": 0.0}
            for pid, (_, cmd) in _tree(self.pid).items():
                part = ("driver" if pid == self.pid else "jvm" if "java" in cmd.split(" ")[0]
                        else "python workers")
                now[part] += _rss_mb(pid)
            for k, v in now.items():
                self.peak[k] = max(self.peak[k], v)
            self.done.wait(0.2)


def timed(cmd: list[str], cwd: Path, peaks: dict | None = None) -> tuple[float, str]:
    """Seconds and output of a command; ``peaks``: filled with its peak memory (MB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    watch = Peaks(proc.pid)
    watch.start()
    out, err = proc.communicate()
    watch.done.set()
    watch.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed: {err[-2000:]}")
    if peaks is not None:
        peaks.update({k: round(v) for k, v in watch.peak.items()})
    return time.perf_counter() - t0, out


def time_line(said: str) -> str:
    """Where an ingest's time went: its ``time <source>:`` line, without the label."""
    return next((line.split(": ", 1)[1] for line in said.splitlines()
                 if line.strip().startswith("time ")), "")


def duckdb_parquet(fmt: str, path: Path, out: Path, time_column: str) -> float:
    """DuckDB's reader -> Parquet partitioned by day, with a sha256 id of the row."""
    import duckdb

    t0 = time.perf_counter()
    reader = f"read_csv('{path}', all_varchar=true)" if fmt == "csv" else \
        f"read_json('{path}', format='newline_delimited')"
    con = duckdb.connect()
    con.execute(f"CREATE VIEW raw AS SELECT * FROM {reader}")
    cols = [r[0] for r in con.execute("DESCRIBE raw").fetchall()]
    row = " || chr(1) || ".join(f"coalesce(CAST(\"{c}\" AS VARCHAR), '')" for c in cols)
    con.execute(f"""COPY (SELECT *, sha256({row}) AS event_id,
        CAST(TRY_CAST("{time_column}" AS TIMESTAMP) AS DATE) AS event_date FROM raw)
        TO '{out}' (FORMAT PARQUET, PARTITION_BY (event_date), OVERWRITE_OR_IGNORE)""")
    return time.perf_counter() - t0


def arrow_delta(fmt: str, path: Path, out: Path, time_column: str) -> tuple[int, float]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    from deltalake import write_deltalake

    t0 = time.perf_counter()
    table = pcsv.read_csv(path) if fmt == "csv" else pjson.read_json(path)
    raw = table.column(time_column)
    ts = pc.strptime(raw, "%Y-%m-%dT%H:%M:%S", "us", error_is_null=True) \
        if pa.types.is_string(raw.type) else pc.cast(raw, pa.timestamp("us"))
    table = table.append_column("event_id", pa.array(range(table.num_rows), pa.int64())) \
        .append_column("ts", ts).append_column("event_date", pc.cast(ts, pa.date32()))
    write_deltalake(str(out), table, partition_by=["event_date"])
    return table.num_rows, time.perf_counter() - t0


def ses_ingest(fmt: str, mb: float, home: Path, memory: dict | None = None
               ) -> tuple[int, float, str, Path, Path]:
    """A file of about ``mb`` MB of ``fmt``'s shape, in a fresh project under ``home``,
    through the whole ``ses ingest``: (rows, seconds, its time line, the landed file, the
    project)."""
    source = "hospital" if fmt == "csv" else "sepsis"
    shutil.rmtree(home, ignore_errors=True)
    file = home / f"{source}.{fmt}"
    rows = make_csv(file, mb) if fmt == "csv" else make_jsonl(file, mb)
    proj = project(home, source, file)
    landed = proj / "data" / "landing" / source / file.name
    print(f"{fmt}: {landed.stat().st_size / 1e6:.1f} MB, {rows:,} rows", flush=True)
    ses, said = timed([sys.executable, "-m", "jobs", "--project-dir", str(proj), "ingest",
                       "--source", source], proj, memory)
    steps = time_line(said)
    print(f"  ses ingest {ses:.1f} s ({steps})", flush=True)
    return rows, ses, steps, landed, proj


def measure(fmt: str, mb: float) -> dict:
    time_column = "timestamp"
    home = OUT / fmt
    # the fixed cost: the same command on a file of a hundred rows (the JVM's start, the
    # events suite's, the statistics' and the commit's own costs)
    _, fixed, fixed_steps, _, _ = ses_ingest(fmt, 1e-4, home)
    memory: dict[str, dict] = {"ses ingest": {}, "spark": {}}
    rows, ses, steps, landed, proj = ses_ingest(fmt, mb, home, memory["ses ingest"])
    size = landed.stat().st_size / 1e6
    job = SPARK_JOB.format(root=str(ROOT), fmt=fmt, path=str(landed), out=str(home / "parquet"),
                           time_column=time_column)
    spark, printed = timed([sys.executable, "-c", job], proj, memory["spark"])
    print(f"  spark {spark:.1f} s", flush=True)
    n, arrow = arrow_delta(fmt, landed, home / "delta", time_column)
    print(f"  arrow {arrow:.1f} s", flush=True)
    duck = duckdb_parquet(fmt, landed, home / "duckdb", time_column)
    print(f"  duckdb {duck:.1f} s", flush=True)
    shutil.rmtree(home, ignore_errors=True)
    seconds = {"ses ingest": ses, "spark": spark, "arrow": arrow, "duckdb": duck}
    cores = os.cpu_count() or 1
    return {"format": fmt, "file_mb": round(size, 1), "rows": rows,
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "rows_per_second": {k: round(rows / v) for k, v in seconds.items()},
            "rows_per_second_per_core": {k: round(rows / v / (1 if k == "arrow" else cores))
                                         for k, v in seconds.items()},
            "ratio": {"ses / spark": round(ses / spark, 2), "ses / arrow": round(ses / arrow, 2),
                      "fixed / arrow": round(fixed / arrow, 2),
                      # the per-row work alone: the command less its fixed cost
                      "(ses - fixed) / arrow": round((ses - fixed) / arrow, 2)},
            "fixed": {"seconds": round(fixed, 1), "steps": fixed_steps},
            "peak_mb": memory, "ses ingest steps": steps}


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = ["ses ingest", "spark", "arrow", "duckdb"]
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        xs = [k + i * width for k in range(len(names))]
        ax.bar(xs, [r["rows_per_second"][n] for n in names], width,
               label=f"{r['format']} ({r['file_mb']:.0f} MB, {r['rows']:,} rows)")
    ax.set_xticks([k + width * (len(results) - 1) / 2 for k in range(len(names))], names)
    ax.set_ylabel("rows per second")
    ax.set_yscale("log")
    ax.set_title("ingest of one landing file, this machine (2 cores)")
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=96, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200, help="each file's size (default 200)")
    ap.add_argument("--only", choices=("csv", "jsonl"))
    args = ap.parse_args()
    results = [measure(fmt, args.mb) for fmt in ("csv", "jsonl") if args.only in (None, fmt)]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    (OUT.parent / "ingest_speed.json").write_text(json.dumps(results, indent=1))
    plot(results, ROOT / "docs" / "benchmarks" / "ingest_speed.png")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
