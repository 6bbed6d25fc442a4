"""``query`` without Spark (DuckDB over delta-rs) against ``query --engine spark``, end to
end as an analyst runs it (a fresh process each time, start-up included), on the lake of
a profile (default: local, after ``make run``).

    .venv/bin/python bench/query_paths.py [--repeat 3]

Prints a table and writes bench/out/query_paths.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = {
    "count one table": "SELECT count(*) AS n FROM matches_sepsis_rising_crp_then_icu",
    "group by": "SELECT patient, count(*) AS n FROM matches_sepsis_rising_crp_then_icu "
                "GROUP BY patient ORDER BY n DESC LIMIT 5",
    "match_events of one pattern": "SELECT variable, avg(value) AS mean FROM "
                                   "match_events_sepsis_rising_crp_then_icu GROUP BY variable",
    "events by type": "SELECT event_type, count(*) AS n FROM events_sepsis GROUP BY event_type "
                      "ORDER BY n DESC LIMIT 5",
    "runs": "SELECT pattern, status, seconds FROM runs ORDER BY started_at DESC LIMIT 5",
}


def timed(engine: str, sql: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jobs", "query", "--engine", engine, sql],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{engine}: {sql}: {proc.stderr[-500:]}")
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = parser.parse_args()
    rows = []
    print(f"{'query':32} {'duckdb s':>9} {'spark s':>9} {'ratio':>7}")
    for name, sql in QUERIES.items():
        duck = min(timed("duckdb", sql) for _ in range(args.repeat))
        spark = min(timed("spark", sql) for _ in range(args.repeat))
        rows.append({"query": name, "duckdb_seconds": round(duck, 2),
                     "spark_seconds": round(spark, 2), "ratio": round(spark / duck, 1)})
        print(f"{name:32} {duck:>9.2f} {spark:>9.2f} {spark / duck:>6.1f}x", flush=True)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "query_paths.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
