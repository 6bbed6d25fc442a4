"""Per-event property masks: the filter of Theorem 1 (match-window paper, section 4.2).

ē has bit i set iff the event satisfies every property of variable v_i (Θp_vi). An event
with ē = 0 can be in no match. Properties of the form ``v.A = literal`` are compiled into
one hash lookup per attribute (which variables does this value admit?), so that only the
few candidate variables have their remaining properties evaluated.
"""

from __future__ import annotations

from .events import Event
from .pattern import Pattern


class PropertyMasks:
    def __init__(self, pattern: Pattern):
        variables = pattern.variables
        self.all = (1 << len(variables)) - 1
        eq_values: dict[str, dict[int, set]] = {}  # attr -> var -> literal values required
        rest: list[tuple] = []
        for v in variables:
            others = []
            for p in pattern.properties[v.name]:
                if p.op == "=" and p.other_attr is None and _hashable(p.value):
                    eq_values.setdefault(p.attr, {}).setdefault(v.index, set()).add(p.value)
                else:
                    others.append(p)
            rest.append(tuple(others))
        self.rest = tuple(rest)
        self.index: list[tuple[str, dict, int]] = []  # (attr, value -> vars, vars unconstrained)
        for attr, per_var in eq_values.items():
            table: dict = {}
            for i, values in per_var.items():
                if len(values) == 1:  # two different required values: never satisfiable
                    value = next(iter(values))
                    table[value] = table.get(value, 0) | 1 << i
            free = self.all & ~sum(1 << i for i in per_var)
            self.index.append((attr, table, free))
        self.with_rest = [i for i, r in enumerate(self.rest) if r]

    def batch(self, events: list[Event]) -> list[int]:
        """ē for every event; one list comprehension in the common case of a single
        indexed attribute (say ``type``) and no other property."""
        if len(self.index) == 1 and not self.with_rest:
            attr, table, free = self.index[0]
            try:
                return [table.get(e.attrs.get(attr), 0) | free for e in events]
            except TypeError:
                pass
        return [self(e) for e in events]

    def __call__(self, e: Event) -> int:
        attrs = e.attrs
        mask = self.all
        for attr, table, free in self.index:
            value = attrs.get(attr)
            try:
                mask &= table.get(value, 0) | free
            except TypeError:  # an unhashable value equals no literal
                mask &= free
            if not mask:
                return 0
        for i in self.with_rest:
            if mask >> i & 1 and not all(p.holds(attrs) for p in self.rest[i]):
                mask &= ~(1 << i)
        return mask


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
