"""``make pr-check``: what a pattern pull request will change in the published tables.

The pull-request path of the pipeline, after dbt's "slim CI" (``state:modified+`` and a
data diff against production): the patterns and models a branch changes
(``jobs.project.changes``) are validated with their examples, then run, base version and new
version, with the nightly steps themselves (``pipeline.run_pattern``: match, validate,
publish; ``models.run_models``) in a *scratch* lake on the same events: the committed
data (``data/landing``) or, when the profile names ``pr_check.sample``, the real lake's
last days of each source, copied. The real lake is only ever read. The two versions'
published tables are compared match by match (``jobs.prcheck.report`` renders the result).

Layout of the scratch folder: ``shared/`` (events, statistics, and the matches of
unchanged patterns a changed model reads), ``base/`` and ``head/`` (one lake per side;
their ``events``, ``stats`` and shared match tables are hard links to ``shared/``'s files), and
``base_src/`` (the base's pattern and model files, from ``git show``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import replace
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import Profile, current_project, load_sources
from jobs.core.language.patternfile import PatternError, load_pattern, parse_pattern
from jobs.core.local.row_patterns import RowPatternFile, load_row_pattern
from jobs.core.rowpattern.lexer import RowPatternError
from jobs.core.rowpattern.parser import parse_row_pattern
from jobs.lake import store as lk
from jobs.lake.store import Lake
from jobs.pipeline.context import RunContext
from jobs.pipeline.ingest.steps import ingest_sources, pipeline_catalog, stats_step
from jobs.pipeline.outcome import FINAL_TYPES
from jobs.pipeline.publish.models import run_models
from jobs.pipeline.publish.row_patterns import run_row_patterns
from jobs.pipeline.run import run_pattern
from jobs.prcheck.diffs import ModelDiff, PatternDiff, PrCheck, Side
from jobs.prcheck.report import charts as draw
from jobs.progress import say
from jobs.project.changes import (
    ADDED,
    CHANGED,
    INVALID,
    REMOVED,
    Changes,
    find_changes,
)
from jobs.project.models import ModelError, load_model, load_models
from jobs.project.patterns import lint, load_catalog
from jobs.status import FAILED, SUCCESS, new_run_id

SHOWN = 5  # added / removed matches shown with their events, per pattern
IGNORED = ("match_id", "pattern_version", "run_id")  # differ between versions by design
SLOWER = 3.0  # warn when the new version's time or work is this many times the base's ...
SLOWER_SECONDS = 5.0  # ... and its time this much more
NEAR_CAP = 0.5  # warn when a window's peak work reaches this share of the profile's cap


def pr_check(spark, profile: Profile, root: Path | None = None, base_ref: str | None = None,
             scratch: Path | None = None, sample: bool | None = None, charts: Path | None = None,
             echo=say, changes: Changes | None = None, shown: int = SHOWN) -> PrCheck:
    """Find, validate and run what changed since ``base_ref`` in a scratch lake (a
    temporary folder, removed afterwards, unless ``scratch`` names one); ``sample``: read
    the profile's lake sample (default: when the profile names ``pr_check.sample``);
    ``shown``: how many added and removed matches per pattern keep their rows."""
    t0 = time.perf_counter()
    root = root or current_project().root
    changes = changes or find_changes(root, base_ref)
    diffs = [PatternDiff(c) for c in changes.changed_patterns]
    models = [ModelDiff(m) for m in changes.affected_models]
    if not diffs and not models:
        return PrCheck(changes, "nothing run", [], [], seconds=time.perf_counter() - t0)
    _validate(root, diffs)
    own = scratch is None
    folder = Path(scratch or tempfile.mkdtemp(prefix="ses-pr-check-"))
    try:
        check = _run(spark, profile, root, changes, diffs, models, folder,
                     profile.pr_sample is not None if sample is None else sample, shown, echo)
        check.scratch = str(folder)
        if charts is not None:

            draw(check, charts)
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    check.seconds = time.perf_counter() - t0
    return check


def _validate(root: Path, diffs: list[PatternDiff]) -> None:
    """``validate`` on the new versions: parse, schema, name clashes, examples."""
    heads = {str(root / d.change.head.path): d for d in diffs if d.change.head is not None}
    if not heads:
        return
    _, problems, _ = lint([Path(p) for p in heads], current_project().sources_file)
    for p in problems:
        d = heads.get(str(Path(p.path))) or heads.get(str(root / p.path))
        if d is not None:
            d.problems.append(f"line {p.line}: {p.message}" if p.line else p.message)
    for d in diffs:
        if d.change.status == INVALID and not d.problems:
            d.problems.append(d.change.head.error or "does not parse")


def _run(spark, profile, root, changes, diffs, models, folder: Path, sample: bool,
         shown: int, echo) -> PrCheck:
    base_src = folder / "base_src"
    for rel, text in changes.base_files.items():
        (base_src / rel).parent.mkdir(parents=True, exist_ok=True)
        (base_src / rel).write_text(text, encoding="utf-8")
    runnable = [d for d in diffs if not d.problems]
    base_runs = [(d, path, _load(path)) for d in runnable
                 if d.change.status in (CHANGED, REMOVED)
                 for path in [base_src / d.change.base.path]]
    head_runs = [(d, path, _load(path)) for d in runnable
                 if d.change.status in (CHANGED, ADDED)
                 for path in [root / d.change.head.path]]
    needed = _needed_models(models, base_src / "models", root / "models")
    changed_names = {d.change.name for d in diffs}
    parents = _parent_patterns(needed, root, changed_names)
    sources = {p.source for _, _, p in base_runs + head_runs} \
        | {p.source for _, p in parents} | (_tables(needed, "events_") & set(load_sources()))
    lakes = {side: folder / side for side in ("shared", "base", "head")}
    scratch = {side: replace(profile, lake=str(path), site=None, landing=str(current_project().landing))
               for side, path in lakes.items()}
    run_id = new_run_id()
    logical_date = date.today().isoformat()
    data, bad = _load_events(spark, profile, scratch["shared"], sorted(sources), sample,
                             run_id, echo)
    for path, pattern in parents:  # unchanged patterns that a changed model reads
        _run_side(spark, scratch["shared"], path, pattern, run_id, logical_date, bad, echo)
    for side in ("base", "head"):
        _link(lakes["shared"], lakes[side])
    for d, path, pattern in base_runs:
        echo(f"pr-check: {d.change.name}, base version")
        d.before = _run_side(spark, scratch["base"], path, pattern, run_id, logical_date, bad,
                             echo)
    for d, path, pattern in head_runs:
        echo(f"pr-check: {d.change.name}, new version")
        d.after = _run_side(spark, scratch["head"], path, pattern, run_id, logical_date, bad,
                            echo)
    for d in diffs:
        _compare(d, profile.max_matches_per_window, shown)
    _run_models(spark, models, needed, scratch, base_src / "models", root / "models", echo)
    events = _shown_events(scratch["shared"], diffs)
    return PrCheck(changes, data, diffs, models, events)


# -- data ---------------------------------------------------------------------------------
def _load_events(spark, profile: Profile, shared: Profile, sources: list[str], sample: bool,
                 run_id: str, echo) -> tuple[str, dict[str, str]]:
    """The events every run reads, in the shared scratch lake; returns (what they are, in
    words; {source: why it has none})."""

    ctx = RunContext.start(shared, run_id)
    if not sample:
        _, bad = ingest_sources(spark, ctx, sources, echo)
        return (f"the committed data ({current_project().relative(current_project().landing)}: "
                f"{', '.join(sources) or 'no source'})", bad)
    known, bad = load_sources(), {}
    patterns = [p for _, p in pipeline_catalog()[1]]
    real, mine = Lake.of_profile(profile), ctx.lake
    for name in sources:
        n = copy_sample(real, real.events(name), mine, mine.events(name), profile.pr_sample)
        if n is None:
            bad[name] = f"the lake {profile.lake} has no events of {name}"
            continue
        echo(f"pr-check: sample of {name}: {n} event(s)")
        if name in known:
            stats_step(spark, ctx, name, known[name], patterns, echo)
    return (f"a sample of the lake {profile.lake}: the last {_days(profile.pr_sample)}"
            f" of events of {', '.join(sources) or 'no source'} (pr_check.sample, profile "
            f"{profile.name})", bad)


def copy_sample(real: lk.Lake, src: str, mine: lk.Lake, dst: str, span: int) -> int | None:
    """The events of ``src`` of its last ``span`` ns (back from the latest event, found in
    the Delta log's file statistics) into ``dst``, streamed batch by batch; ``src`` is only
    read. Returns the number copied (None: no table at ``src``)."""
    from datetime import timedelta

    dt = real.read_table(src)
    if dt is None:
        return None
    actions = pa.table(dt.get_add_actions(flatten=True))
    dataset = dt.to_pyarrow_dataset()
    if "max.ts" in actions.column_names:
        latest = pc.max(actions.column("max.ts")).as_py()
    else:  # a log without statistics: one pass over the time column
        latest = pc.max(dataset.to_table(columns=["ts"]).column("ts")).as_py()
    if latest is None:
        return 0
    cutoff = latest - timedelta(microseconds=span // 1000)
    keep = (pc.field("event_date") >= cutoff.date().isoformat()) \
        & (pc.field("ts") >= pa.scalar(cutoff, pa.timestamp("us", tz="UTC")))
    mine.write(dst, dataset.scanner(filter=keep).to_reader(),
               partition_by=["event_date"], mode="overwrite")
    return mine.table(dst).count()


def _days(ns: int) -> str:
    days = ns / 86400e9
    return f"{days:g} day(s)" if days >= 1 else f"{ns / 3600e9:g} hour(s)"


def _link(shared: Path, lake: Path) -> None:
    """``lake`` gets ``shared``'s events, statistics and match tables as hard links: no
    copy, and paths of its own (Delta files are never changed in place, and both sides
    only read them)."""
    import os

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:  # another file system: copy
            shutil.copy2(src, dst)

    lake.mkdir(parents=True, exist_ok=True)
    for name in ("events", "stats", "quarantine", "matches"):
        if (shared / name).is_dir():
            shutil.copytree(shared / name, lake / name, copy_function=link)


# -- patterns ------------------------------------------------------------------------------
def _load(path: Path):
    """A changed pattern file: YAML, or a ``.sql`` row pattern."""
    return load_row_pattern(path) if path.suffix == ".sql" else load_pattern(path)


def _run_side(spark, profile: Profile, path: Path, pattern, run_id: str, logical_date: str,
              bad: dict[str, str], echo) -> Side:

    if pattern.source in bad:
        return Side(FAILED, message=bad[pattern.source])
    # a report, not a night: a new version is published in its scratch lake whatever it
    # removes, so that the diff shows it (the night would hold it: docs/operations.md)
    if isinstance(pattern, RowPatternFile):
        ctx = RunContext.start(profile, run_id, logical_date)
        outcome = run_row_patterns(spark, ctx, [(path, pattern)], {}, echo)[0]
    else:
        ctx = RunContext.start(profile, run_id, logical_date, accept_changes=[pattern.name]
                               ).for_pattern(path, pattern)
        outcome = run_pattern(spark, ctx, echo=echo)  # a failure is reported, the others run
    if not outcome.ok:
        return Side(FAILED, message=outcome.message, error_type=outcome.error_type)
    table = ctx.lake.read_arrow(ctx.lake.matches(pattern.name))
    return Side(SUCCESS, outcome.record, table)


def match_key(row: dict, columns: list[str]) -> str:
    """What identifies a published match across versions: every column but the
    version-derived ones (``match_id`` hashes the version), bindings in a fixed order."""
    out = {}
    for c in columns:
        v = row[c]
        if c == "bindings" and v is not None:
            v = sorted((k, list(es)) for k, es in v)
        out[c] = v
    return json.dumps(out, sort_keys=True, default=str)


def _rows(side: Side | None) -> pa.Table | None:
    return side.matches if side is not None and side.status == SUCCESS else None


def diff_tables(before: pa.Table | None, after: pa.Table | None
                ) -> tuple[list[dict], list[dict]]:
    """(added, removed) rows between two published match tables, each sorted by start."""
    cols = [c for c in ((after or before).column_names if (after or before) is not None else [])
            if c not in IGNORED and (before is None or c in before.column_names)
            and (after is None or c in after.column_names)]
    old = {match_key(r, cols): r for r in (before.to_pylist() if before is not None else [])}
    new = {match_key(r, cols): r for r in (after.to_pylist() if after is not None else [])}

    def order(rows):
        return sorted(rows, key=lambda r: (str(r.get("start_ts")), str(r.get("bindings"))))
    return (order(r for k, r in new.items() if k not in old),
            order(r for k, r in old.items() if k not in new))


def _measure_names(change) -> tuple[str, ...]:
    """The measure columns of a changed pattern (its head's, else its base's)."""
    for side in (change.head, change.base):
        if side is not None and side.name is not None:
            if side.path.endswith(".sql"):
                try:
                    return tuple(m.name for m in parse_row_pattern(side.text, side.path).measures)
                except RowPatternError:
                    continue
            try:
                pattern = parse_pattern(side.text, side.path)
            except PatternError:
                continue
            return () if pattern.kind == "window" else pattern.measure_names
    return ()


def _months(t: pa.Table | None) -> Counter:
    if t is None or t.num_rows == 0:
        return Counter()
    column = "start_ts" if "start_ts" in t.column_names else "ts"  # ALL ROWS PER MATCH
    return Counter(v for v in pc.strftime(t.column(column), format="%Y-%m").to_pylist()
                   if v is not None)


def _compare(d: PatternDiff, cap: int, shown: int) -> None:
    before, after = _rows(d.before), _rows(d.after)
    d.warnings += _failure_warnings(d)
    if before is None and after is None:
        return
    added, removed = diff_tables(before, after)
    d.n_added, d.n_removed = len(added), len(removed)
    d.added, d.removed = added[:shown], removed[:shown]
    measures = _measure_names(d.change)
    for row in d.added + d.removed if measures else []:  # shown with each match
        row["measures"] = {n: row[n] for n in measures if n in row}
    b, a = _months(before), _months(after)
    d.months = [(m, b.get(m, 0), a.get(m, 0)) for m in sorted(set(b) | set(a))]
    if d.after is not None and d.after.status == SUCCESS:
        d.warnings += list(d.after.row.get("warnings") or [])
        d.warnings += _slower(d.before.row if d.before and d.before.status == SUCCESS else None,
                              d.after.row)
        peak = d.after.row.get("peak") or 0
        if peak >= NEAR_CAP * cap:
            d.warnings.append(f"one window holds {peak:,} {d.after.row.get('work_item') or 'work items'}"
                              f", {peak / cap:.0%} of match.max_matches_per_window ({cap:,}): "
                              "a denser night can reach the cap and fail the run")


def _failure_warnings(d: PatternDiff) -> list[str]:
    out = []
    for label, side in (("base", d.before), ("new", d.after)):
        if side is None or side.status != FAILED:
            continue
        cap = side.error_type in FINAL_TYPES
        what = "window cap reached" if cap else "run failed"
        out.append(f"{what} ({label} version): {side.message}")
    return out


def _slower(before: dict | None, after: dict) -> list[str]:
    """A new version much slower than the base's: by matching time, and by the matcher's
    work counter (the same on every machine)."""
    if before is None:
        return []
    out = []
    b, a = before.get("match_seconds") or 0.0, after.get("match_seconds") or 0.0
    if a >= SLOWER * max(b, 0.001) and a - b >= SLOWER_SECONDS:
        out.append(f"matching takes {a:.1f} s, {a / max(b, 0.001):.1f}x the base's {b:.1f} s")
    bw, aw = before.get("work") or 0, after.get("work") or 0
    if bw and aw >= SLOWER * bw:
        out.append(f"the matcher's work is {aw / bw:.1f}x the base's ({aw:,} vs {bw:,})")
    return out


def _shown_events(profile: Profile, diffs: list[PatternDiff]) -> dict:
    """Time and type of every event of a shown match, from the shared events."""

    wanted: dict[str, set[str]] = {}
    for d in diffs:
        source = _source_of(d)
        for row in d.added + d.removed:
            ids = {e for _, es in row.get("bindings") or [] for e in es}
            wanted.setdefault(source, set()).update(ids)
    out = {}
    known = load_sources()
    lake = Lake.of_profile(profile)
    for source, ids in wanted.items():
        path = lake.events(source)
        if not ids or source is None or not lake.exists(path):
            continue
        label = known[source].type_column if source in known else None
        cols = ["event_id", "ts"] + ([label] if label else [])
        for e in lake.table(path).to_pyarrow_dataset().to_table(
                columns=cols, filter=pc.field("event_id").isin(sorted(ids))).to_pylist():
            out[e["event_id"]] = (e["ts"], str(e.get(label) or "") if label else "")
    return out


def _source_of(d: PatternDiff) -> str | None:
    for side in (d.after, d.before):
        if side is not None and side.row.get("source"):
            return side.row["source"]
    return None


# -- models ---------------------------------------------------------------------------------
def _needed_models(models: list[ModelDiff], *folders: Path) -> dict[Path, dict]:
    """Per models folder: the affected models it has and every model they read, in
    dependency order, name -> ``Model`` (None: a file that does not load; its run
    reports why)."""

    affected = {m.change.name for m in models}
    out = {}
    for folder in folders:
        if not folder.is_dir():
            out[folder] = {}
            continue
        try:
            every = {m.name: m for m in load_models(folder)}
        except Exception:  # noqa: BLE001 - one broken file: each affected model on its own
            out[folder] = {n: _try(load_model, folder / f"{n}.sql") for n in sorted(affected)}
            continue
        keep = set()
        todo = [n for n in affected if n in every]
        while todo:
            n = todo.pop()
            if n not in keep:
                keep.add(n)
                todo += [d for d in every[n].depends_on if d in every]
        out[folder] = {n: m for n, m in every.items() if n in keep}
    return out


def _try(load, path: Path):
    try:
        return load(path)
    except Exception:  # noqa: BLE001 - reported when the model runs
        return None


def _tables(needed: dict[Path, dict], prefix: str) -> set[str]:
    """The names after ``prefix`` of the views the needed models read."""
    return {t[len(prefix):] for models in needed.values() for m in models.values()
            if m is not None for t in m.tables if t.startswith(prefix)}


def _parent_patterns(needed: dict[Path, dict], root: Path, changed: set[str]) -> list:
    """The unchanged patterns whose matches the needed models read (run once, shared)."""

    wanted = _tables(needed, "matches_") - changed
    if not wanted:
        return []
    return [(p, pattern) for p, pattern in load_catalog(folder=root / "patterns").patterns
            if pattern.name in wanted]


def _run_models(spark, models: list[ModelDiff], needed: dict[Path, dict],
                scratch: dict[str, Profile], base_folder: Path, head_folder: Path,
                echo) -> None:

    if not models:
        return
    results = {}
    for side, folder in (("base", base_folder), ("head", head_folder)):
        select = list(needed.get(folder) or {})
        lake = Lake.of_profile(scratch[side])
        try:
            rows = {r["model"]: r for r in run_models(spark, lake, select, folder, echo=echo)} \
                if select else {}
        except ModelError as exc:  # a model file that cannot run: every affected one fails
            rows = {n: {"model": n, "status": FAILED, "message": str(exc)} for n in select}
        tables = {n: lake.read_arrow(lake.model(n)) for n, r in rows.items()
                  if r.get("status") == SUCCESS}
        results[side] = (rows, tables)
    for m in models:
        m.before = results["base"][0].get(m.change.name)
        m.after = results["head"][0].get(m.change.name)
        old, new = results["base"][1].get(m.change.name), results["head"][1].get(m.change.name)
        added, removed = _row_diff(old, new)
        m.n_added, m.n_removed = len(added), len(removed)
        m.added, m.removed = added[:SHOWN], removed[:SHOWN]


def _row_diff(before: pa.Table | None, after: pa.Table | None) -> tuple[list[dict], list[dict]]:
    """Rows of a model added and removed (as a multiset: a repeated row counts per copy)."""
    def keyed(t):
        rows = t.to_pylist() if t is not None else []
        return Counter(json.dumps(r, sort_keys=True, default=str) for r in rows)
    b, a = keyed(before), keyed(after)
    added = [json.loads(k) for k in sorted((a - b).elements())]
    removed = [json.loads(k) for k in sorted((b - a).elements())]
    return added, removed
