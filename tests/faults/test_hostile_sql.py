"""The lake protects itself: SQL an analyst types (``query``, both engines) or proposes
(a model file) can only read. Every statement below is refused before it runs, the lake's
files are byte for byte what they were, and a canary folder outside the lake stays empty.
A lost table comes back equal on the next run; a broken one is named in one line."""

import hashlib
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs.cli.main import main
from jobs.config import load_profile
from jobs.core.errors import NotAQuery, UserError
from jobs.lake.store import Lake
from jobs.pipeline.publish.models import run_models
from jobs.pipeline.run import run_all
from jobs.project.models import ModelError, load_model
from jobs.spark.sql import check_read_only

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = [str(ROOT / "patterns" / f) for f in ("mw_chemo_p1.yaml", "ses_chemo_q1.yaml")]
NIGHT = "2010-08-30"

# {lake} and {canary} are filled in; every kind the issue lists, and a few more
HOSTILE = [
    "INSERT OVERWRITE DIRECTORY '{lake}/matches/mw_chemo_p1' USING parquet SELECT 1 AS x",
    "INSERT OVERWRITE DIRECTORY '{canary}/dir' USING parquet SELECT 1 AS x",
    "INSERT INTO matches_mw_chemo_p1 SELECT * FROM matches_mw_chemo_p1",
    "INSERT OVERWRITE TABLE matches_mw_chemo_p1 SELECT * FROM matches_mw_chemo_p1",
    "WITH t AS (SELECT 1 AS x) INSERT INTO y SELECT * FROM t",
    "CREATE TABLE t AS SELECT 1 AS x",
    "CREATE TABLE t (x INT) USING parquet LOCATION '{canary}/t'",
    "CREATE OR REPLACE VIEW matches_mw_chemo_p1 AS SELECT 1 AS x",
    "DROP TABLE matches_mw_chemo_p1",
    "DROP VIEW events_chemo_mw",
    "ALTER TABLE matches_mw_chemo_p1 ADD COLUMNS (y INT)",
    "TRUNCATE TABLE matches_mw_chemo_p1",
    "DELETE FROM matches_mw_chemo_p1",
    "UPDATE matches_mw_chemo_p1 SET pattern = 'x'",
    "MERGE INTO matches_mw_chemo_p1 t USING matches_mw_chemo_p1 s ON t.match_id = s.match_id "
    "WHEN MATCHED THEN DELETE",
    "COPY (SELECT 42 AS x) TO '{canary}/x.csv'",
    "ATTACH '{canary}/x.db' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET spark.sql.warehouse.dir = '{canary}'",
    "CALL system.refresh()",
    "CACHE TABLE matches_mw_chemo_p1",
    "REFRESH TABLE matches_mw_chemo_p1",
    "ADD JAR '{canary}/x.jar'",
    "LOAD DATA LOCAL INPATH '{canary}/x' INTO TABLE t",
    "EXPORT DATABASE '{canary}/db'",
    "SELECT 1; DROP TABLE matches_mw_chemo_p1",
    "EXECUTE IMMEDIATE 'DROP TABLE matches_mw_chemo_p1'",
    "SELECT reflect('java.lang.System', 'exit', 1)",
    "SELECT * FROM read_csv('/etc/hostname')",
    # files by their path, behind Delta's back (retracted events included)
    "SELECT * FROM text.`/etc/passwd`",
    "SELECT * FROM parquet.`{lake}/events/chemo_mw`",
    "SELECT count(*) FROM binaryFile.`{lake}`",
    "SELECT * FROM delta.`{lake}/matches/mw_chemo_p1`",
    "WITH x AS (SELECT * FROM json.`{canary}`) SELECT * FROM x",
]


def lake_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "_locks" not in p.parts
            and not p.name.endswith(".lock")}


