"""The compiled row-pattern matcher (a program, stepped with equal paths pruned) against a
plain recursive interpreter of the pattern's definition (SQL:2016's preferment order:
alternation left first, greedy quantifiers more iterations first, reluctant fewer,
PERMUTE in lexicographic order; an unbounded loop does not repeat an iteration that
matched no row), over random patterns, conditions and rows: the same first match from
every row."""

from dataclasses import replace
from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.core.rowpattern.evaluate import Frame, holds
from jobs.core.rowpattern.matcher import find_match, fitting_rows
from jobs.core.rowpattern.model import (
    Alt,
    Anchor,
    Concat,
    Empty,
    Exclude,
    Label,
    Permute,
    Quant,
)
from jobs.core.rowpattern.output import matches, output_rows
from jobs.core.rowpattern.parser import _labels, parse_row_pattern
from jobs.core.rowpattern.program import compile_row_pattern
from jobs.core.rowpattern.pruning import necessary_conditions, required_variables

DEFINE = ("A AS A.value <= 1, B AS B.value >= PREV(B.value), "
          "C AS count(C.*) <= 2 AND value <> FIRST(value)")
VARS = ["A", "B", "C", "D"]  # D has no condition: it fits every row


def interpret(node, rows, start, defines, pos, labels, excluded):
    """Every way ``node`` matches from ``pos``, in preferment order: (pos, labels)."""
    if isinstance(node, Label):
        if pos < len(rows):
            now = labels + ((node.name, excluded),)
            condition = defines.get(node.name)
            frame = Frame(rows, start, [v for v, _ in now], pos, False, 1, {})
            if condition is None or holds(condition, frame):
                yield pos + 1, now
    elif isinstance(node, Empty):
        yield pos, labels
    elif isinstance(node, Anchor):
        if (node.kind == "^" and pos == 0) or (node.kind == "$" and pos == len(rows)):
            yield pos, labels
    elif isinstance(node, Exclude):
        yield from interpret(node.item, rows, start, defines, pos, labels, True)
    elif isinstance(node, Alt):
        for item in node.items:
            yield from interpret(item, rows, start, defines, pos, labels, excluded)
    elif isinstance(node, Permute):
        for order in permutations(node.items):
            yield from interpret(Concat(order), rows, start, defines, pos, labels, excluded)
    elif isinstance(node, Concat):
        yield from _sequence(node.items, rows, start, defines, pos, labels, excluded)
    else:
        yield from _repeat(node, 0, rows, start, defines, pos, labels, excluded)


def _sequence(items, rows, start, defines, pos, labels, excluded):
    if not items:
        yield pos, labels
        return
    for p, ls in interpret(items[0], rows, start, defines, pos, labels, excluded):
        yield from _sequence(items[1:], rows, start, defines, p, ls, excluded)


def _repeat(q: Quant, k, rows, start, defines, pos, labels, excluded):
    def more():
        if q.high is None or k < q.high:
            for p, ls in interpret(q.item, rows, start, defines, pos, labels, excluded):
                if q.high is None and k >= q.low and p == pos:
                    continue  # an empty iteration of an unbounded loop is not repeated
                yield from _repeat(q, k + 1, rows, start, defines, p, ls, excluded)

    def stop():
        if k >= q.low:
            yield pos, labels

    first, second = (more, stop) if q.greedy else (stop, more)
    yield from first()
    yield from second()


def patterns():
    leaf = st.one_of(st.sampled_from(VARS).map(Label), st.just(Empty()),
                     st.sampled_from("^$").map(Anchor))

    def extend(inner):
        bounds = st.sampled_from([(0, None), (1, None), (0, 1), (2, None), (1, 2), (0, 2),
                                  (2, 2)])
        return st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Concat(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Permute(tuple(xs))),
            st.tuples(inner, bounds, st.booleans()).map(
                lambda t: Quant(t[0], t[1][0], t[1][1], t[2])),
            inner.map(Exclude))

    return st.recursive(leaf, extend, max_leaves=5)


QUERY = parse_row_pattern(f"SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B C D) "
                          f"DEFINE {DEFINE})")
DEFINES = QUERY.define_map


@settings(max_examples=300, deadline=None)
@given(patterns(), st.lists(st.integers(0, 3), min_size=0, max_size=6))
def test_compiled_matcher_equals_the_definition(pattern, values):
    rows = [{"value": v} for v in values]
    program = compile_row_pattern(pattern)
    for start in range(len(rows)):
        want = next(interpret(pattern, rows, start, DEFINES, start, (), False), None)
        got = find_match(program, rows, start, DEFINES, {})
        # the same with the rows each row-local condition fits computed once (A's)
        assert find_match(program, rows, start, DEFINES, {}, local=fitting_rows(
            QUERY, rows)) == got
        if want is None:
            assert got is None, (pattern, values, start)
        else:
            labels, excluded = got
            assert list(zip(labels, excluded)) == list(want[1]), (pattern, values, start)


PRUNED_DEFINE = ("A AS A.value <= 1, B AS value = 3 AND B.k <> 'z', "
                 "C AS count(C.*) <= 2 AND value <> FIRST(value), D AS value > 0")


@settings(max_examples=300, deadline=None)
@given(patterns(), st.lists(st.tuples(st.sampled_from("pq"), st.integers(0, 3)), max_size=8),
       st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH",
                        "ALL ROWS PER MATCH OMIT EMPTY MATCHES"]))
def test_necessary_conditions_leave_the_result_unchanged(pattern, values, mode):
    """Partitions that fail a necessary condition are skipped, and rows that no first
    variable fits are not tried as a start; the output is the same."""
    query = replace(parse_row_pattern(
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k MEASURES CLASSIFIER() AS c, "
        f"count(*) AS n {mode} PATTERN (A B C D) DEFINE {PRUNED_DEFINE})"),
        pattern=pattern, variables=tuple(dict.fromkeys(_labels(pattern))))
    rows = [{"k": k, "value": v, "id": i} for i, (k, v) in enumerate(values)]
    assert output_rows(query, rows, prune=True) == output_rows(query, rows, prune=False)


def test_a_partition_no_row_of_a_required_variable_fits_is_not_searched():
    query = parse_row_pattern("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k "
                              "PATTERN (A X* B) DEFINE B AS value = 3, "
                              "A AS A.value > PREV(A.value))")
    assert necessary_conditions(query) == ("B",)  # A's condition reads another row
    rows = [{"k": "p", "value": 1}, {"k": "p", "value": 3}, {"k": "q", "value": 1}]
    pruned: list = []
    assert len(list(matches(query, rows, pruned=pruned))) == 0 and pruned == [("q",)]
    assert required_variables(parse_row_pattern(
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN ((A B | A C) D? PERMUTE(E, F)+))"
    ).pattern) == {"A", "E", "F"}
