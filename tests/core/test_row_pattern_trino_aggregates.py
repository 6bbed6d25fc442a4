"""Trino's ``TestAggregationsInRowPatternMatching`` cases, translated as in
``test_row_pattern_trino``: aggregates in MEASURES and DEFINE, RUNNING and FINAL, over a
variable, a SUBSET or every row, with arguments that read ``CLASSIFIER()`` and
``MATCH_NUMBER()``. The window form (``WINDOW w AS (... SEEK ...)``) and subqueries are
outside the ``.sql`` language."""

import pytest

from tests.core.test_row_pattern_trino import run, values

N = None
PARTS = values("id,part,value", (1, "p1", 1), (2, "p1", 1), (6, "p1", 1), (2, "p2", 10),
               (2, "p3", 100), (1, "p3", 100), (3, "p1", 1), (4, "p1", 1), (5, "p1", 1),
               (1, "p2", 10), (3, "p3", 100), (3, "p2", 10))
EIGHT_IDS = values("id", *range(1, 9))


def test_simple_query():
    body = ("ORDER BY id MEASURES {} AS m ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW "
            "PATTERN ({}) {}")
    got = run(body.format("RUNNING sum(id)", "A*", "DEFINE A AS true"), EIGHT_IDS, "id,m")
    assert got == [(i, i * (i + 1) // 2) for i in range(1, 9)]
    got = run(body.format("RUNNING array_agg(CLASSIFIER(A))", "A*", "DEFINE A AS true"),
              EIGHT_IDS, "id,m")
    assert got == [(i, ["A"] * i) for i in range(1, 9)]
    got = run(body.format("concat_ws('', RUNNING array_agg(lower(CLASSIFIER(U))))",
                          'M A X X T C H "!"', 'SUBSET U = (M, A, T, C, H, "!") '
                          "DEFINE M AS true"), EIGHT_IDS, "id,m")
    assert [m for _, m in got] == ["m", "ma", "ma", "ma", "mat", "matc", "match", "match!"]


def test_partitioning():
    body = ("PARTITION BY part ORDER BY id MEASURES RUNNING sum(value) AS running_sum, "
            "MATCH_NUMBER() AS match_no ALL ROWS PER MATCH AFTER MATCH SKIP {} "
            "PATTERN (B+) DEFINE B AS true")
    got = run(body.format("PAST LAST ROW"), PARTS, "part,id,running_sum")
    assert got == [("p1", i, i) for i in range(1, 7)] + \
        [("p2", i, 10 * i) for i in range(1, 4)] + [("p3", i, 100 * i) for i in range(1, 4)]
    got = run(body.format("TO NEXT ROW"), PARTS, "part,match_no,id,running_sum")
    want = []
    for part, n, unit in (("p1", 6, 1), ("p2", 3, 10), ("p3", 3, 100)):
        for start in range(1, n + 1):
            want += [(part, start, i, unit * (i - start + 1)) for i in range(start, n + 1)]
    assert got == want


@pytest.mark.parametrize("rows, define, measure, expected", [
    (values("id,value", (1, 4), (2, 6), (3, 0)), "A AS avg(B.value) = 5",
     "RUNNING avg(B.value)", [(1, "B", 4.0), (2, "B", 5.0), (3, "A", 5.0)]),
    (values("id,value", (1, 4), (2, 6), (3, 0), (4, 5)), "A AS avg(A.value) = 5",
     "RUNNING avg(A.value)", [(1, "B", N), (2, "B", N), (3, "B", N), (4, "A", 5.0)]),
])
def test_tentative_label_match(rows, define, measure, expected):
    got = run(f"ORDER BY id MEASURES {measure} AS m, CLASSIFIER() AS classy ALL ROWS PER "
              f"MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | B)*) DEFINE {define}",
              rows, "id,classy,m")
    assert got == expected


@pytest.mark.parametrize("define", ["sum(value) > 1000", "arbitrary(value) > 1000"])
def test_tentative_label_dropped(define):
    got = run("PARTITION BY part ORDER BY id MEASURES RUNNING sum(value) AS running_sum "
              "ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (B (A | B) B) "
              f"DEFINE A AS {define}", PARTS, "part,id,running_sum")
    assert got == [("p1", 1, 1), ("p1", 2, 2), ("p1", 3, 3), ("p1", 4, 1), ("p1", 5, 2),
                   ("p1", 6, 3), ("p2", 1, 10), ("p2", 2, 20), ("p2", 3, 30),
                   ("p3", 1, 100), ("p3", 2, 200), ("p3", 3, 300)]


TWO_PARTS = values("id,part,value", *[(i, "p1", i) for i in range(1, 6)],
                   *[(i, "p2", 2 * i) for i in range(1, 6)])
RUNNING = [("p1", 1, "B", 1), ("p1", 2, "B", 2), ("p1", 3, "B", 3), ("p1", 4, "B", 4),
           ("p1", 5, "A", 5), ("p2", 1, "B", 2), ("p2", 2, "B", 4), ("p2", 3, "A", 6),
           ("p2", 4, "A", 8), ("p2", 5, "A", 10)]


@pytest.mark.parametrize("measure, define", [
    ("RUNNING max(value)", "max(value) > 4"),
    ("RUNNING max(value)", "max(value + MATCH_NUMBER()) > 5"),
])
def test_tentative_label_with_maximum(measure, define):
    got = run(f"PARTITION BY part ORDER BY id MEASURES {measure} AS m, CLASSIFIER() AS "
              "classy ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | B)*) "
              f"DEFINE A AS {define}", TWO_PARTS, "part,id,classy,m")
    assert got == RUNNING


def test_running_sum_of_ones():
    rows = values("id,part,value", *[(i, "p1", 1) for i in range(1, 6)],
                  *[(i, "p2", 2) for i in range(1, 6)])
    got = run("PARTITION BY part ORDER BY id MEASURES RUNNING sum(value) AS m, CLASSIFIER() "
              "AS classy ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW "
              "PATTERN ((A | B)*) DEFINE A AS sum(value) > 4", rows, "part,id,classy,m")
    assert got == [("p1", 1, "B", 1), ("p1", 2, "B", 2), ("p1", 3, "B", 3), ("p1", 4, "B", 4),
                   ("p1", 5, "A", 5), ("p2", 1, "B", 2), ("p2", 2, "B", 4), ("p2", 3, "A", 6),
                   ("p2", 4, "A", 8), ("p2", 5, "A", 10)]


def test_aggregation_arguments():
    rows = values("part,id,value", *[("p1", i, c) for i, c in enumerate("abcdef", 1)],
                  *[("p2", i, c) for i, c in enumerate("ghi", 1)],
                  *[("p3", i, c) for i, c in enumerate("jkl", 1)])
    got = run("PARTITION BY part ORDER BY id MEASURES array_agg(value || CLASSIFIER()) AS "
              "measure ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (X Y Z+) "
              "DEFINE X AS true", rows, "part,id,measure")
    assert got[5] == ("p1", 6, ["aX", "bY", "cZ", "dZ", "eZ", "fZ"])
    assert got[-1] == ("p3", 3, ["jX", "kY", "lZ"])
    abc = values("id,value", (1, "a"), (2, "b"), (3, "c"))
    got = run("ORDER BY id MEASURES array_agg(value || value || CLASSIFIER()) AS measure "
              "ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (X Y Z) "
              "DEFINE X AS true", abc, "id,measure")
    assert got == [(1, ["aaX"]), (2, ["aaX", "bbY"]), (3, ["aaX", "bbY", "ccZ"])]
    pqrs = values("id,value", (1, "p"), (2, "q"), (3, "r"), (4, "s"))
    got = run("ORDER BY id MEASURES max_by(value, CLASSIFIER()) AS measure ALL ROWS PER "
              "MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B D C) DEFINE A AS true",
              pqrs, "id,measure")
    assert got == [(1, "p"), (2, "q"), (3, "r"), (4, "r")]


def test_selective_aggregation():
    rows = values("id,value", (1, "a"), (2, "b"), (3, "c"), (4, "d"))
    got = run("ORDER BY id MEASURES array_agg(U.id) AS m1, array_agg(CLASSIFIER(U)) AS m2, "
              "array_agg(U.value || CLASSIFIER(U)) AS m3 ALL ROWS PER MATCH AFTER MATCH "
              "SKIP PAST LAST ROW PATTERN (X Y Z Y) SUBSET U = (X, Z) DEFINE X AS true",
              rows, "id,m1,m2,m3")
    assert got == [(1, [1], ["X"], ["aX"]), (2, [1], ["X"], ["aX"]),
                   (3, [1, 3], ["X", "Z"], ["aX", "cZ"]),
                   (4, [1, 3], ["X", "Z"], ["aX", "cZ"])]


def test_count_aggregation():
    rows = values("id,value", (1, "a"), (2, "b"), (3, "c"), (4, "d"))
    got = run("ORDER BY id MEASURES count(*) AS m1, count() AS m2 ALL ROWS PER MATCH AFTER "
              "MATCH SKIP PAST LAST ROW PATTERN (X Y Z) DEFINE X AS id > 1", rows,
              "id,m1,m2")
    assert got == [(2, 1, 1), (3, 2, 2), (4, 3, 3)]
    got = run("ORDER BY id MEASURES RUNNING count(*) AS m1, FINAL count(*) AS m2, RUNNING "
              "count() AS m3, FINAL count() AS m4 ALL ROWS PER MATCH AFTER MATCH SKIP PAST "
              "LAST ROW PATTERN (A B C D) DEFINE A AS true", rows, "id,m1,m2,m3,m4")
    assert got == [(i, i, 4, i, 4) for i in range(1, 5)]
    got = run("ORDER BY id MEASURES count(C.*) AS m1, count(U.*) AS m2 ALL ROWS PER MATCH "
              "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B C D) SUBSET U = (B, D) "
              "DEFINE A AS true", rows, "id,m1,m2")
    assert got == [(1, 0, 0), (2, 0, 1), (3, 1, 1), (4, 1, 2)]


def test_label_and_column_names():
    rows = values("id,A", (1, "p"), (2, "q"), (3, None), (4, "s"))
    got = run("ORDER BY id MEASURES CLASSIFIER() AS classy, count(A.A) AS m1, count(A) AS m2, "
              "count(A.*) AS m3 ALL ROWS PER MATCH PATTERN (A B A A) DEFINE A AS true", rows,
              "id,classy,m1,m2,m3")
    assert got == [(1, "A", 1, 1, 1), (2, "B", 1, 2, 1), (3, "A", 1, 2, 2), (4, "A", 2, 3, 3)]


def test_one_row_per_match():
    rows = values("part,id,value", *[("p1", i, c) for i, c in enumerate("abcdef", 1)],
                  *[("p2", i, c) for i, c in enumerate("ghijkl", 1)])
    got = run("PARTITION BY part ORDER BY id MEASURES array_agg(value || CLASSIFIER()) AS "
              "measure ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (X Y Z) "
              "DEFINE X AS true", rows, "part,measure")
    assert got == [("p1", ["aX", "bY", "cZ"]), ("p1", ["dX", "eY", "fZ"]),
                   ("p2", ["gX", "hY", "iZ"]), ("p2", ["jX", "kY", "lZ"])]


def test_exclusions():
    rows = values("part,id,value", *[("p1", i, f"1{c}") for i, c in enumerate("abcde", 1)],
                  *[("p2", i, f"2{c}") for i, c in enumerate("abcde", 1)])
    got = run("PARTITION BY part ORDER BY id MEASURES array_agg(value) AS m1, "
              "array_agg(value || CLASSIFIER()) AS m2 ALL ROWS PER MATCH AFTER MATCH SKIP "
              "PAST LAST ROW PATTERN (P {- Q R -} S) DEFINE P AS id > 1", rows, "part,m1,m2")
    assert got == [("p1", ["1b"], ["1bP"]),
                   ("p1", ["1b", "1c", "1d", "1e"], ["1bP", "1cQ", "1dR", "1eS"]),
                   ("p2", ["2b"], ["2bP"]),
                   ("p2", ["2b", "2c", "2d", "2e"], ["2bP", "2cQ", "2dR", "2eS"])]


def test_balancing_sums():
    rows = values("id,value", *enumerate([4, 6, 10, 1, 1, 1, 10, 5, 1], 1))
    got = run("ORDER BY id MEASURES RUNNING sum(A.value) AS sa, RUNNING sum(B.value) AS sb, "
              "CLASSIFIER() AS classy ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW "
              "PATTERN ((A | B)*) DEFINE A AS sum(A.value) - A.value <= sum(B.value)", rows,
              "id,classy,sa,sb")
    assert got == [(1, "B", N, 4), (2, "A", 6, 4), (3, "B", 6, 14), (4, "A", 7, 14),
                   (5, "A", 8, 14), (6, "A", 9, 14), (7, "A", 19, 14), (8, "B", 19, 19),
                   (9, "A", 20, 19)]


def test_period_length():
    rows = values("user_id,minute_of_the_day", (1, 3), (1, 4), (1, 5), (1, 8), (1, 9),
                  (2, 2), (2, 3), (2, 4))
    got = run("PARTITION BY user_id ORDER BY minute_of_the_day MEASURES "
              "COALESCE(sum(C.minute_of_the_day) - sum(A.minute_of_the_day), 0) AS "
              "periods_total ONE ROW PER MATCH PATTERN ((A B* C | D)*) DEFINE "
              "B AS minute_of_the_day = PREV(minute_of_the_day) + 1, "
              "C AS minute_of_the_day = PREV(minute_of_the_day) + 1", rows,
              "user_id,periods_total")
    assert got == [(1, 3), (2, 2)]


@pytest.mark.parametrize("n, pattern, define, last", [
    (8, "^(A | B)* (LAST_A | LAST_B)$", "LAST_A AS sum(A.id) + id = sum(B.id), "
     "LAST_B AS sum(B.id) + id = sum(A.id)", ["A"] * 4 + ["B"] * 3 + ["LAST_A"]),
    (6, "^(A | B | C)* (LAST_A | LAST_B | LAST_C)$",
     "LAST_A AS sum(A.id) + id = sum(B.id) AND sum(B.id) = sum(C.id), "
     "LAST_B AS sum(B.id) + id = sum(A.id) AND sum(A.id) = sum(C.id), "
     "LAST_C AS sum(C.id) + id = sum(A.id) AND sum(A.id) = sum(B.id)",
     ["A", "B", "C", "C", "B", "LAST_A"]),
])
def test_set_partitioning(n, pattern, define, last):
    got = run(f"ORDER BY id MEASURES RUNNING array_agg(CLASSIFIER()) AS labels ALL ROWS PER "
              f"MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) DEFINE {define}",
              values("id", *range(1, n + 1)), "id,labels")
    assert got == [(i, last[:i]) for i in range(1, n + 1)]


def test_forking_threads():
    got = run("ORDER BY id MEASURES RUNNING array_agg(CLASSIFIER()) AS labels ALL ROWS PER "
              "MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | B | C)* X) "
              "DEFINE X AS array_agg(CLASSIFIER()) = ARRAY['C', 'A', 'B', 'X']",
              values("id", 1, 2, 3, 4), "id,labels")
    want = ["C", "A", "B", "X"]
    assert got == [(i, want[:i]) for i in range(1, 5)]


def test_multiple_aggregations_in_define():
    got = run("ORDER BY id MEASURES MATCH_NUMBER() AS match_no, array_agg(CLASSIFIER()) AS "
              "labels ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | B){4}) "
              "DEFINE A AS max(id - 2 * MATCH_NUMBER()) > 1 AND max(CLASSIFIER()) = 'B', "
              "B AS min(lower(CLASSIFIER())) = 'b' OR min(MATCH_NUMBER() + 100) < 0",
              EIGHT_IDS, "match_no,labels")
    assert got == [(1, ["B", "B", "B", "A"]), (2, ["B", "A", "A", "A"])]


def test_running_and_final_aggregations():
    got = run("ORDER BY id MEASURES MATCH_NUMBER() AS match, RUNNING array_agg(CLASSIFIER()) "
              "AS running_labels, FINAL array_agg(lower(CLASSIFIER())) AS final_labels, "
              "RUNNING sum(MATCH_NUMBER() * 100) AS running_match, FINAL sum(-MATCH_NUMBER()) "
              "AS final_match ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW "
              "PATTERN (A B C D) DEFINE A AS true", EIGHT_IDS,
              "id,match,running_labels,final_labels,running_match,final_match")
    assert got[:4] == [(i, 1, list("ABCD")[:i], list("abcd"), 100 * i, -4)
                       for i in range(1, 5)]
    assert got[4:] == [(i + 4, 2, list("ABCD")[:i], list("abcd"), 200 * i, -8)
                       for i in range(1, 5)]
