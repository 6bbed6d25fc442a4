"""``.sql`` row patterns as the local commands run them: the file read and parsed (without
executing anything) with its sidecar ``NAME.yaml`` (``description`` and ``examples``,
nothing else, in the YAML patterns' example format), its examples run, and the matches of
an events file written as JSON lines, one per match, as ``ses match`` does for a YAML
pattern. The FROM name is ignored here, as a YAML pattern's ``source`` is."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from jobs.core.language.events import Event, order, parse_ts
from jobs.core.language.pattern import Example
from jobs.core.language.patternfile import read_pattern_text
from jobs.core.language.patternfile.nodes import (
    PatternError,
    Problem,
    compose,
    example_entries,
    line_of,
    plain,
    scalar,
)
from jobs.core.rowpattern.checks import columns_read
from jobs.core.rowpattern.lexer import RowPatternError, statement_version
from jobs.core.rowpattern.model import RowPatternQuery
from jobs.core.rowpattern.output import event_rows, match_json, matches
from jobs.core.rowpattern.parser import parse_row_pattern
from jobs.core.rowpattern.program import compile_row_pattern
from jobs.core.rowpattern.pruning import necessary_conditions, required_variables, row_local
from jobs.core.rowpattern.types import measure_type, output_type, simple_type

SIDECAR_KEYS = ("description", "examples")
MODES = {"one": "ONE ROW PER MATCH", "all": "ALL ROWS PER MATCH (SHOW EMPTY MATCHES)",
         "all_omit": "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
         "unmatched": "ALL ROWS PER MATCH WITH UNMATCHED ROWS"}


@dataclass(frozen=True)
class RowPatternFile:
    """A ``.sql`` pattern with what its sidecar gives; ``version``: a digest of the
    statement's tokens (comments and layout do not change it)."""

    path: Path
    query: RowPatternQuery
    examples: tuple[Example, ...] = ()
    text: str = ""
    matcher = "row_pattern"
    kind = "row_pattern"

    @property
    def name(self) -> str:
        return self.query.name

    @property
    def source(self) -> str:
        return self.query.source

    @property
    def version(self) -> str:
        return statement_version(self.text, str(self.path))


def is_sidecar(path: Path) -> bool:
    """A YAML file beside a ``.sql`` file of its stem: that row pattern's sidecar."""
    path = Path(path)
    return path.suffix in (".yaml", ".yml") and path.with_suffix(".sql").is_file()


def sidecar_of(path: Path) -> Path | None:
    for suffix in (".yaml", ".yml"):
        side = path.with_suffix(suffix)
        if side.is_file():
            return side
    return None


def load_row_pattern(path: str | Path) -> RowPatternFile:
    """Read, parse and check ``path`` and its sidecar; raises ``PatternError`` with each
    problem's file, line and (for the statement) column."""
    path = Path(path)
    text = read_pattern_text(path)
    try:
        query = parse_row_pattern(text, str(path), path.stem)
    except RowPatternError as exc:
        pos = exc.pos
        raise PatternError([Problem(str(path), pos.line if pos else 1, exc.detail,
                                    pos.col if pos else None)]) from None
    side = sidecar_of(path)
    if side is None:
        return RowPatternFile(path, query, text=text)
    description, examples = _sidecar(side, read_pattern_text(side))
    return RowPatternFile(path, replace(query, description=description), examples, text)


@lru_cache(maxsize=1024)
def _sidecar(side: Path, text: str) -> tuple[str, tuple[Example, ...]]:
    """(description, examples) of a sidecar's text; raises ``PatternError``. The same
    text is parsed once per process, as ``parse_pattern`` parses a pattern file."""
    root = compose(text, str(side), ", ".join(SIDECAR_KEYS))
    problems: list[Problem] = []
    parts = {scalar(k): (k, v) for k, v in root.value}
    for key, (node, _) in parts.items():
        if key not in SIDECAR_KEYS:
            problems.append(Problem(str(side), line_of(node), f"unknown key {key!r}: the "
                                    "sidecar of a .sql pattern holds description and "
                                    "examples only (the pattern itself is the .sql file)"))
    description = ""
    if "description" in parts:
        value = plain(parts["description"][1])
        if not isinstance(value, str):
            problems.append(Problem(str(side), line_of(parts["description"][1]),
                                    "description must be text"))
        else:
            description = value.strip()
    examples = []
    node = parts["examples"][1] if "examples" in parts else None
    for name, line, events, expect, expect_line in example_entries(
            node, str(side), problems, "matches such as {A: [e1], B: [e2, e3]}"):
        ids = {str(e["event_id"]) for e in events}
        wanted = []
        for m in expect:
            unknown = {str(i) for k, v in m.items() if k != "measures"
                       for i in (v if isinstance(v, list) else [v])} - ids
            if unknown or ("measures" in m and not isinstance(m["measures"], dict)):
                problems.append(Problem(str(side), expect_line, f"example {name!r}: expected "
                                        f"match {m}: " + (f"unknown event id(s) "
                                                          f"{sorted(unknown)}" if unknown else
                                                          "measures must be a mapping")))
                continue
            wanted.append(m)
        examples.append(Example(name, line, tuple(events), tuple(wanted)))
    if problems:
        raise PatternError(problems)
    return description, tuple(examples)


