"""Operating the project: ``pr-check`` (what a branch's pattern and model changes do to
the published tables), ``cluster`` (a standalone Spark cluster on this machine), ``check``
(the lake's invariants) and ``vacuum`` (files no snapshot names)."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

from jobs.cli.commands import Registry
from jobs.cli.common import spark_for, user_errors
from jobs.config import current_project, load_profile
from jobs.lake.locks import lake_lock
from jobs.lake.maintenance import compact_logs, due, last_maintenance, maintain
from jobs.lake.store import Lake
from jobs.ops import cluster
from jobs.prcheck.check import pr_check
from jobs.prcheck.diffs import PrCheck
from jobs.prcheck.report import pytest_filter, terminal, write_report
from jobs.project.changes import ChangesError, find_changes
from jobs.tools.lakecheck import RETENTION_HOURS, check_lake, vacuum


@user_errors
def cmd_pr_check(args) -> int:
    """What the branch changes in the published tables (``jobs.prcheck``)."""
    root = Path(args.root).resolve() if args.root else current_project().root
    try:
        changes = find_changes(root, args.base)
    except ChangesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    changed = changes.changed_patterns
    if args.list:
        for c in changed:
            print(f"{c.status:9} pattern {c.name:36} {(c.head or c.base).path}")
        for m in changes.affected_models:
            print(f"{m.status:9} model   {m.name:36} {m.reason}")
        return 0
    if args.pytest_k:
        print(pytest_filter([Path(c.head.path).stem for c in changed if c.head is not None]))
        return 0
    out = Path(args.out) if args.out else current_project().root / "pr-check"
    for old in list(out.glob("*.png")) + list(out.glob("report.*")) + list(out.glob("summary.json")):
        old.unlink()
    if not changes.changed_patterns and not changes.affected_models:
        check = PrCheck(changes, "nothing run", [], [])
    else:
        profile, spark = spark_for(args)
        sample = None if args.data == "auto" else args.data == "sample"
        if sample and profile.pr_sample is None:
            print(f"error: profile {profile.name} names no pr_check.sample in "
                  "conf/pipeline.yaml (e.g. pr_check: {sample: 90d})", file=sys.stderr)
            return 2
        check = pr_check(spark, profile, root, args.base,
                         Path(args.scratch) if args.scratch else None, sample, charts=out,
                         changes=changes)
    paths = write_report(check, out)
    print(terminal(check), end="")
    print(f"report: {paths['markdown']} (Markdown, for the pull request), {paths['json']}")
    return 0 if check.ok else 1


@user_errors
def cmd_cluster(args) -> int:
    """The standalone cluster on this machine (``jobs.ops.cluster``)."""
    if args.action == "up":
        cluster.up()
    elif args.action == "down":
        cluster.down()
    else:
        now = cluster.status()
        print("no cluster running" if now is None else
              f"{cluster.master_url()}: {now.get('aliveworkers', 0)} worker(s) alive, "
              f"{len(now.get('activeapps') or [])} application(s) running")
    return 0


@user_errors
def cmd_check(args) -> int:
    """The lake's invariants (``jobs.tools.lakecheck``), under the lake lock."""
    profile = load_profile(args.profile)
    lake = Lake.of_profile(profile)
    with lake_lock(profile.lake, "check", profile.lock_dir):
        findings = check_lake(lake)
    for f in findings:
        print(f"violation: {f}", file=sys.stderr)
    print(f"{profile.lake}: " + ("consistent" if not findings else
                                 f"{len(findings)} violation(s)"))
    return 1 if findings else 0


