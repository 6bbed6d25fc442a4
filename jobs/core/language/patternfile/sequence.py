"""Sequence pattern files (docs/language.md): name, source, within, sets, conditions,
contiguity, alternatives and examples, each problem with its file and line, all at once."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from jobs.core.language.conditions.expressions import (
    PARTITION,
    ConditionSyntaxError,
    aggregates_of,
    attributes_of,
    is_fact,
    is_time,
    match_times_of,
)
from jobs.core.language.conditions.kinds import (
    AggregateCondition,
    PrevRelationship,
    Property,
    Relationship,
    RunningCondition,
    classify,
    pairwise,
    running_condition,
)
from jobs.core.language.conditions.parser import parse_conditions, parse_value
from jobs.core.language.conditions.typecheck import time_problems
from jobs.core.language.optional import optional_problems
from jobs.core.language.partition_facts import anchored
from jobs.core.language.pattern import (
    CONTIGUITY,
    MATCHER_NAMES,
    NAME,
    PLAN_ALIASES,
    PLAN_NAMES,
    Disjunction,
    Example,
    Measure,
    Pattern,
    Variable,
)
from jobs.core.language.patternfile.history import parse_first_ever, parse_history
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
from jobs.core.language.patternfile.sets import parse_sets

REQUIRED = ("name", "source", "within", "sets")
OPTIONAL = ("conditions", "matcher", "description", "examples", "contiguity", "alternatives",
            "measures", "after_match", "first_ever", "history",
            "plan", "kind")
ALLOWED_KEYS = REQUIRED + OPTIONAL
BODY_KEYS = ("sets", "conditions", "contiguity", "measures")  # each alternative's own
# the columns of every sequence pattern's match table (a measure may not take their names)
MATCH_COLUMNS = ("kind", "match_id", "pattern", "pattern_version", "alternative", "start_ts",
                 "end_ts", "n_events", "bindings", "values", "stats", "run_id")
AFTER_MATCH = ("all", "past_last_event", "to_next_event")  # and to_first VAR, to_last VAR
AFTER_MATCH_TO = ("to_first", "to_last")
MAX_VARIABLES = 60  # one bit per variable in the events' 64-bit masks
MAX_SES_SET = 12  # the SES automaton has 2^k states for a set of k variables
MAX_ALTERNATIVES = 16


def parse_sequence(root: yaml.MappingNode, path: str) -> Pattern | Disjunction:
    """A sequence pattern file's checked node tree as a ``Pattern``, or a
    ``Disjunction`` for a file with ``alternatives:``; raises ``PatternError``."""
    problems: list[Problem] = []
    fields, key_lines = mapping_fields(root, ALLOWED_KEYS, path, problems)
    disjunctive = "alternatives" in fields
    for key in REQUIRED:
        if key not in fields and not (key == "sets" and disjunctive):
            problems.append(Problem(path, line_of(root), f"missing field {key!r}"))
    if disjunctive:
        for key in ("sets", "conditions", "measures"):
            if key in fields:
                problems.append(Problem(path, key_lines[key], f"{key!r} belongs inside each "
                                        "alternative when the file has alternatives: move "
                                        "it under one of them (or repeat it in each)"))

    def text_field(key: str, pattern: re.Pattern | None = None, rule: str = "") -> str | None:
        return text_value(fields, key, path, problems, pattern, rule)

    name = text_field("name", NAME, "must be lower case letters, digits and _ "
                      "(it names the output table)")
    source = text_field("source", NAME, "must be lower case letters, digits and _")
    description = text_field("description") or ""
    matcher = "ses"
    if "matcher" in fields:
        matcher = text_field("matcher") or "ses"
        if matcher not in MATCHER_NAMES:
            problems.append(Problem(path, line_of(fields["matcher"]),
                                    f"unknown matcher {matcher!r}: use one of "
                                    f"{', '.join(MATCHER_NAMES)}"))
    plan = None
    if "plan" in fields:
        plan = text_field("plan")
        if plan is not None and PLAN_ALIASES.get(plan, plan) not in PLAN_NAMES:
            problems.append(Problem(path, key_lines["plan"], f"unknown plan generator "
                                    f"{plan!r}: use one of {', '.join(PLAN_NAMES)}"))
        elif plan is not None and matcher != "zstream":
            problems.append(Problem(path, key_lines["plan"], f"plan: {plan} chooses the "
                                    "join order of matcher zstream, but this pattern uses "
                                    f"matcher {matcher} (its automaton follows the sets' "
                                    "order): remove plan, or set matcher: zstream"))
    within, tau = within_field(fields.get("within"), path, problems)
    after_match = text_field("after_match") or "all" if "after_match" in fields else "all"
    words = after_match.split()
    if not (after_match in AFTER_MATCH or (len(words) == 2 and words[0] in AFTER_MATCH_TO)):
        problems.append(Problem(path, key_lines["after_match"], f"after_match {after_match!r}: "
                                f"use one of {', '.join(AFTER_MATCH)}, or to_first VAR / "
                                "to_last VAR"))
        after_match = "all"
    elif after_match != "all" and disjunctive:
        problems.append(Problem(path, key_lines["after_match"], "after_match with "
                                "alternatives is not supported yet: write one file per "
                                "alternative"))

    contiguity = _contiguity(fields.get("contiguity"), "none", path, problems)
    if disjunctive:
        bodies = _parse_alternatives(fields["alternatives"], key_lines["alternatives"],
                                     matcher, contiguity, path, problems)
    else:
        own = {k: v for k, v in fields.items() if k != "contiguity"}  # checked above
        bodies = [_parse_body(own, matcher, contiguity, path, problems)]
    body = bodies[0] if bodies else None  # (none: the alternatives did not parse)
    first_ever = parse_first_ever(fields.get("first_ever"), body, disjunctive, path, problems)
    history = parse_history(fields.get("history"), body, disjunctive, path, problems)
    examples = _parse_examples(fields.get("examples"), [b.positives for b in bodies],
                               disjunctive, path, problems,
                               [{m.name for m in b.measures} for b in bodies])
    if problems:
        raise PatternError(problems)
    patterns = tuple(Pattern(name=name, source=source, within=within, tau=tau, sets=b.sets,
                             conditions=tuple(b.conditions), matcher=matcher,
                             description=description, negations=b.negations,
                             contiguity=b.contiguity, next_sets=b.next_sets,
                             optional_sets=b.optional_sets, after_match=after_match,
                             alternative=k + 1 if disjunctive else None,
                             plan=plan, measures=b.measures, first_ever=first_ever,
                             history=history,
                             path=path, condition_lines=tuple(b.lines),
                             examples=() if disjunctive else tuple(examples))
                     for k, b in enumerate(bodies))
    out = patterns[0] if not disjunctive else Disjunction(
        name=name, source=source, within=within, tau=tau, matcher=matcher,
        alternatives=patterns, description=description, plan=plan, path=path,
        examples=tuple(examples))
    if disjunctive and any(p.whole_history for p in patterns):
        problems.append(Problem(path, key_lines["alternatives"], "partition facts "
                                "(partition.first_ts, last_ts, count) with alternatives are not "
                                "supported yet: write one file per alternative"))
    for p in patterns:
        for message in after_match_problems(p):
            problems.append(Problem(path, key_lines["after_match"], message))
        for message in optional_problems(p):
            where = f"alternative {p.alternative}: " if p.alternative else ""
            problems.append(Problem(path, key_lines.get("sets", key_lines.get(
                "alternatives", line_of(root))), where + message))
    for m in (m for p in patterns for m in p.measures):
        if m.name in out.partition_attributes:
            problems.append(Problem(path, m.line, f"measure {m.name!r}: the match table has "
                                    f"a column {m.name!r} already (a partition attribute); "
                                    "choose another name"))
    if problems:
        raise PatternError(problems)
    return out


@dataclass
class _Body:
    """What one conjunctive pattern (the file, or one of its alternatives) declares."""

    sets: tuple
    negations: tuple
    conditions: list
    lines: list
    contiguity: str
    measures: tuple = ()
    next_sets: tuple = ()
    optional_sets: tuple = ()

    @property
    def positives(self) -> dict[str, Variable]:
        return {v.name: v for s in self.sets for v in s}


def _parse_body(fields: dict[str, yaml.Node], matcher: str, contiguity: str,
                path: str, problems: list[Problem]) -> _Body:
    """``sets``, ``conditions`` and ``contiguity`` of the file or of one alternative."""
    broken: set[str] = set()  # names of badly written variables: no follow-on errors for them
    sets, negations, next_sets, optional_sets = parse_sets(fields.get("sets"), path,
                                                            problems, broken)
    variables = {v.name: v for s in sets for v in s}
    variables.update((n.var.name, n.var) for n in negations)
    conditions, cond_lines = _parse_conditions(fields.get("conditions"), variables, path,
                                               problems, broken)
    contiguity = _contiguity(fields.get("contiguity"), contiguity, path, problems)
    if len(variables) > MAX_VARIABLES:
        problems.append(Problem(path, line_of(fields["sets"]), f"{len(variables)} variables: "
                                f"a pattern may have at most {MAX_VARIABLES}"))
    if matcher == "ses":
        for i, s in enumerate(sets):
            if len(s) > MAX_SES_SET:
                problems.append(Problem(path, line_of(fields["sets"]), f"event set "
                                        f"{i + 1} has {len(s)} variables: with matcher ses "
                                        f"at most {MAX_SES_SET} (its automaton has 2^k "
                                        "states per set of k); split the set or use matcher "
                                        "zstream"))
    measures = _parse_measures(fields.get("measures"), variables, path, problems, broken)
    return _Body(sets, negations, conditions, cond_lines, contiguity, measures, next_sets,
                 optional_sets)


def _contiguity(node, default: str, path: str, problems: list[Problem]) -> str:
    """``contiguity`` of the file or of one alternative (``default`` when absent or
    wrong; a wrong value is a problem)."""
    if node is None:
        return default
    value = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if value not in CONTIGUITY:
        problems.append(Problem(path, line_of(node), f"contiguity {value!r}: use one of "
                                f"{', '.join(CONTIGUITY)}"))
        return default
    return value


def _parse_alternatives(node, line: int, matcher: str, contiguity: str, path: str,
                        problems: list[Problem]) -> list[_Body]:
    """``alternatives``: a list of mappings, each with its own ``sets``, ``conditions``
    and (optionally) ``contiguity``; the file's ``contiguity`` is their default."""
    if not isinstance(node, yaml.SequenceNode) or len(node.value) < 2:
        problems.append(Problem(path, line, "alternatives must be a list of at least "
                                "two patterns, each a mapping with sets and conditions (for "
                                "one, write its sets and conditions at the top level)"))
        return []
    if len(node.value) > MAX_ALTERNATIVES:
        problems.append(Problem(path, line, f"{len(node.value)} alternatives: at most "
                                f"{MAX_ALTERNATIVES}"))
        return []
    bodies = []
    for k, alt in enumerate(node.value, start=1):
        if not isinstance(alt, yaml.MappingNode):
            problems.append(Problem(path, line_of(alt), f"alternative {k} must be a mapping "
                                    "with sets and conditions"))
            continue
        fields: dict[str, yaml.Node] = {}
        for knode, vnode in alt.value:
            key = scalar(knode)
            if key not in BODY_KEYS:
                hint = ("; name, within, matcher and source are shared: write them once at "
                        "the top" if key in ALLOWED_KEYS else "")
                problems.append(Problem(path, line_of(knode), f"unknown key {key!r} in "
                                        f"alternative {k} (allowed: "
                                        f"{', '.join(BODY_KEYS)}){hint}"))
            elif key in fields:
                problems.append(Problem(path, line_of(knode), f"key {key!r} appears twice in "
                                        f"alternative {k}"))
            else:
                fields[key] = vnode
        if "sets" not in fields:
            problems.append(Problem(path, line_of(alt), f"alternative {k} has no sets"))
        bodies.append(_parse_body(fields, matcher, contiguity, path, problems))
    return bodies


