"""A year of nights: a history of ~10M events delivered as one landing file per
day over 365 days, and 50 patterns, run night after night through ``run_all`` (what ``make
run`` runs: ingest, match, validate, publish, models, maintenance, catalogue) in one warm
Spark session. Per night it records the wall time and each step's, the data files and log
commits of the tables that grow, the driver's and the JVM's memory, and the time of three
analyst queries (``query``'s DuckDB path): one match table, ``match_events``, a model.

History: the BPI 2011 hospital log (``../shared/data/real``, 150,291 events, 2005-2008)
replicated ``--copies`` times with shifted patient ids; each copy's days are folded into
one year (day of the log modulo 365, copy ``r`` shifted by ``r`` days), so every day of
the year gets its share (67 copies: 10.07M events, ~27,600 a day). Patterns: the two
committed hospital patterns and 48 variants of them (``within`` from 2 to 49 days, half
SES, half ZStream), and one SQL model.

365 nights do not fit a working day on this machine (about 40 s a night): by default the
benchmark runs a stride, every night of days 1-30 and 336-365, and between them one
catch-up night per month that delivers the month's files at once (``--all-nights`` runs
every night). At the end a fresh lake ingests every file at once and recomputes every
pattern in one run: its tables must equal the year's, match for match (``--no-check``
skips it); its time is the full recompute that a night's cost is compared with.

``--first-load [--days N]`` measures only a fresh lake's first load: every day's file (the
first N) by one whole ``ses ingest`` (its own command).

``--proportional`` measures instead nights that add 1 %, 5 % and 20 % of the history's
events (catch-up nights of 3, 13 and 50 days) after a history of 250 days, against the
full recompute of the history they join; with ``--copies 100`` that history holds 10.2M
events (6.84M with the default 67).

    .venv/bin/python bench/year_of_nights.py [--copies 67] [--all-nights] [--proportional]

Writes bench/out/year_of_nights.json and its plots (docs/benchmarks.md shows them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "data" / "real" / "bpi2011_hospital.parquet"
OUT = ROOT / "bench" / "out"
YEAR = date(2025, 1, 1)
COLUMNS = ["patient", "event_type", "timestamp", "activity_code", "number_of_executions",
           "group", "producer_code", "CASE_diagnosis", "CASE_age"]
MODEL = """-- matches of the CA-125 pattern per patient
SELECT patient, count(*) AS matches, min(start_ts) AS first_match
FROM matches_hospital_ca125_blood_then_consult GROUP BY patient
"""
QUERIES = {
    "match_table": "SELECT count(*) AS n, min(start_ts) AS first, max(start_ts) AS last "
                   "FROM matches_hospital_ca125_blood_then_consult",
    "match_events": "SELECT variable, count(*) AS n FROM match_events WHERE pattern = "
                    "'hospital_crossmatch_transfusion' GROUP BY variable",
    "model": "SELECT * FROM models_hospital_patient_matches ORDER BY matches DESC LIMIT 10",
    # the same questions over the last week only: the same amount of data on day 10 and on
    # day 365, so their times show what the history's files and logs cost a reader
    "match_table_week": "SELECT count(*) AS n FROM matches_hospital_ca125_blood_then_consult "
                        "WHERE start_ts >= TIMESTAMPTZ '{since}'",
    "match_events_week": "SELECT variable, count(*) AS n FROM match_events WHERE pattern = "
                         "'hospital_crossmatch_transfusion' AND ts >= TIMESTAMPTZ '{since}' "
                         "GROUP BY variable",
}
GROWING = ["runs", "ingest_log", "events/hospital", "stats/hospital",
           "matches/hospital_ca125_blood_then_consult", "models/hospital_patient_matches"]


def write_days(landing: Path, copies: int) -> dict[date, Path]:
    """One gzipped CSV per day of the year under ``landing`` (written once, reused)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    done = landing / "_complete"
    days = {YEAR + timedelta(days=k): landing / f"day_{k + 1:03d}.csv.gz" for k in range(365)}
    if done.exists() and done.read_text() == str(copies):
        return days
    shutil.rmtree(landing, ignore_errors=True)
    landing.mkdir(parents=True)
    log = pq.read_table(REAL, columns=COLUMNS)
    log = log.cast(pa.schema([pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type)
                              else f for f in log.schema]))
    base = pc.cast(log.column("timestamp"), pa.timestamp("us"))
    t0 = pc.min(base).as_py()
    offset = pc.divide(pc.cast(pc.subtract(base, pa.scalar(t0, pa.timestamp("us"))),
                               pa.int64()), 86400 * 10**6)  # whole days since the first
    parts = []
    for r in range(copies):
        shifted = pc.add(offset, r)
        day = pc.subtract(shifted, pc.multiply(pc.divide(shifted, 365), 365))  # mod 365
        parts.append(pa.table({"copy": pa.array([r] * log.num_rows, pa.int32()),
                               "day": pc.cast(day, pa.int32()), "row": pa.array(
                                   range(log.num_rows), pa.int32())}))
    index = pa.concat_tables(parts)
    for k, (when, path) in enumerate(days.items()):
        pick = index.filter(pc.equal(index.column("day"), k))
        rows = log.take(pick.column("row"))
        patient = pc.binary_join_element_wise(
            pc.cast(pick.column("copy"), pa.string()), rows.column("patient"), "-")
        stamp = pa.array([when.isoformat()] * rows.num_rows, pa.string())
        table = rows.set_column(0, "patient", patient).set_column(2, "timestamp", stamp)
        with gzip.open(path, "wb") as f:
            pacsv.write_csv(table, f)
        if (k + 1) % 73 == 0:
            print(f"  landing files: {k + 1}/365", flush=True)
    done.write_text(str(copies))
    return days


