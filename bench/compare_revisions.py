"""The engine's time on the same workloads at two revisions of the project: does a change
cost patterns that do not use what it adds? (docs/semantics.md: measures, aggregates and time in
conditions must not slow the other patterns down.)

Each workload is ``match --stats`` in a fresh process; the figure is the engine's own
``seconds`` (start-up and reading excluded), ``--repeat`` runs alternating the two
revisions: best, median and the median of the paired ratios with its quartiles (the spread
of the paired ratios is this machine's noise). The other revision is
checked out in a temporary git worktree and runs with this checkout's venv. Both run the
just-in-time kernels (``SES_KERNELS=jit``, compiled once into Numba's cache by a first,
uncounted run); ``--kernels aot`` builds the base's own ahead-of-time module in its
worktree (``python -m jobs.core.local.aot_build``, about 35 s) and compares the modules
every run uses.

    python bench/compare_revisions.py --base 9030b14 [--peers /tmp/peers] [--repeat 9] [--kernels aot]

Without ``--peers`` the workloads are committed patterns over the committed landing files;
with it, also the peer workloads T1_W10, T2 and T4 (``../shared/peers/prep.py``).
Writes ``bench/out/compare_revisions.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = [  # (pattern, events): patterns without measures, aggregates or time
    ("patterns/sepsis_rising_crp_then_icu.yaml", "data/landing/sepsis/sepsis_1.jsonl.gz"),
    ("patterns/sepsis_labs_then_antibiotics.yaml", "data/landing/sepsis/sepsis_1.jsonl.gz"),
    ("patterns/sepsis_high_marker_then_admission.yaml", "data/landing/sepsis/sepsis_1.jsonl.gz"),
    ("patterns/hospital_ca125_blood_then_consult.yaml", "data/landing/hospital/hospital_2005.csv.gz"),
]
PEERS = [("t1_w10", "trades"), ("t4", "sepsis"), ("t2", "crypto")]


def engine_seconds(tree: Path, pattern: Path, events: Path, kernels: str) -> float:
    """One fresh process's ``match --stats`` engine seconds."""
    env = {**os.environ, "SES_KERNELS": kernels}
    out = subprocess.run([sys.executable, "-m", "jobs", "match", str(pattern), str(events),
                          "--stats"], cwd=tree, capture_output=True, text=True, check=True,
                         env=env)
    return float(json.loads(out.stderr.strip().splitlines()[-1])["seconds"])


def compare(base: Path, pattern: Path, events: Path, repeat: int, kernels: str) -> dict:
    """Runs alternating base and this tree (the machine's drift hits both alike), after one
    uncounted run each (it fills Numba's cache): best, median and the median of the paired
    ratios (now / base), whose spread says what is noise."""
    for tree in (base, ROOT):
        engine_seconds(tree, pattern, events, kernels)
    old, new = [], []
    for _ in range(repeat):
        old.append(engine_seconds(base, pattern, events, kernels))
        new.append(engine_seconds(ROOT, pattern, events, kernels))
    ratios = sorted(n / o for n, o in zip(new, old) if o)
    quart = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {"base_seconds": min(old), "seconds": min(new),
            "base_median": statistics.median(old), "median": statistics.median(new),
            "ratio": round(min(new) / min(old), 3) if min(old) else None,
            "paired_ratio": round(statistics.median(ratios), 3) if ratios else None,
            "paired_iqr": [round(quart[0], 3), round(quart[2], 3)] if ratios else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other revision (a commit or a ref)")
    ap.add_argument("--peers", help="the prepared peer workloads (../shared/peers/prep.py)")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--kernels", choices=("jit", "aot"), default="jit")
    args = ap.parse_args()
    work = [(ROOT / p, ROOT / e, Path(p).stem) for p, e in COMMITTED]
    if args.peers:
        shared = ROOT.parent / "shared" / "peers" / "patterns"
        work += [(shared / f"{p}.yaml", Path(args.peers) / "parquet" / f"{s}.parquet", p)
                 for p, s in PEERS]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(base), args.base],
                       cwd=ROOT, check=True)
        try:
            if args.kernels == "aot":  # the base's own module, from its own kernel source
                subprocess.run([sys.executable, "-m", "jobs.core.local.aot_build"], cwd=base,
                               check=True, capture_output=True)
            for pattern, events, name in work:
                row = {"workload": name, **compare(base, pattern, events, args.repeat,
                                                   args.kernels)}
                rows.append(row)
                print(f"{name}: {row['base_seconds']:.6f} s -> {row['seconds']:.6f} s "
                      f"(paired {row['paired_ratio']})", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    out = ROOT / "bench" / "out" / "compare_revisions.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"base": args.base, "rows": rows}, indent=2))
    print(f"| workload | best / median at {args.base} | best / median now | ratio of bests | "
          "paired ratio, median (IQR) |\n|---|---|---|---:|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['base_seconds']:.4f} / {r['base_median']:.4f} | "
              f"{r['seconds']:.4f} / {r['median']:.4f} | {r['ratio']} | {r['paired_ratio']} "
              f"({r['paired_iqr'][0]}-{r['paired_iqr'][1]}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
