"""What the catalogue site shows, gathered from the pattern files, the models, the sources
and the lake (delta-rs and Arrow only: building the site starts no Spark).

One ``SiteContent`` per build: per pattern its file, version, description, table metadata
and columns, matches per month, a few matches with their events, and its run history;
per source its event types; per model its tables; the lineage between them; and the
latest Great Expectations result of every suite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import current_project, load_sources
from jobs.lake import store as lk
from jobs.lake.funnels import latest, read_funnels
from jobs.lake.health import FLAGGED, VOLUME
from jobs.lake.runs import read_runs
from jobs.project.models import ModelError, load_models
from jobs.project.patterns import every_pattern_path, load_catalog
from jobs.site.match_files import FileSummary, by_file, read_first, summarise_table

SHOWN_MATCHES = 5  # matches drawn on a pattern's timeline
TOP_TYPES = 25  # event types listed per source
HEALTH_NIGHTS = 60  # the nights of checks the operations page shows and draws
RUNS_SHOWN = 5000  # the newest runs rows the site lists and draws (a year's grow nightly)


@dataclass
class PatternPage:
    name: str
    path: str
    text: str
    pattern: object  # Pattern | Disjunction | WindowPattern
    problems: list[str] = field(default_factory=list)  # a file that does not load
    rows: int | None = None  # rows of its match table (None: not published yet)
    description: str = ""
    version: str = ""
    table_version: str = ""  # the version the table says it holds
    columns: list[tuple[str, str, str]] = field(default_factory=list)  # name, type, meaning
    per_month: list[tuple[str, int]] = field(default_factory=list)
    shown: list[dict] = field(default_factory=list)  # {match_id, start, events: [(var, ts, id, label)]}
    runs: list[dict] = field(default_factory=list)


@dataclass
class SourcePage:
    name: str
    description: str
    columns: dict[str, str]
    events: int | None = None
    first: str | None = None
    last: str | None = None
    type_column: str | None = None
    types: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class ModelPage:
    name: str
    description: str
    sql: str
    reads: tuple[str, ...]
    rows: int | None = None
    columns: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class SiteContent:
    lake: str
    home: Path  # the lake's folder on this machine (the GX Data Docs are there)
    patterns: list[PatternPage]
    sources: list[SourcePage]
    models: list[ModelPage]
    quality: list[dict]
    runs: list[dict]
    health: list[dict] = field(default_factory=list)  # the recent nights' checks, oldest first
    # pattern -> its funnel rows of the recent nights (``jobs.lake.funnels``), oldest first
    funnels: dict[str, list] = field(default_factory=dict)

    def funnel(self, pattern: str) -> list:
        """The pattern's funnel of its latest run (its rows, step by step)."""
        return latest(self.funnels.get(pattern, []))

    def funnel_nights(self, pattern: str) -> list[tuple[str, list]]:
        """(logical date, the funnel rows of its latest run) of the recent nights."""
        by_day: dict[str, dict[str, list]] = {}
        for r in self.funnels.get(pattern, []):
            by_day.setdefault(r.logical_date, {}).setdefault(r.run_id, []).append(r)
        return [(d, runs[max(runs)]) for d, runs in sorted(by_day.items())]

    def latest_checks(self, check: str) -> list[dict]:
        """The newest check of each subject (freshness of each source, ...)."""
        out: dict[tuple, dict] = {}
        for c in self.health:
            if c["check"] == check:
                out[(c["subject_kind"], c["subject"])] = c
        return sorted(out.values(), key=lambda c: (c["subject_kind"], c["subject"]))

    def flagged(self, nights: int = 14) -> list[dict]:
        """The warnings and errors of the last ``nights`` logical dates, newest first."""
        days = sorted({c["logical_date"] for c in self.health})[-nights:]
        return [c for c in reversed(self.health)
                if c["logical_date"] in days and c["status"] in FLAGGED]

    def volume(self, kind: str, subject: str) -> list[dict]:
        """A subject's nightly volume checks, one per logical date (its latest run)."""
        by_day = {c["logical_date"]: c for c in self.health
                  if c["check"] == VOLUME and c["subject_kind"] == kind
                  and c["subject"] == subject}
        return [by_day[d] for d in sorted(by_day)]

    def lineage(self) -> list[tuple[str, str]]:
        """(from, to) edges: source -> pattern table -> models (by the tables they read)."""
        edges = [(f"source {p.pattern.source}", f"pattern {p.name}") for p in self.patterns
                 if p.pattern is not None]
        for m in self.models:
            for t in m.reads:
                kind, _, name = t.partition("_")
                node = {"matches": "pattern", "models": "model", "events": "source"}.get(kind)
                if node:
                    edges.append((f"{node} {name}", f"model {m.name}"))
        return edges


