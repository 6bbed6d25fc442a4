"""The pipeline's profiles (``conf/pipeline.yaml``): where the landing files and the lake
are, the Spark settings, the ingest range and the matching limits of each. Every setting's
default is the ``Profile`` field's, written once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

from jobs import environment
from jobs.config.project import Project, current_project
from jobs.config.strict import ANY, EACH, FREE, ConfigError, read
from jobs.core.engine.options import DEFAULT_MAX_MATCHES, DEFAULT_MEMORY_BUDGET, MatchOptions
from jobs.core.errors import InputError
from jobs.core.language.events import format_ts, parse_ts
from jobs.core.language.pattern import parse_duration

NS_MIN, NS_MAX = -(2**63) + 1, 2**63 - 1


@dataclass(frozen=True)
class TimeRange:
    """Accepted event timestamps [low, high] in ns (``conf/pipeline.yaml``: ``ingest``)."""

    low: int = NS_MIN
    high: int = NS_MAX
    setting: str = "the range of 64-bit nanosecond timestamps"

    def describe(self) -> str:
        return f"{format_ts(self.low)[:10]} .. {format_ts(self.high)[:19]} ({self.setting})"


@dataclass(frozen=True)
class EmailSettings:
    """Where a night's alerts go by email (``alerts.email``): an SMTP server and the
    addresses; the password only from an environment variable (``${NAME}``)."""

    host: str
    to: tuple[str, ...]
    port: int = 25
    sender: str = "ses-pipeline@localhost"
    user: str | None = None
    password: str | None = None
    starttls: bool = False


@dataclass(frozen=True)
class AlertSettings:
    """A profile's ``alerts``: where alerts go (webhooks, email; ``SES_ALERT_WEBHOOK`` is
    always one more webhook) and the volume rule's settings (docs/operations.md, "What
    the night tells you")."""

    webhooks: tuple[str, ...] = ()
    email: EmailSettings | None = None
    nights: int = 28  # the volume rule's history: this many earlier nights
    min_nights: int = 7  # no volume flag before a subject has this many nights
    threshold: float = 5.0  # flagged beyond this many robust deviations from the median
    max_removed: float = 0.5  # a new pattern version removing more of its table is held

    @property
    def targets(self) -> tuple[str, ...]:
        """The webhooks: the profile's and ``SES_ALERT_WEBHOOK``'s."""
        env = environment.get("SES_ALERT_WEBHOOK")
        return self.webhooks + ((env,) if env and env not in self.webhooks else ())


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
    max_matches_per_window: int = DEFAULT_MAX_MATCHES
    memory_budget: int = DEFAULT_MEMORY_BUDGET  # bytes per matcher call: instances, matches, events
    parallel_jobs: int = 2  # match jobs of patterns outside a source pass run at once
    funnels: bool = True  # each run counts its patterns' funnels (the ``funnels`` table)
    earliest: str = "1900-01-01"  # events before this date are quarantined at ingest
    max_future: int = 86400 * 10**9  # ... and events later than now + this (ns)
    lock_dir: str | None = None  # where the lake lock lives for an object-store lake
    site: str | None = None  # the catalogue site, rebuilt after every run (None: only `docs`)
    pr_sample: int | None = None  # pr-check: the lake's last this-many ns (None: committed data)
    storage_options: dict[str, str] = field(default_factory=dict)  # delta-rs, object stores
    maintain_every: int = 7 * 86400 * 10**9  # ns between two table maintenances (0: never)
    retention: int = 7 * 86400 * 10**9  # VACUUM keeps what a snapshot this recent needs (ns)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    lineage_url: str | None = None  # OpenLineage over HTTP, beside the files in <lake>/_lineage/

    def ts_range(self, now=None):
        """The accepted event timestamps of this profile (``ingest`` in pipeline.yaml)."""
        now = now or datetime.now(timezone.utc)
        return TimeRange(parse_ts(self.earliest), parse_ts(now) + self.max_future,
                         f"conf/pipeline.yaml, profile {self.name}: ingest.earliest and "
                         "ingest.max_future")

    def match_options(self) -> MatchOptions:
        """The engine's options of this profile's runs: its two limits, and where they are
        set (named in the error that reaches one)."""
        return MatchOptions(max_matches_per_window=self.max_matches_per_window,
                            memory_budget=self.memory_budget, limits=self.limits_hint(),
                            funnel=self.funnels)

    def limits_hint(self) -> str:
        """Where a run's matching limits are set, for an error that reaches one."""
        return (f"match.max_matches_per_window and match.memory_budget in conf/pipeline.yaml "
                f"(profile {self.name})")


