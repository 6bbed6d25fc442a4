"""What makes a parsed MATCH_RECOGNIZE statement meaningless, each named with its line
and column: a variable no clause declares, an aggregate or a navigation whose argument
mixes variables, a navigation nested where SQL:2016 does not allow it, ``FINAL`` in
DEFINE, a skip to an unknown variable."""

from __future__ import annotations

from jobs.core.rowpattern.lexer import RowPatternError
from jobs.core.rowpattern.model import (
    Agg,
    Between,
    Binary,
    Case,
    Cast,
    Classifier,
    Col,
    Exclude,
    Func,
    InList,
    IsNull,
    Like,
    MatchNumber,
    Nav,
    Star,
    Unary,
)


def children(e):
    """The direct subexpressions of ``e``."""
    if isinstance(e, (Unary, IsNull, Cast)):
        return (e.arg,)
    if isinstance(e, Binary):
        return (e.left, e.right)
    if isinstance(e, Between):
        return (e.arg, e.low, e.high)
    if isinstance(e, InList):
        return (e.arg, *e.items)
    if isinstance(e, Like):
        return (e.arg, e.pattern)
    if isinstance(e, Case):
        out = [] if e.operand is None else [e.operand]
        for cond, value in e.whens:
            out += [cond, value]
        return tuple(out + ([] if e.default is None else [e.default]))
    if isinstance(e, Func):
        return e.args
    if isinstance(e, Agg):
        return (e.arg,) if e.by is None else (e.arg, e.by)
    if isinstance(e, Nav):
        return (e.arg,)
    return ()


def walk(e):
    yield e
    for c in children(e):
        yield from walk(c)


def columns_read(q) -> list[tuple[str, object]]:
    """(column, position or None) of every column the statement reads, in order: the
    PARTITION BY and ORDER BY columns, then the columns of MEASURES and DEFINE."""
    exprs = [m.expr for m in q.measures] + [e for _, e in q.defines]
    return [(c, None) for c in q.partition_by] + [(k.column, None) for k in q.order_by] + \
        [(n.name, n.pos) for e in exprs for n in walk(e) if isinstance(n, Col)]


def referenced_vars(e) -> set:
    """The variables an expression's column references and classifiers name (None: the
    universal variable of a bare column or ``CLASSIFIER()``)."""
    out = set()
    for node in walk(e):
        if isinstance(node, (Col, Star)):
            out.add(node.var)
        elif isinstance(node, Classifier):
            out.add(node.var)
    return out


def check(q) -> None:
    """Raise ``RowPatternError`` for the first problem of ``q``."""
    def fail(pos, message):
        raise RowPatternError(q.path, pos, message)

    variables = set(q.variables)
    subsets = {}
    for name, members in q.subsets:
        at = q.pos(f"SUBSET {name}")
        if name in variables:
            fail(at, f"SUBSET {name}: a pattern variable of that name exists")
        if name in subsets:
            fail(at, f"SUBSET {name} is given twice")
        for m in members:
            if m not in variables:
                fail(at, f"SUBSET {name}: {m} is not a variable of PATTERN "
                           f"({', '.join(q.variables) or 'none'})")
        subsets[name] = members
    known = variables | set(subsets)
    seen = set()
    for name, expr in q.defines:
        at = q.pos(f"DEFINE {name}")
        if name not in variables:
            fail(at, f"DEFINE {name}: no variable {name} in PATTERN "
                             f"({', '.join(q.variables) or 'none'})")
        if name in seen:
            fail(at, f"DEFINE {name} is given twice")
        seen.add(name)
        _check_expr(expr, known, fail, define=True)
    for m in q.measures:
        _check_expr(m.expr, known, fail, define=False)
    if q.skip.var is not None and q.skip.var not in known:
        fail(q.pos("SKIP"), f"AFTER MATCH SKIP TO {q.skip.var}: no variable or SUBSET of that name")
    if q.rows_per_match == "unmatched" and _excludes(q.pattern):
        fail(None, "a pattern exclusion {- -} cannot be used WITH UNMATCHED ROWS (an excluded "
                   "row would be neither output nor unmatched)")
    for key in q.partition_by:
        if any(k.column == key for k in q.order_by):
            fail(None, f"{key} is both a PARTITION BY and an ORDER BY column")


def _excludes(node) -> bool:
    if isinstance(node, Exclude):
        return True
    items = getattr(node, "items", None)
    if items is not None:
        return any(_excludes(i) for i in items)
    inner = getattr(node, "item", None)
    return inner is not None and _excludes(inner)


def _check_expr(e, known, fail, define: bool, inside: str | None = None):
    for node in walk(e):
        var = getattr(node, "var", None) if isinstance(node, (Col, Star, Classifier)) else None
        if var is not None and var not in known:
            fail(node.pos, f"undefined variable {var}: not in PATTERN or SUBSET")
        if isinstance(node, Star) and not _counted(e, node):
            fail(node.pos, "* is only the argument of count")
        if isinstance(node, (Nav, Agg)):
            if node.final and define:
                fail(node.pos, "FINAL cannot be used in DEFINE: a row's condition sees the "
                               "match up to that row (RUNNING)")
            _check_inner(node, fail)


def _counted(root, star) -> bool:
    return any(isinstance(n, Agg) and n.name == "count" and n.arg is star for n in walk(root))


def _check_inner(node, fail):
    what = node.name if isinstance(node, Agg) else node.kind
    vars_ = referenced_vars(node)
    if len(vars_) > 1:
        shown = ", ".join(sorted(v or "(the universal variable)" for v in vars_))
        fail(node.pos, f"{what}(...) mixes variables {shown}: its argument must name one "
                       "variable")
    for inner in (x for arg in children(node) for x in walk(arg)):
        if inner is node.arg and isinstance(node, Nav) and node.kind in ("PREV", "NEXT") \
                and isinstance(inner, Nav) and inner.kind in ("FIRST", "LAST"):
            continue  # PREV(LAST(A.value, 2), 3): a physical over a logical navigation
        if isinstance(inner, Agg):
            fail(inner.pos, f"{inner.name}(...) cannot be nested in {what}(...)")
        if isinstance(inner, Nav):
            fail(inner.pos, f"{inner.kind}(...) cannot be nested in {what}(...) (only FIRST "
                            "or LAST, as the whole argument of PREV or NEXT)")
        if isinstance(inner, MatchNumber) and isinstance(node, Nav):
            fail(inner.pos, f"MATCH_NUMBER() cannot be used in {what}(...)")
    if isinstance(node, Nav) and node.kind in ("PREV", "NEXT") and isinstance(node.arg, Nav):
        _check_inner(node.arg, fail)
