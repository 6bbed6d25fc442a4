"""The engine's time on the same workloads at two revisions of the project: does a change
cost patterns that do not use what it adds? (docs/semantics.md: measures, aggregates and time in
conditions must not slow the other patterns down.)

Each workload is ``match --stats`` in a fresh process; the figure is the engine's own
``seconds`` (start-up and reading excluded), best of ``--repeat``. The other revision is
checked out in a temporary git worktree and runs with this checkout's venv. Both run the
just-in-time kernels (``SES_KERNELS=jit``, compiled once into Numba's cache by a first,
uncounted run): a revision whose kernel source differs cannot use the other's
ahead-of-time module, and comparing host-compiled with generic ahead-of-time machine code
would measure the compiler, not the change (``--kernels aot`` compares the modules when
each tree has its own).

    python bench/compare_revisions.py --base 9030b14 [--peers /tmp/peers] [--repeat 3]

Without ``--peers`` the workloads are committed patterns over the committed landing files;
with it, also the peer workloads T1_W10, T2 and T4 (``../shared/peers/prep.py``).
Writes ``bench/out/compare_revisions.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def engine_seconds(tree: Path, pattern: Path, events: Path, repeat: int, kernels: str) -> float:
    best = float("inf")
    env = {**os.environ, "SES_KERNELS": kernels}
    for k in range(repeat + 1):  # the first run fills Numba's cache: not counted
        out = subprocess.run([sys.executable, "-m", "jobs", "match", str(pattern), str(events),
                              "--stats"], cwd=tree, capture_output=True, text=True, check=True,
                             env=env)
        if k == 0:
            continue
        stats = json.loads(out.stderr.strip().splitlines()[-1])
        best = min(best, float(stats["seconds"]))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other revision (a commit or a ref)")
    ap.add_argument("--peers", help="the prepared peer workloads (../shared/peers/prep.py)")
    ap.add_argument("--repeat", type=int, default=3)
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
            for so in (ROOT / "jobs" / "core" / "engine").glob("_kernels_aot*"):
                shutil.copy(so, base / "jobs" / "core" / "engine" / so.name)
            for pattern, events, name in work:
                old = engine_seconds(base, pattern, events, args.repeat, args.kernels)
                new = engine_seconds(ROOT, pattern, events, args.repeat, args.kernels)
                rows.append({"workload": name, "base_seconds": old, "seconds": new,
                             "ratio": round(new / old, 3) if old else None})
                print(f"{name}: {old:.6f} s -> {new:.6f} s", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    out = ROOT / "bench" / "out" / "compare_revisions.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"base": args.base, "rows": rows}, indent=2))
    print(f"| workload | engine s at {args.base} | engine s now | ratio |\n|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['base_seconds']:.4f} | {r['seconds']:.4f} | {r['ratio']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
