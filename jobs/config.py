"""Reading ``conf/``: sources (schemas, landing, id rules) and pipeline profiles."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

from jobs.core.errors import InputError, UserError
from jobs.core.language.events import format_ts, parse_ts
from jobs.core.language.pattern import parse_duration

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
REFERENCES = CONF / "reference"  # reference tables: conf/reference/<name>.csv
KINDS = ("string", "integer", "double", "number", "timestamp")
FORMATS = ("csv", "jsonl", "parquet")


NS_MIN, NS_MAX = -(2**63) + 1, 2**63 - 1


@dataclass(frozen=True)
class TimeRange:
    """Accepted event timestamps [low, high] in ns (``conf/pipeline.yaml``: ``ingest``)."""

    low: int = NS_MIN
    high: int = NS_MAX
    setting: str = "the range of 64-bit nanosecond timestamps"

    def describe(self) -> str:
        return f"{format_ts(self.low)[:10]} .. {format_ts(self.high)[:19]} ({self.setting})"


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


class ConfigError(UserError, ValueError):
    """A configuration file that cannot be used; the message names file and entry."""


@dataclass(frozen=True)
class Source:
    name: str
    columns: dict[str, str]
    time_column: str = "ts"
    id_column: str | None = "event_id"  # None: ids from the content hash rule
    landing: str | None = None
    format: str = "csv"
    description: str = ""

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


@dataclass(frozen=True)
class Profile:
    name: str
    landing: str
    lake: str
    spark_master: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    allowed_lateness: int = 0  # ns
    slice_length: int = 90 * 86400 * 10**9
    max_partition_events: int = 1_000_000
    max_matches_per_window: int = 1_000_000
    memory_budget: int = 2 * 1024**3  # bytes per matcher call (instances, matches, events)
    parallel_jobs: int = 2  # match jobs of patterns outside a source pass run at once
    earliest: str = "1900-01-01"  # events before this date are quarantined at ingest
    max_future: int = 86400 * 10**9  # ... and events later than now + this (ns)
    lock_dir: str | None = None  # where the lake lock lives for an object-store lake
    site: str | None = None  # the catalogue site, rebuilt after every run (None: only `docs`)
    pr_sample: int | None = None  # pr-check: the lake's last this-many ns (None: committed data)
    storage_options: dict[str, str] = field(default_factory=dict)  # delta-rs, object stores

    def ts_range(self, now=None):
        """The accepted event timestamps of this profile (``ingest`` in pipeline.yaml)."""
        now = now or datetime.now(timezone.utc)
        return TimeRange(parse_ts(self.earliest), parse_ts(now) + self.max_future,
                         f"conf/pipeline.yaml, profile {self.name}: ingest.earliest and "
                         "ingest.max_future")

    def limits_hint(self) -> str:
        """Where a run's matching limits are set, for an error that reaches one."""
        return (f"match.max_matches_per_window and match.memory_budget in conf/pipeline.yaml "
                f"(profile {self.name})")


def _resolve(path: str) -> str:
    if "://" in path or os.path.isabs(path):
        return path
    return str(ROOT / path)


def load_sources(path: Path | None = None) -> dict[str, Source]:
    path = path or CONF / "sources.yaml"
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    out = {}
    for name, spec in (doc.get("sources") or {}).items():
        spec = dict(spec or {})
        columns = dict(spec.get("columns") or {})
        bad = {c: k for c, k in columns.items() if k not in KINDS}
        if bad:
            raise ConfigError(f"{path}: source {name!r}: unknown column kinds {bad} "
                              f"(use {', '.join(KINDS)})")
        fmt = spec.get("format", "csv")
        if fmt not in FORMATS:
            raise ConfigError(f"{path}: source {name!r}: format {fmt!r} (use {', '.join(FORMATS)})")
        id_spec = spec.get("id") or {"column": spec.get("id_column", "event_id")}
        if "column" in id_spec:
            id_column = id_spec["column"]
        elif id_spec.get("rule") == "content_hash":
            id_column = None
        else:
            raise ConfigError(f"{path}: source {name!r}: id must be {{column: NAME}} or "
                              "{rule: content_hash}")
        time_column = spec.get("time_column", "ts")
        reserved = {"event_date", "source_file", "ingest_run", "ingested_at", "event_id", "ts"}
        clash = [c for c in columns if c in reserved
                 and not (c == "event_id" and id_column == c) and not (c == "ts" and time_column == c)]
        if clash:
            raise ConfigError(f"{path}: source {name!r}: column(s) {clash} clash with the "
                              "columns ingestion adds (event_id, ts, event_date, source_file, "
                              "ingest_run, ingested_at); rename them")
        if columns and time_column not in columns:
            raise ConfigError(f"{path}: source {name!r}: time column {time_column!r} is not "
                              "among its columns")
        out[name] = Source(name=name, columns=columns, time_column=time_column,
                           id_column=id_column, landing=spec.get("landing"), format=fmt,
                           description=spec.get("description", ""))
    return out