class SourceEvents:
    """Each source's events as the site needs them, without scanning a whole events table
    (its time would grow with the history): the bound events of a few matches from the
    days they span (partition pruning), and a source's totals from its Delta log and its
    statistics table."""

    def __init__(self, lake: lk.Lake):
        self.lake, self.sources = lake, load_sources()

    def type_column(self, source: str) -> str | None:
        s = self.sources.get(source)
        return s.type_column if s else None

    def of_matches(self, source: str, ids: list[str], spans: list[tuple],
                   attributes: tuple[str, ...] = ()) -> pa.Table | None:
        """Events ``ids`` of ``source`` with their ``attributes`` (those the source has),
        read from the days ``spans`` ((start, end) pairs) cover (None: no table yet);
        raises ``BrokenTable``."""
        days = sorted({(start + timedelta(days=k)).strftime("%Y-%m-%d")
                       for start, end in spans for k in range((end - start).days + 2)})
        label = self.type_column(source)
        if not self.lake.exists(self.lake.events(source)):
            return None
        known = dict(self.sources[source].columns) if source in self.sources else {}
        extra = [a for a in attributes if a in known and a not in ("event_id", "ts", label)]
        return self.lake.read_arrow(
            self.lake.events(source),
            columns=["event_id", "ts"] + ([label] if label else []) + extra,
            filter=pc.field("event_id").isin(pa.array(ids, pa.string())),
            partition_filters=[("event_date", "in", days)] if days else None)


def _shown_matches(events: SourceEvents, pattern, t: pa.Table) -> list[dict]:
    """The first matches (by start) with their events: (variable, time, id, label)."""
    if t.num_rows == 0:
        return []
    first = t.sort_by([("start_ts", "ascending"), ("match_id", "ascending")]) \
        .slice(0, SHOWN_MATCHES).to_pylist()
    ids = sorted({e for m in first for _, es in m["bindings"] for e in es})
    spans = [(m["start_ts"], m["end_ts"]) for m in first]  # its bound events lie in it
    shown_attrs = tuple(sorted(a for a in pattern.attributes
                               if not a.startswith("__") and a != "ts"))
    found = events.of_matches(pattern.source, ids, spans, shown_attrs)
    if found is None:
        return []
    label = events.type_column(pattern.source)
    by_id = {e["event_id"]: e for e in found.to_pylist()}
    out = []
    for m in first:
        marks = [(var, _utc(by_id[e]["ts"]), e, str(by_id[e].get(label) or "") if label else "")
                 for var, es in m["bindings"] for e in es if e in by_id]
        values = {e: ", ".join(f"{a} = {by_id[e][a]}" for a in shown_attrs
                               if a in by_id[e] and a != label and by_id[e][a] is not None)
                  for _, es in m["bindings"] for e in es if e in by_id}
        out.append({"match_id": m["match_id"], "start": _utc(m["start_ts"]),
                    "end": _utc(m["end_ts"]),
                    "events": sorted(marks, key=lambda x: (x[1], x[2])),
                    "values": values,
                    "measures": {n: _shown_value(m.get(n))
                                 for n in pattern.measure_names}})
    return out


