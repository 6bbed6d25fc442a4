"""The lake as SQL views, one set of names for every engine: Spark (``query --engine spark``,
the SQL models) and DuckDB over delta-rs (``query``'s fast path, no JVM).

Views: ``matches_<pattern>``, ``events_<source>``, ``quarantine_<source>``,
``stats_<source>``, ``models_<model>``, ``runs``, ``ingest_log``, ``retractions``,
``reference_<name>`` (``conf/reference/*.csv``), and the bound events of the matches:
``match_events_<pattern>`` (one row per match, variable, position and event, with every
column of the event) and ``match_events`` (the same for every pattern, with the columns all
sources share: pattern, match_id, variable, position, event_id, ts).
"""

from __future__ import annotations

import re
from datetime import timezone

import pyarrow as pa
import pyarrow.compute as pc

from jobs.config.references import reference_files
from jobs.core.errors import InputError
from jobs.lake import store as lk
from jobs.lake.changes import Point, snapshot, version_at
from jobs.lake.runs import read_runs
from jobs.lake.view_scope import EVERYTHING, Scope, scope_of

KINDS = ("matches", "events", "quarantine", "stats", "models")
SINGLES = lk.SINGLE_TABLES
SOURCE_KEY = "ses.pattern.source"  # a match table's source, in its Delta metadata
KIND_KEY = "ses.pattern.kind"
# a row pattern's ALL ROWS PER MATCH table: a row per matched event (event_id, classifier),
# no bindings, so no match_events_<pattern> view over it
ROW_PER_EVENT = "row_pattern_rows"
SINCE = "_since_"  # a table's files and rows from a query's time bound on (``view_scope``)


def lake_tables(lake: lk.Lake, checked: bool = True) -> dict[str, str]:
    """View name -> Delta table path, for every table the lake has (``checked=False``:
    every folder where one may be, no log looked at: a query checks those it reads, as
    looking costs more with every commit of a table's log)."""
    out = {}
    for kind in KINDS:
        for name in lake.children(lk.join(lake.root, kind)):
            out[f"{kind}_{name}"] = lk.join(lake.root, kind, name)
    top = set(lake.children(lake.root))
    out.update({name: lk.join(lake.root, name) for name in SINGLES if name in top})
    return {v: p for v, p in out.items() if lake.exists(p)} if checked else out


def match_sources(lake: lk.Lake, tables: dict[str, str],
                  only: set[str] | None = None) -> dict[str, str]:
    """Pattern -> source of every match table whose events table exists (``only``: of these
    patterns): from the table's metadata (written at publish), else from the runs log (read
    only for a table without it: the runs log grows every night, and a query should not pay
    for it)."""
    found: dict[str, str | None] = {}
    for view, path in tables.items():
        if view.startswith("matches_") and (only is None or view[len("matches_"):] in only):
            try:
                conf = lake.snapshot(path, required=True).metadata().configuration
                if conf.get(KIND_KEY) == ROW_PER_EVENT:  # a row per event already
                    continue
                found[view[len("matches_"):]] = conf.get(SOURCE_KEY)
            except lk.BrokenTable:
                continue  # named when a query reads it; the other tables keep working
            except FileNotFoundError:
                continue  # a folder without a table (``lake_tables(checked=False)``)
    missing = sorted(p for p, s in found.items() if not s)
    if missing and "runs" in tables:
        runs = read_runs(lake, columns=["pattern", "source"],
                               filter=pc.field("pattern").isin(pa.array(missing, pa.string())))
        for r in runs.to_pylist() if runs is not None else []:
            if r["source"]:
                found[r["pattern"]] = r["source"]
    return {p: s for p, s in found.items() if s and f"events_{s}" in tables}


def view_names(lake: lk.Lake) -> list[str]:
    """Every view a query can read (the tables, the derived views, the reference tables),
    without opening a table's data."""
    tables = lake_tables(lake)
    return [*tables, *derived_views(lake, tables, "duckdb"), *reference_files()]


def broken_named(lake: lk.Lake, sql: str) -> None:
    """``BrokenTable`` for the first table ``sql`` names whose log or data files cannot be
    read (called when a query failed, to say why in one line)."""
    for view, path in lake_tables(lake).items():
        if view in views_named(sql, [view]):
            lake.check_files(path, footers=True)


def bound_events_sql(pattern: str, dialect: str, table: str | None = None) -> str:
    """(pattern, match_id, variable, position, event_id) of one match table (``table``: a
    view of its rows instead), one row per bound event; position counts from 1 in time
    order within the variable."""
    table = table or f"matches_{pattern}"
    if dialect == "spark":
        return (f"SELECT pattern, match_id, variable, pos + 1 AS position, event_id "
                f"FROM {table} LATERAL VIEW explode(bindings) b AS variable, ids "
                f"LATERAL VIEW posexplode(ids) p AS pos, event_id")
    # unnests side by side in one SELECT walk their lists in step (a tenth of the time of
    # WITH ORDINALITY, whose plan joins every list back to its row)
    return (f"SELECT pattern, match_id, variable, generate_subscripts(ids, 1) AS position, "
            f"unnest(ids) AS event_id FROM (SELECT pattern, match_id, "
            f"unnest(map_keys(bindings)) AS variable, unnest(map_values(bindings)) AS ids "
            f"FROM {table})")


