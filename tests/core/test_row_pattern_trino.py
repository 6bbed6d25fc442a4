"""Trino's ``TestRowPatternMatching`` cases, translated: each query's MATCH_RECOGNIZE is a
``.sql`` pattern over Trino's ``VALUES`` rows, and the rows it returns are compared with
Trino's expected ones (the columns the test selects, in order). Subqueries (``SELECT``
inside an expression) are outside the ``.sql`` language and are not translated."""

import pytest

from jobs.core.rowpattern.lexer import RowPatternError
from jobs.core.rowpattern.matcher import SkipError
from jobs.core.rowpattern.output import output_rows
from jobs.core.rowpattern.parser import parse_row_pattern


def values(columns: str, *tuples) -> list[dict]:
    names = columns.split(",")
    return [dict(zip(names, t if isinstance(t, tuple) else (t,))) for t in tuples]


def run(body: str, rows: list[dict], select: str):
    query = parse_row_pattern(f"SELECT * FROM t MATCH_RECOGNIZE ({body}) AS m", "<trino>")
    return [tuple(r[c] for c in select.split(",")) for r in output_rows(query, rows)]


HEAD = ("ORDER BY id MEASURES match_number() AS match, RUNNING LAST(value) AS val, "
        "classifier() AS label ")
EIGHT = values("id,value", (1, 90), (2, 80), (3, 70), (4, 80), (5, 90), (6, 50), (7, 40),
               (8, 60))
FOUR = values("id,value", (1, 90), (2, 80), (3, 70), (4, 70))
N = None


def test_simple_query():
    got = run(HEAD + "ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C+) "
              "DEFINE /* A defaults to True */ B AS B.value < PREV (B.value), "
              "C AS C.value > PREV (C.value)", EIGHT, "id,match,val,label")
    assert got == [(1, 1, 90, "A"), (2, 1, 80, "B"), (3, 1, 70, "B"), (4, 1, 80, "C"),
                   (5, 1, 90, "C"), (6, 2, 50, "A"), (7, 2, 40, "B"), (8, 2, 60, "C")]


ROW_PATTERN = [
    ("PATTERN (() | A) DEFINE A AS true",
     [(1, 1, N, N), (2, 2, N, N), (3, 3, N, N), (4, 4, N, N)]),
    ("PATTERN (^A) DEFINE A AS true", [(1, 1, 90, "A")]),
    ("PATTERN (A^) DEFINE A AS true", []),
    ("PATTERN (^A^) DEFINE A AS true", []),
    ("PATTERN (A$) DEFINE A AS true", [(4, 1, 70, "A")]),
    ("PATTERN ($A) DEFINE A AS true", []),
    ("PATTERN ($A$) DEFINE A AS true", []),
    ("PATTERN (A B C) DEFINE B AS B.value < PREV (B.value), C AS C.value = PREV (C.value)",
     [(2, 1, 80, "A"), (3, 1, 70, "B"), (4, 1, 70, "C")]),
    ("PATTERN (B | C | A) DEFINE B AS B.value < PREV (B.value), "
     "C AS C.value <= PREV (C.value)",
     [(1, 1, 90, "A"), (2, 2, 80, "B"), (3, 3, 70, "B"), (4, 4, 70, "C")]),
    ("PATTERN (PERMUTE(B, C)) DEFINE B AS B.value < PREV (B.value), "
     "C AS C.value < PREV (C.value)", [(2, 1, 80, "B"), (3, 1, 70, "C")]),
    ("PATTERN (((A) (B (C)))) DEFINE B AS B.value < PREV (B.value), "
     "C AS C.value = PREV (C.value)", [(2, 1, 80, "A"), (3, 1, 70, "B"), (4, 1, 70, "C")]),
]


@pytest.mark.parametrize("clauses, expected", ROW_PATTERN)
def test_row_pattern(clauses, expected):
    got = run(HEAD + "ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW " + clauses, FOUR,
              "id,match,val,label")
    assert got == expected


