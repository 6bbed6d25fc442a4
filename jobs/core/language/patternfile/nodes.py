"""The reading every pattern file gets, whatever its kind (sequence or window): the YAML is
*composed* into a node tree with PyYAML's safe loader and only plain scalars, lists and
mappings are accepted; any tag such as ``!!python/object`` is refused before anything is
constructed. The helpers here read that tree's fields, each problem with its file and line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import yaml

from jobs.core.errors import UserError
from jobs.core.language.pattern import parse_duration

SAFE_TAGS = {f"tag:yaml.org,2002:{t}"
             for t in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")}


# Bounds that keep checking a pull request's file cheap and the pattern runnable.
MAX_FILE_BYTES = 512 * 1024


MAX_DEPTH = 32  # nesting of lists and mappings


MAX_SCALAR_CHARS = 10_000


MAX_TAU_DAYS = 36_525  # 100 years: a longer window could never close (its horizon)




KINDS = ("sequence", "window")


def compose(text: str, path: str, keys: str) -> yaml.MappingNode:
    """The checked YAML node tree of a pattern file's text (safe tags only, one mapping),
    before its kind's parser reads it; raises ``PatternError``. ``keys`` names the
    fields for the message about a file that is not a mapping."""
    prescan(text, path)
    try:
        docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else 0
        reason = getattr(exc, "problem", None) or str(exc)
        if mark is not None and "got '{'" in reason:
            raise PatternError([Problem(path, line, "Kleene bounds such as p{2,5} cannot "
                                        "stand unquoted inside [ ] ('{' opens a mapping "
                                        "there): quote them, [a, 'p{2,5}'], or write the set "
                                        "in block style (- - a / - p{2,5})")]) from None
        raise PatternError([Problem(path, line, f"not valid YAML: {reason}")]) from None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise PatternError([Problem(path, 1, "a pattern file holds exactly one YAML document"
                                    if docs else "the file is empty")])
    root = docs[0]
    problems: list[Problem] = []
    check_tags(root, path, problems)
    if problems:
        raise PatternError(problems)
    if not isinstance(root, yaml.MappingNode):
        raise PatternError([Problem(path, line_of(root), "a pattern file is a mapping of keys "
                                    f"({keys}, ...)")])
    return root



@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    message: str
    column: int | None = None  # a .sql pattern's problems name the column too

    def __str__(self) -> str:
        where = self.line if self.column is None else f"{self.line}:{self.column}"
        return f"{self.path}:{where}: {self.message}"


class PatternError(UserError, ValueError):
    """One or more problems in a pattern file; ``str()`` gives one ``path:line: message`` each."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def check_tags(node: yaml.Node, path: str, problems: list[Problem]) -> None:
    if node.tag not in SAFE_TAGS:
        problems.append(Problem(path, line_of(node),
                                f"tag {node.tag!r} is not allowed: a pattern file holds plain "
                                "text, numbers, lists and mappings only"))
        return
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                problems.append(Problem(path, line_of(k), "a mapping key must be plain text, "
                                        "not a list or a mapping"))
                continue
            check_tags(k, path, problems)
            check_tags(v, path, problems)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            check_tags(v, path, problems)


def scalar(node: yaml.Node):
    return yaml.constructor.SafeConstructor().construct_object(node)