def table_hashes(root: Path) -> dict[str, str]:
    """The tables' files (the lake's site and Great Expectations docs are rebuilt by
    commands and are no data)."""
    return {k: v for k, v in lake_hashes(root).items()
            if k.split(os.sep)[0] in ("events", "matches", "quarantine", "runs", "ingest_log",
                                      "stats", "models", "retractions")}


@pytest.fixture(scope="module")
def shared(spark, tmp_path_factory):
    """A lake built by a run of two patterns, its profile (SES_PIPELINE_CONF) and a canary."""
    tmp = tmp_path_factory.mktemp("hostile")
    landing = tmp / "landing"
    for source in ("chemo_mw", "chemo_ses"):
        shutil.copytree(ROOT / "data" / "landing" / source, landing / source)
    conf = tmp / "pipeline.yaml"
    conf.write_text(textwrap.dedent(f"""\
        profiles:
          test:
            landing: {landing}
            lake: {tmp / 'lake'}
            spark:
              master: local[2]
              conf: {{spark.sql.shuffle.partitions: "2", spark.ui.enabled: "false",
                      spark.sql.session.timeZone: UTC}}
            match: {{allowed_lateness: 0s, slice_length: 7d}}
        """))
    profile = load_profile("test", conf)
    rows = run_all(spark, profile, NIGHT, PATTERNS, echo=lambda *_: None)
    assert all(r["status"] == "success" for r in rows), rows
    canary = tmp / "canary"
    canary.mkdir()
    return profile, conf, canary


@pytest.fixture
def cli(shared, monkeypatch, capsys):
    profile, conf, _ = shared
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))

    def run(*argv):
        code = main([*argv, "--profile", "test"])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def _fill(sql: str, profile, canary: Path) -> str:
    return sql.format(lake=profile.lake, canary=canary)


@pytest.mark.parametrize("engine", ["duckdb", "spark", "auto"])
def test_query_refuses_every_statement_that_is_not_a_query(shared, cli, engine):
    profile, _, canary = shared
    root = Path(profile.lake)
    before = lake_hashes(root)
    for template in HOSTILE:
        sql = _fill(template, profile, canary)
        code, out, err = cli("query", "--engine", engine, sql)
        lines = err.strip().splitlines()
        assert code == 2 and out == "", (sql, code, out, err)
        # one line; an engine's own error on a query (no such function) adds the tables
        assert lines[0].startswith("error: ") and (
            len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("(tables:"))), (sql, err)
    assert table_hashes(root) == {k: v for k, v in before.items() if k in table_hashes(root)}
    assert set(table_hashes(root)) == {k for k in before if k in table_hashes(root)}
    assert list(canary.iterdir()) == []
    # and the queries an analyst needs still answer
    code, out, err = cli("query", "--engine", engine,
                         "SELECT count(*) AS n FROM matches_mw_chemo_p1")
    assert code == 0 and "n" in out, err


def test_refusals_name_the_statement_kind(shared, cli):
    profile, _, canary = shared
    cases = {"COPY (SELECT 42 AS x) TO '{canary}/x.csv'": ("duckdb", "COPY statement"),
             "INSERT OVERWRITE DIRECTORY '{canary}/d' USING parquet SELECT 1 AS x":
                 ("spark", "INSERT OVERWRITE DIRECTORY statement"),
             "DROP TABLE matches_mw_chemo_p1": ("spark", "DROP TABLE statement"),
             "ATTACH '{canary}/x.db'": ("duckdb", "ATTACH statement"),
             "SET spark.sql.x = 1": ("spark", "SET statement"),
             "SELECT reflect('java.lang.System', 'exit', 1)": ("spark", "reflect()"),
             "SELECT * FROM text.`/etc/passwd`": ("spark", "reads files by their path"),
             "SELECT * FROM parquet.`{lake}/events/chemo_mw`": ("auto",
                                                               "reads files by their path")}
    for template, (engine, kind) in cases.items():
        code, _, err = cli("query", "--engine", engine, _fill(template, profile, canary))
        assert code == 2 and "query only reads" in err and kind in err, (template, err)
    code, _, err = cli("query", "--engine", "duckdb", "SELECT * FROM read_csv('/etc/hostname')")
    assert code == 2 and "the lake's tables" in err and "file system" in err.lower(), err
    assert list(canary.iterdir()) == []


