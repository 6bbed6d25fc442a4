"""Reading ``conf/``: the sources and their schemas."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"


@dataclass(frozen=True)
class Source:
    name: str
    columns: dict[str, str]
    id_column: str = "event_id"
    time_column: str = "ts"
    example: str | None = None
    description: str = ""
    extra: dict = field(default_factory=dict, compare=False)


def load_sources(path: Path | None = None) -> dict[str, Source]:
    path = path or CONF / "sources.yaml"
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    out = {}
    for name, spec in (doc.get("sources") or {}).items():
        spec = dict(spec)
        out[name] = Source(
            name=name,
            columns=dict(spec.pop("columns", {})),
            id_column=spec.pop("id_column", "event_id"),
            time_column=spec.pop("time_column", "ts"),
            example=spec.pop("example", None),
            description=spec.pop("description", ""),
            extra=spec,
        )
    return out
