"""What a query can read of the bound-event views, from DuckDB's own parse of it.

``match_events`` unions one branch per pattern, each reading a match table and an events
table: a query that set them all up paid for every table of the lake (about 1 s at fifty
patterns) to read one, and one over last week's bound events read the whole history's
matches and events files. Two limits are read from the query, never by running it:

* **patterns**: when every reference to ``match_events`` sits in ``SELECT … FROM
  match_events [alias] WHERE pattern = '<p>' [AND …]`` (or ``pattern IN ('<p>', …)``),
  only those patterns' rows can reach the rest of the query: the other branches need not
  exist.
* **since**: when every reference to ``match_events`` or ``match_events_<pattern>`` has a
  top-level conjunct ``ts >= <time>`` (``>``, ``=``, ``BETWEEN``; a constant: a literal,
  a cast literal, ``now() - INTERVAL 7 DAY``), only events from that time on can: a bound event lies within its match
  (``start_ts <= ts <= end_ts``, checked on every run by the matches suite), so matches
  that ended before it and events files whose statistics end before it are left unread.
  The bound is taken a day early (any time zone a literal may be read in).

Anything else (a join on the view, a CTE of that name, renamed columns, a filter under an
``OR``, SQL DuckDB cannot parse) reads everything, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

VIEW = "match_events"
MARGIN = timedelta(days=1)
# what a constant expression is made of (no column, subquery, window, parameter, lambda)
CONSTANT_PARTS = {"CONSTANT", "CAST", "FUNCTION", "OPERATOR", "TYPE"}
LOWER = {"COMPARE_GREATERTHANOREQUALTO", "COMPARE_GREATERTHAN", "COMPARE_EQUAL"}
MIRROR = {"COMPARE_LESSTHANOREQUALTO": "COMPARE_GREATERTHANOREQUALTO",
          "COMPARE_LESSTHAN": "COMPARE_GREATERTHAN", "COMPARE_EQUAL": "COMPARE_EQUAL"}


@dataclass(frozen=True)
class Scope:
    """``patterns``: those ``match_events`` may be limited to (None: every pattern; empty
    when the query does not name it). ``since``: every bound-event view the query names
    needs only events at or after it (None: all)."""
    patterns: frozenset[str] | None
    since: datetime | None


EVERYTHING = Scope(None, None)


def scope_of(sql: str) -> Scope:
    """The limits of ``sql``'s references to the bound-event views (module docstring)."""
    import duckdb

    if VIEW not in sql.lower():
        return Scope(frozenset(), None)
    con = duckdb.connect()
    try:  # it evaluates the query's constant bounds: the query connection's locks first
        for setting in ("TimeZone = 'UTC'", "enable_external_access = false",
                        "lock_configuration = true"):
            con.execute(f"SET {setting}")
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
        if tree.get("error") or any(_named_cte(n) for n in _nodes(tree)):
            return EVERYTHING
        patterns: set[str] | None = set()
        since: list[datetime] | None = []
        limited = 0
        for node in _nodes(tree):
            table = node.get("from_table") if node.get("type") == "SELECT_NODE" else None
            if not _is_view(table):
                continue
            limited += 1
            alias = table.get("alias") or table["table_name"]
            conjuncts = _conjuncts(node.get("where_clause"))
            if table["table_name"].lower() == VIEW and patterns is not None:
                found = _pattern_filter(conjuncts, alias)
                patterns = None if found is None else patterns | found
            if since is not None:
                lower = _time_bound(con, conjuncts, alias)
                since = None if lower is None else since + [lower]
        references = [n for n in _nodes(tree) if n.get("type") == "BASE_TABLE"
                      and _view_name(n.get("table_name"))]
        if len(references) != limited:
            return EVERYTHING
        if not any(n["table_name"].lower() == VIEW for n in references):
            patterns = set()  # only match_events_<pattern> views: no union to limit
        return Scope(None if patterns is None else frozenset(patterns),
                     min(since) - MARGIN if since else None)
    except (duckdb.Error, ValueError, IndexError, KeyError, OverflowError):
        return EVERYTHING
    finally:
        con.close()


