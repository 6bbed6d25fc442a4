"""Benchmark of the pattern-based window matcher: what filter and partitioning save.

The sepsis log (15,214 events) replicated k = 1, 4, 16, 64 times with fresh patient ids
(each copy shifted by a year), and two window patterns: the committed
``sepsis_er_episode`` (ER registration to release, every event of the patient buffered:
partitioned by patient) and a sequential one (``prev()``: CRP values rising until an
ICU admission). Each runs with no pruning, with the filter only, and with filter and
partitioning; every variant must give the same windows (checked), and on k = 1 also the
brute-force oracle's. Figures: seconds (best of --repeat), events after the filter,
events tested.

    python bench/windows.py [--copies 1,4,16,64] [--repeat 2]

Output: a Markdown table on stdout and in bench/out/windows.md, raw figures in
bench/out/windows.json, and docs/benchmarks/windows.png.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from jobs.core.engine.batches import MatchStats  # noqa: E402
from jobs.core.engine.columns import from_events  # noqa: E402
from jobs.core.engine.options import MatchOptions  # noqa: E402
from jobs.core.engine.window_matcher import execute_windows  # noqa: E402
from jobs.core.language.events import Event, order, parse_ts  # noqa: E402
from jobs.core.language.patternfile import load_pattern, parse_pattern  # noqa: E402
from jobs.core.language.window import oracle_windows  # noqa: E402

YEAR = 365 * 86400 * 10**9
RISING = """
name: bench_rising_crp_to_icu
kind: window
source: sepsis
within: 14d
start: event_type = 'CRP'
termination: patient = first(patient) and event_type = 'Admission IC'
iteration: patient != first(patient) or event_type != 'CRP' or value > prev(value)
filter: patient = first(patient) and event_type = 'CRP'
select: {patient: first(patient), rises: num() - 2, days: (last(ts) - first(ts)) / 86400}
"""
VARIANTS = {"none": MatchOptions(filter=False, partition=False),
            "filter": MatchOptions(filter=True, partition=False),
            "filter+partition": MatchOptions()}


def sepsis(copies: int) -> list[Event]:
    rows = []
    for f in sorted((ROOT / "data" / "landing" / "sepsis").glob("*.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            rows += [json.loads(line) for line in fh]
    out = []
    for k in range(copies):
        for i, r in enumerate(rows):
            attrs = dict(r)
            ts = parse_ts(attrs.pop("timestamp")) + k * YEAR
            if attrs.get("patient"):
                attrs["patient"] = f"{attrs['patient']}#{k}"
            out.append(Event(f"{k}-{i}", ts, attrs))
    return order(out)


def run(pattern, cols, options):
    st = MatchStats()
    found = []
    for b in execute_windows(pattern, cols, options, st):
        ids = cols.ids.take(b.rows).to_pylist()
        found += [tuple(ids[b.offsets[j]:b.offsets[j + 1]]) for j in range(len(b))]
    return sorted(found), st


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", default="1,4,16,64")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--max-unpruned-events", type=int, default=300_000,
                    help="skip 'none' and 'filter' above this many events (quadratic)")
    args = ap.parse_args()
    patterns = [load_pattern(ROOT / "patterns" / "sepsis_er_episode.yaml"),
                parse_pattern(RISING, "<bench>")]
    results = []
    for k in map(int, args.copies.split(",")):
        events = sepsis(k)
        for p in patterns:
            cols = from_events(events, sorted(p.attributes))
            reference = None
            for name, options in VARIANTS.items():
                if name != "filter+partition" and len(events) > args.max_unpruned_events:
                    continue
                best = None
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    found, st = run(p, cols, options)
                    best = min(best or 1e9, time.perf_counter() - t0)
                if reference is None:
                    reference = found
                assert found == reference, (p.name, k, name)
                row = {"pattern": p.name, "copies": k, "events": len(events), "variant": name,
                       "seconds": round(best, 4), "windows": len(found),
                       "after_filter": st.events_after_filter, "tested": st.work,
                       "partitions": st.partitions}
                if k == 1 and name == "filter+partition":
                    t0 = time.perf_counter()
                    oracle = oracle_windows(p, events)
                    row["oracle_seconds"] = round(time.perf_counter() - t0, 3)
                    assert sorted((w.first.id, *[e.id for e in w.buffer], w.last.id)
                                  for w in oracle) == found, p.name
                results.append(row)
                print(json.dumps(row), flush=True)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "windows.json").write_text(json.dumps(results, indent=1))
    lines = ["| pattern | events | variant | seconds | windows | after filter | tested |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['pattern']} | {r['events']:,} | {r['variant']} | {r['seconds']} | "
                     f"{r['windows']:,} | {r['after_filter']:,} | {r['tested']:,} |")
    table = "\n".join(lines)
    (out / "windows.md").write_text(table + "\n")
    print(table)
    plot(results, ROOT / "docs" / "benchmarks" / "windows.png")


def plot(results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["pattern"] for r in results})
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.6))
    for ax, name in zip(axes, names):
        for variant in VARIANTS:
            pts = [(r["events"], r["seconds"]) for r in results
                   if r["pattern"] == name and r["variant"] == variant]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=variant)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("events")
        ax.set_ylabel("seconds")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
