"""Load and validate pattern files (DESIGN.md section 4).

A pattern file arrives in a pull request, so it is treated as data: the YAML is *composed*
into a node tree with PyYAML's safe loader and only plain scalars, lists and mappings are
accepted; any tag such as ``!!python/object`` is refused before anything is constructed.
Every problem is reported with the file and line, all at once.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .conditions import (
    KEYWORDS,
    Attr,
    Cmp,
    ConditionSyntaxError,
    In,
    Lit,
    Neg,
    PrevRelationship,
    Relationship,
    attributes_of,
    comparisons_of,
    parse_conditions,
)
from .engine import MATCHERS
from .pattern import (
    CONTIGUITY,
    Disjunction,
    Example,
    Negation,
    Pattern,
    Variable,
    parse_duration,
)
from .planners import ALIASES, PLANNERS

REQUIRED = ("name", "source", "within", "sets")
OPTIONAL = ("conditions", "matcher", "description", "examples", "contiguity", "alternatives",
            "plan", "kind")
KINDS = ("sequence", "window")
ALLOWED_KEYS = REQUIRED + OPTIONAL
BODY_KEYS = ("sets", "conditions", "contiguity")  # what each alternative has of its own
NAME = re.compile(r"[a-z][a-z0-9_]{0,99}")  # fullmatch: no trailing newline
VARIABLE = re.compile(r"^(not\s+)?([A-Za-z_][A-Za-z0-9_]*)(\+|\{\s*(\d+)\s*(,\s*(\d*)\s*)?\})?$",
                      re.IGNORECASE)
MAX_BOUND = 10_000
SAFE_TAGS = {f"tag:yaml.org,2002:{t}"
             for t in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")}
RESERVED = set(KEYWORDS) | {"alternative"}  # the tag of a disjunction's expected matches
# Bounds that keep checking a pull request's file cheap and the pattern runnable.
MAX_FILE_BYTES = 512 * 1024
MAX_DEPTH = 32  # nesting of lists and mappings
MAX_SCALAR_CHARS = 10_000
MAX_VARIABLES = 60  # one bit per variable in the events' 64-bit masks
MAX_SES_SET = 12  # the SES automaton has 2^k states for a set of k variables
MAX_TAU_DAYS = 36_525  # 100 years: a longer window could never close (its horizon)


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class PatternError(ValueError):
    """One or more problems in a pattern file; ``str()`` gives one ``path:line: message`` each."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _check_tags(node: yaml.Node, path: str, problems: list[Problem]) -> None:
    if node.tag not in SAFE_TAGS:
        problems.append(Problem(path, _line(node),
                                f"tag {node.tag!r} is not allowed: a pattern file holds plain "
                                "text, numbers, lists and mappings only"))
        return
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                problems.append(Problem(path, _line(k), "a mapping key must be plain text, "
                                        "not a list or a mapping"))
                continue
            _check_tags(k, path, problems)
            _check_tags(v, path, problems)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            _check_tags(v, path, problems)


def _scalar(node: yaml.Node):
    return yaml.constructor.SafeConstructor().construct_object(node)


