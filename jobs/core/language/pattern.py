"""The pattern model: P = (<B1, ..., Bk>, Θ, τ) and the parts the papers derive from it.

Match-window paper, Def. 1 (pattern), the split of Θ into properties Θp_v per variable and
relationships Θr, and Def. 6 (transitive closure Θ+eq of the equality relationships and the
partition attributes X). SES paper, Def. 1 (sequenced event set pattern).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from functools import cached_property

from jobs.core.language.conditions.expressions import (
    Attr,
    Cmp,
    Lit,
    expr_attributes,
    time_function,
)
from jobs.core.language.conditions.kinds import (
    AggregateCondition,
    Condition,
    PrevRelationship,
    Property,
    Ref,
    Relationship,
    RunningCondition,
    known,
)

UNITS_NS = {
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "min": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
    "d": 86400 * 1_000_000_000,
}
DURATION = re.compile(r"^\s*(\d+)\s*([a-z]+)\s*$")


def parse_duration(text: str) -> int:
    """``'15d'`` -> nanoseconds. Raises ValueError naming the allowed units."""
    m = DURATION.match(str(text))
    if not m:
        raise ValueError(f"bad duration {text!r}: write an integer and a unit, e.g. 15d or 264h")
    amount, unit = m.groups()
    if len(amount) > 15:
        raise ValueError(f"the duration {text.strip()[:20]}... is far too long")
    if unit not in UNITS_NS:
        raise ValueError(f"bad unit {unit!r} in {text!r}: use one of {', '.join(UNITS_NS)}")
    return int(amount) * UNITS_NS[unit]


FIRST_EVER_PREFIX = "__first_ever_"
PARTITION_FACT_PREFIX = "__partition_"  # conditions.expressions.PARTITION_FACTS


def first_ever_attribute(variable: str) -> str:
    """The attribute that marks the events ``first_ever`` lets ``variable`` bind."""
    return FIRST_EVER_PREFIX + variable


def history_attribute(k: int) -> str:
    """The attribute that marks the events for which history condition ``k`` holds."""
    return f"__history_{k}"


def reads_marks(cond) -> bool:
    """Whether a condition reads an attribute computed from the whole history (a mark of
    ``first_ever`` or of a history condition, a partition fact), not one of its event."""
    return any(a.startswith("__") for a in cond.attributes)


UNBOUNDED = None
# The one name rule of pattern files, models and the tables they name: lower case letters,
# digits and _, starting with a letter (it is a table name in Spark, DuckDB and Delta).
NAME_RULE = r"[a-z][a-z0-9_]{0,99}"
NAME = re.compile(NAME_RULE)  # use fullmatch
CONTIGUITY = ("none", "partition", "strict")
MATCHER_NAMES = ("ses", "zstream")  # a pattern's `matcher:` (the engine has one class each)
# a ZStream pattern's `plan:`: the generators of jobs.core.plans.planners, one class each
PLAN_NAMES = ('trivial', 'efreq', 'greedy', 'ii-random', 'ii-greedy', 'dp-ld', 'zstream', 'zstream-ord', 'dp-b')
PLAN_ALIASES = {"left-deep": "trivial"}  # TRIVIAL's old name


@dataclass(frozen=True)
class Variable:
    """An event variable: a singleton ``v``, a group ``v+`` / ``v{min,max}`` (Kleene
    closure with bounds; ``max`` None is unbounded) in positive event set ``set_index``,
    or a negated singleton ``not v`` (``negated``; its set_index is -1): no event fits it
    in its interval, or with ``min`` k > 1 (``not v{k,}``) fewer than k events do."""

    name: str
    group: bool
    set_index: int
    index: int  # positives first, then negated: the bit of this variable in bit vectors
    min: int = 1
    max: int | None = 1
    negated: bool = False
    consecutive: bool = False  # a group whose events follow each other among those fitting it

    @property
    def bounded(self) -> bool:
        """A group with bounds other than ``+``."""
        return self.group and (self.min, self.max) != (1, None)

    def __str__(self) -> str:
        if self.negated:
            return "not " + self.name + (f"{{{self.min},}}" if self.min > 1 else "")
        if not self.group:
            return self.name + ("?" if self.min == 0 else "")
        prefix = "consecutive " if self.consecutive else ""
        if not self.bounded:
            return prefix + self.name + "+"
        if (self.min, self.max) == (0, None):
            return prefix + self.name + "*"
        return f"{prefix}{self.name}{{{self.min},{'' if self.max is None else self.max}}}"

    @property
    def optional(self) -> bool:
        """``t?``, ``p*``, ``p{0,n}``: the variable may bind no event."""
        return self.min == 0 and not self.negated


@dataclass(frozen=True)
class Negation:
    """A negated variable and where its interval lies: between positive sets ``before``
    and ``after`` (``before`` None: leading; ``after`` None: trailing)."""

    var: Variable
    before: int | None
    after: int | None
    next: bool = False  # [not next n]: the very next event after set ``before`` does not fit

    @property
    def kind(self) -> str:
        return "leading" if self.before is None else "trailing" if self.after is None \
            else "between"


@dataclass(frozen=True)
class Measure:
    """A computed column of the match table (``measures:``): ``name: expr`` over the
    match (aggregates of group variables, attributes of singletons, arithmetic)."""

    name: str
    expr: object  # conditions.Expr
    line: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return f"{self.name}: {self.expr}"


@dataclass(frozen=True)
class HistoryCondition:
    """A condition on the partition's whole history around one bound event (``history:``;
    docs/semantics.md, "History conditions"): at least / at most ``count`` events h of the
    partition that fit ``where`` (properties of h; none: any event) lie ``before`` the
    event bound to ``anchor`` (h.ts < anchor.ts, or h.ts <= anchor.ts - by with ``by``)
    or ``after`` it (h.ts > anchor.ts, or h.ts >= anchor.ts + by). The partition: the
    events with the anchor's values of ``same`` (default: the pattern's X)."""

    anchor: str
    at_least: int | None
    at_most: int | None
    direction: str  # before | after
    by: int = 0  # ns
    where: tuple[Property, ...] = ()
    line: int = field(default=0, compare=False)
    same: tuple[str, ...] = ()

    def holds(self, n: int) -> bool:
        """Whether ``n`` events in the range satisfy the bound."""
        return (self.at_least is None or n >= self.at_least) and \
            (self.at_most is None or n <= self.at_most)

    def __str__(self) -> str:
        bound = f"at least {self.at_least}" if self.at_least is not None \
            else f"at most {self.at_most}"
        what = " and ".join(str(p.expr) for p in self.where) or "any event"
        by = f" by {self.by // UNITS_NS['d']}d" if self.by and self.by % UNITS_NS["d"] == 0 \
            else (f" by {self.by}ns" if self.by else "")
        same = f" same {', '.join(self.same)}" if self.same else ""
        return f"{bound} of [{what}] {self.direction} {self.anchor}{by}{same}"


@dataclass(frozen=True)
class Example:
    """A small example carried by a pattern file: given events, the expected matches."""

    name: str
    line: int
    events: tuple[dict, ...]
    expect: tuple[dict, ...]  # variable -> event ids


@dataclass(frozen=True)
class Pattern:
    kind = "sequence"  # the other kind of pattern file: window.WindowPattern
    name: str
    source: str | None
    within: str
    tau: int  # τ in nanoseconds
    sets: tuple[tuple[Variable, ...], ...]
    conditions: tuple[Condition, ...]
    matcher: str = "ses"
    description: str = ""
    negations: tuple[Negation, ...] = ()
    contiguity: str = "none"
    next_sets: tuple[int, ...] = ()  # the positive sets written [next b] (DESIGN: per step)
    optional_sets: tuple[int, ...] = ()  # the sets written {optional: [...]}: all or none
    after_match: str = "all"  # which matches are kept: all, past_last_event, to_first v, ...
    alternative: int | None = None  # 1, 2, ...: which alternative of a disjunction
    plan: str | None = field(default=None, compare=False)  # a pinned plan generator
    path: str | None = field(default=None, compare=False)
    condition_lines: tuple[int, ...] = field(default=(), compare=False, repr=False)
    examples: tuple[Example, ...] = field(default=(), compare=False, repr=False)
    measures: tuple[Measure, ...] = ()
    # X given rather than derived: an expansion of optional steps keeps its pattern's X
    partition_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    # ``first_ever: [a]``: a binds only its partition's first event (processing order)
    # that fits a's properties, in the whole history (docs/semantics.md, "First ever")
    first_ever: tuple[str, ...] = ()
    # the version of the pattern file this one runs for (its ``marked()`` form keeps it)
    version_of: str | None = field(default=None, compare=False, repr=False)
    history: tuple[HistoryCondition, ...] = ()  # ``history:`` (conditions on all history)
    # of a ``marked()`` form: (mark attribute, what the file says) for people's messages
    marks: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    @property
    def alternatives(self) -> tuple[Pattern, ...]:
        """The conjunctive patterns whose matches this pattern's are the union of: itself
        (a ``Disjunction`` has several)."""
        return (self,)

    # -- variables -------------------------------------------------------------------
    @cached_property
    def variables(self) -> tuple[Variable, ...]:
        return tuple(v for s in self.sets for v in s)

    @cached_property
    def negated(self) -> tuple[Variable, ...]:
        return tuple(n.var for n in self.negations)

    @cached_property
    def by_name(self) -> dict[str, Variable]:
        return {v.name: v for v in self.variables + self.negated}

    # -- Θ split (match-window paper, Def. 1) ------------------------------------------
    @cached_property
    def properties(self) -> dict[str, tuple[Property, ...]]:
        """Θp_v: the conditions on a single event bound to v (negated variables too); a
        relationship of a group with itself on A (``w.A = w.A``) asks each event's A to be
        known, as any comparison of A does."""
        return {v.name: tuple(dict.fromkeys(
            [c for c in self.conditions if isinstance(c, Property) and c.var == v.name]
            + [known(v.name, a) for a in self.self_related.get(v.name, ())]))
            for v in self.variables + self.negated}

    @cached_property
    def self_related(self) -> dict[str, tuple[str, ...]]:
        """Per group variable, the attributes of the relationships it has with itself as
        written (``w.a < w.a``): each pair of its events is compared on them."""
        out: dict[str, list[str]] = {}
        for c in self.conditions:
            if isinstance(c, Relationship) and c.reflexive and c.simple is not None:
                out.setdefault(c.variables[0], []).append(c.left.attr)
        return {v: tuple(dict.fromkeys(a)) for v, a in out.items()}

    @cached_property
    def relationships(self) -> tuple[Relationship, ...]:
        """Θr without prev, of the positive pattern P⁺: conditions between events of two
        different positive variables."""
        negated = {v.name for v in self.negated}
        return tuple(c for c in self.conditions if isinstance(c, Relationship)
                     and not negated & set(c.variables))

    @cached_property
    def negation_relationships(self) -> dict[str, tuple[Relationship, ...]]:
        """Per negated variable, its relationships with the positive variables."""
        return {v.name: tuple(c for c in self.conditions if isinstance(c, Relationship)
                              and v.name in c.variables) for v in self.negated}

    @cached_property
    def aggregate_conditions(self) -> tuple[AggregateCondition, ...]:
        """The conditions with aggregates: each holds or not for a whole match, so they
        are tested on the matches of the other conditions (docs/semantics.md)."""
        return tuple(c for c in self.conditions if isinstance(c, AggregateCondition))

    @cached_property
    def next_negations(self) -> tuple[Negation, ...]:
        """The negations written ``[not next n]``."""
        return tuple(n for n in self.negations if n.next)

    @cached_property
    def position_rule(self) -> str | None:
        """How positions are numbered, if the pattern needs them: by its contiguity, or
        for ``next`` steps within the partition (over all events without partition
        attributes); None when nothing reads positions."""
        if self.contiguity != "none":
            return self.contiguity
        return "partition" if self.next_sets or self.next_negations else None

    @cached_property
    def min_events(self) -> int:
        """The fewest events a match binds (Σ of the minimums of the variables outside
        optional sets)."""
        return sum(v.min for v in self.variables if v.set_index not in self.optional_sets)

    @cached_property
    def required(self) -> frozenset[str]:
        """The positive variables every match binds."""
        return frozenset(v.name for v in self.variables
                         if not v.optional and v.set_index not in self.optional_sets)

    @cached_property
    def optional_units(self) -> tuple[tuple[str, ...], ...]:
        """What may be absent from a match, each unit all or nothing: an optional variable
        (``t?``, ``p*``, ``p{0,n}``) outside optional sets, or an optional set's variables."""
        out = [tuple(v.name for v in s) for i, s in enumerate(self.sets)
               if i in self.optional_sets]
        out += [(v.name,) for v in self.variables
                if v.optional and v.set_index not in self.optional_sets]
        return tuple(out)

    @cached_property
    def prev_relationships(self) -> dict[str, tuple[PrevRelationship, ...]]:
        """What the engine checks between consecutive events of each group: the declared
        prev relationships and those the running conditions are equivalent to."""
        return {v.name: self.declared_prev_relationships[v.name] + tuple(
            c.as_prev() for c in self.running_conditions[v.name] if c.monotone)
            for v in self.variables}

    @cached_property
    def declared_prev_relationships(self) -> dict[str, tuple[PrevRelationship, ...]]:
        """The prev relationships the file writes (the oracle checks these and the running
        conditions literally)."""
        return {v.name: tuple(c for c in self.conditions
                              if isinstance(c, PrevRelationship) and c.var == v.name)
                for v in self.variables}

    @cached_property
    def running_conditions(self) -> dict[str, tuple[RunningCondition, ...]]:
        """Per group variable, its conditions on running aggregates (``p.a > max(prev(p.a))``)."""
        return {v.name: tuple(c for c in self.conditions
                              if isinstance(c, RunningCondition) and c.var == v.name)
                for v in self.variables}

    # -- Def. 6 -------------------------------------------------------------------------
    @cached_property
    def equality_components(self) -> dict[str, tuple[frozenset[str], ...]]:
        """Per attribute A, the classes of variables made equal on A by Θ+eq."""
        parent: dict[tuple[str, str], tuple[str, str]] = {}

        def find(x):
            while parent.setdefault(x, x) != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        attrs: set[str] = set()
        for r in self.relationships:  # a function of the time is no stored column
            if r.is_equality_on_one_attribute() and not time_function(r.left.attr):
                a = r.left.attr
                attrs.add(a)
                parent[find((a, r.left.var))] = find((a, r.right.var))
        comps: dict[str, dict[tuple[str, str], set[str]]] = {a: {} for a in attrs}
        for (a, v) in list(parent):
            comps[a].setdefault(find((a, v)), set()).add(v)
        return {a: tuple(frozenset(c) for c in sorted(groups.values(), key=sorted))
                for a, groups in sorted(comps.items())}

    @cached_property
    def equality_closure(self) -> tuple[Relationship, ...]:
        """Θ+eq: every ``v.A = w.A`` implied by Θeq (match-window paper, Def. 6).

        Of the reflexive members only those of group variables are kept: ``p.A = p.A`` says
        that all events bound to ``p`` agree on A, which Θ implies when p is linked to
        another variable on A. Without it a group variable's loop could bind an event of
        another partition before its partner is bound, and partitioning would change results.
        """
        out = []
        for a, comps in self.equality_components.items():
            for comp in comps:
                names = [v.name for v in self.variables if v.name in comp]
                for i, v in enumerate(names):
                    if self.by_name[v].group:
                        out.append(Relationship.compare(Ref(v, a), "=", Ref(v, a)))
                    for w in names[i + 1:]:
                        out.append(Relationship.compare(Ref(v, a), "=", Ref(w, a)))
        return tuple(out)

    @cached_property
    def partition_attributes(self) -> tuple[str, ...]:
        """X = {A | v_i.A = v_j.A ∈ Θ+eq for all i, j} (match-window paper, Def. 6)."""
        if self.partition_keys is not None:
            return self.partition_keys
        names = {v.name for v in self.variables}
        if len(self.variables) == 1 and not self.variables[0].group:  # c.A = c.A written:
            v = self.variables[0].name  # one event per match, so X = {A} is exact
            return tuple(sorted({a for a in self.attributes
                                 if known(v, a) in self.properties[v]}))
        return tuple(a for a, comps in self.equality_components.items()
                     if any(c == names for c in comps))

    @cached_property
    def attributes(self) -> frozenset[str]:
        """Every event attribute the conditions and measures read."""
        return frozenset(a for c in self.conditions for a in c.attributes) | frozenset(
            a for m in self.measures for a in expr_attributes(m.expr)) | frozenset(
            a for h in self.history for p in h.where for a in p.attributes) | frozenset(
            a for h in self.history for a in h.same)

    @cached_property
    def measure_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.measures)

    @cached_property
    def linked_negations(self) -> frozenset[str]:
        """The negated variables equal to a positive variable on every partition
        attribute (top-level equalities): their witnesses lie in the match's partition."""
        out = {n.var.name for n in self.next_negations}  # the partition's next event
        positives = self.required  # a link through an optional variable may be absent
        for n in self.negated:
            linked = set()
            for r in self.negation_relationships[n.name]:
                if r.is_equality_on_one_attribute() and set(r.variables) - {n.name} <= positives:
                    linked.add(r.left.attr)
            if set(self.partition_attributes) <= linked:
                out.add(n.name)
        return frozenset(out)

    # -- identity -----------------------------------------------------------------------
    def normalized(self) -> dict:
        """A canonical, order-insensitive form of the pattern (what the version hashes)."""
        out = {
            "name": self.name,
            "source": self.source,
            "tau_ns": self.tau,
            "sets": [sorted(str(v) for v in s) for s in self.sets],
            "conditions": sorted(str(c) for c in self.conditions),
            "matcher": self.matcher,
        }
        if self.negations:  # only new keys: the versions of older patterns stay as they were
            out["negations"] = [[n.before, n.after, n.var.name] + (
                [n.var.min] if n.var.min > 1 else []) + (["next"] if n.next else [])
                for n in self.negations]
        if self.next_sets:
            out["next"] = list(self.next_sets)
        if self.optional_sets:
            out["optional_sets"] = list(self.optional_sets)
        if self.after_match != "all":
            out["after_match"] = self.after_match
        if self.self_related:  # w.a φ w.a over pairs (before: each event alone)
            out["pairwise"] = sorted(f"{v}.{a}" for v, attrs in self.self_related.items()
                                     for a in attrs)
        if self.contiguity != "none":
            out["contiguity"] = self.contiguity
        if self.alternative is not None:
            out["alternative"] = self.alternative
        if self.measures:
            out["measures"] = [[m.name, str(m.expr)] for m in self.measures]
        if self.first_ever:
            out["first_ever"] = sorted(self.first_ever)
        if self.history:
            out["history"] = sorted(str(h) for h in self.history)
        return out

    @cached_property
    def stored_attributes(self) -> tuple[str, ...]:
        """The attributes read from the events (sorted): all but the partition facts,
        which the marks compute."""
        return tuple(sorted(a for a in self.attributes
                            if not a.startswith(PARTITION_FACT_PREFIX)))

    @property
    def whole_history(self) -> bool:
        """Whether every night matches the pattern over the whole history, in whole
        partitions: a history condition or a partition fact can change with any event
        of the partition (docs/semantics.md)."""
        return bool(self.history) or any(a.startswith(PARTITION_FACT_PREFIX)
                                         for a in self.attributes)

    @property
    def marks_needed(self) -> bool:
        """Whether the pattern reads the whole history (``first_ever``, ``history:``,
        partition facts): its events carry marks and its ``marked()`` form runs."""
        return bool(self.first_ever) or self.whole_history

    def marked(self) -> Pattern:
        """The pattern a matcher runs when ``first_ever`` names variables: each of them
        with one more property, ``v.<FIRST_EVER attribute> = true``, which the caller's
        events carry (``language.first_ever``, or phase 1's column from the state)."""
        if not self.first_ever and not self.history:
            return self
        extra = tuple(Property(v, Cmp("=", Attr(v, first_ever_attribute(v)), Lit(True)))
                      for v in self.first_ever) + tuple(
            Property(h.anchor, Cmp("=", Attr(h.anchor, history_attribute(k)), Lit(True)))
            for k, h in enumerate(self.history))
        marks = tuple((first_ever_attribute(v), f"first ever {v}") for v in self.first_ever) \
            + tuple((history_attribute(k), f"history: {h}") for k, h in enumerate(self.history))
        return replace(self, conditions=self.conditions + extra, condition_lines=(),
                       first_ever=(), history=(), partition_keys=self.partition_attributes,
                       version_of=self.version, marks=marks)

    @cached_property
    def version(self) -> str:
        if self.version_of is not None:
            return self.version_of
        blob = json.dumps(self.normalized(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def describe(self) -> str:
        def negs(before):
            return ["{" + str(n.var).replace("not ", "not next " if n.next else "not ") + "}"
                    for n in self.negations if n.before == before]

        parts = negs(None)
        for i, s in enumerate(self.sets):
            parts.append("{" + ("next " if i in self.next_sets else "")
                         + ", ".join(str(v) for v in s) + "}"
                         + ("?" if i in self.optional_sets else ""))
            parts += negs(i)
        extra = "" if self.contiguity == "none" else f", {self.contiguity} contiguity"
        extra += "" if self.after_match == "all" else f", after match {self.after_match}"
        extra += f", first ever {', '.join(self.first_ever)}" if self.first_ever else ""
        extra += "".join(f", history {h}" for h in self.history)
        return f"{self.name} = (<{', '.join(parts)}>, Θ, {self.within}{extra})"


@dataclass(frozen=True)
class Disjunction:
    """A pattern file with ``alternatives:`` (docs/language.md; the join-optimization paper's
    nested patterns in disjunctive normal form): several conjunctive patterns under one
    name, window and matcher. Its matches are the union of the alternatives' matches, each
    tagged with its alternative (1, 2, ...), which is part of its ``match_id``: a set of
    events that matches two alternatives gives two matches."""

    kind = "sequence"  # the other kind of pattern file: window.WindowPattern
    after_match = "all"  # refused with alternatives (one file per alternative)
    name: str
    source: str | None
    within: str
    tau: int
    matcher: str
    alternatives: tuple[Pattern, ...]
    description: str = ""
    plan: str | None = field(default=None, compare=False)
    path: str | None = field(default=None, compare=False)
    examples: tuple[Example, ...] = field(default=(), compare=False, repr=False)

    @cached_property
    def partition_attributes(self) -> tuple[str, ...]:
        """The attributes every alternative partitions by (the intersection of their X):
        grouping by them never separates the events of one match of any alternative."""
        common = set.intersection(*(set(a.partition_attributes) for a in self.alternatives))
        return tuple(a for a in self.alternatives[0].partition_attributes if a in common)

    whole_history = False  # partition facts and history: one file per alternative
    marks_needed = False
    first_ever = ()  # the same
    marks = ()

    @cached_property
    def stored_attributes(self) -> tuple[str, ...]:
        return tuple(sorted(self.attributes))

    @cached_property
    def attributes(self) -> frozenset[str]:
        return frozenset().union(*(a.attributes for a in self.alternatives))

    @cached_property
    def measure_names(self) -> tuple[str, ...]:
        """The measure columns of the match table: every alternative's, in order of first
        appearance (an alternative without one of them has null there)."""
        return tuple(dict.fromkeys(m.name for a in self.alternatives for m in a.measures))

    def normalized(self) -> dict:
        return {"name": self.name, "source": self.source, "tau_ns": self.tau,
                "matcher": self.matcher,
                "alternatives": [a.normalized() for a in self.alternatives]}

    @cached_property
    def version(self) -> str:
        blob = json.dumps(self.normalized(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def describe(self) -> str:
        return "\n  or ".join(a.describe() for a in self.alternatives)