def _parse_conditions(node, variables: dict[str, Variable], path: str,
                      problems: list[Problem], broken: set[str]):
    conditions, lines = [], []
    if node is None:
        return conditions, lines
    if isinstance(node, yaml.ScalarNode) and scalar(node) is None:
        return conditions, lines
    if not isinstance(node, yaml.SequenceNode):
        problems.append(Problem(path, line_of(node), "conditions must be a list, one condition "
                                "per line"))
        return conditions, lines
    known = ", ".join(variables) or "none"
    for cnode in node.value:
        line = line_of(cnode)
        text = scalar(cnode) if isinstance(cnode, yaml.ScalarNode) else None
        if isinstance(text, bool) or not isinstance(text, str):
            problems.append(Problem(path, line, "a condition must be text such as "
                                    "c.type = 'C'"))
            continue
        shown = text if len(text) <= 80 else text[:77] + "..."
        try:
            parsed = parse_conditions(text, {v.name for v in variables.values() if v.group})
        except ConditionSyntaxError as exc:
            col = f" (column {exc.column})" if exc.column else ""
            problems.append(Problem(path, line, f"in condition {shown!r}{col}: {exc}"))
            continue
        for cond, used in parsed:
            if any(v == PARTITION for v, _ in used):  # partition.first_ts, ...: facts
                cond, used = _anchored(cond, used, variables)
            bad = [v for v, _ in used if v not in variables]
            if bad:
                for v in dict.fromkeys(x for x in bad if x not in broken):
                    problems.append(Problem(path, line, f"in condition {shown!r}: unknown "
                                            f"variable {v!r} (the pattern's variables are "
                                            f"{known})"))
                continue
            cond = _as_running(cond, variables)
            rel = pairwise(cond)
            if rel is not None and variables[cond.var].group and not variables[cond.var].negated:
                cond = rel  # w.a = w.a: over every pair of the group's events
            message = _misuse(cond, variables) or _on_time(cond)
            if message:
                problems.append(Problem(path, line, f"in condition {shown!r}: {message}"))
                continue
            conditions.append(cond)
            lines.append(line)
    return conditions, lines