def test_the_catalogue_statements_run(shared, cli):
    for engine, sql in [("duckdb", "SHOW TABLES"), ("duckdb", "DESCRIBE runs"),
                        ("spark", "SHOW TABLES"), ("spark", "DESCRIBE runs"),
                        ("spark", "EXPLAIN SELECT * FROM runs"), ("duckdb", "EXPLAIN SELECT 1")]:
        code, out, err = cli("query", "--engine", engine, sql)
        assert code == 0 and out, (engine, sql, err)


def test_a_model_file_that_is_not_a_query_is_refused_before_spark_runs_it(
        spark, shared, tmp_path):
    profile, _, canary = shared
    root = Path(profile.lake)
    before = table_hashes(root)
    lake = Lake.of_profile(profile)
    for i, template in enumerate(HOSTILE):
        sql = _fill(template, profile, canary)
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        path = folder / "hostile.sql"
        path.write_text(sql + "\n")
        if "reflect(" in sql or "read_csv(" in sql or "`" in sql:  # a query by the grammar:
            rows = run_models(spark, lake, folder=folder, echo=lambda *_: None)  # build says no
            assert rows[0]["status"] == "failed", rows
            if "reflect(" in sql:
                assert "reflect() calls into the JVM" in rows[0]["message"]
            if "`" in sql:
                assert "reads files by their path" in rows[0]["message"], rows
            continue
        with pytest.raises(ModelError) as info:  # validate, models, run, pr-check load it
            load_model(path)
        assert str(path) in str(info.value) and "a model is one query" in str(info.value)
        with pytest.raises(UserError) as gate:  # and Spark's own parser, before spark.sql
            check_read_only(spark, sql, catalogue=False, what=f"{path}: a model is one query")
        if isinstance(gate.value, NotAQuery):
            assert gate.value.kind and str(path) in str(gate.value)
    assert table_hashes(root) == before
    assert list(canary.iterdir()) == []


def test_validate_refuses_a_model_that_is_not_a_query(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "wipe.sql").write_text(
        "INSERT OVERWRITE DIRECTORY '/tmp/x' USING parquet SELECT 1 AS x\n")
    monkeypatch.setenv("SES_MODELS", str(folder))
    code = main(["validate"])
    err = capsys.readouterr().err
    assert code == 1 and f"{folder / 'wipe.sql'}: a model is one query" in err
    assert "an INSERT statement" in err


def _events(profile, source):
    t = DeltaTable(os.path.join(profile.lake, "events", source)).to_pyarrow_table()
    return sorted(t.to_pylist(), key=lambda r: r["event_id"])


def _matches(profile, name):
    t = DeltaTable(os.path.join(profile.lake, "matches", name)).to_pyarrow_table()
    return sorted(t.drop_columns(["run_id"]).to_pylist(), key=lambda r: r["match_id"])


def test_a_lost_events_table_and_a_lost_match_table_come_back_equal(spark, shared):
    profile = shared[0]
    events, matches = _events(profile, "chemo_mw"), _matches(profile, "mw_chemo_p1")
    q1 = _matches(profile, "ses_chemo_q1")
    shutil.rmtree(os.path.join(profile.lake, "events", "chemo_mw"))
    shutil.rmtree(os.path.join(profile.lake, "matches", "ses_chemo_q1"))
    log = []
    rows = run_all(spark, profile, "2010-08-31", PATTERNS, echo=log.append)
    assert all(r["status"] == "success" for r in rows), rows
    said = [line for line in log if "was missing though the ingest log" in line]
    assert said and "re-ingested the 1 still in the landing folder" in said[0], log
    assert _events(profile, "chemo_mw") == events  # lineage too: the first ingest's run
    assert _matches(profile, "mw_chemo_p1") == matches
    assert _matches(profile, "ses_chemo_q1") == q1  # recomputed in full
    q1_row = next(r for r in rows if r["pattern"] == "ses_chemo_q1")
    assert q1_row["full_recompute"]