def load_pattern(path: str | Path) -> Pattern | Disjunction:
    """Read and validate one pattern file; raises ``PatternError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PatternError([Problem(str(path), 0, f"cannot read the file: {exc.strerror}")]) from None
    except UnicodeDecodeError:
        raise PatternError([Problem(str(path), 0, "the file is not UTF-8 text")]) from None
    return parse_pattern(text, str(path))


def _prescan(text: str, path: str) -> None:
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


def parse_pattern(text: str, path: str = "<pattern>") -> Pattern | Disjunction:
    """Parse and validate the text of a pattern file; raises ``PatternError``. A file
    with ``alternatives:`` gives a ``Disjunction``."""
    _prescan(text, path)
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
    _check_tags(root, path, problems)
    if problems:
        raise PatternError(problems)
    if not isinstance(root, yaml.MappingNode):
        raise PatternError([Problem(path, _line(root), "a pattern file is a mapping of keys "
                                    f"({', '.join(REQUIRED)}, ...)")])
    kind = _kind(root, path)
    if kind == "window":
        from .window_loader import parse_window

        return parse_window(root, path)
    fields, key_lines = mapping_fields(root, ALLOWED_KEYS, path, problems)
    disjunctive = "alternatives" in fields
    for key in REQUIRED:
        if key not in fields and not (key == "sets" and disjunctive):
            problems.append(Problem(path, _line(root), f"missing field {key!r}"))
    if disjunctive:
        for key in ("sets", "conditions"):
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
        if matcher not in MATCHERS:
            problems.append(Problem(path, _line(fields["matcher"]),
                                    f"unknown matcher {matcher!r}: use one of "
                                    f"{', '.join(MATCHERS)}"))
    plan = None
    if "plan" in fields:
        plan = text_field("plan")
        if plan is not None and ALIASES.get(plan, plan) not in PLANNERS:
            problems.append(Problem(path, key_lines["plan"], f"unknown plan generator "
                                    f"{plan!r}: use one of {', '.join(PLANNERS)}"))
        elif plan is not None and matcher != "zstream":
            problems.append(Problem(path, key_lines["plan"], f"plan: {plan} chooses the "
                                    "join order of matcher zstream, but this pattern uses "
                                    f"matcher {matcher} (its automaton follows the sets' "
                                    "order): remove plan, or set matcher: zstream"))
    within, tau = _within(fields.get("within"), path, problems)

    contiguity = _contiguity(fields.get("contiguity"), "none", path, problems)
    if disjunctive:
        bodies = _parse_alternatives(fields["alternatives"], key_lines["alternatives"],
                                     matcher, contiguity, path, problems)
    else:
        own = {k: v for k, v in fields.items() if k != "contiguity"}  # checked above
        bodies = [_parse_body(own, matcher, contiguity, path, problems)]
    examples = _parse_examples(fields.get("examples"), [b.positives for b in bodies],
                               disjunctive, path, problems)
    if problems:
        raise PatternError(problems)
    patterns = tuple(Pattern(name=name, source=source, within=within, tau=tau, sets=b.sets,
                             conditions=tuple(b.conditions), matcher=matcher,
                             description=description, negations=b.negations,
                             contiguity=b.contiguity, alternative=k + 1 if disjunctive else None,
                             plan=plan,
                             path=path, condition_lines=tuple(b.lines),
                             examples=() if disjunctive else tuple(examples))
                     for k, b in enumerate(bodies))
    if not disjunctive:
        return patterns[0]
    return Disjunction(name=name, source=source, within=within, tau=tau, matcher=matcher,
                       alternatives=patterns, description=description, plan=plan, path=path,
                       examples=tuple(examples))


def _kind(root: yaml.MappingNode, path: str) -> str:
    """``kind``: sequence (SES / ZStream patterns, the default) or window."""
    for knode, vnode in root.value:
        if isinstance(knode, yaml.ScalarNode) and knode.value == "kind":
            value = _scalar(vnode) if isinstance(vnode, yaml.ScalarNode) else None
            if value not in KINDS:
                raise PatternError([Problem(path, _line(vnode), f"kind {value!r}: use one of "
                                            f"{', '.join(KINDS)} (default: sequence)")])
            return value
    return "sequence"


def mapping_fields(root: yaml.MappingNode, allowed: tuple[str, ...], path: str,
                   problems: list[Problem]) -> tuple[dict[str, yaml.Node], dict[str, int]]:
    """The top-level keys of a pattern file (each once, each allowed) and their lines."""
    fields: dict[str, yaml.Node] = {}
    key_lines: dict[str, int] = {}
    for knode, vnode in root.value:
        key = _scalar(knode) if isinstance(knode, yaml.ScalarNode) else None
        if not isinstance(key, str):
            problems.append(Problem(path, _line(knode), "keys must be plain words"))
            continue
        if key in fields:
            problems.append(Problem(path, _line(knode), f"key {key!r} appears twice"))
            continue
        if key not in allowed:
            hint = difflib.get_close_matches(key, allowed, n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            problems.append(Problem(path, _line(knode), f"unknown key {key!r} "
                                    f"(allowed: {', '.join(allowed)}){extra}"))
            continue
        fields[key] = vnode
        key_lines[key] = _line(knode)
    return fields, key_lines


def text_value(fields: dict[str, yaml.Node], key: str, path: str, problems: list[Problem],
               pattern: re.Pattern | None = None, rule: str = "") -> str | None:
    """A text field (None when absent; a problem when not text or not ``pattern``)."""
    node = fields.get(key)
    if node is None:
        return None
    value = _scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if not isinstance(value, str) or not value.strip():
        problems.append(Problem(path, _line(node), f"{key!r} must be text"))
        return None
    if pattern is not None and not pattern.fullmatch(value):
        problems.append(Problem(path, _line(node), f"{key} {value!r} {rule}"))
        return None
    return value


def _within(node, path: str, problems: list[Problem]) -> tuple[str | None, int]:
    """``within``: a positive duration of at most 100 years, with its unit."""
    if node is None:
        return None, 0
    raw = _scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(raw, int) and not isinstance(raw, bool):
        problems.append(Problem(path, _line(node), f"within: {raw} has no unit: write e.g. "
                                f"{raw}d (units: ms, s, min, h, d)"))
    elif not isinstance(raw, str):
        problems.append(Problem(path, _line(node), "within must be a duration such as 15d"))
    else:
        try:
            tau = parse_duration(raw)
        except ValueError as exc:
            problems.append(Problem(path, _line(node), f"within: {exc}"))
            return None, 0
        if tau <= 0 or tau > MAX_TAU_DAYS * 86400 * 10**9:
            problems.append(Problem(path, _line(node), f"within: {raw.strip()} must be "
                                    f"positive and at most {MAX_TAU_DAYS}d (100 years); a "
                                    "longer window never closes"))
        return raw.strip(), tau
    return None, 0


@dataclass
class _Body:
    """What one conjunctive pattern (the file, or one of its alternatives) declares."""

    sets: tuple
    negations: tuple
    conditions: list
    lines: list
    contiguity: str

    @property
    def positives(self) -> dict[str, Variable]:
        return {v.name: v for s in self.sets for v in s}


def _parse_body(fields: dict[str, yaml.Node], matcher: str, contiguity: str,
                path: str, problems: list[Problem]) -> _Body:
    """``sets``, ``conditions`` and ``contiguity`` of the file or of one alternative."""
    broken: set[str] = set()  # names of badly written variables: no follow-on errors for them
    sets, negations = _parse_sets(fields.get("sets"), path, problems, broken)
    variables = {v.name: v for s in sets for v in s}
    variables.update((n.var.name, n.var) for n in negations)
    conditions, cond_lines = _parse_conditions(fields.get("conditions"), variables, path,
                                               problems, broken)
    contiguity = _contiguity(fields.get("contiguity"), contiguity, path, problems)
    if len(variables) > MAX_VARIABLES:
        problems.append(Problem(path, _line(fields["sets"]), f"{len(variables)} variables: "
                                f"a pattern may have at most {MAX_VARIABLES}"))
    if matcher == "ses":
        for i, s in enumerate(sets):
            if len(s) > MAX_SES_SET:
                problems.append(Problem(path, _line(fields["sets"]), f"event set "
                                        f"{i + 1} has {len(s)} variables: with matcher ses "
                                        f"at most {MAX_SES_SET} (its automaton has 2^k "
                                        "states per set of k); split the set or use matcher "
                                        "zstream"))
    return _Body(sets, negations, conditions, cond_lines, contiguity)


def _contiguity(node, default: str, path: str, problems: list[Problem]) -> str:
    """``contiguity`` of the file or of one alternative (``default`` when absent or
    wrong; a wrong value is a problem)."""
    if node is None:
        return default
    value = _scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if value not in CONTIGUITY:
        problems.append(Problem(path, _line(node), f"contiguity {value!r}: use one of "
                                f"{', '.join(CONTIGUITY)}"))
        return default
    return value


MAX_ALTERNATIVES = 16


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
            problems.append(Problem(path, _line(alt), f"alternative {k} must be a mapping "
                                    "with sets and conditions"))
            continue
        fields: dict[str, yaml.Node] = {}
        for knode, vnode in alt.value:
            key = _scalar(knode)
            if key not in BODY_KEYS:
                hint = ("; name, within, matcher and source are shared: write them once at "
                        "the top" if key in ALLOWED_KEYS else "")
                problems.append(Problem(path, _line(knode), f"unknown key {key!r} in "
                                        f"alternative {k} (allowed: "
                                        f"{', '.join(BODY_KEYS)}){hint}"))
            elif key in fields:
                problems.append(Problem(path, _line(knode), f"key {key!r} appears twice in "
                                        f"alternative {k}"))
            else:
                fields[key] = vnode
        if "sets" not in fields:
            problems.append(Problem(path, _line(alt), f"alternative {k} has no sets"))
        bodies.append(_parse_body(fields, matcher, contiguity, path, problems))
    return bodies


def _parse_sets(node, path: str, problems: list[Problem], broken: set[str]
                ) -> tuple[tuple[tuple[Variable, ...], ...], tuple[Negation, ...]]:
    """The positive event sets (P⁺) and the negated variables with their intervals."""
    if node is None:
        return (), ()
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.append(Problem(path, _line(node), "sets must be a non-empty list of event "
                                "sets, e.g. [[c, p+], [b]]"))
        return (), ()
    seen: dict[str, int] = {}
    parsed: list[tuple[bool, list[tuple]]] = []  # (negated set?, [(name, group, lo, hi)])
    for i, set_node in enumerate(node.value):
        if not isinstance(set_node, yaml.SequenceNode) or not set_node.value:
            problems.append(Problem(path, _line(set_node), f"event set {i + 1} must be a "
                                    "non-empty list of variables, e.g. [c, p+]"))
            continue
        current, kinds = [], set()
        for vnode in set_node.value:
            raw = _scalar(vnode) if isinstance(vnode, yaml.ScalarNode) else None
            m = VARIABLE.match(raw.strip()) if isinstance(raw, str) else None
            if m is None:
                if isinstance(raw, str) and re.match(r"(not\s+)?[A-Za-z_]\w*", raw):
                    broken.add(re.match(r"(?:not\s+)?([A-Za-z_]\w*)", raw).group(1))
                problems.append(Problem(path, _line(vnode),
                                        f"bad variable {raw!r} in set {i + 1}: write a name, "
                                        "p+ for one or more events, 'p{2,5}' or 'p{3,}' for "
                                        "bounds, or 'not n' for a negated event"))
                continue
            neg, name, suffix, lo, comma, hi = m.groups()
            line = _line(vnode)
            if name in RESERVED:
                problems.append(Problem(path, line, f"{name!r} is reserved and cannot "
                                        "name a variable"))
                continue
            if name in seen:
                where = ("twice in set " + str(i + 1)) if seen[name] == i else \
                    f"in sets {seen[name] + 1} and {i + 1}"
                problems.append(Problem(path, line, f"variable {name!r} appears {where}: "
                                        "each variable belongs to exactly one set"))
                continue
            seen[name] = i
            group, vmin, vmax = False, 1, 1
            if suffix == "+":
                group, vmax = True, None
            elif suffix:
                vmin = int(lo)
                vmax = vmin if comma is None else (int(hi) if hi else None)
                group = True
                if vmin < 1:
                    problems.append(Problem(path, line, f"{raw}: the minimum must be at least "
                                            "1 (a variable binds at least one event; to "
                                            "require that no event occurs, use 'not')"))
                    continue
                if vmax is not None and vmax < vmin:
                    problems.append(Problem(path, line, f"{raw}: the minimum {vmin} is larger "
                                            f"than the maximum {vmax}"))
                    continue
                if vmin > MAX_BOUND or (vmax or 0) > MAX_BOUND:
                    problems.append(Problem(path, line, f"{raw}: bounds above {MAX_BOUND:,} "
                                            "are not supported"))
                    continue
            if neg and group:
                problems.append(Problem(path, line, f"'{raw}': a negated variable is a "
                                        f"single event; write 'not {name}' without "
                                        f"{suffix}"))
                continue
            kinds.add(bool(neg))
            current.append((name, group, vmin, vmax, bool(neg)))
        if len(kinds) > 1:
            problems.append(Problem(path, _line(set_node), f"event set {i + 1} mixes negated "
                                    "and positive variables: put the 'not' variables in a "
                                    "set of their own, e.g. [[a], [not n], [b]]"))
            continue
        if current:
            parsed.append((kinds == {True}, current))
    positives = [s for negated, s in parsed if not negated]
    if parsed and not positives:
        problems.append(Problem(path, _line(node), "every event set is negated: a pattern "
                                "needs at least one positive variable"))
        return (), ()
    sets, negations, index = [], [], 0
    for negated, current in parsed:
        if not negated:
            sets.append(tuple(Variable(name, group, len(sets), index + k, vmin, vmax)
                              for k, (name, group, vmin, vmax, _) in enumerate(current)))
            index += len(current)
    n_index = index
    position = -1  # index of the last positive set seen
    for negated, current in parsed:
        if not negated:
            position += 1
            continue
        for name, *_ in current:
            var = Variable(name, False, -1, n_index, negated=True)
            n_index += 1
            negations.append(Negation(var, None if position < 0 else position,
                                      position + 1 if position + 1 < len(sets) else None))
    return tuple(sets), tuple(negations)


def _parse_conditions(node, variables: dict[str, Variable], path: str,
                      problems: list[Problem], broken: set[str]):
    conditions, lines = [], []
    if node is None:
        return conditions, lines
    if isinstance(node, yaml.ScalarNode) and _scalar(node) is None:
        return conditions, lines
    if not isinstance(node, yaml.SequenceNode):
        problems.append(Problem(path, _line(node), "conditions must be a list, one condition "
                                "per line"))
        return conditions, lines
    known = ", ".join(variables) or "none"
    for cnode in node.value:
        line = _line(cnode)
        text = _scalar(cnode) if isinstance(cnode, yaml.ScalarNode) else None
        if isinstance(text, bool) or not isinstance(text, str):
            problems.append(Problem(path, line, "a condition must be text such as "
                                    "c.type = 'C'"))
            continue
        shown = text if len(text) <= 80 else text[:77] + "..."
        try:
            parsed = parse_conditions(text)
        except ConditionSyntaxError as exc:
            col = f" (column {exc.column})" if exc.column else ""
            problems.append(Problem(path, line, f"in condition {shown!r}{col}: {exc}"))
            continue
        for cond, used in parsed:
            bad = [v for v, _ in used if v not in variables]
            if bad:
                for v in dict.fromkeys(x for x in bad if x not in broken):
                    problems.append(Problem(path, line, f"in condition {shown!r}: unknown "
                                            f"variable {v!r} (the pattern's variables are "
                                            f"{known})"))
                continue
            message = _misuse(cond, variables) or _on_time(cond)
            if message:
                problems.append(Problem(path, line, f"in condition {shown!r}: {message}"))
                continue
            conditions.append(cond)
            lines.append(line)
    return conditions, lines


TIME_REFUSED = ("conditions on event times are not supported yet (such a condition would "
                "never hold): bound the whole match with `within:` instead "
                "(docs/language.md, Conditions)")


def _on_time(cond) -> str | None:
    """A condition that reads ``ts``, the event time. Conditions compare numbers and text
    only; refusing one on time beats accepting a condition that silently never holds."""
    names = sorted({str(a) for a in attributes_of(cond.expr) if a.attr == "ts"})
    return f"{', '.join(names)}: {TIME_REFUSED}" if names else None


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
    if isinstance(cond, Relationship) and all(variables[v].negated for v in cond.variables):
        a, b = cond.variables
        return (f"relates two negated variables ({a}, {b}): a negated variable may only be "
                "related to positive ones")
    return None


def _plain(node: yaml.Node):
    """A node as plain Python data (tags were checked already)."""
    if isinstance(node, yaml.MappingNode):
        return {_plain(k): _plain(v) for k, v in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [_plain(v) for v in node.value]
    return _scalar(node)


def _parse_examples(node, alternatives: list[dict[str, Variable]], disjunctive: bool,
                    path: str, problems: list[Problem]) -> list[Example]:
    """``examples``: a list of {name, events: [rows], expect: [bindings]}. In a file with
    alternatives, every expected match names its alternative (``alternative: 2``)."""
    out = []
    for name, line, events, expect, expect_line in example_entries(
            node, path, problems, "matches such as {c: [e1], p: [e3, e9]}"):
        ids = {str(e["event_id"]) for e in events}
        for m in expect:
            message = _expected_problem(m, alternatives, disjunctive, ids)
            if message:
                problems.append(Problem(path, expect_line,
                                        f"example {name!r}: expected match {m}: {message}"))
        out.append(Example(name, line, tuple(events), tuple(
            {v: ids_ if v == "alternative" else
             [str(x) for x in (ids_ if isinstance(ids_, list) else [ids_])]
             for v, ids_ in m.items()} for m in expect)))
    return out


def example_entries(node, path: str, problems: list[Problem], shape: str) -> list[tuple]:
    """The well-formed entries of ``examples`` (each ``{name, events, expect}``) as
    (name, line, event rows, expected entries, line of expect); a problem for each one
    that is not. ``shape`` shows what an expected entry looks like."""
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        problems.append(Problem(path, _line(node), "examples must be a list of "
                                "{name, events, expect}"))
        return []
    out = []
    for i, ex in enumerate(node.value, start=1):
        line = _line(ex)
        if not isinstance(ex, yaml.MappingNode):
            problems.append(Problem(path, line, f"example {i} must be a mapping with "
                                    "events and expect"))
            continue
        parts = {_scalar(k): v for k, v in ex.value}
        unknown = set(parts) - {"name", "events", "expect"}
        if unknown:
            problems.append(Problem(path, line, f"example {i}: unknown key(s) "
                                    f"{', '.join(map(str, sorted(unknown, key=str)))} "
                                    "(allowed: name, events, expect)"))
        name = str(_plain(parts["name"])) if "name" in parts else f"example {i}"
        events, expect = _plain(parts.get("events")) if "events" in parts else None, \
            _plain(parts.get("expect")) if "expect" in parts else None
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            problems.append(Problem(path, line, f"example {name!r}: events must be a list "
                                    "of rows (mappings with event_id and ts)"))
            continue
        bad = [j for j, e in enumerate(events, start=1) if "event_id" not in e or "ts" not in e]
        if bad:
            problems.append(Problem(path, _line(parts["events"]), f"example {name!r}: event "
                                    f"row(s) {bad} need event_id and ts"))
            continue
        if not isinstance(expect, list) or not all(isinstance(m, dict) for m in expect):
            problems.append(Problem(path, line, f"example {name!r}: expect must be a list of "
                                    f"{shape} (may be empty)"))
            continue
        out.append((name, line, events, expect, _line(parts["expect"])))
    return out


def _expected_problem(m: dict, alternatives: list[dict[str, Variable]], disjunctive: bool,
                      ids: set[str]) -> str | None:
    """What is wrong with one expected match of an example, if anything."""
    variables = alternatives[0] if alternatives else {}
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


def check_schema(pattern: Pattern | Disjunction, schema: dict[str, str]) -> list[Problem]:
    """Problems of ``pattern`` against a source schema ``{column: 'string'|'number'|...}``.

    Attributes must exist; a literal must have the column's kind; two attributes compared
    with each other must be of one kind.
    """
    problems = []
    path = pattern.path or "<pattern>"
    columns = ", ".join(sorted(schema))

    def kind_of(attr):
        return "number" if schema.get(attr) in ("number", "integer", "double") else schema.get(attr)

    if pattern.kind == "window":
        conditions = [(_Clause(e, name), pattern.line(name if name in pattern.conditions
                                                       or name == "where" else "select"))
                      for name, e in [*pattern.conditions.items(), ("where", pattern.where),
                                      *pattern.select] if e is not None]
    else:
        conditions = [(c, line) for p in pattern.alternatives
                      for c, line in zip(p.conditions,
                                         p.condition_lines or (0,) * len(p.conditions))]
    for cond, line in conditions:
        attrs = cond.attributes
        missing = [a for a in attrs if a not in schema]
        for a in missing:
            hint = difflib.get_close_matches(a, list(schema), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            problems.append(Problem(path, line, f"in condition '{cond}': the source has no "
                                    f"attribute {a!r} (columns: {columns}){extra}"))
        if missing:
            continue
        timed = [a for a in attrs if schema.get(a) == "timestamp"]
        if timed:
            problems.append(Problem(path, line, f"in condition '{cond}': {', '.join(timed)} "
                                    f"holds timestamps: {TIME_REFUSED}"))
            continue
        for message in _type_problems(cond.expr, kind_of):
            problems.append(Problem(path, line, f"in condition '{cond}': {message}"))
    return problems


@dataclass(frozen=True)
class _Clause:
    """A window pattern's clause, checked like a condition."""

    expr: object
    name: str

    @property
    def attributes(self) -> tuple[str, ...]:
        from .window_conditions import read_attributes

        return tuple(sorted(read_attributes(self.expr)))

    def __str__(self) -> str:
        return f"{self.name}: {self.expr}"