def _shown_value(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def _pattern_page(lake: lk.Lake, events: SourceEvents, path: Path, pattern,
                  runs: list[dict], cache: PageCache | None = None) -> PatternPage:
    page = PatternPage(pattern.name, _rel(path), path.read_text(encoding="utf-8"), pattern,
                       description=pattern.description or "", version=pattern.version)
    page.runs = runs
    try:
        _fill_pattern_page(lake, events, pattern, page, cache)
    except (lk.BrokenTable, FileNotFoundError) as exc:
        page.problems = [str(exc)]  # the page says so; the other pages are built
    return page


def _fill_pattern_page(lake: lk.Lake, events: SourceEvents, pattern, page: PatternPage,
                       cache: PageCache | None = None) -> None:
    dt = lake.read_table(lake.matches(pattern.name))
    if dt is None:
        return
    page.table_version = dt.metadata().configuration.get("ses.pattern.version", "")
    schema = pa.schema(dt.schema().to_arrow())
    page.columns = [(f.name, str(f.type), (f.metadata or {}).get(b"comment", b"").decode())
                    for f in schema]
    key = f"{dt.version()}:{page.table_version}"
    kept = cache.get(f"pattern {pattern.name}", key) if cache is not None else None
    if kept is not None:  # the table did not change since the previous build: no read
        page.rows, page.per_month = kept["rows"], [tuple(x) for x in kept["per_month"]]
        page.shown = _shown_from_json(kept["shown"])
        return
    old = cache.previous(f"pattern {pattern.name}") if cache is not None else None
    dataset = dt.to_pyarrow_dataset()
    summary = summarise_table(dataset, _kept_files(old), SHOWN_MATCHES)
    page.rows, page.per_month = summary.rows, summary.per_month
    ids = [m for _, m in summary.first]
    if old is not None and old.get("shown_ids") == ids and "shown" in old:
        page.shown = _shown_from_json(old["shown"])  # the same first matches: their events
    else:
        shown = read_first(dataset, summary, ["match_id", "start_ts", "end_ts", "bindings",
                                              *pattern.measure_names])
        page.shown = _shown_matches(events, pattern, shown) if shown is not None else []
    if cache is not None:
        cache.keep(f"pattern {pattern.name}", key, {
            "rows": page.rows, "per_month": page.per_month, "shown": _shown_to_json(page.shown),
            "shown_ids": ids, "files": {n: f.to_json() for n, f in summary.files.items()}})


def _row_pattern_page(lake: lk.Lake, path: Path, pf, runs: list[dict]) -> PatternPage:
    """A ``.sql`` row pattern's page: its statement, its automaton, its table's columns
    and rows, its runs."""
    page = PatternPage(pf.name, _rel(path), pf.text, pf, description=pf.query.description,
                       version=pf.version)
    page.runs = runs
    try:
        dt = lake.read_table(lake.matches(pf.name))
        if dt is not None:
            schema = pa.schema(dt.schema().to_arrow())
            page.columns = [(f.name, str(f.type), "") for f in schema]
            page.rows = lake.count_rows(lake.matches(pf.name), table=dt)
    except (lk.BrokenTable, FileNotFoundError) as exc:
        page.problems = [str(exc)]
    return page


def _kept_files(old: dict | None) -> dict[str, FileSummary]:
    """The per-file summaries of the previous build (none if unreadable: all are read)."""
    try:
        return {n: FileSummary.from_json(f) for n, f in (old or {}).get("files", {}).items()}
    except (TypeError, ValueError, KeyError, AttributeError):
        return {}


class PageCache:
    """What the pages read from the lake, by each table's version, kept in the site's
    ``pages.json``: a build reads only the match and events tables that changed since the
    previous one (on a night with nothing new, none), so its time does not grow with the
    history."""

    FILE = "pages.json"

    def __init__(self, previous: Path | None):
        self.old, self.new = {}, {}
        if previous is not None and (previous / self.FILE).exists():
            try:
                self.old = json.loads((previous / self.FILE).read_text(encoding="utf-8"))
            except ValueError:  # unreadable: every table is read
                self.old = {}

    def get(self, name: str, key: str) -> dict | None:
        kept = self.old.get(name)
        if not isinstance(kept, dict) or kept.get("key") != key:
            return None
        self.new[name] = kept
        return kept

    def previous(self, name: str) -> dict | None:
        """The previous build's entry of ``name`` whatever its key (its per-file parts
        still hold for the files the table still has)."""
        kept = self.old.get(name)
        return kept if isinstance(kept, dict) else None

    def keep(self, name: str, key: str, data: dict) -> None:
        self.new[name] = {"key": key, **data}

    def write(self, folder: Path) -> None:
        (folder / self.FILE).write_text(json.dumps(self.new), encoding="utf-8")


def _shown_to_json(shown: list[dict]) -> list[dict]:
    return [{**m, "start": m["start"].isoformat(), "end": m["end"].isoformat(),
             "events": [(v, ts.isoformat(), e, label) for v, ts, e, label in m["events"]]}
            for m in shown]


def _shown_from_json(shown: list[dict]) -> list[dict]:
    return [{**m, "start": _time(m["start"]), "end": _time(m["end"]),
             "events": [(v, _time(ts), e, label) for v, ts, e, label in m["events"]]}
            for m in shown]


def _time(text: str) -> datetime:
    return _utc(datetime.fromisoformat(text))


def _utc(t: datetime) -> datetime:
    """One tzinfo object for UTC, read from Arrow or from pages.json alike (the pictures'
    digests compare them)."""
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is not None else t


def _rel(path: Path) -> str:
    return current_project().relative(path)


def _source_page(events: SourceEvents, name: str, source, cache: PageCache | None = None
                 ) -> SourcePage:
    """A source's totals from the Delta log (events, first and last time: no data file
    read) and its event types from ``stats/<source>`` (the types a pattern reads), read
    again only when the events table changed."""
    columns = dict(source.columns)
    page = SourcePage(name, source.description or "", columns, type_column=source.type_column)
    lake = events.lake
    try:
        dt = lake.read_table(lake.events(name))
        if dt is None:
            return page
        files = pa.table(dt.get_add_actions(flatten=True))
    except (lk.BrokenTable, FileNotFoundError) as exc:
        page.description = f"{page.description} ({exc})".strip()
        return page
    page.events = pc.sum(files.column("num_records")).as_py() or 0 if files.num_rows else 0
    if page.events and "min.ts" in files.column_names:
        page.first = str(pc.min(files.column("min.ts")).as_py())[:19]
        page.last = str(pc.max(files.column("max.ts")).as_py())[:19]
    if page.type_column:
        key = f"{dt.version()}:{page.type_column}"
        kept = cache.get(f"source {name}", key) if cache is not None else None
        if kept is not None:
            page.types = [tuple(x) for x in kept["types"]]
            return page
        old = cache.previous(f"source {name}") if cache is not None else None
        old_files = old.get("type_files", {}) if old and old.get("column") == page.type_column \
            and isinstance(old.get("type_files"), dict) else {}
        page.types, files = _type_counts(lake, name, page.type_column, old_files)
        if cache is not None:
            cache.keep(f"source {name}", key, {"types": page.types, "column": page.type_column,
                                               "type_files": files})
    return page


def _type_counts(lake: lk.Lake, source: str, column: str, kept: dict | None = None
                 ) -> tuple[list[tuple[str, int]], dict]:
    """The most frequent values of ``column``, from the statistics table (empty when no
    pattern reads the column, so none were computed), and the counts per data file they
    were summed from: the files in ``kept`` (of the previous build) are not read again."""
    try:
        dt = lake.read_table(lake.stats(source))
        if dt is None:
            return [], {}
        dataset = dt.to_pyarrow_dataset()

        def counts(fragment) -> dict[str, int]:
            t = fragment.to_table(columns=["attribute", "value", "events"],
                                  schema=dataset.schema)  # small: filtered here
            t = t.filter(pc.equal(t.column("attribute"), column))
            sums = t.group_by("value").aggregate([("events", "sum")]).to_pylist()
            return {str(r["value"]): int(r["events_sum"] or 0) for r in sums}

        files, _ = by_file(dataset, kept or {}, counts)
    except (lk.BrokenTable, OSError, pa.ArrowInvalid):
        return [], {}
    totals: dict[str, int] = {}
    for per_value in files.values():
        for value, n in per_value.items():
            totals[value] = totals.get(value, 0) + n
    top = sorted(totals.items(), key=lambda x: (-x[1], x[0]))[:TOP_TYPES]
    return top, files


def _model_pages(lake: lk.Lake) -> list[ModelPage]:

    try:
        models = load_models()
    except ModelError:
        return []
    out = []
    for m in models:
        page = ModelPage(m.name, m.description, m.sql, tuple(m.tables))
        try:
            dt = lake.read_table(lake.model(m.name))
            if dt is not None:
                page.rows = lake.count_rows(lake.model(m.name))
                page.columns = [(f.name, str(f.type))
                                for f in pa.schema(dt.schema().to_arrow())]
        except (lk.BrokenTable, FileNotFoundError) as exc:
            page.description = f"{page.description} ({exc})".strip()
        out.append(page)
    return out


def latest_validations(home: Path) -> list[dict]:
    """The latest Great Expectations result of each suite (``gx/uncommitted/validations``):
    suite, run name, time, success, and per expectation its type, column, success and
    unexpected count."""
    folder = home / "gx" / "uncommitted" / "validations"
    latest: dict[str, tuple[str, Path]] = {}
    for f in folder.rglob("*.json") if folder.is_dir() else []:
        suite = f.relative_to(folder).parts[0]
        stamp = f.parent.name
        if suite not in latest or stamp > latest[suite][0]:
            latest[suite] = (stamp, f)
    out = []
    for suite, (_, f) in sorted(latest.items()):
        d = json.loads(f.read_text())
        run = d.get("meta", {}).get("run_id", {})
        checks = []
        for r in d.get("results", []):
            cfg = r.get("expectation_config", {})
            kw = cfg.get("kwargs", {})
            column = kw.get("column") or "/".join(str(kw[k]) for k in ("column_A", "column_B")
                                                   if k in kw) or ", ".join(
                kw.get("column_list", []) or [])
            checks.append({"type": cfg.get("type", ""), "column": column,
                           "success": r.get("success"),
                           "unexpected": (r.get("result") or {}).get("unexpected_count"),
                           "observed": (r.get("result") or {}).get("observed_value")})
        out.append({"suite": suite, "run": run.get("run_name") or "-",
                    "time": (run.get("run_time") or "")[:19], "success": d.get("success"),
                    "checks": checks, "statistics": d.get("statistics", {})})
    return out


def _recent_runs(lake: lk.Lake) -> pa.Table | None:
    """The newest ``RUNS_SHOWN`` rows of the runs table (one column read to find them)."""
    times = read_runs(lake, columns=["started_at"])
    if times is None or times.num_rows <= RUNS_SHOWN:
        return read_runs(lake)
    cut = pc.sort_indices(times, sort_keys=[("started_at", "descending")])
    since = times.column("started_at")[cut[RUNS_SHOWN - 1].as_py()]
    return read_runs(lake, filter=pc.field("started_at") >= since)


def gather(lake: lk.Lake, cache: PageCache | None = None) -> SiteContent:
    """Everything the site shows, for the lake and the project's files; ``cache``: what
    the previous build read from the match tables (``PageCache``)."""
    runs_t = _recent_runs(lake)
    runs = sorted(runs_t.to_pylist(), key=lambda r: (str(r["started_at"]), r["pattern"])) \
        if runs_t is not None else []
    catalog = load_catalog(every_pattern_path())
    events = SourceEvents(lake)
    by_pattern: dict[str, list[dict]] = {}
    for r in runs:
        by_pattern.setdefault(r["pattern"], []).append(r)
    pages = [_pattern_page(lake, events, p, pattern, by_pattern.get(pattern.name, []), cache)
             for p, pattern in catalog.patterns]
    pages += [_row_pattern_page(lake, p, pf, by_pattern.get(pf.name, []))
              for p, pf in catalog.row_patterns]
    for r in catalog.rejected:
        pages.append(PatternPage(r.name, _rel(r.path), r.path.read_text(encoding="utf-8"),
                                 None, problems=[str(p) for p in r.problems]))
    sources = [_source_page(events, name, s, cache) for name, s in events.sources.items()]
    return SiteContent(lake.root, lake.local_home(), sorted(pages, key=lambda p: p.name), sources,
                       _model_pages(lake), latest_validations(lake.local_home()), runs,
                       _recent_checks(lake), _recent_funnels(lake))


def _recent_funnels(lake: lk.Lake) -> dict[str, list]:
    """Each pattern's funnel rows of the last ``HEALTH_NIGHTS`` logical dates."""
    t = lake.read_arrow(lake.funnels(), columns=["logical_date"])
    if t is None or t.num_rows == 0:
        return {}
    days = sorted(set(t.column("logical_date").to_pylist()))[-HEALTH_NIGHTS:]
    out: dict[str, list] = {}
    for r in read_funnels(lake, since=days[0]):
        out.setdefault(r.pattern, []).append(r)
    return out


def _recent_checks(lake: lk.Lake) -> list[dict]:
    """The checks of the last ``HEALTH_NIGHTS`` logical dates (``jobs.lake.health``)."""
    t = lake.read_arrow(lake.health(), columns=["logical_date"])
    if t is None or t.num_rows == 0:
        return []
    days = sorted(set(t.column("logical_date").to_pylist()))[-HEALTH_NIGHTS:]
    rows = lake.read_arrow(lake.health(), filter=pc.field("logical_date") >= days[0])
    return sorted(rows.to_pylist(), key=lambda c: (str(c["checked_at"]), c["subject"]))
