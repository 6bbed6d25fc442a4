"""What ``first_ever`` costs a night on the 10M-event history (docs/semantics.md, "First
ever"): the per-partition state against reading the whole history.

On the year benchmark's lake (``bench/year_of_nights.py``: the hospital log replicated to
~10M events, one ingest per day of 2025), for a pattern "a patient's first CA-125 test
ever, then a follow-up consult within 14 days":

* ``full build``: the state from the whole history on Spark (what a full run does, and
  what every night would do without the state);
* ``night, nothing new``: the nightly plan (read the state and the Delta log);
* ``night, one day arrives``: the state's watermark set back to before the last day's
  ingest, so that the plan reads that day's events (~27,600) as a night would.

    .venv/bin/python bench/first_ever_state.py --lake /path/to/year/lake [--rounds 3]

Writes bench/out/first_ever_state.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from jobs.config import load_profile  # noqa: E402
from jobs.core.language.patternfile import parse_pattern  # noqa: E402
from jobs.lake.store import Lake  # noqa: E402
from jobs.pipeline.match.first_ever import build_state, plan_first_ever  # noqa: E402
from jobs.spark.session import build_session  # noqa: E402

PATTERN = textwrap.dedent("""\
    name: bench_first_ca125_then_consult
    source: hospital
    within: 14d
    first_ever: [m]
    sets: [[m], [v]]
    conditions:
      - m.event_type = 'ca-125 mbv meia'
      - v.event_type = 'vervolgconsult poliklinisch'
      - m.patient = v.patient
""")


def timed(fn, rounds: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lake", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "first_ever_state.json"))
    args = ap.parse_args()
    profile = dataclasses.replace(load_profile("local"), lake=args.lake)
    lake = Lake(args.lake)
    pattern = parse_pattern(PATTERN, "<bench>")
    spark = build_session(profile)
    events = lake.read_arrow(lake.events("hospital"), columns=["ingested_at"])
    n_events = events.num_rows
    runs = sorted(set(events.column("ingested_at").to_pylist()))
    build_s, state = timed(lambda: build_state(spark, lake, pattern), args.rounds)
    lake.write(lake.first_ever(pattern.name), state, mode="overwrite", schema_mode="overwrite")
    idle_s, plan = timed(lambda: plan_first_ever(lake, pattern, full=False), args.rounds)
    assert plan.new == plan.replaced == plan.promoted == 0
    # a night's arrivals: the watermark before the last ingest
    before = runs[-2] if len(runs) > 1 else runs[0]
    arrived = int(pc.sum(pc.greater(events.column("ingested_at"), pa.scalar(before))).as_py())
    back = state.set_column(state.schema.get_field_index("watermark"), "watermark",
                            pa.array([before] * state.num_rows, state.schema.field(
                                "watermark").type))
    lake.write(lake.first_ever(pattern.name), back, mode="overwrite", schema_mode="overwrite")
    day_s, plan = timed(lambda: plan_first_ever(lake, pattern, full=False), args.rounds)
    result = {"events": n_events, "partitions": state.num_rows, "arrived": arrived,
              "full_build_s": round(build_s, 2), "night_nothing_new_s": round(idle_s, 3),
              "night_one_day_s": round(day_s, 3), "new_firsts": plan.new,
              "replaced": plan.replaced}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    lake.remove(lake.first_ever(pattern.name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
