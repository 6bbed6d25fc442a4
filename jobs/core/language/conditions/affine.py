"""An aggregate over an expression of its group's attribute (``sum(b.value + a.value)``)
rewritten with the aggregates of that attribute, so that the matchers and the oracle
compute it as they compute ``sum(b.value)``: SQL's aggregate over the expression, the
expression per event of the group and missing values skipped.

``E = α·g + β`` with ``g`` the group's attribute and ``α``, ``β`` one value per match
(literals, singletons' attributes): ``sum(E) = α·sum(g) + β·count(g)``; ``avg``, ``first``
and ``last`` of ``E`` are ``α·f(g) + β``; ``min``/``max`` too when ``α`` is a number (a
negative one swaps them). Anything else is refused with the reason."""

from __future__ import annotations

from jobs.core.language.conditions.expressions import Agg, Arith, Attr, Lit, MatchTime, Neg


def aggregate_of(func: str, expr, groups) -> object:
    """``func(expr)`` rewritten; the group is the first attribute in ``expr`` of a
    variable in ``groups`` (else its first attribute). Raises ``ValueError`` saying why
    it cannot be rewritten."""
    attrs = [a for a in _attrs(expr) if not a.prev]
    group = next((a for a in attrs if a.var in groups), attrs[0] if attrs else None)
    if group is None:
        raise ValueError(f"{func}(...) needs an attribute of a group variable, e.g. "
                         "sum(p.value)")
    parts = _affine(expr, group)
    if parts is None:
        raise ValueError(f"{func}({expr}): an aggregate takes an attribute of its group "
                         f"({group}), or a sum or multiple of it and of values that are one "
                         "per match; this one is not (a product or quotient of the group's "
                         "values)")
    alpha, beta = parts
    g = Agg(func, group.var, group.attr)
    if func == "sum":
        return _plus(_times(alpha, g), _times(beta, Agg("count", group.var, group.attr)))
    if func in ("avg", "first", "last"):
        return _plus(_times(alpha, g), beta)
    if func in ("min", "max"):
        if alpha is not None and not (isinstance(alpha, Lit) and _number(alpha.value)):
            raise ValueError(f"{func}({expr}): the factor of {group} must be a number (its "
                             f"sign says whether the {func} of the expression is the {func} "
                             f"of {group})")
        flipped = alpha is not None and alpha.value < 0
        other = {"min": "max", "max": "min"}[func] if flipped else func
        return _plus(_times(alpha, Agg(other, group.var, group.attr)), beta)
    raise ValueError(f"{func}() of an expression: count an attribute, {func}({group})")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _attrs(e):
    """The attributes an expression reads, in reading order."""
    if isinstance(e, Attr):
        yield e
    elif isinstance(e, Arith):
        yield from _attrs(e.left)
        yield from _attrs(e.right)
    elif isinstance(e, Neg):
        yield from _attrs(e.item)


_ONE = Lit(1)


def _affine(e, g: Attr):
    """``e`` as (α, β) with ``e = α·g + β`` and neither reading ``g`` (None for zero); None
    when ``e`` is not affine in ``g``."""
    if e == g:
        return _ONE, None
    if isinstance(e, (Lit, MatchTime)) or (isinstance(e, Attr) and e.var != g.var):
        return None, e
    if isinstance(e, Neg):
        parts = _affine(e.item, g)
        return None if parts is None else tuple(None if x is None else _negated(x)
                                                for x in parts)
    if not isinstance(e, Arith):
        return None  # an aggregate, another attribute of the group
    left, right = _affine(e.left, g), _affine(e.right, g)
    if left is None or right is None:
        return None
    (a1, b1), (a2, b2) = left, right
    if e.op in "+-":
        combine = _plus if e.op == "+" else _minus
        return combine(a1, a2), combine(b1, b2)
    if e.op == "*":
        if a1 is not None and a2 is not None:
            return None  # g·g
        if a1 is None:
            return _times(b1, a2), _times(b1, b2)
        return _times(a1, b2), _times(b1, b2)
    if a2 is not None:
        return None  # divided by the group's values
    return _divided(a1, b2), _divided(b1, b2)


def _numbers(x, y) -> bool:
    return all(isinstance(v, Lit) and _number(v.value) for v in (x, y))


def _divided(x, y):
    if x is None:
        return None
    if _numbers(x, y) and y.value != 0:
        return Lit(x.value / y.value)
    return Arith("/", x, y)


def _negated(x):
    return Lit(-x.value) if isinstance(x, Lit) and _number(x.value) else Neg(x)


def _plus(x, y):
    if x is None or y is None:
        return y if x is None else x
    return Lit(x.value + y.value) if _numbers(x, y) else Arith("+", x, y)


def _minus(x, y):
    if x is None or y is None:
        return x if y is None else _negated(y)
    return Lit(x.value - y.value) if _numbers(x, y) else Arith("-", x, y)


def _times(x, y):
    if x is None or y is None:
        return None
    if x == _ONE:
        return y
    if y == _ONE:
        return x
    return Lit(x.value * y.value) if _numbers(x, y) else Arith("*", x, y)