def match_events_sql(pattern: str, source: str, dialect: str, since=None) -> str:
    """``match_events_<pattern>``: the bound events joined to their events table (on Spark
    a sort-merge join: broadcasting every events table of ``match_events`` at once can
    exhaust the driver). ``since`` (a time, DuckDB only): of the matches that end at or
    after it, joined to the events files from it on (the views
    ``_since_matches_<pattern>`` and ``_since_events_<source>``)."""
    return _joined(_bound(pattern, dialect, since), source, dialect, since, "e.*")


def match_events_union(sources: dict[str, str], dialect: str, since=None) -> str:
    """``match_events`` of the patterns ``sources`` maps to their source: per source, the
    bound events of all its patterns joined to its events table once (a join per source,
    not per pattern: each scans and shuffles the events table). The pattern is a literal
    per pattern's branch, so that a filter on it leaves the other patterns' tables, and a
    source none of them remain in, unread."""
    by_source: dict[str, list[str]] = {}
    for pattern, source in sorted(sources.items()):
        by_source.setdefault(source, []).append(pattern)
    joins = []
    for source, patterns in sorted(by_source.items()):
        bound = " UNION ALL ".join(
            f"SELECT '{p}' AS pattern, match_id, variable, position, event_id "
            f"FROM ({_bound(p, dialect, since)})" for p in patterns)
        joins.append(_joined(bound, source, dialect, since, "e.event_id, e.ts"))
    return " UNION ALL ".join(joins)


def _joined(bound: str, source: str, dialect: str, since, columns: str) -> str:
    """Bound events (``bound``: a query of pattern, match_id, variable, position,
    event_id) joined to ``source``'s events table, with the events' ``columns``."""
    hint = "/*+ MERGE(e) */ " if dialect == "spark" else ""
    events = f"{SINCE}events_{source}" if since is not None else f"events_{source}"
    return (f"SELECT {hint}b.pattern, b.match_id, b.variable, "
            f"CAST(b.position AS INT) AS position, {columns} "
            f"FROM ({bound}) b JOIN {events} e ON e.event_id = b.event_id")


def _bound(pattern: str, dialect: str, since) -> str:
    """The bound events of a pattern's matches (of those that end at or after ``since``)."""
    matches = f"matches_{pattern}"
    if since is not None:
        matches = (f"(SELECT * FROM {SINCE}{matches} "
                   f"WHERE end_ts >= TIMESTAMPTZ '{since.isoformat()}')")
    return bound_events_sql(pattern, dialect, matches)


def derived_views(lake: lk.Lake, tables: dict[str, str], dialect: str,
                  sql: str | None = None, scope: Scope | None = None) -> dict[str, str]:
    """View name -> SQL of the views over the tables (match_events_*, match_events); with
    ``sql``, those of the patterns it can read (``match_events`` then unions only the
    patterns its filter allows: ``view_scope``), each match table's metadata read for them
    alone; on DuckDB, with the scope's time bound, over the matches and events files from
    then on."""
    scope = scope or (scope_of(sql) if sql is not None else EVERYTHING)
    since = scope.since if dialect == "duckdb" else None
    sources = match_sources(lake, tables, _patterns_read(sql, tables, scope))
    out = {f"match_events_{p}": match_events_sql(p, s, dialect, since)
           for p, s in sorted(sources.items())}
    if sources:
        out["match_events"] = match_events_union(sources, dialect, since)
    return out


def _patterns_read(sql: str | None, tables: dict[str, str], scope: Scope) -> set[str] | None:
    """The patterns whose bound events ``sql`` may read (None: every pattern)."""
    if sql is None:
        return None
    every = _match_patterns(tables)
    named = views_named(sql, derived_names(tables))
    out = {p for p in every if f"match_events_{p}" in named}
    if "match_events" in named:
        asked = scope.patterns
        if asked is None or not asked & every:  # every pattern (the view must exist)
            return None
        out |= asked & every
    return out


def _match_patterns(tables: dict[str, str]) -> set[str]:
    return {v[len("matches_"):] for v in tables if v.startswith("matches_")}


def derived_names(tables: dict[str, str]) -> list[str]:
    """The derived views' names, from the match tables' names alone (a pattern whose events
    table is missing is named too): what a query may name, without opening a table."""
    patterns = sorted(_match_patterns(tables))
    return [f"match_events_{p}" for p in patterns] + (["match_events"] if patterns else [])


