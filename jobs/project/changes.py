"""What a branch changes in the catalogue, against a git ref (``pr-check``'s first step).

Like dbt's ``state:modified``: a pattern is compared by its *normalized version* (the hash
of ``Pattern.normalized()``: comments, key order and formatting are no change), keyed by
its ``name`` (the table it publishes), so a renamed file with the same pattern is no
change either. A model is compared by its SQL without comments and whitespace and by its
parsed sidecar; the models that read a changed pattern's table, and the models after
those, are affected too (``state:modified+``). Reading the base side runs ``git show``
only; no file of the base is executed or checked out.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from jobs.core.errors import UserError
from jobs.core.language.pattern import NAME_RULE
from jobs.core.language.patternfile import PatternError, parse_pattern
from jobs.core.rowpattern.lexer import RowPatternError, statement_version
from jobs.core.rowpattern.parser import parse_row_pattern
from jobs.project.models import tables_read

ADDED, CHANGED, REMOVED, UNCHANGED, INVALID = "added", "changed", "removed", "unchanged", "invalid"


class ChangesError(UserError, RuntimeError):
    """The base cannot be read (no git, unknown ref); the message says what to do."""


@dataclass(frozen=True)
class PatternFile:
    path: str  # relative to the repository root
    text: str
    name: str | None  # None: the file does not parse
    version: str | None
    error: str | None = None


@dataclass(frozen=True)
class PatternChange:
    name: str
    status: str  # added, changed, removed, unchanged, invalid (the head's file does not parse)
    base: PatternFile | None
    head: PatternFile | None

    @property
    def runs(self) -> bool:
        return self.status in (ADDED, CHANGED, REMOVED)


@dataclass(frozen=True)
class ModelChange:
    name: str
    status: str  # added, changed, removed, unchanged
    reason: str  # why it is checked: "its files changed", "reads matches_x", ...


@dataclass(frozen=True)
class Changes:
    base_ref: str
    base_commit: str
    patterns: tuple[PatternChange, ...]
    models: tuple[ModelChange, ...]
    base_files: dict  # relative path -> text, every pattern and model file of the base

    @property
    def changed_patterns(self) -> list[PatternChange]:
        return [c for c in self.patterns if c.status != UNCHANGED]

    @property
    def affected_models(self) -> list[ModelChange]:
        return [m for m in self.models if m.status != UNCHANGED or m.reason]


def git(root: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                             timeout=120)
    except OSError as exc:
        raise ChangesError(f"cannot run git: {exc}; pr-check compares against a git ref") \
            from None
    if out.returncode != 0:
        raise ChangesError(f"git {' '.join(args)}: {out.stderr.strip() or 'failed'}")
    return out.stdout


def default_base(root: Path) -> str:
    """The merge base of HEAD with ``main`` (or ``origin/main``, as CI clones have it)."""
    for ref in ("main", "origin/main", "master", "origin/master"):
        try:
            return git(root, "merge-base", "HEAD", ref).strip()
        except ChangesError:
            continue
    raise ChangesError("no branch main or origin/main to compare with: name the base, "
                       "e.g. make pr-check BASE=origin/main")


def _files_at(root: Path, commit: str, folder: str) -> dict[str, str]:
    listing = git(root, "ls-tree", "-r", "--name-only", commit, "--", folder + "/")
    out = {}
    for rel in listing.splitlines():
        if rel.endswith((".yaml", ".yml", ".sql")):
            out[rel] = git(root, "show", f"{commit}:{rel}")
    return out


def _head_files(root: Path, folder: str) -> dict[str, str]:
    base = root / folder
    if not base.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8")
            for p in sorted(base.iterdir())
            if p.is_file() and p.name.endswith((".yaml", ".yml", ".sql"))}


def pattern_file(rel: str, text: str) -> PatternFile:
    """A pattern file's name and normalized version; a file that does not parse keeps its
    error (parsing is data only: ``yaml.safe_load`` rules, no code runs)."""
    try:
        p = parse_pattern(text, rel)
        return PatternFile(rel, text, p.name, p.version)
    except PatternError as exc:
        m = re.search(rf"^name:\s*({NAME_RULE})\s*$", text, re.M)
        return PatternFile(rel, text, m.group(1) if m else Path(rel).stem, None, str(exc))


def row_pattern_file(rel: str, text: str) -> PatternFile:
    """A ``.sql`` row pattern's name (its stem) and version (a digest of its statement's
    tokens: comments and layout are no change); a file that does not parse keeps its
    error. Parsing builds values only: nothing is executed."""
    name = Path(rel).stem
    try:
        parse_row_pattern(text, rel, name)
        return PatternFile(rel, text, name, statement_version(text, rel))
    except RowPatternError as exc:
        return PatternFile(rel, text, name, None, str(exc))


def _by_name(files: dict[str, str]) -> dict[str, PatternFile]:
    out: dict[str, PatternFile] = {}
    sql_stems = {rel[:-4] for rel in files if rel.endswith(".sql")}
    for rel, text in sorted(files.items()):
        if rel.endswith(".sql"):
            f = row_pattern_file(rel, text)
        elif rel.endswith((".yaml", ".yml")) and rel.rsplit(".", 1)[0] not in sql_stems:
            f = pattern_file(rel, text)  # (NAME.yaml beside NAME.sql is its sidecar)
        else:
            continue
        out.setdefault(f.name, f)  # a name clash is reported by validate
    return out


def compare_patterns(base: dict[str, str], head: dict[str, str]) -> list[PatternChange]:
    """Pattern files of both sides (relative path -> text), compared by name and version."""
    b, h = _by_name(base), _by_name(head)
    out = []
    for name in sorted(set(b) | set(h)):
        old, new = b.get(name), h.get(name)
        if new is not None and new.error:
            status = INVALID
        elif old is None:
            status = ADDED
        elif new is None:
            status = REMOVED
        elif old.version != new.version:
            status = CHANGED
        else:
            status = UNCHANGED
        out.append(PatternChange(name, status, old, new))
    return out


def model_fingerprint(sql: str, sidecar: str | None) -> str:
    """A model's SQL without comments and whitespace (string literals kept: they change
    results), and its parsed sidecar, hashed."""
    code = re.sub(r"--[^\n]*", " ", sql)
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    code = " ".join(code.split()).rstrip(";").strip()
    try:
        meta = yaml.safe_load(sidecar) if sidecar else None
    except yaml.YAMLError:
        meta = sidecar  # unparseable: compare the text (the run reports the error)
    blob = json.dumps([code, meta], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _models(files: dict[str, str]) -> dict[str, tuple[str, set[str], set[str]]]:
    """Model name -> (fingerprint, tables it reads, models it depends on)."""
    out = {}
    for rel, sql in files.items():
        if not rel.endswith(".sql"):
            continue
        stem = rel[:-4]
        side = files.get(stem + ".yaml")
        tables = set(tables_read(sql))
        deps = {t[len("models_"):] for t in tables if t.startswith("models_")}
        try:
            meta = yaml.safe_load(side) if side else {}
            deps |= set((meta or {}).get("depends_on") or [])
        except (yaml.YAMLError, AttributeError, TypeError):
            pass
        out[Path(stem).name] = (model_fingerprint(sql, side), tables, deps)
    return out


def compare_models(base: dict[str, str], head: dict[str, str],
                   patterns: list[PatternChange]) -> list[ModelChange]:
    """Models whose files changed, the models that read a changed pattern's matches, and
    every model after those (in either version's dependency graph)."""
    b, h = _models(base), _models(head)
    touched = {f"matches_{c.name}" for c in patterns if c.status != UNCHANGED}
    status, reason = {}, {}
    for name in sorted(set(b) | set(h)):
        old, new = b.get(name), h.get(name)
        status[name] = (ADDED if old is None else REMOVED if new is None
                        else CHANGED if old[0] != new[0] else UNCHANGED)
        reads = sorted(t for t in (new or old)[1] | (old or new)[1] if t in touched)
        if status[name] != UNCHANGED:
            reason[name] = "its files changed"
        elif reads:
            reason[name] = f"reads {', '.join(reads)}"
    changed = True
    while changed:  # the models after an affected one are affected too
        changed = False
        for name in status:
            if name in reason:
                continue
            deps = (h.get(name) or b.get(name))[2] | (b.get(name) or h.get(name))[2]
            up = sorted(d for d in deps if d in reason)
            if up:
                reason[name] = f"depends on model {', '.join(up)}"
                changed = True
    return [ModelChange(n, status[n], reason.get(n, "")) for n in sorted(status)]


def find_changes(root: Path, base_ref: str | None = None) -> Changes:
    """The patterns and models the working tree of ``root`` changes since ``base_ref``
    (default: the merge base with main)."""
    ref = base_ref or default_base(root)
    commit = git(root, "rev-parse", "--verify", f"{ref}^{{commit}}").strip()
    base = {**_files_at(root, commit, "patterns"), **_files_at(root, commit, "models")}
    head = {**_head_files(root, "patterns"), **_head_files(root, "models")}
    patterns = compare_patterns({k: v for k, v in base.items() if k.startswith("patterns/")},
                                {k: v for k, v in head.items() if k.startswith("patterns/")})
    models = compare_models({k: v for k, v in base.items() if k.startswith("models/")},
                            {k: v for k, v in head.items() if k.startswith("models/")},
                            patterns)
    return Changes(ref, commit, tuple(patterns), tuple(models), base)
