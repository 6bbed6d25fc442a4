"""``query`` over the lake's views: the views of match events equal the bindings on Spark and
DuckDB, the fast path equals Spark, formats and fallback, and the README's recipes."""

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from jobs.core.language.patternfile import load_pattern
from jobs.core.local.row_patterns import load_row_pattern
from jobs.lake import store as lk
from jobs.project.patterns import pattern_paths, row_pattern_paths


def _exploded(profile, name: str) -> list[tuple]:
    t = DeltaTable(lk.Lake(profile.lake).matches(name)).to_pyarrow_table(
        columns=["match_id", "bindings"])
    return sorted((m, var, i + 1, e) for m, b in zip(t.column("match_id").to_pylist(),
                                                     t.column("bindings").to_pylist())
                  for var, ids in b for i, e in enumerate(ids))


FAST_QUERIES = [
    "SELECT e.pattern, count(*) AS n, min(m.start_ts) AS first, max(m.n_events) AS most "
    "FROM match_events e JOIN matches_sepsis_rising_crp_then_icu m ON e.match_id = m.match_id "
    "GROUP BY e.pattern",
    "SELECT patient, count(*) AS n FROM matches_sepsis_rising_crp_then_icu GROUP BY patient "
    "ORDER BY n DESC, patient LIMIT 5",
    "SELECT variable, count(DISTINCT event_id) AS events FROM match_events_mw_chemo_p1 "
    "GROUP BY variable ORDER BY variable",
    "SELECT pattern, status, matches FROM runs ORDER BY pattern",
    "SELECT event_type, count(*) AS n FROM events_sepsis GROUP BY event_type ORDER BY n DESC, "
    "event_type",
    "SELECT r.room, count(*) AS n FROM events_locations e JOIN reference_room_state r "
    "ON e.location = r.room GROUP BY r.room ORDER BY r.room",
]


def test_match_events_views_equal_the_bindings_on_spark_and_duckdb(spark, nightly):
    from jobs.lake.views import duckdb_connection
    from jobs.spark.views import register_spark

    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    views = register_spark(spark, lake)
    con, duck_views = duckdb_connection(lake)
    assert sorted(views) == sorted(duck_views) and "match_events" in views
    patterns = [load_pattern(path) for path in pattern_paths()] + \
        [load_row_pattern(path) for path in row_pattern_paths()]  # a row per match: bindings
    # every pattern's view in one Spark job: match_events unions them, its pattern column
    # a literal per pattern's view
    on_spark: dict[str, list] = {}
    for r in spark.sql("SELECT pattern, match_id, variable, position, event_id "
                       "FROM match_events").collect():
        on_spark.setdefault(r[0], []).append(tuple(r[1:]))
    total = 0
    events_of: dict[str, dict] = {}
    for pattern in patterns:
        expected = _exploded(profile, pattern.name)
        assert sorted(on_spark.get(pattern.name, [])) == expected, pattern.name
        sql = f"SELECT match_id, variable, position, event_id FROM match_events_{pattern.name}"
        assert sorted(con.sql(sql).fetchall()) == expected, pattern.name
        total += len(expected)
        # with the event's own columns, as in events_<source>
        if pattern.source not in events_of:
            events = DeltaTable(lake.events(pattern.source)).to_pyarrow_table().to_pylist()
            events_of[pattern.source] = {e["event_id"]: e for e in events}
        by_id = events_of[pattern.source]
        row = con.sql(f"SELECT * FROM match_events_{pattern.name} LIMIT 1").to_arrow_table() \
            .to_pylist()[0]
        assert {k: v for k, v in row.items() if k in by_id[row["event_id"]]} == \
            by_id[row["event_id"]]
    assert sum(map(len, on_spark.values())) == total  # no rows of another name
    assert con.sql("SELECT count(*) FROM match_events").fetchall()[0][0] == total


@pytest.mark.parametrize("sql", FAST_QUERIES)
def test_fast_query_path_equals_spark(spark, nightly, sql):
    """Both engines set up only the views the query reads (and those they read)."""
    from jobs.lake.views import duckdb_connection
    from jobs.tools.query import run_spark

    lake = lk.Lake(nightly[0].lake)
    con, _ = duckdb_connection(lake, sql)
    duck = con.sql(sql).to_arrow_table()
    ours = run_spark(spark, lake, sql, None)
    assert duck.num_rows > 0
    assert [list(r.values()) for r in duck.to_pylist()] == \
        [list(r.values()) for r in ours.to_pylist()]


def test_spark_views_are_those_of_the_last_lake_registered(spark, tmp_path):
    """A table only the first lake has must not answer queries over the second (pr-check
    and the models register one lake after another on one session)."""
    from jobs.spark.views import register_spark

    first, second = lk.Lake(str(tmp_path / "a")), lk.Lake(str(tmp_path / "b"))
    first.append(first.events("only_a"), pa.table({"event_id": ["x"]}))
    for lake, n in ((first, 1), (second, 2)):
        lake.append(lake.retractions(), pa.table({"retraction_id": [f"r{i}" for i in range(n)]}))
    assert "events_only_a" in register_spark(spark, first)
    assert "events_only_a" not in register_spark(spark, second)
    assert not spark.catalog.tableExists("events_only_a")
    assert spark.sql("SELECT count(*) AS n FROM retractions").first()["n"] == 2


def test_query_command_formats_and_fallback(nightly, monkeypatch, capsys, tmp_path):
    import csv
    import io
    import json

    from jobs.cli.main import main

    profile = nightly[0]
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  test:\n    landing: {profile.landing}\n"
                    f"    lake: {profile.lake}\n    spark: {{master: 'local[1]'}}\n")
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    sql = "SELECT match_id, bindings, start_ts FROM matches_mw_chemo_p1 ORDER BY match_id"
    assert main(["query", "--profile", "test", "--format", "json", sql]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and all(isinstance(r["bindings"], dict) for r in rows)
    assert main(["query", "--profile", "test", "--format", "csv", sql]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["match_id"] for r in table] == [r["match_id"] for r in rows]
    assert json.loads(table[0]["bindings"]) == rows[0]["bindings"]
    assert main(["query", "--profile", "test", "--limit", "2", sql]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["match_id", "bindings", "start_ts"]
    assert "(2 rows (the limit" in out
    # a query only Spark SQL reads falls back to Spark, and says so
    assert main(["query", "--profile", "test", "SELECT explode(array(1, 2)) AS x"]) == 0
    captured = capsys.readouterr()
    assert "running it on Spark" in captured.err and captured.out.split()[:4] == ["x", "-", "1", "2"]
    assert main(["query", "--profile", "test", "--engine", "duckdb", "SELECT * FROM nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_readme_recipes_run_offline_on_the_lake(nightly, capsys):
    """The README's pandas, Polars and DuckDB recipes, as written, on the nightly lake."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Querying the results"):readme.index("## Running on")]
    recipes = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(recipes) == 3
    lake = nightly[0].lake
    for code in recipes:
        exec(compile(code.replace('"lake/', f'"{lake}/'), "README", "exec"), {})
    out = capsys.readouterr().out
    assert "variable" in out  # pandas: the mean per variable
    assert "2014-" in out  # Polars: months
    assert "patient" in out and "sepsis_rising_crp_then_icu" in out  # DuckDB
