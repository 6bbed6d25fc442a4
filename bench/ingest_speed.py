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
  row numbers; no typing rules, no quarantine): what the hardware gives without rules.

    python bench/ingest_speed.py [--mb 200] [--only csv|jsonl]

Writes bench/out/ingest_speed.json and docs/benchmarks/ingest_speed.png (rows per second).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
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


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - t0, proc.stdout


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


def measure(fmt: str, mb: float) -> dict:
    source, time_column = ("hospital", "timestamp") if fmt == "csv" else ("sepsis", "timestamp")
    home = OUT / fmt
    shutil.rmtree(home, ignore_errors=True)
    file = home / f"{source}.{fmt}"
    rows = make_csv(file, mb) if fmt == "csv" else make_jsonl(file, mb)
    size = file.stat().st_size / 1e6
    proj = project(home, source, file)
    landed = proj / "data" / "landing" / source / file.name
    print(f"{fmt}: {size:.0f} MB, {rows:,} rows", flush=True)
    ses, _ = timed([sys.executable, "-m", "jobs", "--project-dir", str(proj), "ingest",
                    "--source", source], proj)
    print(f"  ses ingest {ses:.1f} s", flush=True)
    job = SPARK_JOB.format(root=str(ROOT), fmt=fmt, path=str(landed), out=str(home / "parquet"),
                           time_column=time_column)
    spark, printed = timed([sys.executable, "-c", job], proj)
    print(f"  spark {spark:.1f} s", flush=True)
    n, arrow = arrow_delta(fmt, landed, home / "delta", time_column)
    print(f"  arrow {arrow:.1f} s", flush=True)
    shutil.rmtree(home, ignore_errors=True)
    return {"format": fmt, "file_mb": round(size, 1), "rows": rows,
            "seconds": {"ses ingest": round(ses, 1), "spark": round(spark, 1),
                        "arrow": round(arrow, 1)},
            "rows_per_second": {k: round(rows / v) for k, v in
                                (("ses ingest", ses), ("spark", spark), ("arrow", arrow))}}


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = ["ses ingest", "spark", "arrow"]
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
