"""A fault campaign (docs/operations.md): nights of `ses run` over the committed data with a new landing
file each night, the writer killed with SIGKILL in about half of them (at a random failpoint
of `jobs.failpoints`, or at a random moment), then rerun; after every night `ses check` must
pass and every table must equal that of a lake that was never killed.

Two lakes get the same nights: `clean` (never killed) and `killed`. The sepsis log is
delivered as its history before 2014-05-01, then one file per day; chemo_mw's file is there
from the first night. On one night both lakes retract a day's file (the killed lake's
retract is killed between its delete and its row, then rerun).

    python bench/fault_campaign.py [--nights 20] [--seed 7] [--kill-rate 0.5]

Writes bench/out/fault_campaign.json (every night: the kill, where, the check, the
divergences) and prints a summary; the figures go into docs/operations.md by hand.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out" / "faults"
PATTERNS = [str(p) for p in sorted((ROOT / "patterns").glob("sepsis_*.yaml"))] + [
    str(ROOT / "patterns" / "mw_chemo_p1.yaml")]
FAILPOINTS = ["ingest:after-events", "ingest:after-quarantine", "ingest:after-log",
              "publish:after-merge", "run:after-pattern", "reconcile:after-runs",
              "reconcile:after-repairs"]
RETRACT_NIGHT = 9


def sepsis_days(n: int) -> tuple[list[str], list[tuple[str, list[str]]]]:
    history, by_day = [], {}
    for f in sorted((ROOT / "data" / "landing" / "sepsis").iterdir()):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                day = json.loads(line)["timestamp"][:10]
                (history if day < "2014-05-01" else by_day.setdefault(day, [])).append(line)
    return history, sorted(by_day.items())[:n]


class Lake:
    def __init__(self, name: str):
        self.home = OUT / name
        shutil.rmtree(self.home, ignore_errors=True)
        (self.home / "landing" / "sepsis").mkdir(parents=True)
        shutil.copytree(ROOT / "data" / "landing" / "chemo_mw", self.home / "landing" / "chemo_mw")
        self.root = self.home / "lake"
        conf = self.home / "pipeline.yaml"
        conf.write_text(
            "profiles:\n  campaign:\n"
            f"    landing: {self.home / 'landing'}\n    lake: {self.root}\n"
            "    spark:\n      master: local[2]\n"
            "      conf: {spark.sql.shuffle.partitions: '2', spark.ui.enabled: 'false', "
            "spark.ui.showConsoleProgress: 'false', spark.sql.session.timeZone: UTC}\n"
            "    match: {allowed_lateness: 0s, slice_length: 30d}\n")
        self.env = dict(os.environ, SES_PIPELINE_CONF=str(conf), SES_PROFILE="campaign",
                        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self.env.pop("SES_FAILPOINT", None)

    def ses(self, *args, failpoint: str | None = None, kill_after: float | None = None):
        env = dict(self.env, **({"SES_FAILPOINT": failpoint} if failpoint else {}))
        proc = subprocess.Popen([sys.executable, "-m", "jobs", *args], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate()
        return proc.returncode, out, err


def snapshot(root: Path) -> dict[str, list]:
    """Each table's rows, without what differs between two correct lakes (run ids, times,
    retraction ids), as sorted lists of reprs."""
    from jobs.lake.store import Lake as Store
    from jobs.tools.lakecheck import _all_tables

    store = Store(str(root))
    out = {}
    skip = {"ingest_run", "ingested_at", "run_id", "published_at", "retraction_id",
            "retracted_at", "quarantined_at", "started_at", "finished_at"}
    for name, path in _all_tables(store).items():
        if name == "runs" or name.startswith(("stats/", "models/")):
            continue
        t = store.read_arrow(path)
        if t is None:
            continue
        cols = [c for c in t.column_names if c not in skip]
        out[name] = sorted(repr(sorted(r.items())) for r in t.select(cols).to_pylist())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nights", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kill-rate", type=float, default=0.5)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    history, days = sepsis_days(args.nights)
    clean, killed = Lake("clean"), Lake("killed")
    for lake in (clean, killed):
        (lake.home / "landing" / "sepsis" / "history.jsonl").write_text("".join(history))
    pattern_args = [a for p in PATTERNS for a in ("--pattern", p)]
    report, durations = [], []
    for n, (day, lines) in enumerate(days, start=1):
        night = {"night": n, "date": day}
        for lake in (clean, killed):
            (lake.home / "landing" / "sepsis" / f"day_{day}.jsonl").write_text("".join(lines))
        if n == RETRACT_NIGHT:  # before the night's runs, in both lakes
            target = ["retract", "--source", "sepsis", "--file", f"sepsis/day_{days[1][0]}.jsonl",
                      "--reason", "campaign"]
            assert clean.ses(*target)[0] == 0
            code, _, err = killed.ses(*target, failpoint="retract:after-delete")
            night["retract_killed"] = code == -signal.SIGKILL
            code, out, err = killed.ses(*target)
            assert code == 0, err[-500:]
        t0 = time.perf_counter()
        code, _, err = clean.ses("run", "--logical-date", day, *pattern_args)
        durations.append(time.perf_counter() - t0)
        if code not in (0, 1):
            raise SystemExit(f"night {n}: the clean run failed ({code}): {err[-500:]}")
        if rng.random() < args.kill_rate:
            if rng.random() < 0.5:
                point = rng.choice(FAILPOINTS)
                code, _, _ = killed.ses("run", "--logical-date", day, *pattern_args,
                                        failpoint=point)
            else:
                # within a typical night (the median clean night: the first, which
                # recomputes everything, or one slowed by other work would make most
                # moments fall after the run's end)
                after = rng.uniform(3, 0.9 * sorted(durations)[len(durations) // 2])
                point = f"after {after:.1f} s"
                code, _, _ = killed.ses("run", "--logical-date", day, *pattern_args,
                                        kill_after=after)
            night["kill"] = point
            night["killed"] = code == -signal.SIGKILL
        code, _, err = killed.ses("run", "--logical-date", day, *pattern_args)
        night["run_exit"] = code
        code, out, err = killed.ses("check")
        night["check"] = "passed" if code == 0 else err.strip()
        a, b = snapshot(clean.root), snapshot(killed.root)
        night["divergences"] = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        report.append(night)
        print(f"night {n:2} {day}: kill {night.get('kill', '-'):26} "
              f"{'killed' if night.get('killed') else ('-' if 'kill' not in night else 'not reached')}"
              f"  check {night['check'][:60]:8}  divergences {len(night['divergences'])}",
              flush=True)
    kills = [r for r in report if r.get("killed")]
    summary = {"nights": len(report), "kills": len(kills),
               "kill_points": sorted({r["kill"] for r in kills}),
               "checks_failed": sum(r["check"] != "passed" for r in report),
               "divergences": sum(len(r["divergences"]) for r in report),
               "clean_night_seconds": round(sum(durations) / len(durations), 1),
               "nights_detail": report}
    (ROOT / "bench" / "out").mkdir(exist_ok=True)
    (ROOT / "bench" / "out" / "fault_campaign.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "nights_detail"}, indent=1))
    return 0 if summary["divergences"] == 0 and summary["checks_failed"] == 0 else 1


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)