EMPTY_EACH = [(1, 1, N, N), (2, 2, N, N), (3, 3, N, N), (4, 4, N, N)]
GREEDY_ALL = [(1, 1, N, N), (2, 2, 80, "B"), (3, 2, 70, "B"), (4, 2, 70, "B")]
ONE_EACH = [(1, 1, N, N), (2, 2, 80, "B"), (3, 3, 70, "B"), (4, 4, 70, "B")]
PLUS = [(2, 1, 80, "B"), (3, 1, 70, "B"), (4, 1, 70, "B")]
SINGLES = [(2, 1, 80, "B"), (3, 2, 70, "B"), (4, 3, 70, "B")]
TWO = [(2, 1, 80, "B"), (3, 1, 70, "B")]
QUANTIFIERS = [
    ("B*", GREEDY_ALL), ("B*?", EMPTY_EACH), ("B+", PLUS), ("B+?", SINGLES),
    ("B?", ONE_EACH), ("B??", EMPTY_EACH), ("B{,}", GREEDY_ALL), ("B{,}?", EMPTY_EACH),
    ("B{1,}", PLUS), ("B{1,}?", SINGLES), ("B{2,}", PLUS), ("B{2,}?", TWO),
    ("B{5,}", []), ("B{5,}?", []), ("B{,1}", ONE_EACH), ("B{,1}?", EMPTY_EACH),
    ("B{,2}", [(1, 1, N, N), (2, 2, 80, "B"), (3, 2, 70, "B"), (4, 3, 70, "B")]),
    ("B{,2}?", EMPTY_EACH), ("B{,5}", GREEDY_ALL), ("B{,5}?", EMPTY_EACH),
    ("B{1,1}", SINGLES), ("B{1,1}?", SINGLES), ("B{1,5}", PLUS), ("B{1,5}?", SINGLES),
    ("B{5,7}", []), ("B{5,7}?", []), ("B{1}", SINGLES), ("B{1}?", SINGLES),
    ("B{2}", TWO), ("B{2}?", TWO), ("B{5}", []), ("B{5}?", []),
]


@pytest.mark.parametrize("pattern, expected", QUANTIFIERS)
def test_pattern_quantifiers(pattern, expected):
    got = run(HEAD + f"ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) "
              "DEFINE B AS B.value <= PREV (B.value)", FOUR, "id,match,val,label")
    assert got == expected


ABC = "DEFINE B AS B.value < PREV (B.value), C AS C.value > PREV (C.value)"
EXCLUSIONS = [
    ("A B+ C+", [(1, 1, 90, "A"), (2, 1, 80, "B"), (3, 1, 70, "B"), (4, 1, 80, "C"),
                 (5, 1, 90, "C"), (6, 2, 50, "A"), (7, 2, 40, "B"), (8, 2, 60, "C")]),
    ("A {- B+ -} C+", [(1, 1, 90, "A"), (4, 1, 80, "C"), (5, 1, 90, "C"), (6, 2, 50, "A"),
                       (8, 2, 60, "C")]),
    ("{- A -} {- B+ -} C+", [(4, 1, 80, "C"), (5, 1, 90, "C"), (8, 2, 60, "C")]),
    ("A {- {- B+ -} C+ -}", [(1, 1, 90, "A"), (6, 2, 50, "A")]),
    ("{- A B+ C+ -}", []),
    ("A B+ {- ()* -} C+", [(1, 1, 90, "A"), (2, 1, 80, "B"), (3, 1, 70, "B"),
                           (4, 1, 80, "C"), (5, 1, 90, "C"), (6, 2, 50, "A"),
                           (7, 2, 40, "B"), (8, 2, 60, "C")]),
    ("A {- B -}+ {- C -}+", [(1, 1, 90, "A"), (6, 2, 50, "A")]),
    ("A {- B -}* {- C -}*", [(1, 1, 90, "A"), (6, 2, 50, "A")]),
    ("A {- B -}{1,2} {- C -}{1,2}", [(1, 1, 90, "A"), (6, 2, 50, "A")]),
    ("A {- C -}{2,3} {- B -}{2,3}", [(3, 1, 70, "A")]),
]