UNITS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "k": 1024, "m": 1024**2,
         "g": 1024**3}


def parse_bytes(text) -> int:
    """``'2GB'``, ``'512mb'``, ``'1g'`` or a number of bytes -> bytes."""
    import re

    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in UNITS or len(m.group(1)) > 15:
        raise InputError(f"bad size {text!r}: write e.g. 2GB or 512MB")
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


def load_profile(name: str | None = None, path: Path | None = None) -> Profile:
    name = name or os.environ.get("SES_PROFILE", "local")
    path = path or Path(os.environ.get("SES_PIPELINE_CONF", CONF / "pipeline.yaml"))
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    profiles = doc.get("profiles") or {}
    if name not in profiles:
        raise ConfigError(f"{path}: no profile {name!r} (profiles: {', '.join(profiles)})")
    spec = profiles[name]
    spark = spec.get("spark") or {}
    match = spec.get("match") or {}
    ingest = spec.get("ingest") or {}
    sample = (spec.get("pr_check") or {}).get("sample")
    return Profile(
        name=name,
        landing=_resolve(spec["landing"]),
        lake=_resolve(spec["lake"]),
        spark_master=spark.get("master", "local[*]"),
        spark_conf={k: str(v) for k, v in (spark.get("conf") or {}).items()},
        allowed_lateness=parse_duration(match.get("allowed_lateness", "0s")),
        slice_length=parse_duration(match.get("slice_length", "90d")),
        max_partition_events=int(match.get("max_partition_events", 1_000_000)),
        max_matches_per_window=int(match.get("max_matches_per_window", 1_000_000)),
        memory_budget=_setting(path, name, "match.memory_budget", parse_bytes,
                               match.get("memory_budget", "2GB")),
        parallel_jobs=_setting(path, name, "match.parallel_jobs", _positive,
                               match.get("parallel_jobs", 2)),
        earliest=_setting(path, name, "ingest.earliest", _date_text,
                          ingest.get("earliest", "1900-01-01")),
        max_future=_setting(path, name, "ingest.max_future", parse_duration,
                            ingest.get("max_future", "1d")),
        lock_dir=spec.get("lock_dir"),
        site=_resolve(spec["site"]) if spec.get("site") else None,
        pr_sample=_setting(path, name, "pr_check.sample", parse_duration, sample)
        if sample else None,
        storage_options={str(k): _setting(path, name, f"storage_options.{k}", _expand, v)
                         for k, v in (spec.get("storage_options") or {}).items()},
    )


def _expand(value) -> str:
    """A storage option's value, with ``${NAME}`` replaced by the environment variable
    (credentials stay out of the file)."""
    def var(m: re.Match) -> str:
        if m.group(1) not in os.environ:
            raise InputError(f"the environment variable {m.group(1)} is not set")
        return os.environ[m.group(1)]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", var, str(value))


def _date_text(value) -> str:
    from datetime import date

    return date.fromisoformat(str(value)).isoformat()


def _positive(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{value!r} is not a whole number of at least 1")
    return value


def _setting(path, profile: str, key: str, parse, value):
    try:
        return parse(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: profile {profile!r}: {key}: {exc}") from None
