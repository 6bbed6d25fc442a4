"""Necessary match conditions for a row pattern (the match-window paper's Theorem 2,
for a row-pattern matcher as its algorithm A): a partition in which no row fits a
variable that every match must hold cannot match, so it is not searched.

A variable is *required* when every way the pattern can match labels some row with it
(a concatenation requires what any of its parts requires, an alternation what all its
branches require, a quantifier what its item requires if it repeats at least once, a
pattern that can match no row requires nothing). Its DEFINE condition is *row-local*
when it reads only the row itself (its own or bare columns; no navigation, aggregate,
classifier or match number): then the row a match labels with it must fit it on its own.
Nothing else is pruned: a row that fits no variable still breaks a match (adjacency), and
WITH UNMATCHED ROWS outputs every row, so it prunes nothing."""

from __future__ import annotations

from jobs.core.rowpattern.checks import walk
from jobs.core.rowpattern.model import (
    Agg,
    Alt,
    Classifier,
    Col,
    Concat,
    Exclude,
    Label,
    MatchNumber,
    Nav,
    Permute,
    Quant,
    RowPatternQuery,
    Star,
)


def required_variables(node) -> frozenset[str]:
    """The variables every match of ``node`` labels at least one row with."""
    if isinstance(node, Label):
        return frozenset([node.name])
    if isinstance(node, (Concat, Permute)):
        return frozenset().union(*(required_variables(i) for i in node.items))
    if isinstance(node, Alt):
        return frozenset.intersection(*(required_variables(i) for i in node.items))
    if isinstance(node, Quant):
        return required_variables(node.item) if node.low >= 1 else frozenset()
    if isinstance(node, Exclude):
        return required_variables(node.item)
    return frozenset()  # (), ^, $


def first_variables(node) -> tuple[frozenset[str], bool]:
    """The variables that can label a match's first row, and whether the pattern can
    match without labelling any row (then any row may start a match)."""
    if isinstance(node, Label):
        return frozenset([node.name]), False
    if isinstance(node, (Concat, Permute)):
        out, nullable = frozenset(), True
        items = node.items
        for item in items:
            first, empty = first_variables(item)
            out |= first
            if not empty and isinstance(node, Concat):
                return out, False
            nullable = nullable and empty
        return out, nullable
    if isinstance(node, Alt):
        parts = [first_variables(i) for i in node.items]
        return frozenset().union(*(f for f, _ in parts)), any(e for _, e in parts)
    if isinstance(node, Quant):
        first, empty = first_variables(node.item)
        return first, empty or node.low == 0
    if isinstance(node, Exclude):
        return first_variables(node.item)
    return frozenset(), True  # (), ^, $


def row_local(expr, var: str) -> bool:
    """Whether a condition of ``var`` reads only the row being labelled."""
    for node in walk(expr):
        if isinstance(node, (Nav, Agg, Classifier, MatchNumber, Star)):
            return False
        if isinstance(node, Col) and node.var not in (None, var):
            return False
    return True


def necessary_conditions(query: RowPatternQuery) -> tuple[str, ...]:
    """The variables with a row-local condition that some row of a partition must fit
    for it to match (none WITH UNMATCHED ROWS, which outputs every row)."""
    if query.rows_per_match == "unmatched":
        return ()
    defines = query.define_map
    return tuple(v for v in sorted(required_variables(query.pattern))
                 if v in defines and row_local(defines[v], v))


def may_match(necessary: tuple[str, ...], fitting: dict[str, list[bool]]) -> bool:
    """Whether each necessary variable fits some row (``fitting``: the rows each fits,
    ``matcher.fitting_rows``; a variable missing there could not be computed on every row,
    and the matcher decides)."""
    return all(any(fitting[v]) for v in necessary if v in fitting)
