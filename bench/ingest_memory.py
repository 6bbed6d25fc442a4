"""Ingest's peak memory against the size of a landing file (docs/operations.md).

A hospital-shaped CSV of about SIZE MB (the committed hospital log replicated with shifted
patient ids, so no row repeats another), ingested into a fresh lake by the code of `ses
ingest` (stage, then commit; without the events suite, which runs in Spark's JVM), each
size in its own process; the peak resident memory of that process (ru_maxrss) above the
peak of a 100-row file.

    python bench/ingest_memory.py [--sizes 50,200]

Writes bench/out/ingest_memory.json; the figures go into docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "ingest_memory"


def make_csv(path: Path, mb: float) -> int:
    """A CSV of about ``mb`` MB; returns its rows."""
    with gzip.open(ROOT / "data" / "landing" / "hospital" / "hospital_2006.csv.gz", "rt") as f:
        header, *lines = f.read().splitlines()
    rows = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as out:
        out.write(header + "\n")
        copy = 0
        while out.tell() < mb * 1e6:
            for line in lines:
                out.write(f"c{copy}-{line}\n")  # the patient column comes first
                rows += 1
                if rows % 100 == 0 and out.tell() >= mb * 1e6:
                    break
            copy += 1
    return rows


def child(landing: str, lake: str) -> None:
    sys.path.insert(0, str(ROOT))
    from jobs.config import load_sources
    from jobs.lake.store import Lake
    from jobs.pipeline.ingest import ingest

    t0 = time.perf_counter()
    r = ingest(load_sources()["hospital"], landing, Lake(lake), "bench")
    print(json.dumps({"rows": r.rows, "events": r.new_events, "seconds":
                      round(time.perf_counter() - t0, 1),
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    sys.stdout.flush()
    os._exit(0)


def measure(mb: float) -> dict:
    home = OUT / f"{mb:g}mb"
    shutil.rmtree(home, ignore_errors=True)
    rows = make_csv(home / "landing" / "hospital" / "h.csv", mb)
    size = (home / "landing" / "hospital" / "h.csv").stat().st_size / 1e6
    proc = subprocess.run([sys.executable, __file__, "--child", str(home / "landing"),
                           str(home / "lake")], capture_output=True, text=True, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    shutil.rmtree(home, ignore_errors=True)
    return dict(out, file_mb=round(size, 1), rows_written=rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="50,200")
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
    base = measure(0.01)
    results = {"base": base}
    for mb in map(float, args.sizes.split(",")):
        r = measure(mb)
        r["above_base_mb"] = round(r["peak_mb"] - base["peak_mb"], 1)
        results[f"{mb:g}"] = r
        print(f"{r['file_mb']:7.1f} MB file, {r['rows']:,} rows: peak {r['peak_mb']:.0f} MB "
              f"({r['above_base_mb']:.0f} MB above a 100-row file's), {r['seconds']} s",
              flush=True)
    OUT.parent.mkdir(exist_ok=True)
    (ROOT / "bench" / "out" / "ingest_memory.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
