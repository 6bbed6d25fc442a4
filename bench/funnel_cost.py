"""What counting the funnels costs a night (docs/semantics.md, "Funnels"): the committed
night (every committed pattern over the committed data, ``make run``'s night) run on
fresh lakes with ``match.funnels`` on and off, alternately, in one warm Spark session.
Reports the night's wall time and its match time (the runs rows' ``match_seconds``),
each the median of the rounds, and the ratio on/off.

    .venv/bin/python bench/funnel_cost.py [--rounds 3] [--out bench/out/funnel_cost.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.config import load_profile  # noqa: E402
from jobs.pipeline.outcome import PatternOutcome  # noqa: E402
from jobs.pipeline.run import run_all  # noqa: E402
from jobs.spark.session import build_session  # noqa: E402

LOGICAL_DATE = "2026-11-20"


def night(spark, base, folder: Path, funnels: bool) -> tuple[float, float]:
    """(wall seconds, match seconds) of one committed night on a fresh lake."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    profile = dataclasses.replace(base, lake=str(folder / "lake"), site=None, funnels=funnels,
                                  maintain_every=0)
    t0 = time.perf_counter()
    rows = run_all(spark, profile, LOGICAL_DATE, echo=lambda _: None)
    wall = time.perf_counter() - t0
    match = sum(float(r.get("match_seconds") or 0) for r in rows
                if isinstance(r, PatternOutcome))
    return wall, match


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "funnel_cost.json"))
    args = ap.parse_args()
    base = load_profile("local")
    spark = build_session(base)
    scratch = Path(tempfile.mkdtemp(prefix="funnel-cost-"))
    night(spark, base, scratch / "warm", True)  # the first night warms Spark and the kernels
    got: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    for k in range(args.rounds):
        for label in ("off", "on") if k % 2 else ("on", "off"):
            got[label].append(night(spark, base, scratch / label, label == "on"))
            print(f"round {k + 1} funnels {label}: night {got[label][-1][0]:.1f} s, "
                  f"match {got[label][-1][1]:.1f} s", flush=True)
    result = {}
    for label, values in got.items():
        result[label] = {"night_s": round(statistics.median(v[0] for v in values), 2),
                         "match_s": round(statistics.median(v[1] for v in values), 2),
                         "rounds": values}
    result["night_ratio"] = round(result["on"]["night_s"] / result["off"]["night_s"], 3)
    result["match_ratio"] = round(result["on"]["match_s"] / result["off"]["match_s"], 3)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"night: {result['on']['night_s']} s with funnels, {result['off']['night_s']} s "
          f"without ({result['night_ratio']}x); match steps {result['match_ratio']}x")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
