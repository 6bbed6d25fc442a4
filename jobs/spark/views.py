"""The lake's views on a Spark session (``query --engine spark``, the SQL models): the same
names and bodies as DuckDB's (``jobs.lake.views``), each table read as a Spark frame."""

from __future__ import annotations

from jobs.config.references import reference_files
from jobs.lake import store as lk
from jobs.lake.view_scope import EVERYTHING, scope_of
from jobs.lake.views import (
    KINDS,
    SINGLES,
    _with_what_they_read,
    derived_views,
    lake_tables,
    views_named,
)
from jobs.spark.tables import read_spark


def register_spark(spark, lake: lk.Lake, sql: str | None = None) -> list[str]:
    """Every view of the lake on a Spark session, instead of those of a lake registered
    before (a table one lake has and the other not must not leak); returns their names.
    With ``sql``, only the views it names and those they read, as ``duckdb_connection``
    does (each view costs a read of its table's log and file list)."""

    prefixes = tuple(f"{k}_" for k in KINDS) + ("match_events",)
    for t in spark.catalog.listTables():
        if t.isTemporary and (t.name.startswith(prefixes) or t.name in SINGLES):
            spark.catalog.dropTempView(t.name)
    tables = lake_tables(lake)
    refs = reference_files()
    scope = scope_of(sql) if sql is not None else EVERYTHING  # parsed once for both calls
    if sql is not None:
        derived = derived_views(lake, tables, "spark", sql, scope)
        wanted = _with_what_they_read(views_named(sql, [*tables, *derived, *refs]), tables,
                                      derived, refs)
        tables = {v: p for v, p in tables.items() if v in wanted}
        refs = {v: p for v, p in refs.items() if v in wanted}
    for view, path in list(tables.items()):
        try:
            read_spark(spark, lake, path).createOrReplaceTempView(view)
        except lk.BrokenTable:
            del tables[view]  # a query that reads it is told why (broken_named)
    derived = derived_views(lake, tables, "spark", sql, scope)  # of the tables that could be read
    if sql is not None:
        derived = {v: body for v, body in derived.items() if v in wanted}
    for view, body in derived.items():
        spark.sql(body).createOrReplaceTempView(view)
    return list(tables) + list(derived) + register_references(spark, refs)


def register_references(spark, refs: dict | None = None) -> list[str]:
    """``conf/reference/<name>.csv`` (with a header) as the view ``reference_<name>``;
    ``refs``: only these (view name -> file)."""
    refs = reference_files() if refs is None else refs
    for name, path in refs.items():
        (spark.read.option("header", True).option("inferSchema", True).csv(str(path))
         .createOrReplaceTempView(name))
    return list(refs)
