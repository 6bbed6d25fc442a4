"""What a night costs each kind of history-wide pattern (docs/semantics.md): history
conditions, partition facts and ``after_match`` episodes, each beside an ordinary pattern
of the same shape, early in a year of nights and at its end.

History: the year benchmark's landing files (``bench/year_of_nights.py``: the BPI 2011
hospital log replicated ``--copies`` times and folded into the days of 2025), one file
per day. Nights, all through ``run_all`` in one warm Spark session: days 1-30 at once (a
warm-up, so that every night's ``within`` lies inside the history), ten nights of one
day each (days 31-40: "night 10" is day 40's), days 41-364 at once, night 365 (day 365
alone). Per pattern and
night: the events its match job read (the runs table's ``events``), its match step's
seconds, whether it was a full recompute. At the end a fresh lake ingests every file and
recomputes the four patterns in one run: their tables must equal the year's, match for
match. Goals (issue: every pattern incremental): each kind reads at most 3× the events of
the ordinary pattern on a night, and its night 365 costs at most 1.2× its night 10.

    .venv/bin/python bench/incremental_kinds.py [--copies 10]

Writes bench/out/incremental_kinds.json and bench/out/incremental_kinds.png.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from year_of_nights import OUT, events_in, project, published, write_days  # noqa: E402

SHAPE = """\
    source: hospital
    within: 14d
    sets:
      - [m]
      - [v]
    conditions:
      - m.event_type = 'ca-125 mbv meia'
      - v.event_type = 'vervolgconsult poliklinisch'
      - m.patient = v.patient
"""

PATTERNS = {
    "inc_ordinary": SHAPE,
    "inc_history": SHAPE + """\
    history:
      - {at_least: 1, before: m, by: 30d, same: [patient]}
      - {at_most: 2, before: m, where: "h.event_type = 'ca-125 mbv meia'"}
""",
    "inc_history_after": SHAPE + """\
    history:
      - {at_least: 1, after: v, by: 7d, same: [patient]}
""",
    "inc_facts": SHAPE + """\
      - m.ts - partition.first_ts >= 30d
    measures:
      since: partition.first_ts
""",
    "inc_facts_count": SHAPE + """\
      - partition.count >= 20
""",
    "inc_episodes": SHAPE + """\
    after_match: past_last_event