def _nodes(tree):
    """Every dict in the parse tree, depth first."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _view_name(name) -> bool:
    name = str(name or "").lower()
    return name == VIEW or name.startswith(VIEW + "_")


def _is_view(table) -> bool:
    return (isinstance(table, dict) and table.get("type") == "BASE_TABLE"
            and _view_name(table.get("table_name"))
            and not table.get("schema_name") and not table.get("catalog_name")
            and not table.get("column_name_alias") and not table.get("at_clause"))


def _named_cte(node: dict) -> bool:
    """A CTE with a bound-event view's name (its references would not be the view's)."""
    ctes = node.get("cte_map", {}).get("map", []) if isinstance(node.get("cte_map"), dict) \
        else []
    return any(_view_name(entry.get("key")) for entry in ctes if isinstance(entry, dict))


def _conjuncts(where) -> list[dict]:
    if not isinstance(where, dict):
        return []
    if where.get("type") == "CONJUNCTION_AND":
        return [c for c in where.get("children", []) if isinstance(c, dict)]
    return [where]


def _pattern_filter(conjuncts: list[dict], alias: str) -> set[str] | None:
    """The literals of a conjunct ``pattern = '<p>'`` / ``pattern IN (…)``."""
    for c in conjuncts:
        kind = c.get("type")
        if kind == "COMPARE_EQUAL":
            sides = [c.get("left"), c.get("right")]
            for col, lit in (sides, sides[::-1]):
                if _is_column(col, "pattern", alias) and _text(lit) is not None:
                    return {_text(lit)}
        elif kind == "COMPARE_IN":
            col, *values = c.get("children", []) or [None]
            texts = [_text(v) for v in values]
            if _is_column(col, "pattern", alias) and values and None not in texts:
                return set(texts)
    return None


def _time_bound(con, conjuncts: list[dict], alias: str) -> datetime | None:
    """The latest lower bound on ``ts`` among the conjuncts (None: none)."""
    bounds = []
    for c in conjuncts:
        kind = c.get("type")
        if kind == "COMPARE_BETWEEN" and _is_column(c.get("input"), "ts", alias):
            bounds.append(_time(con, c.get("lower")))
        elif kind in LOWER and _is_column(c.get("left"), "ts", alias):
            bounds.append(_time(con, c.get("right")))
        elif kind in MIRROR and _is_column(c.get("right"), "ts", alias):
            bounds.append(_time(con, c.get("left")))
    bounds = [b for b in bounds if b is not None]
    return max(bounds) if bounds else None


def _time(con, expr) -> datetime | None:
    """A constant expression's time as DuckDB reads it against ``ts`` (a TIMESTAMPTZ, in
    UTC): a literal, a cast literal, or functions and operators of them (``now() -
    INTERVAL 7 DAY``); None for anything that reads a column or a table."""
    if not isinstance(expr, dict) or any(
            n.get("class") not in CONSTANT_PARTS for n in _nodes(expr) if "class" in n):
        return None
    template = json.loads(con.execute("SELECT json_serialize_sql('SELECT 1')").fetchall()[0][0])
    template["statements"][0]["node"]["select_list"] = [expr]
    text = con.execute("SELECT json_deserialize_sql(?)", [json.dumps(template)]).fetchall()[0][0]
    return con.execute(f"SELECT CAST(({text[len('SELECT '):]}) AS TIMESTAMPTZ)").fetchall()[0][0]


def _is_column(expr, column: str, alias: str) -> bool:
    if not isinstance(expr, dict) or expr.get("type") != "COLUMN_REF":
        return False
    names = [str(n).lower() for n in expr.get("column_names", [])]
    return names == [column] or names == [alias.lower(), column]


def _text(expr) -> str | None:
    if isinstance(expr, dict) and expr.get("type") == "VALUE_CONSTANT":
        literal = expr.get("literal", {})
        if literal.get("kind") == "STRING":
            return literal.get("text")
    return None
