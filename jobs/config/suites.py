"""Reading the expectation suites (``expectations/events.json``, ``matches.json``) strictly:
each is a JSON object whose ``expectations`` is a list of ``{"type": ..., "kwargs": {...}}``.
A file that is not JSON, writes a key twice (JSON keeps the last without a word) or has
another shape is a ``ConfigError`` naming the file and line, at ``ses validate`` and
before a night checks anything with it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from jobs.config.project import current_project
from jobs.config.strict import ConfigError, twice
from jobs.core.inputs import json_keys_twice

SUITES = ("events", "matches")


def _where_twice(path: Path, text: str, key: str) -> str:
    """``path:line: ...`` of a key written twice: JSON is YAML's subset, and YAML's nodes
    know their lines; without them (text YAML does not read), the file alone."""
    try:
        found = twice(path, yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        found = []
    return found[0].replace("YAML would", "JSON would") if found else \
        f"{path}: key {key!r} appears twice in one object; JSON would keep only the last"


def read_suite(path: Path) -> dict:
    """The suite in ``path``, checked (module docstring)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (the project's expectation suites are "
                          f"{', '.join(s + '.json' for s in SUITES)})") from None
    try:
        doc, doubled = json_keys_twice(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if doubled:
        raise ConfigError(_where_twice(path, text, doubled[0]))
    if not isinstance(doc, dict) or not isinstance(doc.get("expectations"), list):
        raise ConfigError(f'{path}: a suite is an object with "expectations": [...]')
    for i, e in enumerate(doc["expectations"], 1):
        if not (isinstance(e, dict) and isinstance(e.get("type"), str)
                and isinstance(e.get("kwargs", {}), dict) and set(e) <= {"type", "kwargs",
                                                                         "meta"}):
            raise ConfigError(f"{path}: expectation {i} is not "
                              '{"type": "expect_...", "kwargs": {...}}')
    return doc


def load_suite(name: str) -> dict:
    """The project's suite ``expectations/<name>.json``."""
    return read_suite(current_project().expectations / f"{name}.json")


def check_suites() -> None:
    """Every suite of the project (``validate``); a ``ConfigError`` for the first bad one."""
    for name in SUITES:
        load_suite(name)
