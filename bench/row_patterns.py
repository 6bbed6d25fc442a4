"""A ``.sql`` row pattern against the YAML form of the same question, in one run.

Two questions both languages can say, over the same synthetic events (``--partitions``
patients of ``--rows`` events each, one a minute, a random walk of ``value`` and one of
four ``event_type``s, seeded):

* ``v_shape``: Trino's ``A B+ C+`` (a fall then a rise, row after row), each condition
  reading the row before (``PREV``); YAML: ``contiguity: partition`` with ``prev`` and
  ``first``/``last`` (as tests/core/test_peer_suites.py translates Trino's tests);
* ``typed_steps``: three event types one right after the other (``A B C``), conditions
  that read only their row (computed once per row, and the first one bounds the starts).

Each side runs in this process after a warm-up (the YAML engine's kernels loaded, the
row-pattern program compiled): the YAML engine (``core.local.runner.run``, SES), the
row-pattern matcher (``core.rowpattern.output.matches``) and, for ``typed_steps`` (whose
matches cannot overlap, so a self-join finds them), DuckDB's self-join of the events
numbered per patient (``row_number``) on consecutive numbers; seconds are the median of
``--repeat`` runs, and the match counts must be equal. Prints a Markdown table and writes
``bench/out/row_patterns.json``.

    python bench/row_patterns.py [--partitions 200] [--rows 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.core.engine import aot  # noqa: E402
from jobs.core.language.events import Event, order  # noqa: E402
from jobs.core.language.patternfile import parse_pattern  # noqa: E402
from jobs.core.local.runner import MatchOptions, run  # noqa: E402
from jobs.core.rowpattern.output import event_rows, matches  # noqa: E402
from jobs.core.rowpattern.parser import parse_row_pattern  # noqa: E402

TYPES = ["x", "y", "z", "w"]
YAML = {
    "v_shape": """name: v_shape
source: s
within: 1d
sets: [[a], ['b+'], ['c+']]
conditions:
  - b.value < prev(b.value)
  - first(b.value) < a.value
  - c.value > prev(c.value)
  - first(c.value) > last(b.value)
  - a.patient = b.patient
  - b.patient = c.patient
contiguity: partition
after_match: past_last_event
matcher: ses
""",
    "typed_steps": """name: typed_steps
source: s
within: 1d
sets: [[a], [b], [c]]
conditions:
  - a.event_type = 'x'
  - b.event_type = 'y'
  - c.event_type = 'z'
  - a.patient = b.patient
  - b.patient = c.patient
contiguity: partition
after_match: past_last_event
matcher: ses
""",
}
SQL = {
    "v_shape": """SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY patient ORDER BY ts
  PATTERN (A B+ C+) WITHIN INTERVAL '2' DAY
  DEFINE B AS B.value < PREV(B.value), C AS C.value > PREV(C.value))""",
    "typed_steps": """SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY patient ORDER BY ts
  PATTERN (A B C) WITHIN INTERVAL '2' DAY
  DEFINE A AS event_type = 'x', B AS event_type = 'y', C AS event_type = 'z')""",
}


def synthetic(partitions: int, rows: int, seed: int = 7) -> list[Event]:
    rnd = random.Random(seed)
    out = []
    for p in range(partitions):
        value = 100.0
        for i in range(rows):
            value += rnd.choice([-3.0, -1.0, 1.0, 2.0])
            out.append(Event(f"{p}-{i}", (p * rows + i) * 60 * 10**9,
                             {"patient": p, "value": value, "event_type": rnd.choice(TYPES)}))
    return order(out)


DUCKDB = """WITH e AS (SELECT *, row_number() OVER (PARTITION BY patient ORDER BY ts, id) AS rn
                FROM events)
SELECT count(*) FROM e a JOIN e b ON b.patient = a.patient AND b.rn = a.rn + 1
                   JOIN e c ON c.patient = a.patient AND c.rn = a.rn + 2
WHERE a.event_type = 'x' AND b.event_type = 'y' AND c.event_type = 'z'"""


def duckdb_count(events: list[Event]):
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    table = pa.table({"id": [e.id for e in events], "ts": [e.ts for e in events],
                      "patient": [e.attrs["patient"] for e in events],
                      "event_type": [e.attrs["event_type"] for e in events]})
    con.register("events", table)
    return lambda: con.sql(DUCKDB).fetchall()[0][0]


def timed(fn, repeat: int) -> tuple[float, int]:
    fn()  # warm-up
    seconds, n = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    aot.load()
    events = synthetic(args.partitions, args.rows)
    rows = event_rows(events)
    results = []
    for name in YAML:
        pattern = parse_pattern(YAML[name], f"<{name}>")
        query = parse_row_pattern(SQL[name], f"<{name}.sql>", name)
        yaml_s, yaml_n = timed(lambda p=pattern: len(run(p, events, MatchOptions())[0]),
                               args.repeat)
        sql_s, sql_n = timed(lambda q=query: sum(1 for _ in matches(q, rows)), args.repeat)
        if yaml_n != sql_n:
            raise SystemExit(f"{name}: the YAML engine found {yaml_n} matches, the row "
                             f"pattern {sql_n}")
        duck_s = None
        if name == "typed_steps":
            duck_s, duck_n = timed(duckdb_count(events), args.repeat)
            if duck_n != sql_n:
                raise SystemExit(f"{name}: DuckDB's self-join found {duck_n}, not {sql_n}")
        results.append({"workload": name, "events": len(events), "matches": sql_n,
                        "yaml_seconds": round(yaml_s, 3), "sql_seconds": round(sql_s, 3),
                        "duckdb_seconds": None if duck_s is None else round(duck_s, 3),
                        "ratio": round(sql_s / yaml_s, 2)})
    out = ROOT / "bench" / "out" / "row_patterns.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print("| workload | events | matches | YAML engine (s) | row pattern (s) | row pattern / "
          "YAML | DuckDB self-join (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        duck = "-" if r["duckdb_seconds"] is None else r["duckdb_seconds"]
        print(f"| {r['workload']} | {r['events']:,} | {r['matches']:,} | {r['yaml_seconds']} "
              f"| {r['sql_seconds']} | {r['ratio']}× | {duck} |")


if __name__ == "__main__":
    main()
