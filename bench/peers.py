"""The peer workloads side by side: this project's engine and Siddhi 5.1.7, in one run.

Workloads and data: ``../shared/peers/README.md`` (trades, crypto and sepsis data; the
same patterns written for both engines). For each workload, one after the other:

* the project: a fresh Python process reads the Parquet file into columns, loads the
  compiled kernels (start-up, reported apart), then runs ``engine.execute`` three times
  (engine seconds: the median; matches are produced as columns and counted, as Siddhi's
  callback counts them) and once more writing the ``match`` command's JSON lines to
  /dev/null (output seconds); peak RSS is the process's own;
* Siddhi: ``../shared/peers/siddhi.sh WORKDIR RUN`` under GNU time (engine seconds from
  the runner: first event sent to last processed; peak RSS of the JVM).

Match counts are checked against the README's table. Writes a Markdown table and a bar
chart (PNG) into ``docs/benchmarks.md`` / ``docs/peers.png``, raw figures into
``bench/out/peers.json``.

    python bench/peers.py [--work /tmp/peers] [--runs T1_W1,T4] [--no-siddhi]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT.parent / "shared" / "peers"

# run -> (pattern file, data set, first N events or None, expected matches (project))
WORKLOADS = {
    "T1_W1": ("t1_w1.yaml", "trades", None, 5_407),
    "T1_W10": ("t1_w10.yaml", "trades", None, 225_127),
    "T2_p26000": ("t2.yaml", "crypto", 26_000, 20_291),
    "T2_p50000": ("t2.yaml", "crypto", 50_000, 2_289_424),
    "T2_full": ("t2.yaml", "crypto", None, 16_632_827),
    "T4": ("t4.yaml", "sepsis", None, 320),
}
MARK_BEGIN = "<!-- peers:begin -->"
MARK_END = "<!-- peers:end -->"


def run_project(name: str, work: Path) -> dict:
    """One workload in this process (called in a child process by ``main``)."""
    import pyarrow.parquet as pq

    from jobs.core.engine.batches import MatchStats
    from jobs.core.engine.columns import from_arrow
    from jobs.core.engine.options import MatchOptions
    from jobs.core.engine.output import bindings_of, json_lines, sort_batch
    from jobs.core.engine.runtime import compile_pattern, execute
    from jobs.core.language.patternfile import load_pattern

    pattern_file, data, first_n, _ = WORKLOADS[name]
    t0 = time.perf_counter()
    pattern = load_pattern(PEERS / "patterns" / pattern_file)
    compiled = compile_pattern(pattern)
    table = pq.read_table(work / "parquet" / f"{data}.parquet")
    if first_n:
        table = table.slice(0, first_n)
    cols = from_arrow(table, compiled.attributes)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    from jobs.core.engine import aot

    kernels = aot.load()  # the ahead-of-time kernels, or SES_KERNELS=jit's
    warm = cols.take(__import__("numpy").arange(min(cols.n, 200)))
    for _ in execute(compiled, warm, MatchOptions()):
        pass
    startup_s = time.perf_counter() - t0
    times, stats = [], None
    for _ in range(3):
        st = MatchStats()
        t0 = time.perf_counter()
        n = sum(len(b) for b in execute(compiled, cols, MatchOptions(), st))
        times.append(time.perf_counter() - t0)
        stats = st
    names = [v.name for v in compiled.variables]
    rank = cols.id_rank()
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as out:
        for b in execute(compiled, cols, MatchOptions()):
            b = sort_batch(b, cols, len(names), rank)
            out.write(json_lines(pattern.name, b, bindings_of(b, cols, names)))
    output_s = time.perf_counter() - t0
    return {"engine": "project", "run": name, "events": cols.n, "matches": n,
            "engine_seconds": statistics.median(times), "runs": times,
            "startup_seconds": startup_s, "load_seconds": load_s, "output_seconds": output_s,
            "kernels": kernels.loaded.mode,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_work": stats.peak, "work": stats.work, "work_item": stats.work_item,
            "candidate_windows": stats.candidate_windows}


def run_siddhi(name: str, work: Path) -> dict:
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(["/usr/bin/time", "-f", "MAXRSS_KB %M", "bash",
                           str(PEERS / "siddhi.sh"), str(work), f"^{name}$"],
                          capture_output=True, text=True, env=env)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"siddhi.sh {name} failed ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    row = json.loads(lines[-1])
    rss = re.search(r"MAXRSS_KB (\d+)", proc.stderr)
    row["peak_mb"] = int(rss.group(1)) / 1024 if rss else None
    row["engine"] = "siddhi"
    return row


def table(rows: list[dict]) -> str:
    by = {(r["engine"], r["run"]): r for r in rows}
    lines = ["| workload | events | matches (project / Siddhi) | Siddhi engine s | project engine s "
             "| Siddhi / project | project + JSON output s | Siddhi peak RSS | project peak RSS "
             "| project start-up s (once per process) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in WORKLOADS:
        p, s = by.get(("project", name)), by.get(("siddhi", name))
        if p is None:
            continue
        sid = f"{s['engine_seconds']:.3f}" if s else "—"
        ratio = f"**{s['engine_seconds'] / p['engine_seconds']:.1f}×**" if s else "—"
        smem = f"{s['peak_mb']:,.0f} MB" if s and s.get("peak_mb") else "—"
        smatch = f"{s['matches']:,}" if s else "—"
        lines.append(f"| {name} | {p['events']:,} | {p['matches']:,} / {smatch} | {sid} "
                     f"| {p['engine_seconds']:.3f} | {ratio} "
                     f"| {p['engine_seconds'] + p['output_seconds']:.2f} | {smem} "
                     f"| {p['peak_mb']:,.0f} MB | {p['startup_seconds']:.2f} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [n for n in WORKLOADS if any(r["run"] == n for r in rows)]
    by = {(r["engine"], r["run"]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    x = np.arange(len(names))
    for ax, key, title in ((axes[0], "engine_seconds", "engine seconds (log)"),
                           (axes[1], "peak_mb", "peak memory, MB (log)")):
        for k, (engine, color) in enumerate((("siddhi", "#d95f02"), ("project", "#1b9e77"))):
            vals = [(by.get((engine, n)) or {}).get(key) or 0 for n in names]
            ax.bar(x + (k - 0.5) * 0.38, vals, 0.38, label=engine, color=color)
        ax.set_xticks(x, names, rotation=20)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle("Peer workloads: this project vs Siddhi 5.1.7 (one run, 2 cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_docs(rows: list[dict]) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    when = time.strftime("%Y-%m-%d")
    block = (f"{MARK_BEGIN}\n## Peer workloads: the project's engine and Siddhi, side by side\n\n"
             f"`make bench` (`bench/peers.py`), measured {when} in one run on this 2-core "
             "machine, one workload after the other. Engine seconds exclude reading the input "
             "and process start-up on both sides (the project's start-up, loading its compiled "
             "kernels, is its own column); \"project + JSON output\" adds writing every match "
             "as the `match` command's JSON line. Match counts differ slightly by rule: the "
             "project orders sets strictly by `ts` and drops events without a patient, Siddhi "
             "follows arrival order and treats a missing patient as one more patient.\n\n"
             f"{table(rows)}\n\n![peer workloads](peers.png)\n{MARK_END}")
    if MARK_BEGIN in text:
        pre, rest = text.split(MARK_BEGIN, 1)
        text = pre + block + rest.split(MARK_END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/peers", help="scratch folder for data and Siddhi")
    ap.add_argument("--runs", default=",".join(WORKLOADS), help="comma-separated workloads")
    ap.add_argument("--no-siddhi", action="store_true", help="the project only")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    work = Path(args.work)
    if args.one:
        print(json.dumps(run_project(args.one, work)))
        return 0
    if not (work / "parquet" / "crypto.parquet").exists():
        print(f"preparing the peer data in {work} …", file=sys.stderr)
        subprocess.run([sys.executable, str(PEERS / "prep.py"), str(work)], check=True)
    rows = []
    for name in args.runs.split(","):
        proc = subprocess.run([sys.executable, __file__, "--work", str(work), "--one", name],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"project {name} failed: {proc.stderr.strip()[-800:]}")
        p = json.loads(proc.stdout.strip().splitlines()[-1])
        if p["matches"] != WORKLOADS[name][3]:
            raise SystemExit(f"{name}: {p['matches']:,} matches, expected {WORKLOADS[name][3]:,}")
        rows.append(p)
        print(f"{name}: project {p['engine_seconds']:.3f} s, {p['matches']:,} matches, "
              f"{p['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
        if not args.no_siddhi:
            s = run_siddhi(name, work)
            rows.append(s)
            print(f"{name}: siddhi  {s['engine_seconds']:.3f} s, {s['matches']:,} matches, "
                  f"{s['peak_mb'] or 0:.0f} MB", file=sys.stderr, flush=True)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "peers.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))
    plot(rows, ROOT / "docs" / "peers.png")
    write_docs(rows)
    print("written: docs/benchmarks.md, docs/peers.png, bench/out/peers.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