def prescan(text: str, path: str) -> None:
    """Refuse, before PyYAML builds anything, what could make checking slow or crash:
    a huge file, anchors and aliases (an alias bomb expands exponentially), nesting deeper
    than ``MAX_DEPTH`` (the composer recurses) and huge scalars. PyYAML's event parser is
    iterative, so this pass itself is linear in the file."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise PatternError([Problem(path, 0, f"the file has {size:,} bytes: a pattern file "
                                    f"may have at most {MAX_FILE_BYTES:,}")])
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise PatternError([Problem(path, line, "anchors and aliases (&name, *name) "
                                            "are not allowed in a pattern file: write the "
                                            "value out")])
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise PatternError([Problem(path, line, f"lists and mappings nested more "
                                                f"than {MAX_DEPTH} levels deep")])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_SCALAR_CHARS:
                raise PatternError([Problem(path, line, f"a value of {len(event.value):,} "
                                            f"characters: at most {MAX_SCALAR_CHARS:,}")])
    except yaml.YAMLError:
        return  # compose reports the syntax error with its line


def file_kind(root: yaml.MappingNode, path: str) -> str:
    """``kind``: sequence (SES / ZStream patterns, the default) or window."""
    for knode, vnode in root.value:
        if isinstance(knode, yaml.ScalarNode) and knode.value == "kind":
            value = scalar(vnode) if isinstance(vnode, yaml.ScalarNode) else None
            if value not in KINDS:
                raise PatternError([Problem(path, line_of(vnode), f"kind {value!r}: use one of "
                                            f"{', '.join(KINDS)} (default: sequence)")])
            return value
    return "sequence"


def mapping_fields(root: yaml.MappingNode, allowed: tuple[str, ...], path: str,
                   problems: list[Problem]) -> tuple[dict[str, yaml.Node], dict[str, int]]:
    """The top-level keys of a pattern file (each once, each allowed) and their lines."""
    fields: dict[str, yaml.Node] = {}
    key_lines: dict[str, int] = {}
    for knode, vnode in root.value:
        key = scalar(knode) if isinstance(knode, yaml.ScalarNode) else None
        if not isinstance(key, str):
            problems.append(Problem(path, line_of(knode), "keys must be plain words"))
            continue
        if key in fields:
            problems.append(Problem(path, line_of(knode), f"key {key!r} appears twice"))
            continue
        if key not in allowed:
            hint = difflib.get_close_matches(key, allowed, n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            problems.append(Problem(path, line_of(knode), f"unknown key {key!r} "
                                    f"(allowed: {', '.join(allowed)}){extra}"))
            continue
        fields[key] = vnode
        key_lines[key] = line_of(knode)
    return fields, key_lines


def text_value(fields: dict[str, yaml.Node], key: str, path: str, problems: list[Problem],
               pattern: re.Pattern | None = None, rule: str = "") -> str | None:
    """A text field (None when absent; a problem when not text or not ``pattern``)."""
    node = fields.get(key)
    if node is None:
        return None
    value = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if not isinstance(value, str) or not value.strip():
        problems.append(Problem(path, line_of(node), f"{key!r} must be text"))
        return None
    if pattern is not None and not pattern.fullmatch(value):
        problems.append(Problem(path, line_of(node), f"{key} {value!r} {rule}"))
        return None
    return value


def within_field(node, path: str, problems: list[Problem]) -> tuple[str | None, int]:
    """``within``: a positive duration of at most 100 years, with its unit."""
    if node is None:
        return None, 0
    raw = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(raw, int) and not isinstance(raw, bool):
        problems.append(Problem(path, line_of(node), f"within: {raw} has no unit: write e.g. "
                                f"{raw}d (units: ms, s, min, h, d)"))
    elif not isinstance(raw, str):
        problems.append(Problem(path, line_of(node), "within must be a duration such as 15d"))
    else:
        try:
            tau = parse_duration(raw)
        except ValueError as exc:
            problems.append(Problem(path, line_of(node), f"within: {exc}"))
            return None, 0
        if tau <= 0 or tau > MAX_TAU_DAYS * 86400 * 10**9:
            problems.append(Problem(path, line_of(node), f"within: {raw.strip()} must be "
                                    f"positive and at most {MAX_TAU_DAYS}d (100 years); a "
                                    "longer window never closes"))
        return raw.strip(), tau
    return None, 0


def plain(node: yaml.Node):
    """A node as plain Python data (tags were checked already)."""
    if isinstance(node, yaml.MappingNode):
        return {plain(k): plain(v) for k, v in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [plain(v) for v in node.value]
    return scalar(node)


def example_entries(node, path: str, problems: list[Problem], shape: str) -> list[tuple]:
    """The well-formed entries of ``examples`` (each ``{name, events, expect}``) as
    (name, line, event rows, expected entries, line of expect); a problem for each one
    that is not. ``shape`` shows what an expected entry looks like."""
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        problems.append(Problem(path, line_of(node), "examples must be a list of "
                                "{name, events, expect}"))
        return []
    out = []
    for i, ex in enumerate(node.value, start=1):
        line = line_of(ex)
        if not isinstance(ex, yaml.MappingNode):
            problems.append(Problem(path, line, f"example {i} must be a mapping with "
                                    "events and expect"))
            continue
        parts = {scalar(k): v for k, v in ex.value}
        unknown = set(parts) - {"name", "events", "expect"}
        if unknown:
            problems.append(Problem(path, line, f"example {i}: unknown key(s) "
                                    f"{', '.join(map(str, sorted(unknown, key=str)))} "
                                    "(allowed: name, events, expect)"))
        name = str(plain(parts["name"])) if "name" in parts else f"example {i}"
        events, expect = plain(parts.get("events")) if "events" in parts else None, \
            plain(parts.get("expect")) if "expect" in parts else None
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            problems.append(Problem(path, line, f"example {name!r}: events must be a list "
                                    "of rows (mappings with event_id and ts)"))
            continue
        bad = [j for j, e in enumerate(events, start=1) if "event_id" not in e or "ts" not in e]
        if bad:
            problems.append(Problem(path, line_of(parts["events"]), f"example {name!r}: event "
                                    f"row(s) {bad} need event_id and ts"))
            continue
        if not isinstance(expect, list) or not all(isinstance(m, dict) for m in expect):
            problems.append(Problem(path, line, f"example {name!r}: expect must be a list of "
                                    f"{shape} (may be empty)"))
            continue
        out.append((name, line, events, expect, line_of(parts["expect"])))
    return out


TIME_REFUSED = ("only the event time ts is compared in conditions (e.g. b.ts - c.ts <= 9d); "
                "other timestamp columns are not supported there (docs/language.md, Time)")
