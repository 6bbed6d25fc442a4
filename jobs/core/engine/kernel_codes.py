"""What the compiled kernels and their callers share without loading Numba: the kernels'
status codes and the comparison of two encoded values (the kernels compile this very
function; the planner's sampling calls it in Python)."""

from __future__ import annotations

DONE, FULL, CAP, BUDGET = 0, 1, 2, 3


def compare(op, lv, lk, rv, rk):
    """``left op right`` on encoded values (see ``compiled.compare_columns``): ``lk``/``rk``
    are the kinds (0 missing, which compares false), values of different kinds are only
    unequal; ``op`` indexes ``=, !=, <, <=, >, >=``."""
    if lk == 0 or rk == 0:
        return False
    if lk != rk:
        return op == 1
    if op == 0:
        return lv == rv
    if op == 1:
        return lv != rv
    if op == 2:
        return lv < rv
    if op == 3:
        return lv <= rv
    if op == 4:
        return lv > rv
    return lv >= rv