@pytest.mark.parametrize("pattern, expected", EXCLUSIONS)
def test_exclusion_syntax(pattern, expected):
    got = run(HEAD + f"ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) "
              + ABC, EIGHT, "id,match,val,label")
    assert got == expected


def test_back_reference():
    ones = values("value", 1, 1)
    body = "MEASURES CLASSIFIER() AS classy ALL ROWS PER MATCH PATTERN ((A | B)* X) DEFINE "
    assert run(body + "X AS value = A.value", ones, "value,classy") == [(1, "A"), (1, "X")]
    assert run(body + "X AS value = B.value", ones, "value,classy") == [(1, "B"), (1, "X")]
    condition = "PREV(LAST(A.value), 3) + FIRST(A.value) + PREV(LAST(B.value), 2)"
    got = run(f"ORDER BY value MEASURES CLASSIFIER() AS classy, {condition} AS "
              f"defining_condition ALL ROWS PER MATCH PATTERN ((A | B)* X) DEFINE X AS "
              f"value = {condition}", values("value", 1, 2, 3, 4, 5, 6),
              "value,classy,defining_condition")
    assert got == [(1, "B", N), (2, "A", N), (3, "A", N), (4, "A", N), (5, "B", 6),
                   (6, "X", 6)]
    condition = ("PREV(CLASSIFIER(U), 1) = 'A' AND LAST(CLASSIFIER(), 3) = 'B' AND "
                 "FIRST(CLASSIFIER(U)) = 'B'")
    got = run(f"ORDER BY value MEASURES CLASSIFIER() AS classy, {condition} AS "
              f"defining_condition ALL ROWS PER MATCH PATTERN ((A | B)* X $) "
              f"SUBSET U = (A, B) DEFINE X AS {condition}", values("value", 1, 2, 3, 4, 5),
              "value,classy,defining_condition")
    assert got == [(1, "B", N), (2, "B", False), (3, "A", False), (4, "A", True),
                   (5, "X", True)]


EMPTY_CYCLES = [
    ("()* | B", EMPTY_EACH), ("()+ | B", EMPTY_EACH), ("(){5,} | B", EMPTY_EACH),
    ("B | ()*", [(1, 1, N, N), (2, 2, 80, "B"), (3, 3, 70, "B"), (4, 4, N, N)]),
    ("(B ()*)*", [(1, 1, N, N), (2, 2, 80, "B"), (3, 2, 70, "B"), (4, 3, N, N)]),
    ("(B ()*)*?", EMPTY_EACH), ("^* | B", EMPTY_EACH),
    ("^+ | B", [(1, 1, N, N), (2, 2, 80, "B"), (3, 3, 70, "B")]),
    ("^* A B", [(1, 1, 90, "A"), (2, 1, 80, "B")]), ("$* | B", EMPTY_EACH),
    ("$+ | B", [(2, 1, 80, "B"), (3, 2, 70, "B")]),
    ("B A $+", [(3, 1, 70, "B"), (4, 1, 70, "A")]),
]


@pytest.mark.parametrize("pattern, expected", EMPTY_CYCLES)
def test_empty_cycle(pattern, expected):
    got = run(HEAD + f"ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) "
              "DEFINE B AS B.value < PREV (B.value)", FOUR, "id,match,val,label")
    assert got == expected


