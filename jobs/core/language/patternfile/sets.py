"""The ``sets:`` of a sequence pattern file (docs/language.md, "Sets"): variables in order,
group variables (``p+``, ``'p{2,5}'``), optional and negated ones, ``next`` and
``consecutive`` steps, each problem with its line."""

from __future__ import annotations

import re

import yaml

from jobs.core.language.conditions.expressions import KEYWORDS
from jobs.core.language.pattern import Negation, Variable
from jobs.core.language.patternfile.nodes import Problem, line_of, scalar

VARIABLE = re.compile(r"^(not\s+)?(next\s+)?(consecutive\s+)?([A-Za-z_][A-Za-z0-9_]*)"
                      r"(\+|\*|\?|\{\s*(\d+)\s*(,\s*(\d*)\s*)?\})?$", re.IGNORECASE)
MAX_BOUND = 10_000
RESERVED = set(KEYWORDS) | {"alternative"}  # the tag of a disjunction's expected matches


def parse_sets(node, path: str, problems: list[Problem], broken: set[str]
               ) -> tuple[tuple[tuple[Variable, ...], ...], tuple[Negation, ...], tuple[int, ...],
                           tuple[int, ...]]:
    """The positive event sets (P⁺), the negated variables with their intervals, the
    positive sets written ``[next b]`` (their event is the very next one) and those written
    ``{optional: [...]}`` (all of their variables, or none)."""
    if node is None:
        return (), (), (), ()
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.append(Problem(path, line_of(node), "sets must be a non-empty list of event "
                                "sets, e.g. [[c, p+], [b]]"))
        return (), (), (), ()
    seen: dict[str, int] = {}
    parsed: list[tuple[bool, list[tuple]]] = []  # (negated set?, [(name, group, lo, hi)])
    optional_nodes = set()  # the sets written {optional: [a, b]}: all of them, or none
    for i, set_node in enumerate(node.value):
        if isinstance(set_node, yaml.MappingNode) and len(set_node.value) == 1 \
                and scalar(set_node.value[0][0]) == "optional":
            set_node = set_node.value[0][1]
            optional_nodes.add(len(parsed))
        if not isinstance(set_node, yaml.SequenceNode) or not set_node.value:
            problems.append(Problem(path, line_of(set_node), f"event set {i + 1} must be a "
                                    "non-empty list of variables, e.g. [c, p+]"))
            continue
        current, kinds = [], set()
        for vnode in set_node.value:
            raw = scalar(vnode) if isinstance(vnode, yaml.ScalarNode) else None
            m = VARIABLE.match(raw.strip()) if isinstance(raw, str) else None
            if m is None:
                if isinstance(raw, str) and re.match(r"(not\s+)?(next\s+)?[A-Za-z_]\w*", raw):
                    broken.add(re.match(r"(?:not\s+)?(?:next\s+)?(?:consecutive\s+)?"
                                        r"([A-Za-z_]\w*)", raw).group(1))
                problems.append(Problem(path, line_of(vnode),
                                        f"bad variable {raw!r} in set {i + 1}: write a name, "
                                        "p+ for one or more events, 'p{2,5}' or 'p{3,}' for "
                                        "bounds, 'not n' for a negated event or 'not n{2,}' "
                                        "for fewer than 2 such events"))
                continue
            neg, nxt, cons, name, suffix, lo, comma, hi = m.groups()
            line = line_of(vnode)
            if nxt and len(set_node.value) > 1:
                problems.append(Problem(path, line, f"'{raw}': a 'next' step is a set of its "
                                        f"own, e.g. [[a], [next {name}]]: its event is the "
                                        "very next one after the set before"))
                continue
            if nxt and neg and suffix:
                problems.append(Problem(path, line, f"'{raw}': 'not next {name}' is about one "
                                        f"event (the very next one): write it without "
                                        f"{suffix}"))
                continue
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
            elif suffix == "*":
                group, vmin, vmax = True, 0, None
            elif suffix == "?":
                vmin = 0
            elif suffix:
                vmin = int(lo)
                vmax = vmin if comma is None else (int(hi) if hi else None)
                group = True
                if vmin < 1 and (neg or vmax == 0):
                    problems.append(Problem(path, line, f"{raw}: the minimum must be at least "
                                            "1 here (to require that no event occurs, use "
                                            "'not n'; for at most k events, 'not n{k+1,}')"))
                    continue
                if vmax is not None and vmax < vmin:
                    problems.append(Problem(path, line, f"{raw}: the minimum {vmin} is larger "
                                            f"than the maximum {vmax}"))
                    continue
                if vmin > MAX_BOUND or (vmax or 0) > MAX_BOUND:
                    problems.append(Problem(path, line, f"{raw}: bounds above {MAX_BOUND:,} "
                                            "are not supported"))
                    continue
            if neg and suffix in ("*", "?"):
                problems.append(Problem(path, line, f"'{raw}': a negated variable cannot be "
                                        f"optional: 'not {name}' already allows no event"))
                continue
            if neg and group and not (comma is not None and not hi):
                problems.append(Problem(path, line, f"'{raw}': a negated variable takes a "
                                        f"lower bound only: 'not {name}' (no event fits "
                                        f"{name}) or 'not {name}{{k,}}' (fewer than k events "
                                        f"fit {name})"))
                continue
            if neg:
                group, vmax = False, None
            if cons and (neg or not group):
                problems.append(Problem(path, line, f"'{raw}': consecutive is for a group "
                                        f"(consecutive {name}+ or 'consecutive {name}{{3}}'): "
                                        "its events follow each other among the events that "
                                        "fit it"))
                continue
            kinds.add(bool(neg))
            current.append((name, group, vmin, vmax, bool(neg), bool(nxt), bool(cons)))
        if len(kinds) > 1:
            problems.append(Problem(path, line_of(set_node), f"event set {i + 1} mixes negated "
                                    "and positive variables: put the 'not' variables in a "
                                    "set of their own, e.g. [[a], [not n], [b]]"))
            continue
        if current and len(parsed) in optional_nodes and kinds == {True}:
            problems.append(Problem(path, line_of(set_node), f"event set {i + 1}: a negated "
                                    "set cannot be optional"))
            continue
        if current:
            parsed.append((kinds == {True}, current))
    positives = [s for negated, s in parsed if not negated]
    if parsed and not positives:
        problems.append(Problem(path, line_of(node), "every event set is negated: a pattern "
                                "needs at least one positive variable"))
        return (), (), (), ()
    if parsed and parsed[0][1][0][5]:
        problems.append(Problem(path, line_of(node.value[0]), "the first set cannot be a "
                                "'next' step: 'next' means right after the set before"))
    sets, negations, index, next_sets = [], [], 0, []
    optional_sets: list[int] = []
    for k, (negated, current) in enumerate(parsed):
        if not negated:
            if k in optional_nodes:
                optional_sets.append(len(sets))
            if current[0][5]:
                next_sets.append(len(sets))
            sets.append(tuple(Variable(name, group, len(sets), index + k, vmin, vmax,
                                       consecutive=cons)
                              for k, (name, group, vmin, vmax, _, _, cons)
                              in enumerate(current)))
            index += len(current)
    n_index = index
    position = -1  # index of the last positive set seen
    for negated, current in parsed:
        if not negated:
            position += 1
            continue
        for name, _, vmin, _, _, nxt, _ in current:
            var = Variable(name, False, -1, n_index, min=vmin, max=None, negated=True)
            n_index += 1
            if nxt and position < 0:
                problems.append(Problem(path, line_of(node.value[0]), f"'not next {name}' "
                                        "cannot lead: it is about the event right after the "
                                        "set before it"))
            negations.append(Negation(var, None if position < 0 else position,
                                      position + 1 if position + 1 < len(sets) else None,
                                      next=nxt))
    return tuple(sets), tuple(negations), tuple(next_sets), tuple(optional_sets)
