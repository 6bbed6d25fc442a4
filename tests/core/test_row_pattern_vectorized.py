"""Row-local conditions on whole Arrow columns (``vectorized``) against the row-by-row
evaluator: the same rows fit, over random conditions and rows with nulls, integers,
decimals and text; what Arrow cannot compute as SQL does is left to the evaluator."""

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.core.rowpattern.evaluate import EvaluationError, Frame, holds
from jobs.core.rowpattern.parser import parse_row_pattern
from jobs.core.rowpattern.vectorized import fitting_vector

NUMBER = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0]))
TEXT = st.one_of(st.none(), st.sampled_from(["a", "b", "ab", "B"]))
ROWS = st.lists(st.fixed_dictionaries({"x": NUMBER, "y": NUMBER, "s": TEXT}), max_size=12)


def conditions():
    number = st.sampled_from(["x", "y", "A.x", "1", "2.5", "-1", "x + y", "x * 2", "-x",
                              "NULL"])
    text = st.sampled_from(["s", "A.s", "'a'", "'ab'"])
    atom = st.one_of(
        st.tuples(number, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), number).map(
            " ".join),
        st.tuples(text, st.sampled_from(["=", "<>", "<"]), text).map(" ".join),
        number.map(lambda n: f"{n} IS NULL"), text.map(lambda t: f"{t} IS NOT NULL"),
        number.map(lambda n: f"{n} BETWEEN -1 AND 2"),
        number.map(lambda n: f"{n} NOT IN (1, 2)"), text.map(lambda t: f"{t} IN ('a', 'b')"),
        text.map(lambda t: f"{t} LIKE 'a%'"), st.sampled_from(["x = s", "TRUE", "NULL"]))
    return st.recursive(atom, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda c: f"NOT ({c})")), max_leaves=4)


@settings(max_examples=400, deadline=None)
@given(conditions(), ROWS)
def test_vectorized_conditions_equal_the_row_evaluator(condition, rows):
    query = parse_row_pattern(f"SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) "
                              f"DEFINE A AS {condition})")
    expr = query.define_map["A"]
    fast = fitting_vector(expr, rows, {})
    try:
        slow = [holds(expr, Frame(rows, r, ["A"], r, False, 1, {})) for r in range(len(rows))]
    except EvaluationError:
        slow = None
    if fast is not None and slow is not None:
        assert fast == slow, (condition, rows)
    assert fast is None or slow is not None or not rows, (condition, rows)