OUTPUT_MODES = [
    ("ONE ROW PER MATCH", "B*", [(1, N, N), (2, 70, "B"), (3, N, N)]),
    ("", "B*", [(1, N, N), (2, 70, "B"), (3, N, N)]),
    ("ONE ROW PER MATCH", "B+", [(1, 70, "B")]),
    ("ALL ROWS PER MATCH", "B*", [(1, N, N), (2, 80, "B"), (2, 70, "B"), (3, N, N)]),
    ("ALL ROWS PER MATCH", "B+", [(1, 80, "B"), (1, 70, "B")]),
    ("ALL ROWS PER MATCH SHOW EMPTY MATCHES", "B*",
     [(1, N, N), (2, 80, "B"), (2, 70, "B"), (3, N, N)]),
    ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "B*", [(2, 80, "B"), (2, 70, "B")]),
    ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "B+", [(1, 80, "B"), (1, 70, "B")]),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "B+",
     [(N, N, N), (1, 80, "B"), (1, 70, "B"), (N, N, N)]),
]


@pytest.mark.parametrize("mode, pattern, expected", OUTPUT_MODES)
def test_output_modes(mode, pattern, expected):
    got = run(HEAD + f"{mode} AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) "
              "DEFINE B AS B.value < PREV (B.value)", FOUR, "match,val,label")
    assert got == expected


SIX = values("id,value", (1, 90), (2, 80), (3, 70), (4, 80), (5, 70), (6, 80))
FIRST_MATCH = [(1, 1, 90, "A"), (2, 1, 80, "B"), (3, 1, 70, "B"), (4, 1, 80, "C")]
FROM_FOUR = FIRST_MATCH + [(4, 2, 80, "A"), (5, 2, 70, "B"), (6, 2, 80, "C")]


@pytest.mark.parametrize("skip, expected", [
    ("AFTER MATCH SKIP PAST LAST ROW", FIRST_MATCH),
    ("AFTER MATCH SKIP TO NEXT ROW", FIRST_MATCH + [
        (2, 2, 80, "A"), (3, 2, 70, "B"), (4, 2, 80, "C"), (4, 3, 80, "A"), (5, 3, 70, "B"),
        (6, 3, 80, "C")]),
    ("AFTER MATCH SKIP TO FIRST C", FROM_FOUR),
    ("AFTER MATCH SKIP TO LAST B", FROM_FOUR),
    ("AFTER MATCH SKIP TO B", FROM_FOUR),
    ("AFTER MATCH SKIP TO U", FROM_FOUR),
])
def test_after_match_skip(skip, expected):
    assert run(_skip_query(skip), SIX, "id,match,val,label") == expected


def _skip_query(skip: str) -> str:
    return (HEAD + f"ALL ROWS PER MATCH {skip} PATTERN (A B+ C+ D?) SUBSET U = (C, D) "
            "DEFINE B AS B.value < PREV (B.value), C AS C.value > PREV (C.value), "
            "D AS false")


def test_after_match_skip_errors():
    with pytest.raises(SkipError, match="first row of match"):
        run(_skip_query("AFTER MATCH SKIP TO A"), SIX, "id")
    with pytest.raises(SkipError, match="D is not in match"):
        run(_skip_query("AFTER MATCH SKIP TO D"), SIX, "id")


def test_empty_matches_and_unmatched_rows():
    rows = values("id,value", (1, 100), (2, 100), (3, 90), (4, 80), (5, 70), (6, 100))
    got = run("ORDER BY id MEASURES match_number() AS match, classifier() AS label "
              "ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP TO NEXT ROW "
              "PATTERN (A B{2}) DEFINE B AS B.value < PREV (B.value)", rows,
              "id,match,value,label")
    assert got == [(1, N, 100, N), (2, 1, 100, "A"), (3, 1, 90, "B"), (4, 1, 80, "B"),
                   (3, 2, 90, "A"), (4, 2, 80, "B"), (5, 2, 70, "B"), (6, N, 100, N)]