def variants(folder: Path, count: int = 50) -> None:
    """The two committed hospital patterns and 48 variants (``within`` 2-49 days); with
    ``count``, the first ``count`` of these 50."""
    for name in ("hospital_ca125_blood_then_consult", "hospital_crossmatch_transfusion"):
        shutil.copy(ROOT / "patterns" / f"{name}.yaml", folder)
    ca125 = (ROOT / "patterns" / "hospital_ca125_blood_then_consult.yaml").read_text()
    cross = (ROOT / "patterns" / "hospital_crossmatch_transfusion.yaml").read_text()
    body = {"ca125": ca125.split("examples:")[0], "cross": cross.split("examples:")[0]}
    for k in range(max(count - 2, 0)):
        kind = "ca125" if k % 2 == 0 else "cross"
        days = 2 + k
        text = body[kind]
        text = text.replace("name: hospital_ca125_blood_then_consult",
                            f"name: v{k:02d}_ca125_{days}d")
        text = text.replace("name: hospital_crossmatch_transfusion", f"name: v{k:02d}_cross_{days}d")
        text = text.replace("within: 14d", f"within: {days}d").replace("within: 3d",
                                                                         f"within: {days}d")
        if k % 4 in (2, 3):  # the other matcher for half of them
            text = text.replace("matcher: ses", "matcher: zstream") if "matcher: ses" in text \
                else text.replace("matcher: zstream", "matcher: ses")
        (folder / f"v{k:02d}.yaml").write_text(text)


def project(scratch: Path, name: str, patterns: int = 50) -> Path:
    """A project under ``scratch``: conf (the repo's sources, a profile on its own lake),
    the 50 patterns, the model, an empty landing folder."""
    home = scratch / name
    shutil.rmtree(home, ignore_errors=True)
    (home / "conf").mkdir(parents=True)
    (home / "patterns").mkdir()
    (home / "models").mkdir()
    (home / "landing" / "hospital").mkdir(parents=True)
    shutil.copy(ROOT / "conf" / "sources.yaml", home / "conf")
    shutil.copytree(ROOT / "expectations", home / "expectations")
    if (ROOT / "conf" / "reference").is_dir():
        shutil.copytree(ROOT / "conf" / "reference", home / "conf" / "reference")
    text = (ROOT / "conf" / "pipeline.yaml").read_text()
    text = text.replace("    landing: data/landing ", "    landing: landing ", 1)
    (home / "conf" / "pipeline.yaml").write_text(text)
    variants(home / "patterns", patterns)
    (home / "models" / "hospital_patient_matches.sql").write_text(MODEL)
    return home