UNITS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "k": 1024, "m": 1024**2,
         "g": 1024**3}


def parse_bytes(text) -> int:
    """``'2GB'``, ``'512mb'``, ``'1g'`` or a number of bytes -> bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in UNITS or len(m.group(1)) > 15:
        raise InputError(f"bad size {text!r}: write e.g. 2GB or 512MB")
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


PROFILE_KEYS = {
    "landing": ANY, "lake": ANY, "site": ANY, "lock_dir": ANY, "storage_options": FREE,
    "spark": {"master": ANY, "conf": FREE},
    "ingest": {"earliest", "max_future"},
    "match": {"allowed_lateness", "slice_length", "max_partition_events",
              "max_matches_per_window", "memory_budget", "parallel_jobs", "funnels"},
    "pr_check": {"sample"},
    "maintenance": {"every", "retention"},
    "lineage": {"url"},
    "alerts": {"webhooks": ANY, "email": {"host", "port", "sender", "to", "user", "password",
                                          "starttls"},
               "nights": ANY, "min_nights": ANY, "threshold": ANY,
               "max_removed": ANY},
}
PIPELINE_SHAPE = {"airflow": {"schedule", "start_date", "retries", "retry_delay_minutes"},
                  "profiles": {EACH: PROFILE_KEYS}}
DEFAULTS = Profile("", "", "", "local[*]")  # every setting's default, written once: here


def load_profile(name: str | None = None, path: Path | None = None,
                 project: Project | None = None) -> Profile:
    """A profile of ``conf/pipeline.yaml`` (``name``: else ``SES_PROFILE``, else ``local``),
    every key checked and every value parsed: a ``ConfigError`` with ``path:line`` for
    anything that cannot be used. Relative paths are relative to the project."""
    project = project or current_project()
    name = name or environment.get("SES_PROFILE", "local")
    path = path or project.pipeline_file
    doc, lines = read(path, PIPELINE_SHAPE)
    profiles = doc.get("profiles") or {}
    if name not in profiles:
        raise ConfigError(f"{path}: no profile {name!r} (profiles: {', '.join(profiles)})")
    spec = profiles[name] or {}
    at = f"{path}:{lines.get(('profiles', name), 1)}: profile {name!r}"
    for key in ("landing", "lake"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise ConfigError(f"{at}: {key} must be a path (e.g. {key}: {key})")
    spark = spec.get("spark") or {}
    match = spec.get("match") or {}
    ingest = spec.get("ingest") or {}
    sample = (spec.get("pr_check") or {}).get("sample")
    upkeep = spec.get("maintenance") or {}

    def setting(key: str, parse, value):
        try:
            return parse(value)
        except (ValueError, TypeError) as exc:
            line = lines.get(("profiles", name) + tuple(key.split(".")))
            where = f"{path}:{line}" if line else str(path)
            raise ConfigError(f"{where}: profile {name!r}: {key}: {exc}") from None

    def resolve(value) -> str:
        return value if "://" in str(value) else str(project.resolve(value))

    d = DEFAULTS
    return Profile(
        name=name,
        landing=resolve(spec["landing"]),
        lake=resolve(spec["lake"]),
        spark_master=str(spark.get("master", d.spark_master)),
        spark_conf={str(k): str(v) for k, v in (spark.get("conf") or {}).items()},
        allowed_lateness=setting("match.allowed_lateness", parse_duration,
                                 match.get("allowed_lateness", "0s")),
        slice_length=setting("match.slice_length", _duration_or_ns,
                             match.get("slice_length", d.slice_length)),
        max_partition_events=setting("match.max_partition_events", _whole,
                                     match.get("max_partition_events", d.max_partition_events)),
        max_matches_per_window=setting("match.max_matches_per_window", _positive,
                                       match.get("max_matches_per_window",
                                                 d.max_matches_per_window)),
        memory_budget=setting("match.memory_budget", parse_bytes,
                              match.get("memory_budget", d.memory_budget)),
        parallel_jobs=setting("match.parallel_jobs", _positive,
                              match.get("parallel_jobs", d.parallel_jobs)),
        funnels=setting("match.funnels", _flag, match.get("funnels", d.funnels)),
        earliest=setting("ingest.earliest", _date_text, ingest.get("earliest", d.earliest)),
        max_future=setting("ingest.max_future", _duration_or_ns,
                           ingest.get("max_future", d.max_future)),
        lock_dir=spec.get("lock_dir"),
        site=resolve(spec["site"]) if spec.get("site") else None,
        pr_sample=setting("pr_check.sample", parse_duration, sample) if sample else None,
        storage_options={str(k): setting(f"storage_options.{k}", environment.expand, v)
                         for k, v in (spec.get("storage_options") or {}).items()},
        maintain_every=setting("maintenance.every", _duration_or_ns,
                               upkeep.get("every", d.maintain_every)),
        retention=setting("maintenance.retention", _at_least_a_day,
                          upkeep.get("retention", d.retention)),
        alerts=_alerts(spec.get("alerts") or {}, setting),
        lineage_url=setting("lineage.url", environment.expand, spec["lineage"]["url"])
        if (spec.get("lineage") or {}).get("url") else None,
    )


def _alerts(spec: dict, setting) -> AlertSettings:
    """``alerts`` of a profile; ``${NAME}`` in a URL, a user or a password is read from the
    environment when the profile loads (no secret in conf/)."""
    d = AlertSettings()
    hooks = spec.get("webhooks") or []
    if isinstance(hooks, str):
        hooks = [hooks]
    email = None
    if spec.get("email"):
        e = spec["email"]
        to = e.get("to") or []
        to = [to] if isinstance(to, str) else to
        if not e.get("host") or not to:
            setting("alerts.email", _fail, "alerts.email needs host and to (an address or a list)")
        email = EmailSettings(
            host=str(e["host"]), to=tuple(str(a) for a in to),
            port=setting("alerts.email.port", _positive, e.get("port", 25)),
            sender=str(e.get("sender", EmailSettings.sender)),
            user=setting("alerts.email.user", environment.expand, e["user"]) if e.get("user") else None,
            password=setting("alerts.email.password", environment.expand, e["password"])
            if e.get("password") else None,
            starttls=bool(e.get("starttls", False)))
    return AlertSettings(
        webhooks=tuple(setting("alerts.webhooks", environment.expand, h) for h in hooks),
        email=email,
        nights=setting("alerts.nights", _positive, spec.get("nights", d.nights)),
        min_nights=setting("alerts.min_nights", _positive, spec.get("min_nights", d.min_nights)),
        threshold=setting("alerts.threshold", _positive_number,
                          spec.get("threshold", d.threshold)),
        max_removed=setting("alerts.max_removed", _share, spec.get("max_removed", d.max_removed)))


def _fail(message: str):
    raise ValueError(message)


def _positive_number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{value!r} is not a number above 0")
    return float(value)


def _share(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{value!r} is not a share in (0, 1], e.g. 0.5")
    return float(value)


@dataclass(frozen=True)
class AirflowSettings:
    """The nightly DAG's ``airflow:`` block of ``conf/pipeline.yaml`` (its defaults here)."""

    schedule: str = "0 2 * * *"
    start_date: str = "2026-11-01"
    retries: int = 2
    retry_delay_minutes: int = 5