def test_union_variable():
    rows = values("id,value", (1, 90), (2, 80), (3, 70), (4, 80))
    got = run("ORDER BY id MEASURES match_number() AS match, RUNNING LAST(value) AS val, "
              "classifier(U) AS lower_or_higher, classifier(W) AS label "
              "ALL ROWS PER MATCH PATTERN ((L | H) A) SUBSET U = (L, H), W = (A, L, H) "
              "DEFINE A AS A.value = 80, L AS L.value < 80, H AS H.value > 80", rows,
              "id,match,val,lower_or_higher,label")
    assert got == [(1, 1, 90, "H", "H"), (2, 1, 80, "H", "A"), (3, 2, 70, "L", "L"),
                   (4, 2, 80, "L", "A")]


THREE = values("id,value", (1, 10), (2, 20), (3, 30))


@pytest.mark.parametrize("measure, expected", [
    ("value", [10, 20, 30]), ("LAST(value)", [10, 20, 30]),
    ("RUNNING LAST(value)", [10, 20, 30]), ("FINAL LAST(value)", [30, 30, 30]),
    ("FIRST(value)", [10, 10, 10]), ("RUNNING FIRST(value)", [10, 10, 10]),
    ("FINAL FIRST(value)", [10, 10, 10]), ("FINAL LAST(value, 2)", [10, 10, 10]),
    ("FIRST(value, 2)", [30, 30, 30]), ("LAST(value, 10)", [N, N, N]),
    ("FIRST(value, 10)", [N, N, N]), ("PREV(value)", [N, 10, 20]),
    ("NEXT(value)", [20, 30, N]), ("NEXT(FIRST(value), 2)", [30, 30, 30]),
    ("NEXT(FIRST(value), 10)", [N, N, N]), ("PREV(FIRST(value), 10)", [N, N, N]),
    ("PREV(FIRST(value, 10), 2)", [N, N, N]), ("PREV(LAST(value, 10), 2)", [N, N, N]),
])
def test_navigation_functions(measure, expected):
    got = run(f"ORDER BY id MEASURES {measure} AS measure ALL ROWS PER MATCH PATTERN (A+) "
              "DEFINE A AS true", THREE, "id,measure")
    assert got == list(zip([1, 2, 3], expected))


@pytest.mark.parametrize("measure, expected", [
    ("PREV(B.value, 4)", N), ("PREV(B.value, 3)", 10), ("PREV(B.value, 2)", 20),
    ("NEXT(B.value, 1)", 40), ("NEXT(B.value, 2)", N),
])
def test_navigation_outside_the_match(measure, expected):
    rows = values("id,value", (1, 10), (2, 20), (3, 30), (4, 30), (5, 40))
    got = run(f"ORDER BY id MEASURES {measure} AS measure ONE ROW PER MATCH PATTERN (A B) "
              "DEFINE B AS B.value = PREV(B.value)", rows, "measure")
    assert got == [(expected,)]


def test_classifier_past_current_row():
    rows = values("id,value", (1, 90), (2, 80), (3, 70), (4, 80))
    got = run("ORDER BY id MEASURES CLASSIFIER() AS label, NEXT(CLASSIFIER()) AS next_label "
              "ALL ROWS PER MATCH PATTERN (A B+ C+) DEFINE B AS B.value < PREV(B.value), "
              "C AS C.value > PREV(C.value)", rows, "id,value,label,next_label")
    assert got == [(1, 90, "A", "B"), (2, 80, "B", "B"), (3, 70, "B", "C"), (4, 80, "C", N)]
    assert run("ORDER BY id MEASURES value AS val ALL ROWS PER MATCH PATTERN (A+) "
               "DEFINE A AS NEXT(CLASSIFIER()) = 'A'", rows, "id,val") == []


def test_case_sensitive_labels():
    rows = values("id,value", (1, 90), (2, 80), (3, 70), (4, 80))
    got = run('ORDER BY id MEASURES CLASSIFIER() AS label ALL ROWS PER MATCH '
              'PATTERN (a "b"+ C+) DEFINE "b" AS "b".value < PREV("b".value), '
              'C AS C.value > PREV(C.value)', rows, "id,label")
    assert got == [(1, "A"), (2, "b"), (3, "b"), (4, "C")]