def schedule(all_nights: bool, warm_up: int = 0, daily: int = 30
             ) -> list[tuple[date, list[date]]]:
    """(logical date, days delivered that night): every night, or the stride (``daily``
    nights at each end of the year, one catch-up night per month between). ``warm_up``:
    a first night delivers the year's first ``warm_up`` days at once, so that from the
    next night on every pattern's ``within`` lies inside the history (each night then does
    the work of any later night: the nights compare like with like)."""
    days = [YEAR + timedelta(days=k) for k in range(365)]
    first = [(days[warm_up - 1], days[:warm_up])] if warm_up else []
    days = days[warm_up:]
    if all_nights:
        return first + [(d, [d]) for d in days]
    out = first + [(d, [d]) for d in days[:daily]]
    rest = days[daily:len(days) - daily]
    while rest:  # one catch-up night per calendar month
        month = [d for d in rest if (d.year, d.month) == (rest[0].year, rest[0].month)]
        out.append((month[-1], month))
        rest = rest[len(month):]
    return out + [(d, [d]) for d in days[len(days) - daily:]]


class Steps:
    """Wall time of each step of ``run_all``, by wrapping the functions it calls."""

    NAMES = {"ingest_sources": "ingest", "run_catalog": "match+validate+publish",
             "models_step": "models", "maintenance_step": "maintenance", "site_step": "catalogue"}

    def __init__(self):
        from jobs.pipeline import run

        self.seconds: dict[str, float] = {}
        for fn, label in self.NAMES.items():
            setattr(run, fn, self._timed(getattr(run, fn), label))

    def _timed(self, fn, label):
        def wrapper(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                self.seconds[label] = self.seconds.get(label, 0) + time.perf_counter() - t0
        return wrapper

    def take(self) -> dict[str, float]:
        out = {k: round(v, 2) for k, v in self.seconds.items()}
        self.seconds.clear()
        return out


def table_sizes(lake) -> dict[str, dict]:
    from deltalake import DeltaTable

    out = {}
    for name in GROWING:
        path = f"{lake.root}/{name}"
        if Path(path).exists():
            dt = DeltaTable(path)
            out[name] = {"files": len(dt.file_uris()), "commits": dt.version() + 1,
                         "log_files": len(list((Path(path) / "_delta_log").glob("*.json")))}
    return out


def query_seconds(lake, logical: date) -> dict[str, float]:
    from jobs.tools.query import run_duckdb

    out = {}
    since = f"{logical - timedelta(days=7)} 00:00:00+00"
    for name, sql in QUERIES.items():
        t0 = time.perf_counter()
        try:
            run_duckdb(lake, sql.replace("{since}", since), None)
            out[name] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # noqa: BLE001 - a table not there yet
            out[name] = None
            print(f"  query {name}: {str(exc)[:120]}", flush=True)
    return out


def queries_on(pairs: list[str]) -> int:
    """The analyst queries on lakes kept by earlier runs (``LAKE=YYYY-MM-DD``: the lake's
    folder and the logical date of its last night), five times each; the medians, their
    ratios to the first lake's, in ``bench/out/year_queries.json``."""
    from jobs.lake.store import Lake

    out = {}
    for pair in pairs:
        root, _, day = pair.partition("=")
        lake, logical = Lake.of(root), date.fromisoformat(day)
        runs = [query_seconds(lake, logical) for _ in range(5)]
        out[pair] = {q: round(statistics.median(r[q] for r in runs), 3) for q in QUERIES}
        print(pair, json.dumps(out[pair]), flush=True)
    first = out[pairs[0]]
    ratios = {pair: {q: round(t[q] / first[q], 2) for q in QUERIES} for pair, t in out.items()}
    print("ratios to the first:", json.dumps(ratios), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "year_queries.json").write_text(json.dumps({"seconds": out, "ratios": ratios},
                                                      indent=1))
    return 0


def memory(spark) -> dict[str, float]:
    rss = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    return {"driver_rss_mb": round(rss, 1),
            "driver_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "jvm_heap_mb": round((runtime.totalMemory() - runtime.freeMemory()) / 2**20, 1)}


def published(lake, names) -> dict[str, set]:
    import pyarrow.compute as pc

    out = {}
    for name in names:
        t = lake.read_arrow(lake.matches(name), columns=["match_id", "start_ts"])
        out[name] = set() if t is None else set(t.column("match_id").to_pylist())
        if t is not None:
            out[f"{name}@last"] = pc.max(t.column("start_ts")).as_py()
    return out


def year(args, spark, days, scratch) -> dict:
    from jobs.config import load_profile
    from jobs.config.project import Project, use_project
    from jobs.lake.store import Lake
    from jobs.pipeline.run import run_all

    home = project(scratch, "year")
    use_project(Project(home))
    profile = load_profile("local")
    lake = Lake.of_profile(profile)
    steps = Steps()
    nights = []
    plan = schedule(args.all_nights, args.warm_up, args.daily)[:args.limit]
    for n, (logical, deliver) in enumerate(plan, start=1):
        for d in deliver:
            shutil.copy(days[d], home / "landing" / "hospital" / days[d].name)
        t0 = time.perf_counter()
        rows = run_all(spark, profile, logical.isoformat(), echo=lambda *_: None)
        wall = time.perf_counter() - t0
        outcomes = [r for r in rows if "pattern" in r]
        night = {"night": n, "logical_date": logical.isoformat(), "days": len(deliver),
                 "wall_seconds": round(wall, 2), "steps": steps.take(),
                 "failed": [f"{r['pattern']}: {(r['message'] or '')[:100]}" for r in outcomes
                            if r["status"] != "success"][:3],
                 "new_events": None, "matches": sum(r["matches"] or 0 for r in outcomes),
                 "inserted": sum(r["inserted"] or 0 for r in outcomes),
                 "tables": table_sizes(lake), "memory": memory(spark),
                 "queries": query_seconds(lake, logical)}
        nights.append(night)
        print(f"night {n:3d} {logical} ({len(deliver)} day(s)): {wall:6.1f} s "
              f"{night['steps']} queries {night['queries']} failed {night['failed']}",
              flush=True)
        (OUT / f"{args.name}.json").write_text(json.dumps({"nights": nights}, indent=1,
                                                            default=str))
        if n == args.copy_after:  # a young lake to profile beside the old one
            shutil.copytree(home, scratch / f"year_night{n}", symlinks=True)
    return {"home": str(home), "profile": profile, "lake": lake, "nights": nights,
            "last": plan[-1][0].isoformat()}


def recompute(spark, days, scratch, logical: str, delivered: list[date], patterns: int = 50
              ) -> dict:
    """A fresh lake: every delivered file at once, every pattern in one run."""
    from jobs.config import load_profile
    from jobs.config.project import Project, use_project
    from jobs.lake.store import Lake
    from jobs.pipeline.run import run_all

    home = project(scratch, "recompute", patterns)
    for d in delivered:
        shutil.copy(days[d], home / "landing" / "hospital" / days[d].name)
    use_project(Project(home))
    profile = load_profile("local")
    t0 = time.perf_counter()
    rows = run_all(spark, profile, logical, echo=lambda *_: None)
    return {"seconds": round(time.perf_counter() - t0, 1),
            "match_seconds": round(sum((r.get("match_seconds") or 0) for r in rows
                                       if "pattern" in r), 1),
            "lake": Lake.of_profile(profile),
            "names": [r["pattern"] for r in rows if "pattern" in r]}


def first_load(days, scratch) -> dict:
    """The whole year's files into a fresh lake by the whole ``ses ingest`` (a command of
    its own: JVM start, the events suite, the statistics and the commit included)."""
    import subprocess

    from ingest_speed import time_line  # a script beside this one

    home = project(scratch, "first_load", 0)
    for path in days.values():
        shutil.copy(path, home / "landing" / "hospital" / path.name)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "jobs", "--project-dir", str(home), "ingest",
                             "--source", "hospital"], cwd=home, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:  # its progress, as a user sees it
        print("  " + line.rstrip(), flush=True)
        lines.append(line)
    err = proc.stderr.read()
    seconds = time.perf_counter() - t0
    if proc.wait() != 0:
        raise SystemExit(f"ses ingest failed: {err[-2000:]}")
    steps = time_line("".join(lines))
    from jobs.config import load_profile
    from jobs.config.project import Project, use_project
    from jobs.lake.store import Lake

    use_project(Project(home))
    events = events_in(Lake.of_profile(load_profile("local")))
    return {"files": len(days), "events": events, "seconds": round(seconds, 1),
            "rows_per_second": round(events / seconds), "steps": steps}


def events_in(lake) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    files = pa.table(DeltaTable(lake.events("hospital")).get_add_actions(flatten=True))
    return int(pc.sum(files.column("num_records")).as_py())


def proportional(spark, days, scratch, patterns: int = 50) -> dict:
    """Nights adding 1, 5 and 20 % of a 250-day history's events (catch-ups of 3, 13 and 50
    days), each against a full recompute of the history it joins (a fresh lake, one run);
    a night with nothing new gives the fixed cost."""
    from jobs.config import load_profile
    from jobs.config.project import Project, use_project
    from jobs.lake.store import Lake
    from jobs.pipeline.run import run_all

    order = sorted(days)
    home = project(scratch, "proportional", patterns)
    use_project(Project(home))
    profile = load_profile("local")
    lake = Lake.of_profile(profile)
    steps = Steps()

    def night(deliver: list[date], logical: date | None = None) -> dict:
        for d in deliver:
            shutil.copy(days[d], home / "landing" / "hospital" / days[d].name)
        before = events_in(lake) if Path(lake.events("hospital")).exists() else 0
        steps.take()  # the steps of this night only, not of the recompute before it
        t0 = time.perf_counter()
        rows = run_all(spark, profile, (logical or deliver[-1]).isoformat(),
                       echo=lambda *_: None)
        wall = time.perf_counter() - t0
        after = events_in(lake)
        return {"days": len(deliver), "history_events": before, "new_events": after - before,
                "share": round((after - before) / max(before, 1), 4),
                "wall_seconds": round(wall, 1), "steps": steps.take(),
                "failed": [r["pattern"] for r in rows if "pattern" in r
                           and r["status"] != "success"]}

    out = {"history": night(order[:250])}
    print(f"history of 250 days: {out['history']}", flush=True)
    at = 250
    for label, n in (("1%", 3), ("5%", 13), ("20%", 50)):
        full = recompute(spark, days, scratch, order[at - 1].isoformat(), order[:at], patterns)
        full_steps = steps.take()
        use_project(Project(home))
        one = night(order[at:at + n])
        one.update(full_recompute_seconds=full["seconds"], full_recompute_steps=full_steps,
                   ratio=round(one["wall_seconds"] / full["seconds"], 3))
        out[label] = one
        print(f"{label}: {one}", flush=True)
        at += n
    out["empty"] = night([], order[at - 1] + timedelta(days=1))  # no file: the fixed cost
    print(f"a night with nothing new: {out['empty']}", flush=True)
    for label in ("1%", "5%", "20%"):
        one = out[label]
        one["ratio_above_fixed"] = round((one["wall_seconds"] - out["empty"]["wall_seconds"])
                                         / one["full_recompute_seconds"], 3)
    return out


def tables_differ(year_lake, full: dict) -> list[str]:
    """The patterns whose published matches differ, match for match (ids and the last
    start), between the year's lake and a recompute."""
    a, b = published(year_lake, full["names"]), published(full["lake"], full["names"])
    return [n for n in full["names"] if a[n] != b[n] or a.get(f"{n}@last") != b.get(f"{n}@last")]


def check_only(spark, days, scratch) -> int:
    """The final check alone, on a year lake kept by an earlier run."""
    from jobs.config import load_profile
    from jobs.config.project import Project, use_project
    from jobs.lake.store import Lake

    use_project(Project(scratch / "year"))
    year_lake = Lake.of_profile(load_profile("local"))
    last = schedule(True)[-1][0].isoformat()
    full = recompute(spark, days, scratch, last, sorted(days))
    differ = tables_differ(year_lake, full)
    out = {"recompute_seconds": full["seconds"], "recompute_match_seconds":
           full["match_seconds"], "patterns": len(full["names"]), "tables_differ": differ}
    (OUT / "year_of_nights_check.json").write_text(json.dumps(out, indent=1))
    print(f"full recompute: {full['seconds']} s; tables that differ: {differ or 'none'}",
          flush=True)
    return 0 if not differ else 1


def plots(nights: list[dict], name: str = "year_of_nights") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [n["night"] for n in nights]
    out = []
    stem = name

    def save(fig, name):
        path = OUT / f"{stem}_{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)

    fig, ax = plt.subplots(figsize=(9, 4))
    labels = sorted({k for n in nights for k in n["steps"]})
    bottom = [0.0] * len(nights)
    for label in labels:
        ys = [n["steps"].get(label, 0) for n in nights]
        ax.bar(xs, ys, bottom=bottom, label=label)
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xlabel("night (one day delivered each, unless a label above the bar says more)")
    for n, b in zip(nights, bottom):  # the days each night delivered, above its bar
        if n["days"] > 1:
            ax.annotate(f"{n['days']} d", (n["night"], b), ha="center", va="bottom", fontsize=6)
    ax.set_ylabel("seconds")
    ax.set_title("wall time per night, by step")
    ax.legend(fontsize=7)
    save(fig, "wall")

    def lines(series: dict[str, list], ylabel: str, title: str, name: str,
              log: bool = False) -> None:
        fig, ax = plt.subplots(figsize=(9, 4))
        for label, ys in series.items():
            ax.plot(xs, ys, label=label)
        if log:
            ax.set_yscale("symlog")
        ax.set_xlabel("night")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7)
        save(fig, name)

    lines({t: [n["tables"].get(t, {}).get("files", 0) for n in nights] for t in GROWING},
          "data files", "data files per table (maintenance compacts weekly)", "files", log=True)
    lines({q: [n["queries"].get(q) or 0 for n in nights] for q in QUERIES}, "seconds",
          "analyst queries (ses query, DuckDB)", "queries")
    lines({k: [n["memory"][k] for n in nights] for k in ("driver_rss_mb", "jvm_heap_mb")},
          "MB", "driver memory after each night", "memory")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=67, help="copies of the hospital log")
    ap.add_argument("--all-nights", action="store_true", help="all 365 nights, no stride")
    ap.add_argument("--no-check", action="store_true", help="skip the final recompute")
    ap.add_argument("--limit", type=int, default=None, help="stop after this many nights "
                    "(a smoke test)")
    ap.add_argument("--scratch", default=None, help="keep the lakes in this folder")
    ap.add_argument("--first-load", action="store_true",
                    help="only the first load: every day's file by one `ses ingest`")
    ap.add_argument("--days", type=int, default=365,
                    help="--first-load: the year's first DAYS files only (default 365)")
    ap.add_argument("--proportional", action="store_true",
                    help="nights of 1, 5, 20 %% new events against a full recompute")
    ap.add_argument("--patterns", type=int, default=50,
                    help="with --proportional: this many of the 50 patterns")
    ap.add_argument("--warm-up", type=int, default=0, metavar="DAYS",
                    help="a first night delivers this many days at once (a history longer "
                         "than every within before the measured nights)")
    ap.add_argument("--daily", type=int, default=30,
                    help="daily nights at each end of the stride (default 30)")
    ap.add_argument("--check-only", action="store_true",
                    help="no nights: compare the year lake kept in --scratch with a full "
                         "recompute over every day")
    ap.add_argument("--copy-after", type=int, default=None, metavar="N",
                    help="copy the project and its lake after night N to "
                         "<scratch>/year_night<N> (to profile a young lake beside the old)")
    ap.add_argument("--queries-on", nargs="+", default=None, metavar="LAKE=DATE",
                    help="no nights: time the analyst queries (median of five) on kept lakes "
                         "as of their logical dates, e.g. a copy after night 10 and the year")
    args = ap.parse_args()
    if args.queries_on:
        return queries_on(args.queries_on)
    args.name = "year_of_nights" + (f"_warm{args.warm_up}" if args.warm_up else "") + \
        (f"_copies{args.copies}" if args.copies != 67 else "")
    if args.check_only and not args.scratch:
        ap.error("--check-only needs --scratch (the folder of a run kept with --scratch)")
    OUT.mkdir(parents=True, exist_ok=True)
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="ses-year-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"scratch: {scratch}", flush=True)
    days = write_days(OUT / "year_landing" / str(args.copies), args.copies)
    if args.first_load:
        out = first_load(dict(list(days.items())[:args.days]), scratch)
        (OUT / f"year_first_load_copies{args.copies}_days{args.days}.json").write_text(
            json.dumps(out, indent=1))
        print(json.dumps(out))
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        return 0
    from jobs.config import load_profile
    from jobs.spark.session import build_session

    spark = build_session(load_profile("local"), "ses-year-of-nights")
    if args.proportional:
        out = proportional(spark, days, scratch, args.patterns)
        out["patterns"] = args.patterns
        (OUT / "year_of_nights_proportional.json").write_text(json.dumps(out, indent=1))
        print(json.dumps(out))
        return 0
    if args.check_only:
        return check_only(spark, days, scratch)
    result = year(args, spark, days, scratch)
    nights = result["nights"]
    summary = {"copies": args.copies, "nights": len(nights), "warm_up_days": args.warm_up,
               "events": events_in(result["lake"])}
    daily = [n for n in nights if n["days"] == 1 and n["night"] > (1 if args.warm_up else 0)]
    tenth, last = daily[min(9, len(daily) - 1)], daily[-1]
    summary.update(night10_seconds=tenth["wall_seconds"], night365_seconds=last["wall_seconds"],
                   ratio=round(last["wall_seconds"] / tenth["wall_seconds"], 2),
                   queries_day10=tenth["queries"], queries_day365=last["queries"])
    if not args.no_check:
        full = recompute(spark, days, scratch, result["last"], list(days))
        differ = tables_differ(result["lake"], full)
        summary.update(recompute_seconds=full["seconds"],
                       recompute_match_seconds=full["match_seconds"], tables_differ=differ)
        print(f"full recompute: {full['seconds']} s; tables that differ: {differ or 'none'}",
              flush=True)
    pictures = plots(nights, args.name)
    (OUT / f"{args.name}.json").write_text(json.dumps({"summary": summary, "nights": nights},
                                                        indent=1, default=str))
    print(json.dumps(summary, default=str))
    print("plots: " + ", ".join(str(p) for p in pictures))
    if not args.scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if not summary.get("tables_differ") else 1


if __name__ == "__main__":
    sys.exit(main())