def after_match_problems(p: Pattern) -> list[str]:
    """What keeps ``after_match`` from being exact: episodes are taken per partition of
    the partition attributes over its whole history (without any: over the whole source),
    so every negated variable must be linked to them (no time slices), and to_first /
    to_last name a positive variable."""
    if p.after_match == "all":
        return []
    words = p.after_match.split()
    if len(words) == 2 and words[1] not in {v.name for v in p.variables}:
        return [f"after_match {p.after_match}: {words[1]!r} is not a positive variable of "
                f"the pattern (its variables are {', '.join(v.name for v in p.variables)})"]
    unlinked = {v.name for v in p.negated} - p.linked_negations
    if p.partition_attributes and unlinked:
        return [f"after_match {p.after_match}: the negated variable(s) {', '.join(sorted(unlinked))} "
                "must be linked to the partition attributes (e.g. n.patient = a.patient)"]
    return []


def _as_running(cond, variables: dict[str, Variable]):
    """A condition on the whole match that reads a group's current event and aggregates of
    that group only (``p.value >= 1.5 * first(p.value)``) is a running condition: each
    event of the group against the events bound to it before (Flink's iterative
    conditions), when it has the form the engine runs."""
    if not isinstance(cond, AggregateCondition) or any(
            True for _ in match_times_of(cond.expr)):
        return cond
    names = {a.var for a in attributes_of(cond.expr)}
    groups = {g.var for g in aggregates_of(cond.expr)}
    v = variables.get(next(iter(names))) if len(names) == 1 else None
    if v is not None and names == groups and v.group and not v.negated:
        try:
            return running_condition(cond.expr, v.name)
        except ConditionSyntaxError:
            return cond  # the misuse check says what is wrong
    return cond