def test_scalar_functions():
    rows = values("id,value", (1, 90), (2, 80), (3, 60))
    got = run("ORDER BY id MEASURES CAST(lower(LAST(CLASSIFIER())) || '_label' AS "
              "varchar(7)) AS label ALL ROWS PER MATCH PATTERN (A B+) "
              "DEFINE B AS B.value + 10 < abs(PREV (B.value))", rows, "id,label")
    assert got == [(2, "a_label"), (3, "b_label")]


def test_running_and_final():
    rows = values("id,value", (1, 90), (2, 80), (3, 70), (4, 100), (5, 200))
    columns = ("label,final_label,running_value,final_value,a_running_value,a_final_value,"
               "b_running_value,b_final_value,c_running_value,c_final_value")
    got = run("ORDER BY id MEASURES CLASSIFIER() AS label, FINAL LAST(CLASSIFIER()) AS "
              "final_label, RUNNING LAST(value) AS running_value, FINAL LAST(value) AS "
              "final_value, RUNNING LAST(A.value) AS A_running_value, FINAL LAST(A.value) AS "
              "A_final_value, RUNNING LAST(B.value) AS B_running_value, FINAL LAST(B.value) "
              "AS B_final_value, RUNNING LAST(C.value) AS C_running_value, FINAL "
              "LAST(C.value) AS C_final_value ALL ROWS PER MATCH PATTERN (A B+ C+) DEFINE "
              "B AS B.value < PREV (B.value), C AS C.value > PREV (C.value)", rows,
              "id," + columns)
    assert got == [(1, "A", "C", 90, 200, 90, 90, N, 70, N, 200),
                   (2, "B", "C", 80, 200, 90, 90, 80, 70, N, 200),
                   (3, "B", "C", 70, 200, 90, 90, 70, 70, N, 200),
                   (4, "C", "C", 100, 200, 90, 90, 70, 70, 100, 200),
                   (5, "C", "C", 200, 200, 90, 90, 70, 70, 200, 200)]


def test_partitioning_and_ordering():
    rows = values("id,part,value", (1, "p1", 90), (2, "p1", 80), (6, "p1", 80),
                  (2, "p2", 20), (2, "p3", 60), (1, "p3", 50), (3, "p1", 70), (4, "p1", 80),
                  (5, "p1", 90), (1, "p2", 20), (3, "p3", 70), (3, "p2", 10))
    body = ("PARTITION BY part ORDER BY id MEASURES match_number() AS match, "
            "PREV(RUNNING LAST(value)) AS val, classifier() AS label ALL ROWS PER MATCH "
            "AFTER MATCH SKIP PAST LAST ROW PATTERN (B+) DEFINE B AS B.value < PREV (B.value)")
    assert run(body, rows, "part,id,match,val,label") == [
        ("p1", 2, 1, 90, "B"), ("p1", 3, 1, 80, "B"), ("p1", 6, 2, 90, "B"),
        ("p2", 3, 1, 20, "B")]
    assert run(body, [], "part") == []
    unordered = values("id,value", (5, 10), (2, 90), (1, 80), (4, 20), (3, 30))
    assert run("ORDER BY id MEASURES match_number() AS match, RUNNING LAST(value) AS val, "
               "classifier() AS label ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW "
               "PATTERN (B+) DEFINE B AS B.value < PREV (B.value)", unordered,
               "id,match,val,label") == [(3, 1, 30, "B"), (4, 1, 20, "B"), (5, 1, 10, "B")]
    parted = values("id,part,value", (5, "p2", 10), (2, "p1", 90), (1, "p1", 80),
                    (4, "p2", 20), (3, "p1", 30))
    assert run("PARTITION BY part ORDER BY id ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST "
               "ROW PATTERN (B+) DEFINE B AS B.value < PREV (B.value)", parted,
               "id,part") == [(3, "p1"), (5, "p2")]


