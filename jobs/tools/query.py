"""``query``: SQL over the lake's views. DuckDB over delta-rs answers without starting
Spark; Spark SQL (the dialect of the models) answers what DuckDB cannot."""

from __future__ import annotations

import pyarrow as pa

from jobs.core.errors import UserError
from jobs.lake.store import Lake
from jobs.lake.views import duckdb_connection, register_spark


class QueryFailed(UserError):
    """A query an engine refused or could not run; ``views`` are the tables there are."""

    def __init__(self, message: str, views: list[str]):
        super().__init__(message)
        self.views = views

    def __str__(self) -> str:
        return f"{self.args[0]}\n(tables: {', '.join(self.views)})"


def duckdb_views(lake: Lake) -> list[str]:
    return duckdb_connection(lake, None)[1]


def run_duckdb(lake: Lake, sql: str, limit: int | None) -> pa.Table | None:
    """The rows of ``sql`` on DuckDB (None for a statement without rows)."""
    import duckdb

    con, views = duckdb_connection(lake, sql)
    try:
        rel = con.sql(sql)
        if rel is None:
            return None
        return (rel.limit(limit) if limit is not None else rel).to_arrow_table()
    except duckdb.Error as exc:
        raise QueryFailed(str(exc).strip().splitlines()[0], views) from None


def spark_views(spark, lake: Lake) -> list[str]:
    return register_spark(spark, lake)


def run_spark(spark, lake: Lake, sql: str, limit: int | None) -> pa.Table:
    """The rows of ``sql`` on Spark SQL over the lake's views."""
    import logging

    from pyspark.errors import AnalysisException, ParseException

    views = register_spark(spark, lake)
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # we say it shorter
    try:
        df = spark.sql(sql)
        return (df.limit(limit) if limit is not None else df).toArrow()
    except (AnalysisException, ParseException) as exc:
        raise QueryFailed(str(exc).strip().splitlines()[0], views) from None