def _on_time(cond) -> str | None:
    """What is wrong with the times of a condition or measure: times compare with times
    and durations with durations (``conditions.time_problems``); a property cannot read
    its own event's time (there is no time literal to compare it with)."""
    problems = time_problems(cond.expr)
    if problems:
        return problems[0]
    read = [a.attr for a in attributes_of(cond.expr)]
    if isinstance(cond, Property) and any(is_time(a) for a in read) \
            and not any(is_fact(a) for a in read):  # a partition's time is another time
        return (f"reads only {cond.var}'s own time: relate it to another variable's time, "
                f"e.g. b.ts - {cond.var}.ts <= 9d, or bound the whole match with within")
    return None


def _misuse(cond, variables: dict[str, Variable]) -> str | None:
    """What the variables' kinds forbid: prev() on a singleton or a negated variable, a
    relationship between two negated variables."""
    if isinstance(cond, PrevRelationship):
        v = variables[cond.var]
        if v.negated:
            return (f"prev() cannot be used on the negated variable {v.name!r}: it stands "
                    "for a single event")
        if not v.group:
            return (f"prev() needs a group variable, but {cond.var!r} is a singleton (write "
                    f"{cond.var}+ in sets to make it a group)")
    if isinstance(cond, AggregateCondition):
        return _aggregate_misuse(cond, variables)
    if isinstance(cond, RunningCondition):
        v = variables[cond.var]
        if v.negated or not v.group:
            what = "the negated variable" if v.negated else "the singleton"
            return (f"a running aggregate compares each event of a group with the ones bound "
                    f"before it, but {v.name!r} is {what}")
    if isinstance(cond, Relationship) and all(variables[v].negated for v in cond.variables):
        a, b = cond.variables
        return (f"relates two negated variables ({a}, {b}): a negated variable may only be "
                "related to positive ones")
    return None


