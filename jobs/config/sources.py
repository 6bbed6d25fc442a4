"""The event sources of ``conf/sources.yaml``: each one's schema (column -> kind), where its
raw files land, their format, its time column and id rule."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from jobs.config.project import current_project
from jobs.config.strict import ANY, EACH, FREE, ConfigError, parse, read_text
from jobs.core.language.pattern import parse_duration

KINDS = ("string", "integer", "double", "number", "timestamp")
FORMATS = ("csv", "jsonl", "parquet")

TYPE_COLUMNS = ("event_type", "type", "activity", "event", "kind")  # in order of preference
KEY_COLUMNS = ("patient", "person", "case", "pid", "customer", "user", "id")


def pick_column(columns: dict[str, str], names) -> str | None:
    """The first of ``names`` that is a text or integer column of ``columns``."""
    usable = [c for c, kind in columns.items() if kind in ("string", "integer")]
    return next((c for c in names if c in usable), None)


def type_column(columns: dict[str, str], key: str | None = None) -> str | None:
    """The column that tells events apart (their type), the one rule for the scaffold,
    the catalogue and pr-check: the first of ``TYPE_COLUMNS`` holding text or integers,
    else the first text column other than ``key``."""
    return pick_column(columns, TYPE_COLUMNS) or next(
        (c for c, k in columns.items() if k == "string" and c != key), None)


@dataclass(frozen=True)
class Freshness:
    """A source's ``freshness: {warn_after: 2d, error_after: 7d}`` (ns; None: no such
    threshold), as dbt's source freshness: how long the source may go without a new
    landing file or a newer event before the night warns, or fails."""

    warn_after: int | None = None
    error_after: int | None = None


@dataclass(frozen=True)
class Source:
    name: str
    columns: dict[str, str]
    time_column: str = "ts"
    id_column: str | None = "event_id"  # None: ids from the content hash rule
    landing: str | None = None
    format: str = "csv"
    description: str = ""
    freshness: Freshness | None = None  # None: not checked

    @property
    def id_rule(self) -> str:
        return "column" if self.id_column else "content_hash"

    @property
    def attributes(self) -> dict[str, str]:
        """The columns a pattern can read: all but the id and the time column."""
        return {c: k for c, k in self.columns.items() if c not in (self.id_column, self.time_column)}

    @property
    def type_column(self) -> str | None:
        attrs = self.attributes
        return type_column(attrs, pick_column(attrs, KEY_COLUMNS))


SOURCE_KEYS = {"description": ANY, "landing": ANY, "format": ANY, "time_column": ANY,
               "id": {"column", "rule"}, "id_column": ANY, "columns": FREE,
               "freshness": {"warn_after", "error_after"}}
SOURCES_SHAPE = {"sources": {EACH: SOURCE_KEYS}}


def load_sources(path: Path | None = None) -> dict[str, Source]:
    """The sources of ``conf/sources.yaml`` (``path``: another file), checked strictly.
    The same text is parsed once per process (a night asks for the sources in each of
    its steps: 14 ms a parse); an edited file is read again."""
    path = path or current_project().sources_file
    return dict(_sources(path, read_text(path)))


@lru_cache(maxsize=32)
def _sources(path: Path, text: str) -> dict[str, Source]:
    doc, lines = parse(path, text, SOURCES_SHAPE)
    out = {}
    for name, spec in (doc.get("sources") or {}).items():
        where = f"{path}:{lines.get(('sources', name), 1)}: source {name!r}"
        spec = dict(spec or {})
        columns = dict(spec.get("columns") or {})
        bad = {c: k for c, k in columns.items() if k not in KINDS}
        if bad:
            raise ConfigError(f"{where}: unknown column kinds {bad} (use {', '.join(KINDS)})")
        fmt = spec.get("format", "csv")
        if fmt not in FORMATS:
            raise ConfigError(f"{where}: format {fmt!r} (use {', '.join(FORMATS)})")
        id_spec = spec.get("id") or {"column": spec.get("id_column", "event_id")}
        if "column" in id_spec:
            id_column = id_spec["column"]
        elif id_spec.get("rule") == "content_hash":
            id_column = None
        else:
            raise ConfigError(f"{where}: id must be {{column: NAME}} or {{rule: content_hash}}")
        time_column = spec.get("time_column", "ts")
        reserved = {"event_date", "source_file", "ingest_run", "ingested_at", "event_id", "ts"}
        clash = [c for c in columns if c in reserved
                 and not (c == "event_id" and id_column == c) and not (c == "ts" and time_column == c)]
        if clash:
            raise ConfigError(f"{where}: column(s) {clash} clash with the columns ingestion "
                              "adds (event_id, ts, event_date, source_file, ingest_run, "
                              "ingested_at); rename them")
        if columns and time_column not in columns:
            raise ConfigError(f"{where}: time column {time_column!r} is not among its columns")
        fresh = None
        if spec.get("freshness") is not None:
            fresh = _freshness(spec["freshness"], where, lines.get(
                ("sources", name, "freshness")), path)
        out[name] = Source(name=name, columns=columns, time_column=time_column,
                           id_column=id_column, landing=spec.get("landing"), format=fmt,
                           description=spec.get("description", ""), freshness=fresh)
    return out


def _freshness(spec, where: str, line: int | None, path: Path) -> Freshness:
    """``freshness: {warn_after: 2d, error_after: 7d}``: at least one, each a duration,
    the warning before the error."""
    at = f"{path}:{line}: {where.split(': ', 1)[1]}" if line else where
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(f"{at}: freshness must be a mapping, e.g. "
                          "{warn_after: 2d, error_after: 7d}")
    out = {}
    for key in ("warn_after", "error_after"):
        if spec.get(key) is None:
            continue
        try:
            out[key] = parse_duration(spec[key])
        except ValueError as exc:
            raise ConfigError(f"{at}: freshness.{key}: {exc}") from None
        if out[key] <= 0:
            raise ConfigError(f"{at}: freshness.{key} must be longer than 0")
    if "warn_after" in out and "error_after" in out and out["warn_after"] > out["error_after"]:
        raise ConfigError(f"{at}: freshness.warn_after ({spec['warn_after']}) is longer than "
                          f"error_after ({spec['error_after']}): the warning comes first")
    return Freshness(**out)
