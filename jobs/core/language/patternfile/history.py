"""The keys of a pattern file that look beyond its window (docs/language.md, "The first
time ever", "Conditions on the whole history"): ``first_ever: [a]`` and ``history:``."""

from __future__ import annotations

import yaml

from jobs.core.language.conditions.expressions import ConditionSyntaxError
from jobs.core.language.conditions.kinds import Property
from jobs.core.language.conditions.parser import parse_conditions
from jobs.core.language.pattern import HistoryCondition, Variable, parse_duration
from jobs.core.language.patternfile.nodes import Problem, line_of, scalar

HISTORY_KEYS = ("at_least", "at_most", "before", "after", "by", "where", "same")
HISTORY_EVENT = "h"  # the variable a history condition's ``where`` names
MAX_COUNT = 1_000_000


def _anchor_problem(name, positives: dict[str, Variable], optional_sets, negated: set[str],
                    what: str) -> str | None:
    v = positives.get(name) if isinstance(name, str) else None
    if v is None:
        kind = "a negated variable" if name in negated else "not a variable of sets"
        return f"{what}: {name!r} is {kind}: name a positive variable"
    if v.group or v.min == 0 or v.set_index in optional_sets:
        return (f"{what}: {name!r} must bind exactly one event in every match (a singleton, "
                f"not optional, not a group like {v})")
    return None


def parse_first_ever(node: yaml.Node | None, body, disjunctive: bool, path: str,
                     problems: list[Problem]) -> tuple[str, ...]:
    """``first_ever: [a, ...]``: positive singleton variables that are always bound (not
    optional, not in a group, not negated)."""
    if node is None:
        return ()
    line = line_of(node)
    items = node.value if isinstance(node, yaml.SequenceNode) else None
    names = [scalar(x) for x in items] if items is not None and all(
        isinstance(x, yaml.ScalarNode) for x in items) else None
    if not names or not all(isinstance(n, str) for n in names):
        problems.append(Problem(path, line, "first_ever must be a list of variable names, "
                                "e.g. first_ever: [a]"))
        return ()
    if disjunctive:
        problems.append(Problem(path, line, "first_ever with alternatives is not supported "
                                "yet: write one file per alternative"))
        return ()
    negated = {n.var.name for n in body.negations}
    for name in names:
        message = _anchor_problem(name, body.positives, body.optional_sets, negated,
                                  "first_ever")
        if message:
            problems.append(Problem(path, line, message))
    if len(set(names)) < len(names):
        problems.append(Problem(path, line, "first_ever names a variable twice"))
    return tuple(dict.fromkeys(names))


def parse_history(node: yaml.Node | None, body, disjunctive: bool, path: str,
                  problems: list[Problem]) -> tuple[HistoryCondition, ...]:
    """``history:``: a list of {at_least: k | at_most: k, before: v | after: v, by:
    DURATION, where: CONDITION ON h}."""
    if node is None:
        return ()
    if not isinstance(node, yaml.SequenceNode):
        problems.append(Problem(path, line_of(node), "history must be a list, e.g. "
                                "history: [{at_most: 0, before: c, where: \"h.type = 'X'\"}]"))
        return ()
    if disjunctive:
        problems.append(Problem(path, line_of(node), "history with alternatives is not "
                                "supported yet: write one file per alternative"))
        return ()
    negated = {n.var.name for n in body.negations}
    out = []
    for item in node.value:
        line = line_of(item)
        if not isinstance(item, yaml.MappingNode):
            problems.append(Problem(path, line, "a history condition is a mapping such as "
                                    "{at_least: 1, before: c, by: 365d}"))
            continue
        fields = {}
        for k, v in item.value:
            key = scalar(k) if isinstance(k, yaml.ScalarNode) else None
            if key not in HISTORY_KEYS:
                problems.append(Problem(path, line_of(k), f"unknown key {key!r} in a history "
                                        f"condition (known: {', '.join(HISTORY_KEYS)})"))
                continue
            if isinstance(v, yaml.SequenceNode):
                fields[key] = [scalar(x) if isinstance(x, yaml.ScalarNode) else None
                               for x in v.value]
            else:
                fields[key] = scalar(v) if isinstance(v, yaml.ScalarNode) else None
        parsed = _one(fields, body, negated, path, line, problems)
        if parsed is not None:
            out.append(parsed)
    return tuple(out)


def _one(fields: dict, body, negated: set[str], path: str, line: int,
         problems: list[Problem]) -> HistoryCondition | None:
    bounds = [k for k in ("at_least", "at_most") if k in fields]
    sides = [k for k in ("before", "after") if k in fields]
    if len(bounds) != 1 or len(sides) != 1:
        problems.append(Problem(path, line, "a history condition needs one of at_least / "
                                "at_most and one of before / after"))
        return None
    count = fields[bounds[0]]
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
        problems.append(Problem(path, line, f"{bounds[0]} must be a whole number from 0 "
                                f"to {MAX_COUNT:,}"))
        return None
    anchor = fields[sides[0]]
    message = _anchor_problem(anchor, body.positives, body.optional_sets, negated,
                              f"history {sides[0]}")
    if message:
        problems.append(Problem(path, line, message))
        return None
    by = 0
    if fields.get("by") is not None:
        try:
            by = parse_duration(fields["by"])
        except ValueError as exc:
            problems.append(Problem(path, line, f"history by: {exc}"))
            return None
    where = _where(fields.get("where"), path, line, problems)
    if where is None:
        return None
    same = fields.get("same") or []
    if not isinstance(same, list) or not all(isinstance(a, str) and a for a in same):
        problems.append(Problem(path, line, "history same: a list of attributes the history "
                                "events share with the anchor's, e.g. same: [patient]"))
        return None
    return HistoryCondition(anchor, count if bounds[0] == "at_least" else None,
                            count if bounds[0] == "at_most" else None, sides[0], by, where,
                            line, tuple(same))


def _where(text, path: str, line: int, problems: list[Problem]) -> tuple[Property, ...] | None:
    """The properties of the history event h (none: any event)."""
    if text is None:
        return ()
    if not isinstance(text, str) or not text.strip():
        problems.append(Problem(path, line, "history where: must be a condition on h, "
                                "e.g. where: \"h.event_type = 'Chemotherapy'\""))
        return None
    try:
        parsed = parse_conditions(text)
    except ConditionSyntaxError as exc:
        problems.append(Problem(path, line, f"history where {text[:60]!r}: {exc}"))
        return None
    out = []
    for cond, used in parsed:
        names = {v for v, _ in used}
        if names != {HISTORY_EVENT} or not isinstance(cond, Property):
            problems.append(Problem(path, line, f"history where {text[:60]!r}: a condition "
                                    f"on the history event {HISTORY_EVENT} alone (e.g. "
                                    f"{HISTORY_EVENT}.event_type = 'X')"))
            return None
        out.append(cond)
    return tuple(out)
