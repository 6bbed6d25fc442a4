"""The frozen model of a MATCH_RECOGNIZE statement: the row pattern (a regular expression
over pattern variables), the expressions of DEFINE and MEASURES, and the clauses around
them (SQL:2016 part 5, "row pattern recognition"; Trino's syntax, Flink's ``WITHIN``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pos:
    """Where a token starts: 1-based line and column of the file."""

    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


# ---- expressions -------------------------------------------------------------------

@dataclass(frozen=True)
class Lit:
    value: Any
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Col:
    """``var.name`` or a bare ``name`` (``var`` None: the universal variable)."""

    var: str | None
    name: str
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Star:
    """``*`` or ``var.*`` as the argument of ``count``."""

    var: str | None
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Unary:
    op: str  # '-', '+', 'NOT'
    arg: Any
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % || = <> < <= > >= AND OR
    left: Any
    right: Any
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class IsNull:
    arg: Any
    negated: bool
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Between:
    arg: Any
    low: Any
    high: Any
    negated: bool
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class InList:
    arg: Any
    items: tuple
    negated: bool
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Like:
    arg: Any
    pattern: Any
    negated: bool
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Case:
    operand: Any | None
    whens: tuple  # ((condition or value, result), ...)
    default: Any | None
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Func:
    """A scalar function (``coalesce``, ``abs``, ``lower``, ...)."""

    name: str
    args: tuple
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Cast:
    arg: Any
    type: str  # varchar, integer, bigint, double, real, decimal, boolean
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Nav:
    """``PREV``/``NEXT`` (physical: rows of the partition) or ``FIRST``/``LAST`` (logical:
    rows of the match mapped to the argument's variable), with an offset; ``final`` for a
    ``FINAL`` logical navigation (all rows of the match, in MEASURES only)."""

    kind: str
    arg: Any
    offset: int
    final: bool = False
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Agg:
    """An aggregate over the rows of the match mapped to its argument's variable (all rows
    for the universal variable); ``final`` for ``FINAL``."""

    name: str  # sum count avg min max array_agg arbitrary max_by min_by count_if bool_and ...
    arg: Any
    final: bool = False
    distinct: bool = False
    pos: Pos = field(default=Pos(0, 0), compare=False)
    by: Any = None  # max_by(arg, by), min_by(arg, by)


@dataclass(frozen=True)
class Classifier:
    var: str | None
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class MatchNumber:
    pos: Pos = field(default=Pos(0, 0), compare=False)


# ---- the row pattern ---------------------------------------------------------------

@dataclass(frozen=True)
class Label:
    name: str
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True)
class Empty:
    """``()``: matches no row."""


@dataclass(frozen=True)
class Concat:
    items: tuple


@dataclass(frozen=True)
class Alt:
    """Alternation; the left alternative is preferred."""

    items: tuple


@dataclass(frozen=True)
class Permute:
    """``PERMUTE(a, b, ...)``: every order, preferred lexicographically by position."""

    items: tuple


@dataclass(frozen=True)
class Quant:
    item: Any
    low: int
    high: int | None  # None: unbounded
    greedy: bool = True


@dataclass(frozen=True)
class Anchor:
    kind: str  # '^' partition start, '$' partition end


@dataclass(frozen=True)
class Exclude:
    """``{- ... -}``: rows matched inside are not output by ALL ROWS PER MATCH."""

    item: Any


# ---- the statement -----------------------------------------------------------------

@dataclass(frozen=True)
class Measure:
    name: str
    expr: Any
    pos: Pos


@dataclass(frozen=True)
class OrderKey:
    column: str
    ascending: bool = True
    nulls_first: bool = False


@dataclass(frozen=True)
class Skip:
    """AFTER MATCH SKIP: ``past_last``, ``next_row``, ``first`` or ``last`` (``to``)."""

    kind: str = "past_last"
    var: str | None = None


ROWS_ONE, ROWS_ALL, ROWS_ALL_OMIT, ROWS_ALL_UNMATCHED = "one", "all", "all_omit", "unmatched"


@dataclass(frozen=True)
class RowPatternQuery:
    """One ``SELECT * FROM source MATCH_RECOGNIZE (...)``; ``name`` is the file's stem."""

    name: str
    source: str
    partition_by: tuple[str, ...]
    order_by: tuple[OrderKey, ...]
    measures: tuple[Measure, ...]
    rows_per_match: str
    skip: Skip
    pattern: Any
    subsets: tuple[tuple[str, tuple[str, ...]], ...]
    defines: tuple[tuple[str, Any], ...]
    within_ns: int | None
    variables: tuple[str, ...]  # the pattern's variables in order of first appearance
    path: str = "<sql>"
    description: str = ""
    where: tuple[tuple[str, Pos], ...] = ()  # ("DEFINE X", pos), ("SUBSET U", ...), ("SKIP", ...)
    kind: str = field(default="row_pattern", init=False)

    @property
    def subset_map(self) -> dict[str, tuple[str, ...]]:
        return dict(self.subsets)

    @property
    def define_map(self) -> dict[str, Any]:
        return dict(self.defines)

    def pos(self, what: str) -> Pos | None:
        return dict(self.where).get(what)

    @property
    def all_rows(self) -> bool:
        return self.rows_per_match != ROWS_ONE