""",
}


def write_patterns(home: Path) -> None:
    folder = home / "patterns"
    shutil.rmtree(folder)
    folder.mkdir()
    for name, body in PATTERNS.items():
        (folder / f"{name}.yaml").write_text(f"name: {name}\n" + textwrap.dedent(body))


def rows_of(rows: list[dict]) -> dict[str, dict]:
    return {r["pattern"]: {"events": r["events"], "match_seconds": r.get("match_seconds"),
                           "after_filter": r.get("events_after_filter"),
                           "full": bool(r["full_recompute"]), "status": r["status"],
                           "matches": r["matches"], "inserted": r["inserted"],
                           "deleted": r["deleted"]}
            for r in rows if r.get("pattern") in PATTERNS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--scratch", default=None)
    args = ap.parse_args()
    from jobs.config import load_profile
    from jobs.config.project import Project, use_project
    from jobs.lake.store import Lake
    from jobs.pipeline.run import run_all
    from jobs.spark.session import build_session

    OUT.mkdir(parents=True, exist_ok=True)
    days = write_days(OUT / f"incremental_landing_{args.copies}", args.copies)
    order = sorted(days)
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="inc-kinds-"))
    home = project(scratch, "nights", 0)
    write_patterns(home)
    use_project(Project(home))
    profile = load_profile("local")
    lake = Lake.of_profile(profile)
    spark = build_session(profile)
    nights = []
    schedule = [("warm-up", order[:30])] + [(f"night {n - 29}", order[n:n + 1])
                                            for n in range(30, 40)] + [
        ("catch-up", order[40:364]), ("night 365", order[364:])]
    for label, deliver in schedule:
        for d in deliver:
            shutil.copy(days[d], home / "landing" / "hospital" / days[d].name)
        t0 = time.perf_counter()
        rows = run_all(spark, profile, deliver[-1].isoformat(), echo=lambda *_: None)
        night = {"night": label, "logical_date": deliver[-1].isoformat(),
                 "days": len(deliver), "history_events": events_in(lake),
                 "wall_seconds": round(time.perf_counter() - t0, 1), "patterns": rows_of(rows)}
        nights.append(night)
        print(json.dumps(night, default=str), flush=True)
    # the driver's plan of a state night, nothing new (outside the match step's seconds)
    from jobs.core.language.patternfile import load_pattern
    from jobs.pipeline.match.partition_state import plan_history_state

    history = load_pattern(home / "patterns" / "inc_history.yaml")
    t0 = time.perf_counter()
    state_rows = plan_history_state(lake, history, False).state.num_rows
    plan_seconds = round(time.perf_counter() - t0, 3)
    # one recompute of the whole history: the same tables, match for match
    full_home = project(scratch, "recompute", 0)
    write_patterns(full_home)
    for d in order:
        shutil.copy(days[d], full_home / "landing" / "hospital" / days[d].name)
    use_project(Project(full_home))
    full_profile = load_profile("local")
    t0 = time.perf_counter()
    full_rows = rows_of(run_all(spark, full_profile, order[-1].isoformat(),
                                echo=lambda *_: None))
    full_seconds = round(time.perf_counter() - t0, 1)
    a = published(lake, list(PATTERNS))
    b = published(Lake.of_profile(full_profile), list(PATTERNS))
    differ = [n for n in PATTERNS if a[n] != b[n]]
    ten, last = nights[10]["patterns"], nights[-1]["patterns"]
    median = {name: statistics.median(n["patterns"][name]["match_seconds"]
                                      for n in nights[1:11]) for name in PATTERNS}
    summary = {}
    for name in PATTERNS:
        summary[name] = {
            "events_night10": ten[name]["events"], "events_night365": last[name]["events"],
            "seconds_night10": ten[name]["match_seconds"],
            "seconds_night365": last[name]["match_seconds"],
            "read_vs_ordinary_night10": round(ten[name]["events"] / max(
                ten["inc_ordinary"]["events"], 1), 2),
            "read_vs_ordinary_night365": round(last[name]["events"] / max(
                last["inc_ordinary"]["events"], 1), 2),
            "night365_vs_night10": round(last[name]["match_seconds"] / max(
                ten[name]["match_seconds"], 1e-9), 2),
            "seconds_median_nights1_10": round(median[name], 3),
            "night365_vs_median_nights1_10": round(last[name]["match_seconds"] / max(
                median[name], 1e-9), 2),
            "full_recompute_events": full_rows[name]["events"],
            "full_recompute_matches": full_rows[name]["matches"],
            "full_recompute_seconds": full_rows[name]["match_seconds"]}
    out = {"copies": args.copies, "history_events": nights[-1]["history_events"],
           "nights": nights, "summary": summary, "recompute_seconds": full_seconds,
           "tables_differ": differ,
           "state_plan": {"rows": state_rows, "seconds": plan_seconds}}
    (OUT / "incremental_kinds.json").write_text(json.dumps(out, indent=1, default=str))
    plot(summary)
    for name, s in summary.items():
        print(f"{name:14s} {s}")
    print(f"tables that differ from one recompute: {differ or 'none'}")
    return 0 if not differ else 1


def plot(summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    x = range(len(names))
    for ax, key, title in ((axes[0], "events", "events read by the match job"),
                           (axes[1], "seconds", "match step, seconds")):
        ax.bar([i - 0.2 for i in x], [summary[n][f"{key}_night10"] for n in names], 0.4,
               label="night 10")
        ax.bar([i + 0.2 for i in x], [summary[n][f"{key}_night365"] for n in names], 0.4,
               label="night 365")
        ax.set_xticks(list(x), [n.removeprefix("inc_") for n in names])
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "incremental_kinds.png", dpi=100)


if __name__ == "__main__":
    sys.exit(main())

