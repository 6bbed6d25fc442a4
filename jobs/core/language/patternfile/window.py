"""Load a ``kind: window`` pattern file (docs/windows.md): checked like every pattern
file (safe YAML nodes only, every problem with its line, all at once)."""

from __future__ import annotations

import re

import yaml

from jobs.core.language.conditions.expressions import ConditionSyntaxError
from jobs.core.language.pattern import NAME, Example
from jobs.core.language.patternfile.nodes import (
    PatternError,
    Problem,
    example_entries,
    line_of,
    mapping_fields,
    scalar,
    text_value,
    within_field,
)
from jobs.core.language.window import BINDINGS, CONDITIONS, WindowPattern
from jobs.core.language.window_conditions import parse_window_condition, parse_window_value

REQUIRED = ("name", "kind", "source", "within", "start", "termination")
OPTIONAL = ("iteration", "filter", "select", "where", "description", "examples")
COLUMN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# columns every match table has: a select value may not take their names
RESERVED = ("match_id", "pattern", "pattern_version", "alternative", "start_ts", "end_ts",
            "n_events", "bindings", "run_id")
MAX_SELECT = 50


def parse_window(root: yaml.MappingNode, path: str) -> WindowPattern:
    problems: list[Problem] = []
    fields, key_lines = mapping_fields(root, REQUIRED + OPTIONAL, path, problems)
    for key in REQUIRED:
        if key not in fields:
            problems.append(Problem(path, line_of(root), f"missing field {key!r}"))
    name = text_value(fields, "name", path, problems, NAME,
                      "must be lower case letters, digits and _ (it names the output table)")
    source = text_value(fields, "source", path, problems, NAME,
                        "must be lower case letters, digits and _")
    description = text_value(fields, "description", path, problems) or ""
    within, tau = within_field(fields.get("within"), path, problems)
    parsed = {}
    for clause in (*CONDITIONS, "where"):
        node = fields.get(clause)
        if node is None:
            continue
        parsed[clause] = _expression(node, clause, path, problems, parse_window_condition)
    select = _select(fields.get("select"), path, problems)
    examples = _examples(fields.get("examples"), path, problems)
    if problems:
        raise PatternError(problems)
    lines = tuple((k, key_lines[k]) for k in (*CONDITIONS, "where", "select") if k in key_lines)
    optional = {c: parsed[c] for c in ("iteration", "filter") if c in parsed}
    return WindowPattern(name=name, source=source, within=within, tau=tau,
                         start=parsed["start"], termination=parsed["termination"],
                         select=select, where=parsed.get("where"), description=description,
                         path=path, lines=lines, examples=tuple(examples), **optional)


def _expression(node, clause: str, path: str, problems: list[Problem], parse):
    value = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if value is None:
        problems.append(Problem(path, line_of(node), f"{clause} must be one condition as text, "
                                "e.g. location = 'Lab'" if clause != "select" else
                                f"{clause}: a value as text"))
        return None
    try:
        return parse(value, clause)
    except ConditionSyntaxError as exc:
        at = f" (column {exc.column})" if exc.column else ""
        problems.append(Problem(path, line_of(node), f"{clause}: {exc}{at}: {value!r}"))
        return None


def _select(node, path: str, problems: list[Problem]) -> tuple:
    """``select``: a mapping of output column -> value (one row per window)."""
    if node is None:
        return ()
    if not isinstance(node, yaml.MappingNode) or not node.value:
        problems.append(Problem(path, line_of(node), "select must be a mapping of column "
                                "names to values, e.g. duration: last(ts) - first(ts)"))
        return ()
    if len(node.value) > MAX_SELECT:
        problems.append(Problem(path, line_of(node), f"select has {len(node.value)} values: "
                                f"at most {MAX_SELECT}"))
        return ()
    out, seen = [], set()
    for knode, vnode in node.value:
        key = scalar(knode) if isinstance(knode, yaml.ScalarNode) else None
        if not isinstance(key, str) or not COLUMN.fullmatch(key):
            problems.append(Problem(path, line_of(knode), f"select: {key!r} is not a column "
                                    "name (lower case letters, digits and _)"))
            continue
        if key in RESERVED or key in seen:
            why = "is a column of every match table" if key in RESERVED else "appears twice"
            problems.append(Problem(path, line_of(knode), f"select: {key!r} {why}: choose "
                                    "another name"))
            continue
        seen.add(key)
        expr = _expression(vnode, "select", path, problems, parse_window_value)
        if expr is not None:
            out.append((key, expr))
    return tuple(out)


def _examples(node, path: str, problems: list[Problem]) -> list[Example]:
    """``examples``: {name, events, expect: [{first: id, buffer: [ids], last: id,
    values: {...}}]}; ``values`` is compared when given."""
    out = []
    for name, line, events, expect, expect_line in example_entries(
            node, path, problems, "windows such as {first: e1, buffer: [e2], last: e3}"):
        ids = {str(e["event_id"]) for e in events}
        windows = []
        for m in expect:
            message = _expected_problem(m, ids)
            if message:
                problems.append(Problem(path, expect_line, f"example {name!r}: expected "
                                        f"window {m}: {message}"))
                continue
            w = {k: [str(x) for x in (m.get(k) or [])] if k == "buffer" else [str(m[k])]
                 for k in BINDINGS}
            if "values" in m:
                w["values"] = m["values"]
            windows.append(w)
        out.append(Example(name, line, tuple(events), tuple(windows)))
    return out


def _expected_problem(m: dict, ids: set[str]) -> str | None:
    unknown = set(m) - {*BINDINGS, "values"}
    if unknown or "first" not in m or "last" not in m:
        return "give first, last, and optionally buffer and values"
    if not isinstance(m.get("buffer", []) or [], list):
        return "buffer must be a list of event ids"
    if "values" in m and not isinstance(m["values"], dict):
        return "values must be a mapping of select columns to values"
    used = {str(m["first"]), str(m["last"]), *map(str, m.get("buffer") or [])}
    missing = used - ids
    return f"unknown event id(s) {sorted(missing)}" if missing else None