@user_errors
def cmd_vacuum(args) -> int:
    """VACUUM every table of the lake, under the lake lock."""
    profile = load_profile(args.profile)
    with lake_lock(profile.lake, "vacuum", profile.lock_dir):
        gone = vacuum(Lake.of_profile(profile), args.retention_hours, args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    for table, files in gone.items():
        print(f"{table}: {verb} {len(files)} file(s)")
    print(f"{verb} {sum(map(len, gone.values()))} file(s) that no snapshot of the last "
          f"{args.retention_hours} h names")
    return 0


@user_errors
def cmd_maintain(args) -> int:
    """Table maintenance (``jobs.lake.maintenance``) under the lake lock; with
    ``--if-due``, only when the profile's ``maintenance.every`` has passed (the DAG's
    weekly task)."""
    profile = load_profile(args.profile)
    lake = Lake.of_profile(profile)
    logical_date = args.logical_date or date.today().isoformat()
    if args.if_due and not due(lake, profile.maintain_every, logical_date):
        last = last_maintenance(lake) or {}
        with lake_lock(profile.lake, "maintain", profile.lock_dir):
            logs = compact_logs(lake)
        print(f"maintenance not due (last for {last.get('logical_date')}, every "
              f"{profile.maintain_every // (86400 * 10**9)}d)"
              + (f"; compacted {', '.join(logs)}" if logs else ""))
        return 0
    with lake_lock(profile.lake, "maintain", profile.lock_dir):
        maintain(lake, profile.retention, logical_date)
    return 0


def register(r: Registry) -> None:
    pr = r.add("operate", "pr-check", "what the branch's pattern and model changes do to the "
               "published tables: validate, run base and new versions in a scratch lake, "
               "report (make pr-check BASE=ref)", cmd_pr_check, profile=False)
    pr.add_argument("--base", help="the git ref to compare with (default: the merge base "
                    "with main)")
    pr.add_argument("--out", default=None,
                    help="folder of the report (report.md, report.txt, summary.json, PNGs); "
                         "default pr-check/")
    pr.add_argument("--data", choices=("auto", "committed", "sample"), default="auto",
                    help="the events: the committed data (data/landing) or the profile's "
                         "pr_check.sample of its lake (auto: the sample when the profile "
                         "names one)")
    pr.add_argument("--scratch", help="keep the scratch lake in this folder (default: a "
                    "temporary folder, removed)")
    pr.add_argument("--root", help=argparse.SUPPRESS)  # another checkout (tests)
    pr.add_argument("--profile", help="the profile (default: local)")
    pr.add_argument("--list", action="store_true", help="only list what changed (no Spark)")
    pr.add_argument("--pytest-k", action="store_true",
                    help="only print a pytest -k expression for the changed patterns' tests")

    cl = r.add("operate", "cluster", "a Spark standalone cluster on this machine (master and "
               "two workers on 127.0.0.1; profile standalone submits to it)", cmd_cluster,
               profile=False)
    cl.add_argument("action", choices=("up", "down", "status"))

    r.add("operate", "check", "verify the lake's invariants (every table readable, no "
          "duplicate ids, run totals = table rows, no match bound to a missing event, no "
          "orphan staging); exit 1 naming each violation", cmd_check)
    v = r.add("operate", "vacuum", "delete the data files that no snapshot of the last "
              "RETENTION hours names (a killed write's files, files a rewrite replaced)",
              cmd_vacuum)
    v.add_argument("--retention-hours", type=int, default=RETENTION_HOURS,
                   help=f"keep what a snapshot this recent needs (default {RETENTION_HOURS}: "
                        "a reader's snapshot up to a week old stays whole)")
    v.add_argument("--dry-run", action="store_true", help="only list what would go")
    m = r.add("operate", "maintain", "compact small files (OPTIMIZE), checkpoint and trim "
              "every table's Delta log, VACUUM what no snapshot of the profile's "
              "maintenance.retention names; `run` does it every maintenance.every", cmd_maintain)
    m.add_argument("--if-due", action="store_true",
                   help="only when the last maintenance is maintenance.every old")
    m.add_argument("--logical-date", help="YYYY-MM-DD the schedule counts from (default: "
                   "today)")