def _events(rows) -> list[Event]:
    return order(Event(str(r["event_id"]), parse_ts(r["ts"]),
                       {k: v for k, v in r.items() if k not in ("event_id", "ts")})
                 for r in rows)


def _bindings(bindings: dict) -> str:
    """Bindings as a comparable key: non-empty ones, variables upper-cased, ids as text."""
    return json.dumps(sorted((str(v).upper(), sorted(map(str, ids if isinstance(ids, list)
                                                           else [ids])))
                             for v, ids in bindings.items() if ids not in ([], None)))


def _measures(values: dict | None) -> str | None:
    if values is None:
        return None
    return json.dumps(sorted((k, float(v) if isinstance(v, (int, float)) and
                              not isinstance(v, bool) else v) for k, v in values.items()),
                      default=str)


def example_problems(pf: RowPatternFile) -> list[Problem]:
    """Each example that does not give exactly its expected matches (the measures an
    expected match names compared too), with its line."""
    side = sidecar_of(pf.path)
    out = []
    for ex in pf.examples:
        try:
            found = [match_json(pf.query, pm) for pm in
                     matches(pf.query, event_rows(_events(ex.events)))]
        except Exception as exc:  # noqa: BLE001 - reported with the example's line
            out.append(Problem(str(side), ex.line, f"example {ex.name!r} could not run: "
                               f"{type(exc).__name__}: {exc}"))
            continue
        wanted = [(_bindings({k: v for k, v in m.items() if k != "measures"}),
                   m.get("measures")) for m in ex.expect]
        named = {b: list(ms) for b, ms in wanted if ms is not None}
        expected = {(b, _measures(ms)) for b, ms in wanted}
        got = set()
        for f in found:
            b, values = _bindings(f["bindings"]), f.get("measures", {})
            got.add((b, _measures({k: values.get(k) for k in named[b]}) if b in named
                     else None))
        missing, unexpected = sorted(expected - got, key=str), sorted(got - expected, key=str)
        if missing or unexpected:
            shown = [f"missing {_shown(missing)}"] if missing else []
            shown += [f"unexpected {_shown(unexpected)}"] if unexpected else []
            out.append(Problem(str(side), ex.line, f"example {ex.name!r} fails: "
                               + "; ".join(shown)))
    return out


def _shown(keys) -> str:
    return "; ".join(str(dict(json.loads(b))) + (f" measures {dict(json.loads(m))}" if m
                                                 else "") for b, m in keys)


def match_events(query: RowPatternQuery, events: list[Event],
                 write: Callable[[bytes], object]) -> int:
    """Write one JSON line per match of ``query`` over ``events``; returns how many."""
    n = 0
    for pm in matches(query, event_rows(events)):
        write((json.dumps(match_json(query, pm), ensure_ascii=False) + "\n").encode())
        n += 1
    return n



def unknown_columns(pf: RowPatternFile, columns) -> list[Problem]:
    """A problem, with its line and column, for each column the statement reads that the
    source does not have (``ts`` and ``event_id`` are every source's)."""
    known = {c.lower() for c in columns} | {"ts", "event_id"}
    out, seen = [], set()
    for name, pos in columns_read(pf.query):
        if name.lower() not in known and name.lower() not in seen:
            seen.add(name.lower())
            out.append(Problem(str(pf.path), pos.line if pos else 1,
                               f"{name} is not a column of source {pf.source!r} (columns: "
                               f"{', '.join(sorted(known))})", pos.col if pos else None))
    return out


def explain_lines(pf: RowPatternFile, columns: dict[str, str]) -> list[str]:
    """``ses explain FILE.sql``: how the statement is matched, without reading events:
    its partitions and order, the compiled program, which variables every match holds,
    which conditions are computed once per row (and prune a partition no row fits), and
    each measure's column type (``columns``: the source's column types)."""
    q = pf.query
    lower = {k.lower(): simple_type(v) for k, v in columns.items()}
    local = [v for v, e in q.defines if row_local(e, v)]
    order = ", ".join(k.column + ("" if k.ascending else " DESC") for k in q.order_by)
    subsets = "; ".join(f"{n} = ({', '.join(m)})" for n, m in q.subsets)
    skip = q.skip.kind.replace("_", " ") + (f" {q.skip.var}" if q.skip.var else "")
    held = ", ".join(sorted(required_variables(q.pattern))) or "nothing (it may be empty)"
    lines = [f"{pf.name} (row pattern, source {pf.source}, version {pf.version})",
             f"partitions: {', '.join(q.partition_by) or 'none (the source is one partition)'}"
             f"; order: {order or 'ts, event_id'}",
             f"output: {MODES[q.rows_per_match]}; after a match: skip {skip}"
             + (f"; within {q.within_ns / 1e9:g} s" if q.within_ns else ""),
             f"variables: {', '.join(q.variables)}" + (f"; subsets: {subsets}" if subsets else ""),
             f"every match holds: {held}",
             f"conditions computed once per row: {', '.join(local) or 'none'}; a partition "
             f"no row fits of {', '.join(necessary_conditions(q)) or '(none)'} is not searched",
             "conditions evaluated on the match so far: "
             + (", ".join(v for v, _ in q.defines if v not in local) or "none")]
    for m in q.measures:
        lines.append(f"measure {m.name}: {output_type(measure_type(m.expr, lower))}")
    lines.append("program:")
    lines += ["  " + line for line in str(compile_row_pattern(q.pattern)).splitlines()]
    return lines
