"""The catalogue's operations page after a fortnight of real nights, for
docs/operations.md ("What the night tells you"): the hospital log (one landing file per
day, ``bench/year_of_nights.py``'s files of one copy) delivered night after night through
``run_all`` with the two committed hospital patterns and ``freshness`` set on the source:
ten ordinary nights, a catch-up night that delivers ten days at once (a volume jump), and
three nights when nothing arrives (volume drops to zero; the source goes stale: a warning,
then an error). Each landing file's time is set to its night, as if it had arrived then.
Then the site is built and its operations page photographed with headless Chromium.

    .venv/bin/python bench/operations_page.py [--out docs/operations_page.png]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from year_of_nights import OUT, project, write_days  # noqa: E402


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("no headless Chromium: make browser installs it")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "operations_page.png"))
    args = ap.parse_args()
    from jobs.config import load_profile
    from jobs.config.project import Project, use_project
    from jobs.lake.store import Lake
    from jobs.pipeline.run import run_all
    from jobs.site.build import build_site
    from jobs.spark.session import build_session

    days = write_days(OUT / "year_landing" / "1", 1)
    order = sorted(days)
    scratch = Path(tempfile.mkdtemp(prefix="ses-ops-page-"))
    home = project(scratch, "ops")
    for f in (home / "patterns").glob("v*.yaml"):  # the two committed patterns only
        f.unlink()
    conf = yaml.safe_load((home / "conf" / "sources.yaml").read_text())
    conf["sources"]["hospital"]["freshness"] = {"warn_after": "1d", "error_after": "2d"}
    (home / "conf" / "sources.yaml").write_text(yaml.safe_dump(conf, sort_keys=False))
    use_project(Project(home))
    profile = load_profile("local")
    spark = build_session(profile, "ses-operations-page")
    plan = [[d] for d in order[:10]] + [order[10:20]] + [[], [], []]
    night = order[0]
    for n, deliver in enumerate(plan, start=1):
        night = deliver[-1] if deliver else night + timedelta(days=1)
        for d in deliver:
            target = home / "landing" / "hospital" / days[d].name
            shutil.copy(days[d], target)
            at = datetime.combine(d, datetime.min.time(), tzinfo=timezone.utc) + timedelta(hours=23)
            os.utime(target, (at.timestamp(), at.timestamp()))
        lines = []
        rows = run_all(spark, profile, night.isoformat(), echo=lines.append)
        flagged = [line for line in lines if line.startswith(("warning: ", "ERROR: "))]
        print(f"night {n:2d} {night}: {len(deliver)} file(s); {len(rows)} rows; "
              f"{len(flagged)} flagged", flush=True)
        for line in flagged:
            print("   " + line[:150], flush=True)
    spark.stop()
    site = build_site(Lake.of_profile(profile), scratch / "site", echo=print).parent
    out = Path(args.out)
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", "--window-size=1200,1500",
                    f"--screenshot={out}", (site / "operations.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    print(f"operations page: {out}")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