def _type_problems(expr, kind_of) -> list[str]:
    """Type mismatches of a condition against the source's column kinds: arithmetic on
    text, a comparison of text with a number."""
    out: list[str] = []

    def kind(e):
        if isinstance(e, Lit):
            return "string" if isinstance(e.value, str) else "number"
        if isinstance(e, Attr):
            k = kind_of(e.attr)
            return k if k in ("string", "number") else None
        parts = (e.item,) if isinstance(e, Neg) else (e.left, e.right)
        for p in parts:
            if kind(p) == "string":
                what = "negates" if isinstance(e, Neg) else {
                    "+": "adds", "-": "subtracts", "*": "multiplies", "/": "divides"}[e.op]
                out.append(f"{e} {what} text ({p} holds strings): + - * / need numbers")
        return "number"

    for c in comparisons_of(expr):
        if isinstance(c, Cmp):
            kl, kr = kind(c.left), kind(c.right)
            if kl and kr and kl != kr:
                if isinstance(c.right, Lit) and isinstance(c.left, Attr):
                    out.append(f"{c.left.attr} holds {kl}s but is compared with a {kr}")
                elif isinstance(c.left, Attr) and isinstance(c.right, Attr):
                    out.append(f"compares attributes of different types ({kl}, {kr})")
                else:
                    out.append(f"compares a {kl} with a {kr} ({c})")
        elif isinstance(c, In):
            k = kind(c.item)
            others = {kind(v) for v in c.values}
            if k and others - {k}:
                out.append(f"{c.item} holds {k}s but the list after in has "
                           f"{' and '.join(sorted(others - {k}))}s")
    return list(dict.fromkeys(out))