def _aggregate_misuse(cond: AggregateCondition | Measure, variables: dict[str, Variable],
                      what: str = "a condition with aggregates") -> str | None:
    """An aggregate reads the events of a positive group variable; the other attributes
    of its condition (or measure) must be of positive singletons (one event per match)."""
    for g in aggregates_of(cond.expr):
        v = variables[g.var]
        if v.negated:
            return (f"{g} aggregates the negated variable {v.name!r}: a negated variable "
                    "binds no event of a match")
        if not v.group and not (v.optional and g.func == "count" and g.attr is None):
            return (f"{g} aggregates the singleton {v.name!r}, which binds one event: write "
                    f"{v.name}.{g.attr or 'attr'} (or {v.name}+ in sets to make it a group)")
    for a in attributes_of(cond.expr):
        v = variables[a.var]
        if v.negated:
            return (f"{a} is an attribute of the negated variable {v.name!r} in {what}, "
                    "which reads a whole match: a negated variable binds no event of it")
        if v.group:
            return (f"{a}: {v.name} is a group, and {what} reads the whole match; name one "
                    f"value of the group, e.g. last({a}) or max({a})")
    return None


def _anchored(cond, used, variables: dict[str, Variable]):
    """A condition that reads partition facts, read on a bound variable: its own, else the
    pattern's first required one (every event of a match has the same partition)."""
    own = [v for v, _ in used if v != PARTITION and v in variables]
    required = [v.name for v in variables.values() if not v.negated and v.min > 0]
    anchor = own[0] if own else (required or list(variables) or [PARTITION])[0]
    expr = anchored(cond.expr, anchor)
    return classify(expr), [(anchor if v == PARTITION else v, c) for v, c in used]


def _parse_measures(node, variables: dict[str, Variable], path: str, problems: list[Problem],
                    broken: set[str]) -> tuple[Measure, ...]:
    """``measures``: a mapping of output column -> value expression over the match."""
    if node is None or (isinstance(node, yaml.ScalarNode) and scalar(node) is None):
        return ()
    if not isinstance(node, yaml.MappingNode):
        problems.append(Problem(path, line_of(node), "measures must be a mapping of column "
                                "name to expression, e.g. total_dose: sum(p.value)"))
        return ()
    out: list[Measure] = []
    known = ", ".join(variables) or "none"
    for knode, vnode in node.value:
        line = line_of(knode)
        name = scalar(knode) if isinstance(knode, yaml.ScalarNode) else None
        if not isinstance(name, str) or not NAME.fullmatch(name):
            problems.append(Problem(path, line, f"measure name {name!r} must be lower case "
                                    "letters, digits and _ (it names a column)"))
            continue
        if name in MATCH_COLUMNS:
            problems.append(Problem(path, line, f"measure {name!r}: every match table has a "
                                    f"column {name!r}; choose another name"))
            continue
        if any(m.name == name for m in out):
            problems.append(Problem(path, line, f"measure {name!r} appears twice"))
            continue
        text = scalar(vnode) if isinstance(vnode, yaml.ScalarNode) else None
        if isinstance(text, bool) or not isinstance(text, (str, int, float)):
            problems.append(Problem(path, line, f"measure {name!r} must be an expression "
                                    "such as sum(p.value)"))
            continue
        try:
            expr, used = parse_value(str(text), {v.name for v in variables.values()
                                                 if v.group})
        except ConditionSyntaxError as exc:
            col = f" (column {exc.column})" if exc.column else ""
            problems.append(Problem(path, line, f"in measure {name!r}{col}: {exc}"))
            continue
        if any(v == PARTITION for v, _ in used):  # partition facts, read on a variable
            singles = [v.name for v in variables.values()
                       if not v.negated and not v.group and v.min > 0]
            anchor = next((v for v, _ in used if v != PARTITION and v in variables),
                          (singles or list(variables) or [PARTITION])[0])
            expr = anchored(expr, anchor)
            used = [(anchor if v == PARTITION else v, c) for v, c in used]
        bad = [v for v, _ in used if v not in variables]
        if bad:
            for v in dict.fromkeys(x for x in bad if x not in broken):
                problems.append(Problem(path, line, f"in measure {name!r}: unknown variable "
                                        f"{v!r} (the pattern's variables are {known})"))
            continue
        measure = Measure(name, expr, line)
        if not used and not any(True for _ in match_times_of(expr)):
            problems.append(Problem(path, line, f"measure {name!r} reads nothing of the "
                                    "match: use an aggregate such as count(p) or an "
                                    "attribute such as c.value"))
            continue
        message = _aggregate_misuse(measure, variables, "a measure") or _on_time(measure)
        if message:
            problems.append(Problem(path, line, f"in measure {name!r}: {message}"))
            continue
        out.append(measure)
    return tuple(out)


