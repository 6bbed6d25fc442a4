"""Hypothesis strategies: random SES patterns and random event tables.

Patterns have 1-3 event sets, singleton and group variables, properties, equality and
order relationships and prev() conditions; events have few distinct values and many
timestamp ties so that the interesting cases (nondeterminism, ties, several partitions)
come up often.
"""

from hypothesis import strategies as st

from jobs.core.language.events import Event, order
from jobs.core.language.patternfile import parse_pattern

DAY = 86400 * 10**9
TYPES = ("A", "B", "C", "D")
OPS = ("=", "!=", "<", "<=", ">", ">=")


@st.composite
def patterns(draw, max_vars: int = 4, matcher: str = "ses", relationships: str = "any",
             prev: bool = True, exclusive: bool = False, max_set_size: int = 2):
    """``relationships``: 'any', 'partition' (only the same-patient chain) or 'none';
    ``exclusive``: every variable requires its own event type, so no event fits two."""
    n_sets = draw(st.integers(1, 3))
    names = iter("abcdefgh")
    sets, variables = [], []
    for _ in range(n_sets):
        size = draw(st.integers(1, max_set_size))
        current = []
        for _ in range(size):
            if len(variables) >= max_vars:
                break
            v = next(names)
            group = draw(st.booleans())
            current.append(v + ("+" if group else ""))
            variables.append((v, group))
        if current:
            sets.append(current)
    conditions = []
    for i, (v, group) in enumerate(variables):
        kind = draw(st.sampled_from(["type", "type", "value", "none"]))
        if exclusive:
            conditions.append(f"{v}.type = '{TYPES[i]}'")
            if kind == "value":
                conditions.append(f"{v}.value {draw(st.sampled_from(OPS))} {draw(st.integers(0, 3))}")
        elif kind == "type":
            conditions.append(f"{v}.type = '{draw(st.sampled_from(TYPES))}'")
        elif kind == "value":
            conditions.append(f"{v}.value {draw(st.sampled_from(OPS))} {draw(st.integers(0, 3))}")
        if prev and group and draw(st.booleans()):
            conditions.append(f"prev({v}.value) {draw(st.sampled_from(OPS))} {v}.value")
    if relationships != "none" and len(variables) > 1:
        names_only = [v for v, _ in variables]
        if relationships == "partition" or draw(st.booleans()):  # same patient for all: X
            for x, y in zip(names_only, names_only[1:]):
                conditions.append(f"{x}.patient = {y}.patient")
        elif relationships == "any":
            for _ in range(draw(st.integers(0, 2))):
                x, y = draw(st.permutations(names_only))[:2]
                conditions.append(f"{x}.patient = {y}.patient")
        for _ in range(draw(st.integers(0, 1)) if relationships == "any" else 0):
            x, y = draw(st.permutations(names_only))[:2]
            conditions.append(f"{x}.value {draw(st.sampled_from(OPS))} {y}.value")
    tau_days = draw(st.integers(1, 6))
    text = (f"name: random\nsource: random\nwithin: {tau_days}d\n"
            f"sets: {[list(s) for s in sets]}\n".replace("'", "")
            + "conditions:\n" + "".join(f"  - \"{c}\"\n" for c in conditions)
            + f"matcher: {matcher}\n")
    return parse_pattern(text, "<random>")


