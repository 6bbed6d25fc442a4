"""``query``: SQL over the lake's views, read-only. DuckDB over delta-rs answers without
starting Spark; Spark SQL (the dialect of the models) answers what DuckDB cannot.

Only a query runs: each engine's own parser decides, before anything runs, that the
statement is one SELECT/WITH query or a SHOW, DESCRIBE or EXPLAIN (DuckDB:
``duckdb.extract_statements``; Spark: ``jobs.spark.sql``). Anything else (INSERT, COPY,
CREATE, DROP, SET, ATTACH, ...) is refused with one line naming it. DuckDB then reads the
lake's tables and no other file (``lake.views.duckdb_connection``)."""

from __future__ import annotations

import pyarrow as pa

from jobs.core.errors import NotAQuery, UserError
from jobs.lake.changes import Point
from jobs.lake.store import Lake
from jobs.lake.views import broken_named, duckdb_connection, view_names
from jobs.spark.sql import check_read_only
from jobs.spark.views import register_spark


class QueryFailed(UserError):
    """A query an engine refused or could not run; ``views`` are the tables there are."""

    def __init__(self, message: str, views: list[str]):
        super().__init__(message)
        self.views = views

    def __str__(self) -> str:
        if not self.views:
            return self.args[0]
        return f"{self.args[0]}\n(tables: {', '.join(self.views)})"


def duckdb_views(lake: Lake) -> list[str]:
    return view_names(lake)


READS = "query only reads"
DUCKDB_READS = ("SELECT", "EXPLAIN")  # DuckDB parses SHOW, DESCRIBE, SUMMARIZE as SELECT


def check_duckdb(sql: str) -> None:
    """Refuse, by DuckDB's parser, anything but one query (``NotAQuery``)."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(str(exc).strip().splitlines()[0], []) from None
    if len(statements) != 1:
        raise NotAQuery(f"{READS}: this is {len(statements)} statements; give one query",
                        "several statements")
    kind = str(statements[0].type).rsplit(".", 1)[-1]
    if kind not in DUCKDB_READS:
        raise NotAQuery(f"{READS}: this is {'an' if kind[0] in 'AEIOU' else 'a'} {kind} "
                        "statement, and it was not run (it runs SELECT or WITH queries, "
                        "SHOW, DESCRIBE and EXPLAIN)", kind)


def run_duckdb(lake: Lake, sql: str, limit: int | None, as_of: Point | None = None
               ) -> pa.Table | None:
    """The rows of ``sql`` on DuckDB (None for a statement without rows); refuses what
    is not a query, and a query that reaches for a file outside the lake's tables.
    ``as_of``: the tables as they were then (``jobs.lake.changes``)."""
    import duckdb

    check_duckdb(sql)
    con, views = duckdb_connection(lake, sql, as_of)
    try:
        rel = con.sql(sql)
        if rel is None:
            return None
        return (rel.limit(limit) if limit is not None else rel).to_arrow_table()
    except duckdb.PermissionException as exc:
        first = str(exc).strip().splitlines()[0]
        raise NotAQuery(f"{READS} the lake's tables: {first}", "file access") from None
    except duckdb.Error as exc:
        broken_named(lake, sql)  # a table whose files cannot be read: say which
        raise QueryFailed(str(exc).strip().splitlines()[0], views) from None


def spark_views(spark, lake: Lake) -> list[str]:
    return register_spark(spark, lake)


def run_spark(spark, lake: Lake, sql: str, limit: int | None) -> pa.Table:
    """The rows of ``sql`` on Spark SQL over the lake's views: only the views it names,
    and those they read, are set up (as on DuckDB): a lake of 200 patterns has 400 views,
    and each costs a read of its table's log and files."""
    import logging

    from pyspark.errors import AnalysisException, ParseException

    check_read_only(spark, sql, catalogue=True, what=READS)
    register_spark(spark, lake, sql)
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # we say it shorter
    try:
        df = spark.sql(sql)
        return (df.limit(limit) if limit is not None else df).toArrow()
    except (AnalysisException, ParseException) as exc:
        broken_named(lake, sql)  # a table it names was left out: it cannot be read
        raise QueryFailed(str(exc).strip().splitlines()[0], view_names(lake)) from None
    except Exception:  # an executor's error, such as a data file gone or not Parquet
        broken_named(lake, sql)
        raise
