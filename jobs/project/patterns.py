"""The pattern catalogue: every pattern file an entry point may run, checked together.

A pattern's ``name`` names its published table, so two files with one name would
overwrite each other's matches. Every entry point (``validate``, ``run``, ``backfill``,
the per-pattern steps and the Airflow DAG) reads patterns through this module: a file
that does not parse, or whose name another file also uses, is reported with its path and
line and is not run; every other pattern is.
"""

from __future__ import annotations

from dataclasses import dataclass
from glob import glob as globfiles
from pathlib import Path

from jobs.config import current_project, load_sources
from jobs.core.errors import UserError
from jobs.core.language.pattern import NAME_RULE, Pattern
from jobs.core.language.patternfile import PatternError, Problem, check_schema, load_pattern
from jobs.core.local.examples import run_example
from jobs.core.local.row_patterns import (
    RowPatternFile,
    example_problems,
    is_sidecar,
    load_row_pattern,
    unknown_columns,
)

SUFFIXES = ("*.yaml", "*.yml")


def pattern_paths(folder: Path | None = None, glob: str | None = None) -> list[Path]:
    """The YAML pattern files of a folder (default ``patterns/``): ``*.yaml`` and
    ``*.yml``, but a row pattern's sidecar (``NAME.yaml`` beside ``NAME.sql``); or the
    files a glob names (relative to the project, or absolute)."""
    if glob:
        return sorted(Path(p) for p in globfiles(str(current_project().resolve(glob))))
    folder = folder or current_project().patterns
    return sorted(p for suffix in SUFFIXES for p in folder.glob(suffix) if not is_sidecar(p))


def row_pattern_paths(folder: Path | None = None) -> list[Path]:
    """The ``.sql`` row patterns (MATCH_RECOGNIZE) of a folder (default ``patterns/``)."""
    return sorted((folder or current_project().patterns).glob("*.sql"))


def every_pattern_path(folder: Path | None = None) -> list[Path]:
    """Every pattern file of a folder, YAML and ``.sql``: what a night runs."""
    return pattern_paths(folder) + row_pattern_paths(folder)


@dataclass(frozen=True)
class Rejected:
    """A pattern file that will not run, and why (``name``: the pattern's name when it
    could be read, else the file's stem, for the run log)."""

    path: Path
    name: str
    problems: tuple[Problem, ...]

    @property
    def message(self) -> str:
        return "; ".join(str(p) for p in self.problems)


@dataclass(frozen=True)
class PatternCatalog:
    patterns: tuple[tuple[Path, Pattern], ...]
    rejected: tuple[Rejected, ...]
    row_patterns: tuple[tuple[Path, RowPatternFile], ...] = ()  # the .sql files

    def get(self, path: Path) -> Pattern:
        """The pattern of ``path``; raises ``PatternError`` if it was rejected."""
        target = Path(path).resolve()
        for p, pattern in self.patterns:
            if p.resolve() == target:
                return pattern
        for r in self.rejected:
            if r.path.resolve() == target:
                raise PatternError(list(r.problems))
        return load_pattern(path)  # not in the catalogue: load alone


def source_problems(path: Path, pattern: Pattern, sources: dict) -> list[Problem]:
    """What ``validate`` checks of a pattern against ``conf/sources.yaml``: its source is
    defined, and every attribute it reads is a column of it, of the right kind (``path:
    line``, with the nearest column's name). No sources file: nothing to check."""
    if not sources:
        return []
    source = sources.get(pattern.source)
    if source is None:
        return [Problem(str(path), 1, f"unknown source {pattern.source!r} (conf/sources.yaml "
                        f"defines: {', '.join(sorted(sources))})")]
    return check_schema(pattern, source.columns) if source.columns else []


def _project_sources() -> dict:
    try:
        f = current_project().sources_file
        return load_sources(f) if f.exists() else {}
    except UserError:  # a broken conf/sources.yaml is reported by the step that reads it
        return {}