def load_airflow_settings(project: Project | None = None) -> AirflowSettings:
    """The ``airflow:`` block of the project's ``conf/pipeline.yaml`` (or the file
    ``SES_PIPELINE_CONF`` names), read strictly: a ``ConfigError`` with ``path:line`` for an
    unknown key or a value that cannot be used."""
    path = (project or current_project()).pipeline_file
    doc, lines = read(path, PIPELINE_SHAPE)
    spec = doc.get("airflow") or {}
    parsers = {"schedule": str, "start_date": _date_text, "retries": _whole,
               "retry_delay_minutes": _whole}
    values = {}
    for key, parse in parsers.items():
        if key in spec:
            try:
                values[key] = parse(spec[key])
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{path}:{lines.get(('airflow', key), 1)}: airflow.{key}: "
                                  f"{exc}") from None
    return AirflowSettings(**values)


def check_pipeline_file(project: Project | None = None) -> None:
    """``conf/pipeline.yaml``'s keys, every profile's (``validate``): a ``ConfigError`` with
    ``path:line`` for a key the file may not hold. Values are checked when a profile is
    loaded (some name environment variables only the machine that runs it has)."""
    read((project or current_project()).pipeline_file, PIPELINE_SHAPE)


def _duration_or_ns(value) -> int:
    """A duration written with its unit (``90d``), or a default already in ns."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return parse_duration(value)


def _at_least_a_day(value) -> int:
    ns = _duration_or_ns(value)
    if ns < 86400 * 10**9:
        raise ValueError(f"{value!r} is shorter than 1d: a reader's snapshot (a run, a query) "
                         "could lose its files")
    return ns


def _date_text(value) -> str:
    return date.fromisoformat(str(value)).isoformat()


def _positive(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{value!r} is not a whole number of at least 1")
    return value


def _whole(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a whole number (0: no limit)")
    return value


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not true or false")
    return value