def test_a_lost_landing_file_is_named(spark, shared, tmp_path):
    from jobs.pipeline.ingest import describe, stage

    profile = shared[0]
    lake = Lake.of_profile(profile)
    landing = tmp_path / "landing"
    (landing / "chemo_mw").mkdir(parents=True)  # the logged file is gone from here
    shutil.move(os.path.join(profile.lake, "events", "chemo_mw"), tmp_path / "kept")
    try:
        from jobs.config import load_sources

        batch = stage(load_sources()["chemo_mw"], str(landing), lake, "r-gone")
        text = describe(batch.result)
        assert batch.result.gone == ["chemo_mw/chemo_match_windows.csv"], text
        assert "gone from the landing folder: chemo_mw/chemo_match_windows.csv" in text
        assert "lost until the files are put back" in text
    finally:
        shutil.move(str(tmp_path / "kept"), os.path.join(profile.lake, "events", "chemo_mw"))


def test_a_broken_table_is_named_in_one_line_and_the_others_keep_working(
        spark, shared, cli, tmp_path):
    profile = shared[0]
    table = Path(profile.lake) / "matches" / "ses_chemo_q1"
    backup = tmp_path / "backup"
    shutil.copytree(table, backup)
    try:
        # a checkpoint at the last version (table maintenance writes one) would stand in
        # for the commit cut short: without one, the log cannot be read
        for f in (table / "_delta_log").glob("*checkpoint*"):
            f.unlink()
        last = sorted((table / "_delta_log").glob("*.json"))[-1]
        last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # cut short
        for engine in ("duckdb", "spark"):
            code, _, err = cli("query", "--engine", engine, "SELECT * FROM matches_ses_chemo_q1")
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert "matches/ses_chemo_q1 cannot be read" in err and "docs/operations.md" in err
            code, out, err = cli("query", "--engine", engine,
                                 "SELECT count(*) AS n FROM matches_mw_chemo_p1")
            assert code == 0, err
        code, out, err = cli("query")
        assert code == 0 and "matches_mw_chemo_p1" in out, err
        code, out, err = cli("runs")
        assert code == 0 and "ses_chemo_q1" in out, err
        code, out, err = cli("docs", "--out", str(tmp_path / "site"))
        assert code == 0 and (tmp_path / "site" / "index.html").exists(), err
        rows = run_all(spark, profile, "2010-09-01", PATTERNS, echo=lambda *_: None)
        by = {r["pattern"]: r for r in rows}
        assert by["mw_chemo_p1"]["status"] == "success"
        assert by["ses_chemo_q1"]["status"] == "failed"
        assert "matches/ses_chemo_q1 cannot be read" in by["ses_chemo_q1"]["message"]
    finally:
        shutil.rmtree(table)
        shutil.copytree(backup, table)
    # a data file gone
    data = sorted(p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts)[0]
    moved = tmp_path / data.name
    shutil.move(data, moved)
    try:
        for engine in ("duckdb", "spark"):
            code, _, err = cli("query", "--engine", engine, "SELECT * FROM matches_ses_chemo_q1")
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert "matches/ses_chemo_q1 cannot be read" in err and "missing" in err, err
    finally:
        shutil.move(moved, data)



def test_validate_with_data_reads_the_lake(cli):
    """`validate --data` checks the patterns on the lake's events (Spark)."""
    code, out, err = cli("validate", "--data", PATTERNS[0])
    assert code == 0, err
    assert "ok: 1 pattern file(s) valid" in out and "data: 0 warning(s) on the events of" in out
