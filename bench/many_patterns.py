"""Benchmark of a night's cost against the number of patterns (docs/pipeline.md, docs/benchmarks.md).

For each N, a catalogue of N valid patterns: the committed ones, then variations of the
committed sequence patterns of the hospital and sepsis sources (another window `within`,
a renamed copy), so every pattern reads real events and finds real matches. Each N runs
`ses run` (the `make run` code) on the committed data into a fresh lake, twice: the
first night (every pattern new: a full recompute) and the next night (incremental), and
reads the step times from the run's summary and the runs table, and the peak resident
memory of the Python driver process (``driver_mb``).

    python bench/many_patterns.py [--n 18,50,100,200] [--nights 2]

Writes bench/out/many_patterns.json and docs/benchmarks/many_patterns.png (with the wall
times of bench/out/many_patterns_before.json, when present: the same script run in a
checkout of an earlier commit); the figures go into docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "many"
PATTERNS = ROOT / "patterns"
SCALES = ("2h", "6h", "12h", "18h", "2d", "3d", "4d", "5d")
DATES = ("2026-11-24", "2026-11-25")


def variants(n: int) -> list[tuple[str, str]]:
    """(file name, text) of n patterns: the committed ones first, then variations of
    the sequence patterns of the hospital and sepsis sources with another ``within``."""
    files = sorted(PATTERNS.glob("*.yaml"))
    out = [(f.name, f.read_text(encoding="utf-8")) for f in files]
    bases = [(f.stem, f.read_text(encoding="utf-8")) for f in files
             if f.stem.startswith(("sepsis_", "hospital_")) and "\nsets:" in f.read_text()]
    i = 0
    while len(out) < n:
        stem, text = bases[i % len(bases)]
        scale = SCALES[(i // len(bases)) % len(SCALES)]
        name = f"{stem}_v{i}"
        body = text.split("\nexamples:")[0] + "\n"  # the examples hold for the original window
        body = re.sub(r"(?m)^name: .*$", f"name: {name}", body)
        body = re.sub(r"(?m)^within: .*$", f"within: {scale}", body)
        out.append((f"{name}.yaml", body))
        i += 1
    return out[:n]


def conf(lake: Path, site: Path) -> Path:
    """conf/pipeline.yaml with the lake and site of this benchmark."""
    text = (ROOT / "conf" / "pipeline.yaml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^    landing: data/landing", f"    landing: {ROOT / 'data' / 'landing'}",
                  text, count=1)
    text = re.sub(r"(?m)^    lake: lake\b", f"    lake: {lake}", text, count=1)
    text = re.sub(r"(?m)^    site: site\b", f"    site: {site}", text, count=1)
    path = lake.parent / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# `python -m jobs` that reports the peak resident memory of its own process (the Python
# driver, not the JVM it starts) on exit
# (a __main__ without a file is taken by pyspark.sql.connect for a doctest run: it exits)
DRIVER_RSS = ("import resource, sys\n"
              "sys.modules['__main__'].__file__ = 'many_patterns-driver'\n"
              "from jobs.cli.main import exit_now, main\n"
              "code = main(sys.argv[1:])\n"
              "print('driver_max_rss_kb=%d' % resource.getrusage(resource.RUSAGE_SELF)"
              ".ru_maxrss, file=sys.stderr)\n"
              "exit_now(code)")
SUMMARY = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)"
                     r"\s+([\d.]+)\s+success$")


def night(n: int, day: str, files: list[Path], env: dict) -> dict:
    """One `ses run` of the n patterns: its wall time and the summary's step sums."""
    cmd = [sys.executable, "-c", DRIVER_RSS, "run", "--logical-date", day]
    for f in files:
        cmd += ["--pattern", str(f)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    log = OUT / f"n{n}" / f"night-{day}.log"  # the run's own lines (step times)
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise SystemExit(f"N={n} {day}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    rss = re.findall(r"^driver_max_rss_kb=(\d+)$", proc.stderr, re.M)
    rows = [m.groups() for line in proc.stdout.splitlines() if (m := SUMMARY.match(line))]
    run_line = next(line for line in proc.stdout.splitlines() if line.startswith("run "))
    run_seconds = float(run_line.split("(")[1].split(" s")[0])
    out = {"n": n, "day": day, "wall": round(wall, 1), "run": run_seconds,
           "patterns_ok": len(rows),
           "matches": sum(int(r[1]) for r in rows),
           "match": round(sum(float(r[6]) for r in rows), 1),
           "validate": round(sum(float(r[7]) for r in rows), 1),
           "publish": round(sum(float(r[8]) for r in rows), 1)}
    out["other"] = round(out["wall"] - out["match"] - out["validate"] - out["publish"], 1)
    out["driver_mb"] = round(int(rss[-1]) / 1024) if rss else None
    return out


BEFORE_FILE = OUT.parent / "many_patterns_before.json"  # the same run on an earlier commit
BEFORE = json.loads(BEFORE_FILE.read_text()) if BEFORE_FILE.exists() else []


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, day in zip(axes, DATES):
        rs = sorted((r for r in results if r["day"] == day), key=lambda r: r["n"])
        if not rs:
            continue
        ns = [r["n"] for r in rs]
        bottom = [0.0] * len(rs)
        for step in ("match", "validate", "publish", "other"):
            vals = [r[step] for r in rs]
            ax.bar([str(x) for x in ns], vals, bottom=bottom, label=step)
            bottom = [b + v for b, v in zip(bottom, vals)]
        before = [r for r in BEFORE if r["day"] == day and r["n"] in ns]
        if before:
            ax.plot([str(r["n"]) for r in sorted(before, key=lambda r: r["n"])],
                    [r["wall"] for r in sorted(before, key=lambda r: r["n"])], "kD--",
                    label="before (wall)")
        ax.set_title(f"night {DATES.index(day) + 1} ({'full recompute' if day == DATES[0] else 'incremental'})")
        ax.set_xlabel("patterns")
    axes[0].set_ylabel("seconds (wall)")
    axes[0].legend()
    fig.suptitle("ses run on the committed data: a night's time by step against the number of patterns")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="18,50,100,200", help="numbers of patterns, comma-separated")
    ap.add_argument("--nights", type=int, default=2, choices=(1, 2))
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    results_path = OUT.parent / "many_patterns.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else []
    for n in (int(x) for x in args.n.split(",")):
        work = OUT / f"n{n}"
        shutil.rmtree(work, ignore_errors=True)
        (work / "patterns").mkdir(parents=True)
        files = []
        for name, text in variants(n):
            (work / "patterns" / name).write_text(text, encoding="utf-8")
            files.append(work / "patterns" / name)
        env = dict(os.environ, SES_PIPELINE_CONF=str(conf(work / "lake", work / "site")))
        results = [r for r in results if r["n"] != n]
        for day in DATES[:args.nights]:
            print(f"N={n}, night {day} ...", flush=True)
            r = night(n, day, files, env)
            print(f"  {r}", flush=True)
            results.append(r)
        results_path.write_text(json.dumps(results, indent=1))
    plot(results, ROOT / "docs" / "benchmarks" / "many_patterns.png")
    print(f"results: {results_path}; plot: docs/benchmarks/many_patterns.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