def test_output_layout():
    rows = values("id,part,value", ("ordering", "partitioning", 90))
    body = ("PARTITION BY part ORDER BY id MEASURES CLASSIFIER() AS classy {} PATTERN (A) "
            "DEFINE A AS true")
    query = parse_row_pattern(f"SELECT * FROM t MATCH_RECOGNIZE ("
                              f"{body.format('ALL ROWS PER MATCH')})", "<t>")
    (row,) = output_rows(query, rows)
    assert list(row.items()) == [("part", "partitioning"), ("id", "ordering"),
                                 ("classy", "A"), ("value", 90)]
    query = parse_row_pattern(f"SELECT * FROM t MATCH_RECOGNIZE ("
                              f"{body.format('ONE ROW PER MATCH')})", "<t>")
    (row,) = output_rows(query, rows)
    assert list(row.items()) == [("part", "partitioning"), ("classy", "A")]


@pytest.mark.parametrize("measure, expected", [
    ("FIRST(A.value) IN (300, LAST(A.value))", [False, False, True, True]),
    ("CLASSIFIER() IN ('X', lower(CLASSIFIER()))", [False] * 4),
    ("MATCH_NUMBER() IN (0, MATCH_NUMBER())", [True] * 4),
])
def test_in_predicate_without_subquery(measure, expected):
    rows = values("id,value", (1, 100), (2, 200), (3, 300), (4, 400))
    got = run(f"ORDER BY id MEASURES {measure} AS val ONE ROW PER MATCH AFTER MATCH SKIP TO "
              "NEXT ROW PATTERN (A+) DEFINE A AS true", rows, "val")
    assert got == [(v,) for v in expected]


def test_potentially_exponential_match():
    """Equal paths are pruned: 20 rows of (A+)+ B fail at once, not after 2^19 tries."""
    got = run("MEASURES CLASSIFIER() AS classy PATTERN ((A+)+ B) DEFINE A AS value = 1, "
              "B AS value = 2", values("value", *[1] * 20), "classy")
    assert got == []


def test_exponential_match():
    condition = " AND ".join(["FIRST(CLASSIFIER()) = 'B'"] +
                             [f"FIRST(CLASSIFIER(), {i}) = 'B'" for i in range(1, 8)])
    got = run(f"ORDER BY value MEASURES CLASSIFIER() AS classy ALL ROWS PER MATCH "
              f"PATTERN ((A | B)+ LAST) DEFINE LAST AS {condition}",
              values("value", *range(1, 10)), "classy")
    assert got == [("B",)] * 8 + [("LAST",)]


@pytest.mark.parametrize("body, message", [
    ("PATTERN (A B) DEFINE C AS true", "x.sql:2:22: DEFINE C: no variable C in PATTERN"),
    ("MEASURES X.value AS v PATTERN (A) DEFINE A AS true", "undefined variable X"),
    ("MEASURES sum(A.value + B.value) AS v PATTERN (A B)", "mixes variables A, B"),
    ("PATTERN (A) DEFINE A AS FINAL LAST(A.value) > 0", "FINAL cannot be used in DEFINE"),
    ("PATTERN (A{3,2})", "lower bound is above the upper"),
    ("PATTERN (A) DEFINE A AS PREV(A.value + MATCH_NUMBER()) > 1", "MATCH_NUMBER() cannot"),
    ("AFTER MATCH SKIP TO X PATTERN (A)", "SKIP TO X: no variable"),
    ("PATTERN (A) DEFINE A AS PREV(PREV(A.value)) > 0", "cannot be nested"),
    ("PATTERN (A", "expected ')'"),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A {- B -})", "exclusion"),
    ("PATTERN (A) DEFINE A AS foo(value)", "unknown function foo"),
])
def test_errors_name_line_and_column(body, message):
    with pytest.raises(RowPatternError) as info:
        parse_row_pattern(f"SELECT * FROM t MATCH_RECOGNIZE (\n{body})", "patterns/x.sql")
    assert str(info.value).startswith("patterns/x.sql:")
    assert message in str(info.value)
