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
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import current_project, load_sources
from jobs.lake import store as lk
from jobs.project.models import ModelError, load_models
from jobs.project.patterns import load_catalog, pattern_paths

SHOWN_MATCHES = 5  # matches drawn on a pattern's timeline
TOP_TYPES = 25  # event types listed per source


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


def _month_counts(t: pa.Table) -> list[tuple[str, int]]:
    if t.num_rows == 0:
        return []
    months = pc.strftime(t.column("start_ts"), format="%Y-%m")
    counts = pc.value_counts(months).to_pylist()
    return sorted((c["values"], c["counts"]) for c in counts)


class SourceEvents:
    """Each source's events as the site needs them (id, time, type), read once per build:
    opening and scanning a large events table per pattern cost a second each."""

    def __init__(self, lake: lk.Lake):
        self.lake, self.sources, self._tables = lake, load_sources(), {}

    def type_column(self, source: str) -> str | None:
        s = self.sources.get(source)
        return s.type_column if s else None

    def table(self, source: str) -> pa.Table | None:
        """The events of ``source`` (None: no table yet); raises ``BrokenTable``."""
        if source not in self._tables:
            label = self.type_column(source)
            self._tables[source] = self.lake.read_arrow(
                self.lake.events(source), columns=["event_id", "ts"] + ([label] if label else []))
        return self._tables[source]


def _shown_matches(events: SourceEvents, pattern, t: pa.Table) -> list[dict]:
    """The first matches (by start) with their events: (variable, time, id, label)."""
    if t.num_rows == 0:
        return []
    table = events.table(pattern.source)
    if table is None:
        return []
    first = t.sort_by([("start_ts", "ascending"), ("match_id", "ascending")]) \
        .slice(0, SHOWN_MATCHES).to_pylist()
    ids = sorted({e for m in first for _, es in m["bindings"] for e in es})
    label = events.type_column(pattern.source)
    found = table.filter(pc.is_in(table.column("event_id"), pa.array(ids, pa.string())))
    by_id = {e["event_id"]: e for e in found.to_pylist()}
    out = []
    for m in first:
        marks = [(var, by_id[e]["ts"], e, str(by_id[e].get(label) or "") if label else "")
                 for var, es in m["bindings"] for e in es if e in by_id]
        out.append({"match_id": m["match_id"], "start": m["start_ts"], "end": m["end_ts"],
                    "events": sorted(marks, key=lambda x: (x[1], x[2]))})
    return out


def _pattern_page(lake: lk.Lake, events: SourceEvents, path: Path, pattern,
                  runs: list[dict]) -> PatternPage:
    page = PatternPage(pattern.name, _rel(path), path.read_text(encoding="utf-8"), pattern,
                       description=pattern.description or "", version=pattern.version)
    page.runs = [r for r in runs if r["pattern"] == pattern.name]
    try:
        _fill_pattern_page(lake, events, pattern, page)
    except (lk.BrokenTable, FileNotFoundError) as exc:
        page.problems = [str(exc)]  # the page says so; the other pages are built
    return page


def _fill_pattern_page(lake: lk.Lake, events: SourceEvents, pattern, page: PatternPage
                       ) -> None:
    dt = lake.read_table(lake.matches(pattern.name))
    if dt is None:
        return
    page.table_version = dt.metadata().configuration.get("ses.pattern.version", "")
    schema = pa.schema(dt.schema().to_arrow())
    page.columns = [(f.name, str(f.type), (f.metadata or {}).get(b"comment", b"").decode())
                    for f in schema]
    t = dt.to_pyarrow_dataset().to_table(columns=["match_id", "start_ts", "end_ts",
                                                   "bindings"])
    page.rows = t.num_rows
    page.per_month = _month_counts(t)
    page.shown = _shown_matches(events, pattern, t)


def _rel(path: Path) -> str:
    return current_project().relative(path)


def _source_page(events: SourceEvents, name: str, source) -> SourcePage:
    columns = dict(source.columns)
    page = SourcePage(name, source.description or "", columns, type_column=source.type_column)
    try:
        t = events.table(name)
        if t is None:
            return page
    except (lk.BrokenTable, FileNotFoundError) as exc:
        page.description = f"{page.description} ({exc})".strip()
        return page
    page.events = t.num_rows
    if t.num_rows:
        lo, hi = pc.min_max(t.column("ts")).values()
        page.first, page.last = str(lo.as_py())[:19], str(hi.as_py())[:19]
    if page.type_column:
        counts = pc.value_counts(t.column(page.type_column)).to_pylist()
        page.types = sorted(((str(c["values"]), c["counts"]) for c in counts),
                            key=lambda x: (-x[1], x[0]))[:TOP_TYPES]
    return page


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


def gather(lake: lk.Lake) -> SiteContent:
    """Everything the site shows, for the lake and the project's files."""
    runs_t = lake.read_arrow(lake.runs())
    runs = sorted(runs_t.to_pylist(), key=lambda r: (str(r["started_at"]), r["pattern"])) \
        if runs_t is not None else []
    catalog = load_catalog(pattern_paths())
    events = SourceEvents(lake)
    pages = [_pattern_page(lake, events, p, pattern, runs) for p, pattern in catalog.patterns]
    for r in catalog.rejected:
        pages.append(PatternPage(r.name, _rel(r.path), r.path.read_text(encoding="utf-8"),
                                 None, problems=[str(p) for p in r.problems]))
    sources = [_source_page(events, name, s) for name, s in events.sources.items()]
    return SiteContent(lake.root, lake.local_home(), sorted(pages, key=lambda p: p.name), sources,
                     _model_pages(lake), latest_validations(lake.local_home()), runs)
