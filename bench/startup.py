"""Start-up costs of the compiled engine: what a process, a pattern and a Spark task pay.

Each figure comes from fresh Python processes (median of three):

* compile: the kernels compiled from nothing (an empty Numba cache directory): once per
  machine (or per cache directory) after an install;
* load: the just-in-time kernels loaded from Numba's cache and called once, and the
  ahead-of-time kernels (``jobs.core.engine.aot``, what a process uses after ``make``) loaded and
  called once: once per Python process (the local ``match`` command; each Spark Python
  worker, which Spark reuses across tasks);
* prepare: compiling a pattern and preparing its matcher: once per pattern and process;
* per call: one ``execute`` on a small group (a patient's events): what phase 2 pays per
  engine call on top of the matching itself.

and, when the peer workloads are prepared (``../shared/peers/prep.py /tmp/peers``), the
whole ``match`` command on T4 (process start to exit) with each kernel set, with the
start-up and kernel load it reports in ``--stats``.

    python bench/startup.py [--peers /tmp/peers]   # a Markdown table; bench/out/startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
from jobs.core.engine.runtime import MatchOptions, compile_pattern, execute
from jobs.core.engine.columns import from_events
from jobs.core.language.events import Event, order
from jobs.core.language.patternfile import load_pattern
imported = time.perf_counter() - t0
events = order([Event(f"e{{i}}", i * 10**9, {{"type": t, "patient": 1, "value": i}})
                for i, t in enumerate("CPPBCPB")])
out = {{"import": imported}}
for name in ("mw_chemo_p1", "ses_chemo_q1"):
    t0 = time.perf_counter()
    pattern = load_pattern({root!r} + "/patterns/" + name + ".yaml")
    compiled = compile_pattern(pattern)
    cols = from_events(events, compiled.attributes)
    out.setdefault("prepare", []).append(time.perf_counter() - t0)
    for matcher in ("ses", "zstream"):
        t0 = time.perf_counter()
        list(execute(compiled, cols, MatchOptions(matcher=matcher)))
        list(execute(compiled, cols, MatchOptions(matcher=matcher, strategy="eager")))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(200):
            list(execute(compiled, cols, MatchOptions(matcher=matcher)))
        out.setdefault("first_calls", []).append(first)
        out.setdefault("per_call", []).append((time.perf_counter() - t0) / 200)
print(json.dumps(out))
"""


def probe(cache_dir: str | None, jit: bool = True) -> dict:
    env = dict(os.environ)
    if cache_dir:
        env["NUMBA_CACHE_DIR"] = cache_dir
    if jit:
        env["SES_KERNELS"] = "jit"
    proc = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT))],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def match_t4(peers: Path, jit: bool) -> dict:
    """``python -m jobs match`` on T4 in a fresh process: wall time and its --stats."""
    env = dict(os.environ) | ({"SES_KERNELS": "jit"} if jit else {})
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jobs", "match",
                           str(ROOT.parent / "shared" / "peers" / "patterns" / "t4.yaml"),
                           str(peers / "parquet" / "sepsis.parquet"), "--stats"],
                          capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    wall = time.perf_counter() - started
    return json.loads(proc.stderr.strip().splitlines()[-1]) | {"wall": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=Path, default=Path("/tmp/peers"))
    args = parser.parse_args()
    compile_s, load_s, aot_s, prepare_s, call_s = [], [], [], [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as cache:
            cold = probe(cache)  # empty cache: compiles (and fills the cache)
            warm = probe(cache)  # the same cache: loads
        ahead = probe(None, jit=False)
        compile_s.append(sum(cold["first_calls"]))
        load_s.append(sum(warm["first_calls"]))
        aot_s.append(sum(ahead["first_calls"]))
        prepare_s.append(warm["prepare"][-1])  # the first includes lazy imports
        call_s.append(max(warm["per_call"]))
    med = statistics.median
    rows = [("compile the kernels (empty cache)", "once per machine / cache directory",
             f"{med(compile_s):.1f} s"),
            ("load the just-in-time kernels from Numba's cache, call each once",
             "once per Python process (CLI run, Spark Python worker)", f"{med(load_s):.2f} s"),
            ("load the ahead-of-time kernels, call each once (after `make`)",
             "once per Python process", f"{med(aot_s) * 1000:.0f} ms"),
            ("read, compile a pattern; its columns", "once per pattern and process",
             f"{med(prepare_s) * 1000:.1f} ms"),
            ("one engine call on a small group", "per phase-2 engine call",
             f"{med(call_s) * 1000:.2f} ms")]
    table = "| cost | paid | median of 3 |\n|---|---|---|\n" + "\n".join(
        f"| {a} | {b} | {c} |" for a, b, c in rows)
    print(table)
    result = {"compile_s": compile_s, "load_s": load_s, "aot_load_s": aot_s,
              "prepare_s": prepare_s, "call_s": call_s}
    if (args.peers / "parquet" / "sepsis.parquet").exists():
        print("\n| `match` on T4 (320 matches) | process wall | start-up | kernel load | "
              "engine |\n|---|---:|---:|---:|---:|")
        for jit in (True, False):
            runs = [match_t4(args.peers, jit) for _ in range(3)]
            best = min(runs, key=lambda r: r["wall"])
            label = "just-in-time kernels" if jit else "ahead-of-time kernels"
            print(f"| {label} | {best['wall']:.2f} s | {best['startup_seconds']:.2f} s | "
                  f"{best['kernel_load_seconds'] * 1000:.0f} ms | "
                  f"{best['seconds'] * 1000:.0f} ms |")
            result["t4_jit" if jit else "t4_aot"] = runs
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "startup.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