def inputs_of(lake: lk.Lake, sql: str) -> dict[str, str]:
    """What ``sql`` reads, directly or through the derived views, as {name: version}: each
    Delta table's path within the lake (``matches/<pattern>``) and version, each reference
    file's name (``reference/<file>``) and modification time; the same inputs give the
    same answer (``run_models`` skips a model whose inputs did not change), also in a lake
    moved or copied elsewhere."""
    tables, refs = lake_tables(lake), reference_files()
    derived = derived_views(lake, tables, "spark", sql)
    wanted = _with_what_they_read(views_named(sql, [*tables, *derived, *refs]), tables,
                                  derived, refs)
    out = {}
    for view in sorted(wanted):
        if view in tables:
            dt = lake.snapshot(tables[view])
            out[lake.name_of(tables[view])] = str(dt.version()) if dt is not None else "missing"
        elif view in refs:
            out[f"reference/{refs[view].name}"] = str(refs[view].stat().st_mtime_ns)
    return out


def _with_what_they_read(wanted: set[str], tables: dict, derived: dict[str, str],
                         refs: dict) -> set[str]:
    """``wanted`` and the views the derived ones among them read (``match_events`` and
    each ``match_events_<pattern>`` read match tables and events tables)."""
    names = [*tables, *derived, *refs]
    out = set(wanted)
    for view in derived:  # each reads tables only, never another derived view
        if view in out:
            out |= views_named(derived[view], names)
    return out


def views_named(sql: str, names) -> set[str]:
    words = set(re.findall(r"[a-z_][a-z0-9_]*", sql.lower()))
    return {n for n in names if n.lower() in words}


def duckdb_connection(lake: lk.Lake, sql: str | None = None, as_of: Point | None = None):
    """A DuckDB connection with the views over delta-rs's Arrow datasets (read lazily:
    only the columns and files a query needs); with ``sql``, only the views it names and
    those they read are set up. Returns (connection, every view name).

    The connection reads the lake's tables and nothing else: once the views are set up,
    DuckDB's file system access is switched off and its configuration locked (no
    ``read_csv('/etc/…')``, no ``COPY … TO``, no ``ATTACH``, no ``SET`` to undo it).

    ``as_of``: every table as it was at that point (``jobs.lake.changes``); a table that
    did not exist then is not there. A version names one table's version: the query must
    then read one table."""
    import duckdb


    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    tables = lake_tables(lake, checked=sql is None)  # with sql: those it reads, below
    scope = scope_of(sql) if sql is not None else EVERYTHING
    derived = derived_views(lake, tables, "duckdb", sql, scope)
    refs = reference_files()
    names = [*tables, *derived, *refs]
    wanted = set(names) if sql is None else \
        _with_what_they_read(views_named(sql, names), tables, derived, refs)
    if sql is not None:  # what a query may name, for a failed query's suggestions
        names = [*tables, *derived_names(tables), *refs]
    bodies = " ".join(body for view, body in derived.items() if view in wanted)
    pruned = views_named(bodies, [f"{SINCE}{t}" for t in tables])  # from a time bound on
    read = [v for v in tables if (v in wanted or f"{SINCE}{v}" in pruned)
            and (sql is None or lake.exists(tables[v]))]
    if as_of is not None and as_of.kind == "version" and len(read) != 1:
        raise InputError(f"--as-of {as_of.version}: a version is one table's; this query reads "
                         f"{len(read)} tables ({', '.join(read) or 'none'}): give a run id or "
                         "a time")
    for view in read:
        dt = lake.table(tables[view])
        if as_of is not None:
            version = version_at(lake, tables[view], as_of, dt)
            if version is None:
                if sql is not None:  # the query names it: say so rather than "no such table"
                    raise InputError(f"{view} did not exist yet at {as_of.describe()}")
                continue
            dt = snapshot(lake, tables[view], version)
        if view in wanted:
            con.register(f"_t_{view}", dt.to_pyarrow_dataset())
            con.execute(f'CREATE VIEW "{view}" AS SELECT * FROM "_t_{view}"')
        if f"{SINCE}{view}" in pruned:  # only the files whose times reach the bound
            column = "end_ts" if view.startswith("matches_") else "ts"
            since = scope.since.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            con.register(f"_t{SINCE}{view}", dt.to_pyarrow_dataset(
                file_pruning_predicate=f"{column} >= '{since}'"))
            con.execute(f'CREATE VIEW "{SINCE}{view}" AS SELECT * FROM "_t{SINCE}{view}"')
    there = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    for view, body in derived.items():  # each reads tables only
        if view in wanted and all(t in there for t in _reads(body, [*tables, *derived, *pruned])):
            con.execute(f'CREATE VIEW "{view}" AS {body}')
            there.add(view)
    for view, path in refs.items():  # read now: the files are closed to queries below
        if view in wanted:
            con.execute(f"CREATE TABLE {view} AS SELECT * FROM read_csv_auto('{path}', "
                        "header = true)")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con, names


def _reads(body: str, names) -> list[str]:
    """The views (tables, derived views) a derived view's SQL names."""
    return [t for t in names if re.search(rf'\b{re.escape(t)}\b', body)]
