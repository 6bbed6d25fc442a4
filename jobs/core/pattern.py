"""The pattern model: P = (<B1, ..., Bk>, Θ, τ) and the parts the papers derive from it.

Match-window paper, Def. 1 (pattern), the split of Θ into properties Θp_v per variable and
relationships Θr, and Def. 6 (transitive closure Θ+eq of the equality relationships and the
partition attributes X). SES paper, Def. 1 (sequenced event set pattern).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property

from .conditions import Condition, PrevRelationship, Property, Ref, Relationship

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


@dataclass(frozen=True)
class Variable:
    """An event variable: a singleton ``v`` or a group ``v+`` in event set ``set_index``."""

    name: str
    group: bool
    set_index: int
    index: int  # position among all variables: the bit of this variable in bit vectors

    def __str__(self) -> str:
        return self.name + ("+" if self.group else "")


@dataclass(frozen=True)
class Example:
    """A small example carried by a pattern file: given events, the expected matches."""

    name: str
    line: int
    events: tuple[dict, ...]
    expect: tuple[dict, ...]  # variable -> event ids


@dataclass(frozen=True)
class Pattern:
    name: str
    source: str | None
    within: str
    tau: int  # τ in nanoseconds
    sets: tuple[tuple[Variable, ...], ...]
    conditions: tuple[Condition, ...]
    matcher: str = "ses"
    description: str = ""
    path: str | None = field(default=None, compare=False)
    condition_lines: tuple[int, ...] = field(default=(), compare=False, repr=False)
    examples: tuple[Example, ...] = field(default=(), compare=False, repr=False)

    # -- variables -------------------------------------------------------------------
    @cached_property
    def variables(self) -> tuple[Variable, ...]:
        return tuple(v for s in self.sets for v in s)

    @cached_property
    def by_name(self) -> dict[str, Variable]:
        return {v.name: v for v in self.variables}

    # -- Θ split (match-window paper, Def. 1) ------------------------------------------
    @cached_property
    def properties(self) -> dict[str, tuple[Property, ...]]:
        """Θp_v: the conditions on a single event bound to v."""
        return {v.name: tuple(c for c in self.conditions
                              if isinstance(c, Property) and c.var == v.name)
                for v in self.variables}

    @cached_property
    def relationships(self) -> tuple[Relationship, ...]:
        """Θr without prev: conditions between events of two different variables."""
        return tuple(c for c in self.conditions if isinstance(c, Relationship))

    @cached_property
    def prev_relationships(self) -> dict[str, tuple[PrevRelationship, ...]]:
        return {v.name: tuple(c for c in self.conditions
                              if isinstance(c, PrevRelationship) and c.var == v.name)
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
        for r in self.relationships:
            if r.is_equality_on_one_attribute():
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
                        out.append(Relationship(Ref(v, a), "=", Ref(v, a)))
                    for w in names[i + 1:]:
                        out.append(Relationship(Ref(v, a), "=", Ref(w, a)))
        return tuple(out)

    @cached_property
    def partition_attributes(self) -> tuple[str, ...]:
        """X = {A | v_i.A = v_j.A ∈ Θ+eq for all i, j} (match-window paper, Def. 6)."""
        names = {v.name for v in self.variables}
        if len(names) < 2:
            return ()
        return tuple(a for a, comps in self.equality_components.items()
                     if any(c == names for c in comps))

    @cached_property
    def attributes(self) -> frozenset[str]:
        """Every event attribute the conditions read."""
        out: set[str] = set()
        for c in self.conditions:
            if isinstance(c, Property):
                out.add(c.attr)
                if c.other_attr:
                    out.add(c.other_attr)
            elif isinstance(c, Relationship):
                out.update((c.left.attr, c.right.attr))
            else:
                out.update((c.attr, c.other_attr))
        return frozenset(out)

    # -- identity -----------------------------------------------------------------------
    def normalized(self) -> dict:
        """A canonical, order-insensitive form of the pattern (what the version hashes)."""
        return {
            "name": self.name,
            "source": self.source,
            "tau_ns": self.tau,
            "sets": [sorted(str(v) for v in s) for s in self.sets],
            "conditions": sorted(str(c) for c in self.conditions),
            "matcher": self.matcher,
        }

    @cached_property
    def version(self) -> str:
        blob = json.dumps(self.normalized(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def describe(self) -> str:
        sets = ", ".join("{" + ", ".join(str(v) for v in s) + "}" for s in self.sets)
        return f"{self.name} = (<{sets}>, Θ, {self.within})"