def load_catalog(paths: list[str | Path] | None = None, folder: Path | None = None,
                 sources: dict | None = None) -> PatternCatalog:
    """Load ``paths`` (default: every file of ``folder``, default ``patterns/``). Names
    must be unique across the given files *and* the other files of their folders (a
    folder is a catalogue: its patterns publish to one lake's ``matches/`` tables). Each
    pattern is checked against its source's columns (``sources``, default the project's
    ``conf/sources.yaml``) before any run reads events: an unknown column is the file's
    problem, with its line, not a Spark error."""
    sources = _project_sources() if sources is None else sources
    given = [Path(p) for p in paths] if paths else every_pattern_path(folder)
    chosen = {g.resolve() for g in given}
    folders = dict.fromkeys(g.resolve().parent for g in given)
    others = [p for f in folders for p in every_pattern_path(f) if p.resolve() not in chosen]
    loaded: list[tuple[Path, Pattern]] = []
    rejected: list[Rejected] = []
    rows: list[tuple[Path, RowPatternFile]] = []
    for p in given:
        if p.suffix == ".sql":  # a row pattern (MATCH_RECOGNIZE)
            try:
                pf = load_row_pattern(p)
                if sources and pf.source not in sources:
                    raise PatternError([Problem(str(p), 1, f"unknown source {pf.source!r} in "
                                                "FROM (conf/sources.yaml defines: "
                                                f"{', '.join(sorted(sources))})")])
                rows.append((p, pf))
            except PatternError as exc:
                rejected.append(Rejected(p, p.stem, tuple(exc.problems)))
            continue
        try:
            pattern = load_pattern(p)
            problems = source_problems(p, pattern, sources)
            if problems:
                raise PatternError(problems)
            loaded.append((p, pattern))
        except PatternError as exc:
            rejected.append(Rejected(p, _name_of(p), tuple(exc.problems)))
        except Exception as exc:  # a checker bug must not stop the other files
            rejected.append(Rejected(p, _name_of(p), (Problem(str(p), 0, "cannot check "
                                     f"this file: {type(exc).__name__}: {exc}"),)))
    owners: dict[str, list[Path]] = {}
    for p, pattern in [*loaded, *rows]:
        owners.setdefault(pattern.name, []).append(p)
    for p in others:  # files not run now still own their names
        if p.suffix == ".sql":
            owners.setdefault(p.stem, []).append(p)
            continue
        try:
            owners.setdefault(load_pattern(p).name, []).append(p)
        except Exception:
            continue
    ok, ok_rows = [], []
    for p, pattern in [*loaded, *rows]:
        clash = [o for o in owners[pattern.name] if o.resolve() != p.resolve()]
        if clash:
            rejected.append(Rejected(p, pattern.name, (Problem(
                str(p), 1, f"pattern name {pattern.name!r} is also used by "
                f"{', '.join(map(str, clash))}: names must be unique (each names its "
                "matches table); rename one"),)))
        else:
            (ok_rows if p.suffix == ".sql" else ok).append((p, pattern))
    return PatternCatalog(tuple(ok), tuple(sorted(rejected, key=lambda r: str(r.path))),
                          tuple(ok_rows))


def source_groups(paths: list[str | Path] | None = None) -> list[dict]:
    """The pattern files by the source they read, each group matched in one pass (the
    nightly DAG's task per source): ``{"name", "source", "paths"}``, by source; a file
    that does not load is a group of its own, named after the file (``source`` None)."""
    catalog = load_catalog(paths)
    by_source: dict[str, list[str]] = {}
    for path, pattern in [*catalog.patterns, *catalog.row_patterns]:
        by_source.setdefault(pattern.source, []).append(str(path))
    groups = [{"name": source, "source": source, "paths": files}
              for source, files in sorted(by_source.items())]
    return groups + [{"name": f"{r.path.name} (not loaded)", "source": None,
                      "paths": [str(r.path)]} for r in catalog.rejected]


def _name_of(path: Path) -> str:
    """The ``name:`` of a file that failed the checks, if a plain line gives it."""
    import re

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return path.stem
    m = re.search(rf"^name:\s*({NAME_RULE})\s*$", head, re.M)
    return m.group(1) if m else path.stem


def lint(files: list[Path], sources_file: Path) -> tuple[PatternCatalog, list[Problem], int]:
    """``validate``: the catalogue of ``files`` checked against the sources' schemas, with
    every example run; returns (catalogue, problems, examples run)."""

    sources = load_sources(sources_file) if sources_file.exists() else {}
    rows = [f for f in files if Path(f).suffix == ".sql"]
    files = [f for f in files if Path(f).suffix != ".sql"]
    catalog = load_catalog(files, sources=sources) if files else PatternCatalog((), ())
    problems: list[Problem] = [p for r in catalog.rejected for p in r.problems]
    n_examples = 0
    for f in rows:
        found, n = row_pattern_problems(Path(f), sources)
        problems += found
        n_examples += n
    for f, pattern in catalog.patterns:
        n_examples += len(pattern.examples)
        if not pattern.examples:
            problems.append(Problem(str(f), 1, "no examples: add an `examples:` block (a few "
                                    "events and the matches they give; `make new-pattern` "
                                    "writes one to start from, docs/patterns.md explains it)"))
        for example in pattern.examples:  # the pattern's own small tests
            try:
                result = run_example(pattern, example)
            except Exception as exc:  # noqa: BLE001 - report it with the file, check the rest
                problems.append(Problem(str(f), example.line, f"example {example.name!r} "
                                        f"could not run: {type(exc).__name__}: {exc}"))
                continue
            if not result.ok:
                problems.append(Problem(str(f), example.line, result.message()))
    return catalog, problems, n_examples


def row_pattern_problems(path: Path, sources: dict) -> tuple[list[Problem], int]:
    """``validate`` of a ``.sql`` row pattern: it parses (nothing executed), its source is
    one of ``conf/sources.yaml``, it has examples and they pass; returns the problems and
    the number of examples run."""
    try:
        pf = load_row_pattern(path)
    except PatternError as exc:
        return list(exc.problems), 0
    problems = []
    if sources and pf.source not in sources:
        problems.append(Problem(str(path), 1, f"unknown source {pf.source!r} in FROM "
                                f"(conf/sources.yaml defines: {', '.join(sorted(sources))})"))
    elif sources and sources[pf.source].columns:
        problems += unknown_columns(pf, sources[pf.source].columns)
    if not pf.examples:
        problems.append(Problem(str(path), 1, f"no examples: add an `examples:` block to its "
                                f"sidecar {path.with_suffix('.yaml').name} (docs/language.md, "
                                "MATCH_RECOGNIZE)"))
    return problems + example_problems(pf), len(pf.examples)
