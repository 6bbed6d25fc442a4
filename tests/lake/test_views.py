"""Which events table a match table's views join (its Delta metadata, else the runs log),
and what a query reads of the bound-event views: only the patterns its filter names, only
the matches and events files from its time bound on, its rows unchanged."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.lake import store as lk
from jobs.lake.match_rows import BINDINGS
from jobs.lake.view_scope import scope_of
from jobs.lake.views import (
    SOURCE_KEY,
    duckdb_connection,
    inputs_of,
    lake_tables,
    match_sources,
)


def test_a_match_table_s_source_comes_from_its_metadata_else_from_the_runs_log(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    lake.append(lake.events("s"), pa.table({"event_id": ["e"]}))
    for name in ("tagged", "old", "elsewhere"):  # "old": written before the tag
        lake.write(lake.matches(name), pa.table({"match_id": ["m"]}))
    lake.table(lake.matches("tagged")).alter.set_table_properties(
        {SOURCE_KEY: "s"}, raise_if_not_exists=False)
    lake.table(lake.matches("elsewhere")).alter.set_table_properties(  # no such events table
        {SOURCE_KEY: "gone"}, raise_if_not_exists=False)
    assert match_sources(lake, lake_tables(lake)) == {"tagged": "s"}
    lake.append(lake.runs(), pa.table({"pattern": ["old", "tagged"], "source": ["s", "x"]}))
    assert match_sources(lake, lake_tables(lake)) == {"tagged": "s", "old": "s"}


# --- what a query can read of the bound-event views (jobs.lake.view_scope) -------------

DAY0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("sql, patterns, since", [
    ("SELECT variable, count(*) FROM match_events WHERE pattern = 'a' AND "
     "ts >= TIMESTAMPTZ '2025-12-24 00:00:00+00' GROUP BY variable", {"a"}, "2025-12-23"),
    ("SELECT * FROM match_events m WHERE m.pattern IN ('a', 'b')", {"a", "b"}, None),
    ("SELECT * FROM match_events_x WHERE ts BETWEEN '2025-01-01' AND DATE '2025-02-01'",
     set(), "2024-12-31"),
    ("SELECT * FROM match_events_x WHERE DATE '2025-03-01' <= ts AND variable = 'c'", set(),
     "2025-02-28"),
    ("SELECT * FROM (SELECT * FROM match_events WHERE pattern = 'a' AND ts > '2025-05-01') x "
     "JOIN (SELECT * FROM match_events WHERE pattern = 'b' AND ts >= '2025-04-01 12:00') y "
     "USING (event_id)", {"a", "b"}, "2025-03-31 12:00"),
    ("SELECT * FROM match_events WHERE ts >= TIMESTAMPTZ '2025-01-01 00:00+05'", None,
     "2024-12-30 19:00"),
    # anything the reading cannot be sure of reads everything
    ("SELECT * FROM match_events WHERE pattern = 'a' OR ts > '2025-01-01'", None, None),
    ("SELECT * FROM match_events_x a JOIN match_events_y b USING (event_id) "
     "WHERE a.ts > '2025-01-01'", None, None),
    ("WITH match_events AS (SELECT 1) SELECT * FROM match_events", None, None),
    ("SELECT * FROM match_events AS m(p, q) WHERE p = 'a'", None, None),
    ("SELECT * FROM match_events WHERE ts >= (SELECT max(ts) FROM runs)", None, None),
    ("SELECT * FROM match_events_x WHERE ts >= position", set(), None),
    ("SELECT * FROM match_events WHERE pattern = \"a\"", None, None),
    ("DESCRIBE match_events", None, None),
    ("SELECT * FROM match_events WHERE pattern = 'a' AND ts >= 'not a time'", None, None),
    ("SELECT count(*) FROM runs", set(), None),
])
def test_a_querys_reach_into_the_bound_event_views_is_read_from_its_parse(sql, patterns, since):
    scope = scope_of(sql)
    assert scope.patterns == (None if patterns is None else frozenset(patterns))
    assert scope.since == (None if since is None else
                           datetime.fromisoformat(since).replace(tzinfo=timezone.utc))


def test_a_bound_may_be_any_constant_expression_as_duckdb_would_read_it():
    scope = scope_of("SELECT * FROM match_events_x WHERE ts >= now() - INTERVAL 7 DAY")
    expected = datetime.now(timezone.utc) - timedelta(days=8)
    assert abs(scope.since - expected) < timedelta(minutes=5)
    scope = scope_of("SELECT * FROM match_events_x WHERE ts > date_trunc('month', "
                     "TIMESTAMPTZ '2025-05-17 10:00+00') + INTERVAL 1 DAY")
    assert scope.since == datetime(2025, 5, 1, tzinfo=timezone.utc)
    # evaluated where no file can be read: an expression that tries reads everything
    assert scope_of("SELECT * FROM match_events_x WHERE ts >= "
                    "CAST(getenv('HOME') AS TIMESTAMPTZ)").since is None


@pytest.fixture(scope="module")
def bound_lake(tmp_path_factory):
    """Two sources, three patterns with bound events over sixty days, one events file a
    day: the shape a year of nights leaves, small."""
    lake = lk.Lake.of(str(tmp_path_factory.mktemp("bound") / "lake"))
    rng = np.random.default_rng(7)
    for source, patterns in (("s", ("a", "b")), ("t", ("c",))):
        ts = [DAY0 + timedelta(hours=int(h)) for h in np.sort(rng.integers(0, 60 * 24, 900))]
        ids = [f"{source}{i}" for i in range(len(ts))]
        for day in sorted({t.date() for t in ts}):
            keep = [i for i, t in enumerate(ts) if t.date() == day]
            lake.append(lake.events(source), pa.table({
                "event_id": [ids[i] for i in keep], "kind": [f"k{i % 3}" for i in keep],
                "ts": pa.array([ts[i] for i in keep], pa.timestamp("us", tz="UTC")),
                "event_date": [str(day)] * len(keep)}), partition_by=["event_date"])
        for pattern in patterns:
            rows = []
            for m in range(120):
                picked = sorted(rng.choice(len(ts), size=int(rng.integers(1, 5)), replace=False))
                times = [ts[i] for i in picked]
                rows.append({"match_id": f"{pattern}{m}", "pattern": pattern,
                             "start_ts": min(times), "end_ts": max(times),
                             "bindings": [("x", [ids[picked[0]]]),
                                          ("y", [ids[i] for i in picked[1:]])]})
            for half in (rows[::2], rows[1::2]):  # two commits: two files
                lake.append(lake.matches(pattern), pa.Table.from_pylist(half, pa.schema([
                    ("match_id", pa.string()), ("pattern", pa.string()),
                    ("start_ts", pa.timestamp("us", tz="UTC")),
                    ("end_ts", pa.timestamp("us", tz="UTC")), ("bindings", BINDINGS)])))
            lake.table(lake.matches(pattern)).alter.set_table_properties(
                {SOURCE_KEY: source}, raise_if_not_exists=False)
    everything, _ = duckdb_connection(lake)
    return lake, everything


LITERALS = {"tz": "TIMESTAMPTZ '{}+00'", "naive": "TIMESTAMP '{}'", "date": "DATE '{}'",
            "text": "'{}'"}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern=st.sampled_from(["a", "b", "c"]), union=st.booleans(),
       op=st.sampled_from([">=", ">", "=", "BETWEEN", "<="]),
       literal=st.sampled_from(sorted(LITERALS)), hours=st.integers(-48, 62 * 24),
       extra=st.sampled_from(["", " AND variable = 'y'", " OR variable = 'x'"]))
def test_pruning_by_pattern_and_time_leaves_a_querys_rows_unchanged(
        bound_lake, pattern, union, op, literal, hours, extra):
    """Whatever the filter, the rows equal those of a connection with every table whole."""
    lake, everything = bound_lake
    def bound(at):
        at += timedelta(hours=hours, minutes=30)
        text = str(at.date()) if literal == "date" else at.strftime("%Y-%m-%d %H:%M:%S")
        return LITERALS[literal].format(text)

    where = (f"ts BETWEEN {bound(DAY0)} AND {bound(DAY0 + timedelta(days=3))}"
             if op == "BETWEEN" else f"ts {op} {bound(DAY0)}")
    view, also = ("match_events", f"pattern = '{pattern}' AND ") if union \
        else (f"match_events_{pattern}", "")
    sql = (f"SELECT pattern, match_id, variable, position, event_id, ts FROM {view} "
           f"WHERE {also}{where}{extra}")
    con, _ = duckdb_connection(lake, sql)
    assert sorted(con.sql(sql).fetchall()) == sorted(everything.sql(sql).fetchall())


def test_a_time_bound_reads_the_matches_and_events_files_from_then_on(bound_lake):
    lake, everything = bound_lake
    since = DAY0 + timedelta(days=50)
    sql = (f"SELECT count(*) FROM match_events WHERE pattern = 'b' AND "
           f"ts >= TIMESTAMPTZ '{since.isoformat()}'")
    con, _ = duckdb_connection(lake, sql)
    made = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() "
                                      "WHERE NOT internal").fetchall()
            if not r[0].startswith("_t_")}  # the Arrow datasets behind the views
    # match_events joins the bound events to the events table itself, once per source
    assert made == {"match_events", "_since_matches_b", "_since_events_s"}
    files = con.sql("SELECT count(*), min(ts) FROM _since_events_s").fetchall()[0]
    total = everything.sql("SELECT count(*) FROM events_s").fetchall()[0][0]
    # eleven days of sixty, the day before the bound included
    assert files[0] < total / 4 and files[1] >= since - timedelta(days=1, hours=1)
    assert con.sql(sql).fetchall() == everything.sql(sql).fetchall() != [(0,)]


def test_a_models_inputs_are_the_tables_its_filter_leaves(bound_lake):
    """A model over one pattern's bound events is rebuilt when that pattern's tables
    change, not when another pattern's do."""
    lake, _ = bound_lake
    one = inputs_of(lake, "SELECT * FROM match_events WHERE pattern = 'a'")
    assert set(one) == {"matches/a", "events/s"}  # within the lake: a copied lake keeps them
    every = inputs_of(lake, "SELECT * FROM match_events WHERE pattern = 'a' OR true")
    assert set(every) == {f"matches/{p}" for p in "abc"} | {"events/s", "events/t"}