def _parse_examples(node, alternatives: list[dict[str, Variable]], disjunctive: bool,
                    path: str, problems: list[Problem],
                    measures: list[set[str]] | None = None) -> list[Example]:
    """``examples``: a list of {name, events: [rows], expect: [bindings]}. In a file with
    alternatives, every expected match names its alternative (``alternative: 2``). An
    expected match may give some of its measures' values (``measures: {doses: 2}``)."""
    out = []
    for name, line, events, expect, expect_line in example_entries(
            node, path, problems, "matches such as {c: [e1], p: [e3, e9]}"):
        ids = {str(e["event_id"]) for e in events}
        for m in expect:
            message = _expected_problem(m, alternatives, disjunctive, ids, measures)
            if message:
                problems.append(Problem(path, expect_line,
                                        f"example {name!r}: expected match {m}: {message}"))
        out.append(Example(name, line, tuple(events), tuple(
            {v: ids_ if v in ("alternative", "measures") else
             [str(x) for x in (ids_ if isinstance(ids_, list) else [ids_])]
             for v, ids_ in m.items()} for m in expect)))
    return out


def _expected_problem(m: dict, alternatives: list[dict[str, Variable]], disjunctive: bool,
                      ids: set[str], measures: list[set[str]] | None = None) -> str | None:
    """What is wrong with one expected match of an example, if anything."""
    variables = alternatives[0] if alternatives else {}
    if "measures" in m:
        given = m["measures"]
        k = m.get("alternative") if disjunctive else 1
        own = (measures or [set()] * len(alternatives))[k - 1] \
            if isinstance(k, int) and 1 <= k <= len(alternatives) else set()
        if not isinstance(given, dict):
            return "measures must be a mapping such as {doses: 2}"
        unknown = sorted(map(str, set(given) - own))
        if unknown:
            return (f"unknown measure(s) {unknown} (the pattern's measures are "
                    f"{', '.join(sorted(own)) or 'none'})")
        m = {v: x for v, x in m.items() if v != "measures"}
    if disjunctive:
        k = m.get("alternative")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(alternatives):
            return (f"name its alternative, e.g. alternative: 1 (1 to {len(alternatives)})"
                    if k is None else f"alternative {k!r} must be a number from 1 to "
                    f"{len(alternatives)}")
        variables = alternatives[k - 1]
        m = {v: x for v, x in m.items() if v != "alternative"}
    wrong = set(m) ^ set(variables)
    if wrong:
        of = f"alternative {k}'s" if disjunctive else "the pattern's"
        return (f"variables {sorted(map(str, wrong))} do not match {of} "
                f"({', '.join(variables)})")
    missing = {str(x) for v in m.values() for x in (v if isinstance(v, list) else [v])} - ids
    if missing:
        return f"unknown event id(s) {sorted(missing)}"
    return None