@st.composite
def event_tables(draw, max_events: int = 9, max_day: int = 8, distinct_ts: bool = False,
                 hours: bool = False):
    """Random events in processing order; ``hours``: at some hour of their day too."""
    n = draw(st.integers(0, max_events))
    if distinct_ts:
        days = draw(st.lists(st.integers(0, max(max_day, n)), min_size=n, max_size=n, unique=True))
    else:
        days = [draw(st.integers(0, max_day)) for _ in range(n)]
    events = []
    for i in range(n):
        events.append(Event(
            f"e{i:02d}",
            days[i] * DAY + (draw(st.sampled_from([0, 6, 23])) * DAY // 24 if hours else 0),
            {"type": draw(st.sampled_from(TYPES)), "value": draw(st.integers(0, 3)),
             "patient": draw(st.integers(1, 2))}))
    return order(events)


BOUNDS = ("+", "{1,2}", "{2,}", "{2,3}", "{2}", "{1,1}")


@st.composite
def language_patterns(draw, matcher: str = "ses", negation: bool = False,
                      bounds: bool = False, contiguity: bool = False, rich: bool = False,
                      aggregates: bool = False, times: bool = False, max_vars: int = 3,
                      counting: bool = False, steps: bool = False, optional: bool = False,
                      episodes: bool = False, as_body: bool = False,
                      self_relations: bool = False, whole_source: bool = False):
    """Random patterns with the second and third steps of the language: negated sets
    (leading, between, trailing) with properties and relationships, Kleene bounds,
    contiguity, conditions with in / or / not / arithmetic, and aggregate conditions over
    group variables, conditions on time (``times``), bounded negation, distinct counts and
    time functions (``counting``), relationships of a group with itself (``w.patient =
    w.patient``, ``w.value < w.value``: ``self_relations``), each on request. ``episodes``:
    an after-match rule, per patient; with ``whole_source``, without partition attributes
    (the episodes of the whole source). ``as_body``: the
    text of its sets, conditions and contiguity (one alternative of a disjunction)."""
    n_sets = draw(st.integers(1, 2))
    names = iter("abcd")
    sets, variables = [], []
    for _ in range(n_sets):
        current = []
        for _ in range(draw(st.integers(1, 2))):
            if len(variables) >= max_vars:
                break
            v = next(names)
            group = draw(st.booleans())
            suffix = (draw(st.sampled_from(BOUNDS)) if bounds else "+") if group else ""
            if optional and variables and draw(st.booleans()):  # the first stays required
                suffix = draw(st.sampled_from(["*", "{0,2}"])) if group else "?"
            prefix = "consecutive " if steps and group and draw(st.booleans()) else ""
            current.append(f"'{prefix}{v}{suffix}'" if "{" in suffix or prefix or "?" in suffix
                           or "*" in suffix else v + suffix)
            variables.append((v, group))
        if current:
            sets.append(current)
    conditions = []

    def prop(v):
        kind = draw(st.sampled_from(["type", "value", "none"] + (["in", "or", "not"] * rich)))
        t, x = draw(st.sampled_from(TYPES)), draw(st.integers(0, 3))
        return {"type": f"{v}.type = '{t}'", "value": f"{v}.value {draw(st.sampled_from(OPS))} {x}",
                "none": None, "in": f"{v}.type in ('{t}', '{draw(st.sampled_from(TYPES))}')",
                "or": f"{v}.value + 1 > {x} or {v}.type = '{t}'",
                "not": f"not ({v}.type = '{t}' and {v}.value < {x})"}[kind]

    for v, group in variables:
        c = prop(v)
        if c:
            conditions.append(c)
        if group and draw(st.booleans()):
            op = draw(st.sampled_from(OPS))
            conditions.append(f"prev({v}.value) {op} {v}.value" if not rich or draw(st.booleans())
                              else f"prev({v}.value) - 1 {op} {v}.value")
    positive = [v for v, _ in variables]
    linked = episodes and not whole_source  # episodes per patient: every variable on it
    if len(positive) > 1 and (linked or (not whole_source and draw(st.booleans()))):
        for x, y in zip(positive, positive[1:]):  # with optional steps: all to the first
            conditions.append(f"{positive[0] if optional else x}.patient = {y}.patient")
    if len(positive) > 1 and draw(st.booleans()):
        x, y = draw(st.permutations(positive))[:2]
        op = draw(st.sampled_from([o for o in OPS if o != "=" or not episodes]))
        conditions.append(f"{x}.value {op} {y}.value" if not rich
                          else f"{x}.value >= {y}.value * 2 or {x}.type = {y}.type")
    groups = [v for v, group in variables if group]
    singles = [v for v, group in variables if not group]
    for g in (groups if self_relations else []):  # every pair of the group's events
        if (draw(st.booleans()) and not whole_source) or (linked and len(positive) == 1):
            conditions.append(f"{g}.patient = {g}.patient")
        if draw(st.booleans()):
            op = draw(st.sampled_from([o for o in OPS if o != "="]))  # (= on patient)
            conditions.append(f"{g}.value {op} {g}.value")
    if self_relations and linked and positive == singles:
        conditions.append(f"{positive[0]}.patient = {positive[0]}.patient")
    for _ in range(draw(st.integers(1, 2)) if aggregates and groups else 0):
        g, op, x = draw(st.sampled_from(groups)), draw(st.sampled_from(OPS)), \
            draw(st.integers(0, 6))
        other = f"{draw(st.sampled_from(singles))}.value" if singles else str(x)
        conditions.append(draw(st.sampled_from([
            f"sum({g}.value) {op} {x}", f"count({g}) {op} {draw(st.integers(1, 3))}",
            f"last({g}.value) {op} first({g}.value)", f"avg({g}.value) {op} {other}",
            f"max({g}.type) {op} '{draw(st.sampled_from(TYPES))}'",
            f"min({g}.value) + 1 {op} count({g}.value)",
            f"not (sum({g}.value) > {x} and count({g}) < 3)"])))
    for g in (groups if aggregates else []):  # running aggregates over the group so far
        if draw(st.booleans()):
            conditions.append(draw(st.sampled_from([
                f"{g}.value > max(prev({g}.value))", f"{g}.value >= max(prev({g}.value))",
                f"min(prev({g}.value)) > {g}.value", f"{g}.value <= min(prev({g}.value))",
                f"{g}.ts > max(prev({g}.ts))",
                # the fourth step: iterative conditions against the events bound before
                f"{g}.value >= 2 * first({g}.value) - 1", f"{g}.value > avg({g}.value)",
                f"count({g}) < 2 or {g}.value > sum({g}.value) - 2",
                f"{g}.type != last({g}.type)", f"{g}.ts - first({g}.ts) <= 2d"])))
    if times and len(positive) > 1:
        x, y = draw(st.permutations(positive))[:2]
        d = f"{draw(st.integers(0, 4))}{draw(st.sampled_from(['d', 'h']))}"
        conditions.append(draw(st.sampled_from([
            f"{y}.ts - {x}.ts {draw(st.sampled_from(OPS))} {d}",
            f"{y}.ts {draw(st.sampled_from(OPS))} {x}.ts + {d}",
            f"{x}.ts - {d} < {y}.ts or {x}.value = {y}.value"])))
    for g in (groups if times else []):
        if draw(st.booleans()):
            conditions.append(draw(st.sampled_from([
                f"{g}.ts - prev({g}.ts) {draw(st.sampled_from(OPS))} {draw(st.integers(0, 2))}d",
                f"last({g}.ts) - first({g}.ts) {draw(st.sampled_from(OPS))} {draw(st.integers(0, 3))}d",
                f"end_ts - start_ts {draw(st.sampled_from(OPS))} {draw(st.integers(0, 4))}d"])))
    if counting:  # the fourth step: time functions, distinct counts
        for v in positive:
            if draw(st.booleans()):
                conditions.append(draw(st.sampled_from([
                    f"hour({v}.ts) {draw(st.sampled_from(OPS))} {draw(st.sampled_from([0, 6, 12]))}",
                    f"weekday({v}.ts) != {draw(st.integers(1, 7))} or {v}.value > 1"])))
        if len(positive) > 1 and draw(st.booleans()):
            x, y = draw(st.permutations(positive))[:2]
            conditions.append(draw(st.sampled_from([
                f"date({x}.ts) = date({y}.ts)", f"date({y}.ts) - date({x}.ts) >= 1d",
                f"hour({x}.ts) <= hour({y}.ts)"])))
        for g in groups:
            if draw(st.booleans()):
                conditions.append(draw(st.sampled_from([
                    f"count(distinct date({g}.ts)) {draw(st.sampled_from(OPS))} "
                    f"{draw(st.integers(1, 3))}",
                    f"count(distinct {g}.value) >= 2",
                    f"count(distinct {g}.type) < count({g})"])))
    measures = []
    if counting and draw(st.booleans()):
        measures.append(draw(st.sampled_from(
            [f"days: count(distinct date({g}.ts))" for g in groups]
            + [f"day: date({v}.ts)" for v in singles] + [f"h: hour({v}.ts)" for v in singles]
            + [f"w: min(weekday({g}.ts))" for g in groups] + ["width: end_ts - start_ts"])))
    if times and draw(st.booleans()):
        measures.append(draw(st.sampled_from(
            ["span: end_ts - start_ts", "began: start_ts"]
            + [f"gap: last({g}.ts) - first({g}.ts)" for g in groups]
            + [f"at: {v}.ts" for v in singles])))
    if aggregates:
        for k in range(draw(st.integers(0, 3))):
            choices = [f"count({g})" for g in groups] + [f"sum({g}.value)" for g in groups] \
                + [f"avg({g}.value) * 2" for g in groups] + [f"max({g}.type)" for g in groups] \
                + [f"last({g}.value) - first({g}.value)" for g in groups] \
                + [f"{v}.value + 1" for v in singles] + [f"{v}.type" for v in singles]
            measures.append(f"m{k}: {draw(st.sampled_from(choices))}")
    layout = [("pos", s) for s in sets]
    if steps:  # [next b] on a later set of one variable
        for k, s in enumerate(sets[1:], start=1):
            if len(s) == 1 and "consecutive" not in s[0] and draw(st.booleans()):
                layout[k] = ("pos", ["'next " + s[0].strip("'") + "'"])
    if negation:
        for n in "nq"[:draw(st.integers(1, 2))]:
            at = draw(st.integers(0, len(layout)))
            bound = draw(st.sampled_from(["", "{2,}", "{3,}"])) if counting else ""
            if steps and any(kind == "pos" for kind, _ in layout[:at]) and draw(st.booleans()):
                layout.insert(at, ("neg", [f"'not next {n}'"]))
            else:
                layout.insert(at, ("neg", [f"'not {n}{bound}'" if bound else f"not {n}"]))
            c = prop(n) or f"{n}.type = '{draw(st.sampled_from(TYPES))}'"
            conditions.append(c)
            link = "patient" if linked else \
                draw(st.sampled_from(["patient", "value", "none"] + ["time"] * times))
            target = positive[0] if linked else draw(st.sampled_from(positive))
            if link == "patient":
                conditions.append(f"{n}.patient = {target}.patient")
            elif link == "value":
                conditions.append(f"{n}.value {draw(st.sampled_from(OPS))} {target}.value")
            elif link == "time":  # the witness within some hours of a bound event
                conditions.append(f"{target}.ts - {n}.ts {draw(st.sampled_from(OPS))} "
                                  f"{draw(st.integers(-2, 2))}d")
    cont = draw(st.sampled_from(["none", "partition", "strict"])) if contiguity else "none"
    body = (f"sets: [{', '.join('[' + ', '.join(s) + ']' for _, s in layout)}]\n"
            + "conditions:\n" + "".join(f"  - \"{c}\"\n" for c in conditions)
            + f"contiguity: {cont}\n"
            + ("measures:\n" + "".join(f"  {m}\n" for m in measures) if measures else ""))
    if as_body:
        return body
    rule = draw(st.sampled_from(["past_last_event", "to_next_event",
                                 f"to_first {positive[-1]}", f"to_last {positive[0]}"])) \
        if episodes and (len(positive) > 1 or self_relations or whole_source) else "all"
    text = (f"name: random\nsource: random\nwithin: {draw(st.integers(1, 4))}d\n"
            + body + f"matcher: {matcher}\nafter_match: {rule}\n")
    return parse_pattern(text, "<random>")


@st.composite
def disjunctive_patterns(draw, matcher: str = "ses", **operators):
    """Random files with two or three alternatives, each a random pattern of the
    language (with the requested operators); their variables often share names."""
    bodies = [draw(language_patterns(matcher=matcher, as_body=True, **operators))
              for _ in range(draw(st.integers(2, 3)))]
    alternatives = "".join("  - " + "\n    ".join(b.rstrip("\n").split("\n")) + "\n"
                           for b in bodies)
    text = (f"name: random\nsource: random\nwithin: {draw(st.integers(1, 4))}d\n"
            f"matcher: {matcher}\nalternatives:\n{alternatives}")
    return parse_pattern(text, "<random>")
