"""The matches suite's check frames of a small night, computed on the driver.

``quality.match_check_frame`` builds each staged run's check frame as a Spark plan: for a
night of a few thousand matches that is seconds of planning and scheduling per pattern for
milliseconds of work. Here the same frame is one DuckDB query over Arrow tables: the
staged Parquet files, and the events of the patterns' source read once per night through
delta-rs (only the ``event_date`` partitions the runs can bind). The columns, their types
and their values equal the Spark frame's (``tests/pipeline/test_check_frames.py`` compares
them on every committed pattern and on broken staged runs), so a suite gives the same
verdict on either.

A negated variable's witnesses are the events that satisfy its properties, decided by the
matcher's own compiled properties (``CompiledPattern.fits``), the reference the Spark
predicates follow.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.engine.columns import from_arrow
from jobs.core.engine.runtime import compile_pattern
from jobs.core.language.conditions.expressions import Agg, stored
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.lake import store as lk
from jobs.spark.predicates import event_date_filters

# the Arrow types of the Spark frame's columns that DuckDB would give otherwise
TIME = pa.timestamp("us", tz="UTC")


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class StagedMatches:
    """One staged run of a pattern that the matches suite checks: its first events lie
    in [low, high), ``rows`` matches were staged."""
    pattern: Pattern | Disjunction
    run_id: str
    low: int | None
    high: int | None
    rows: int


def micros(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Instants as int64 microseconds since the epoch (a naive timestamp is UTC, as Spark
    writes it)."""
    if pa.types.is_timestamp(column.type):
        column = pc.cast(column, pa.timestamp("us", tz=column.type.tz), safe=False)
    return pc.cast(column, pa.int64())


def prefix(pattern: Pattern) -> str:
    """The prefix of the per-variable columns of one alternative in the checked frame
    (``a2_n_p``): alternatives may use one variable name with other bounds. The column
    is null in the other alternatives' rows, which an expectation skips."""
    return "" if pattern.alternative is None else f"a{pattern.alternative}_"


def counted_measures(pattern: Pattern) -> list[tuple[str, object]]:
    """(measure, variable) of each ``count(v)`` measure: the suite checks it lies within
    the variable's Kleene bounds (column ``<prefix>m_<measure>``)."""
    out = []
    for m in pattern.measures:
        e = m.expr
        if isinstance(e, Agg) and e.func == "count" and e.attr is None:
            out.append((m.name, pattern.by_name[e.var]))
    return out


def has_counted_measures(pattern) -> bool:
    """Whether some alternative of a sequence pattern has a ``count(v)`` measure (its
    check frame then reads the staged ``values``)."""
    return pattern.kind != "window" and any(counted_measures(a) for a in pattern.alternatives)


def checked_negations(pattern: Pattern):
    """The negated variables the suite can check exactly: linked to the partition
    attributes and related to the positive variables by those equalities only (no event
    of the source may satisfy their properties inside their interval, in the match's
    partition)."""
    out = []
    for n in pattern.negations:
        if n.next:  # [not next n]: one event, found by position (the matcher checks it)
            continue
        rels = pattern.negation_relationships[n.var.name]
        if n.var.name in pattern.linked_negations and pattern.partition_attributes and all(
                r.is_equality_on_one_attribute() and r.left.attr in pattern.partition_attributes
                for r in rels):
            out.append(n)
    return out


def required(pattern: Pattern, a, b) -> bool:
    """Whether two consecutive sets both bind an event in every match (so their order can
    be checked; an optional step may leave one empty)."""
    return all(any(v.name in pattern.required for v in s) for s in (a, b))


def keys_of(pattern: Pattern | Disjunction) -> list[str]:
    return sorted({*pattern.partition_attributes,
                   *(k for alt in pattern.alternatives for k in alt.partition_attributes)})


class DriverFrames:
    """Check frames of the staged runs of one lake, sharing one read of each source's
    events (the union of the runs' ranges)."""

    def __init__(self, lake: lk.Lake, runs: list[StagedMatches]):
        import duckdb

        self.lake = lake
        self.con = duckdb.connect()
        self.con.execute("SET threads TO 2")
        self.events: dict[str, pa.Table] = {}
        self._witness_views: list[str] = []
        for source in {r.pattern.source for r in runs}:
            mine = [r for r in runs if r.pattern.source == source]
            lows = [r.low for r in mine]
            highs = [None if r.high is None else r.high + r.pattern.tau for r in mine]
            keys = sorted(set().union(*(keys_of(r.pattern) for r in mine)))
            self.events[source] = self._read_events(
                source, keys, event_date_filters(None if None in lows else min(lows),
                                                 None if None in highs else max(highs), 0),
                self._bound_ids(mine))

    def _bound_ids(self, runs: list[StagedMatches]) -> pa.Array | None:
        """The event ids the staged runs bind: a run's join with the source's events finds
        only those, so only those are read. None (every event) when a run's staged files
        cannot be read: its frame then fails on its own."""
        try:
            staged = pa.concat_tables([self._staged(r, ["bindings"]) for r in runs])
        except Exception:  # noqa: BLE001 - that run's frame reports it
            return None
        self.con.register("bound", staged)
        try:
            return self.con.sql(
                "SELECT DISTINCT unnest(ids) AS event_id FROM (SELECT unnest(map_values("
                "CAST(bindings::JSON AS MAP(VARCHAR, VARCHAR[])))) AS ids FROM bound)"
            ).to_arrow_table().column(0).combine_chunks()
        finally:
            self.con.unregister("bound")

    def _staged(self, run: StagedMatches, names: list[str]) -> pa.Table:
        """The ``names`` columns of a run's staged match rows."""
        import pyarrow.dataset as pads

        fs, folder = self.lake.filesystem(self.lake.staging(run.pattern.name, run.run_id))
        return pads.dataset(folder, filesystem=fs, format="parquet").to_table(
            columns=names, filter=pads.field("kind") == "match")

    def _read_events(self, source: str, columns: list[str], filters,
                     ids: pa.Array | None) -> pa.Table:
        """The source's events of the ``filters`` partitions; with ``ids``, those of
        these ids (when the source's ids are text, as the bindings name them)."""
        import pyarrow.dataset as pads

        path = self.lake.events(source)
        kind = pa.schema(self.lake.snapshot(path, required=True).schema().to_arrow()).field(
            "event_id").type
        only = None
        if ids is not None and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            only = pads.field("event_id").isin(ids.cast(kind))
        table = self.lake.read_arrow(path, ["event_id", "ts", *columns],
                                     partition_filters=filters, filter=only)
        return table.set_column(1, "ets", micros(table.column("ts")))

    def frame(self, run: StagedMatches) -> pa.Table:
        """The run's check frame, with the Spark frame's columns and types."""
        disjunctive = isinstance(run.pattern, Disjunction)
        counted = has_counted_measures(run.pattern)
        staged = self._staged(run, [
            "match_id", *(["alternative"] if disjunctive else []), "start_ts", "end_ts",
            "n_events", "bindings", *(["values"] if counted else [])])
        for name in ("start_ts", "end_ts"):
            staged = staged.set_column(staged.column_names.index(name), name,
                                       micros(staged.column(name)))
        self.con.register("staged", staged)
        self.con.register("ev", self.events[run.pattern.source])
        try:
            if run.pattern.kind == "window":
                sql = window_sql(run.pattern)
            elif not disjunctive:
                sql = self._alternative_sql(run, run.pattern, "staged")
            else:
                sql = " UNION ALL BY NAME ".join(
                    f"({self._alternative_sql(run, alt, f'staged WHERE alternative = {alt.alternative}')})"
                    for alt in run.pattern.alternatives)
            table = self.con.sql(sql).to_arrow_table()
        finally:
            for name in ("staged", "ev", *self._witness_views):
                self.con.unregister(name)
            self._witness_views = []
        return typed(table)

    def _witnesses(self, run: StagedMatches, pattern: Pattern, name: str, keys: list[str]) -> str:
        """A view of the events that satisfy the negated variable ``name``'s properties in
        the partitions its witnesses may lie in (up to τ before the run's first start):
        their time ``wts`` and partition values ``key_<k>``."""
        attrs = sorted({stored(a) for p in pattern.properties[name] for a in p.attributes})
        low = None if run.low is None else run.low - pattern.tau
        columns = list(dict.fromkeys(["event_id", "ts", *keys, *attrs]))
        table = self.lake.read_arrow(self.lake.events(pattern.source), columns,
                                     partition_filters=event_date_filters(low, run.high,
                                                                          pattern.tau))
        if pattern.properties[name]:
            compiled = compile_pattern(pattern)
            cols = from_arrow(table, compiled.attributes, ordered=True)
            table = table.filter(pa.array(compiled.fits(name, cols)))
        out = pa.table({"wts": micros(table.column("ts")),
                        **{f"key_{k}": table.column(k) for k in keys}})
        view = f"witness_{len(self._witness_views)}"
        self.con.register(view, out)
        self._witness_views.append(view)
        return view

    def _alternative_sql(self, run: StagedMatches, pattern: Pattern, staged: str) -> str:
        """``quality._alternative_frame`` as one query."""
        pre = prefix(pattern)
        keys = list(pattern.partition_attributes)
        variables = [v.name for v in pattern.variables]
        kcols = "".join(f", e.{quoted(k)}" for k in keys)
        kaggs = "".join(
            f", count(DISTINCT {quoted(k)}) AS {quoted('dk_' + k)}, count({quoted(k)}) AS "
            f"{quoted('nk_' + k)}, first({quoted(k)}) FILTER (WHERE {quoted(k)} IS NOT NULL) "
            f"AS {quoted('key_' + k)}" for k in keys)
        pivots = "".join(
            f", count(*) FILTER (WHERE var = {text(v)}) AS {quoted(v + '_n')}, min(ets) FILTER "
            f"(WHERE var = {text(v)}) AS {quoted(v + '_lo')}, max(ets) FILTER (WHERE var = "
            f"{text(v)}) AS {quoted(v + '_hi')}" for v in variables)

        def last(names):
            return "greatest(" + ", ".join(quoted(v.name + "_hi") for v in names) + ")"

        def first(names):
            return "least(" + ", ".join(quoted(v.name + "_lo") for v in names) + ")"

        order = [f"coalesce({last(a)} < {first(b)}, {str(not required(pattern, a, b)).lower()})"
                 for a, b in zip(pattern.sets, pattern.sets[1:])]
        part = [f"{quoted('dk_' + k)} = 1 AND {quoted('nk_' + k)} = bound" for k in keys]
        ctes = [
            f"st AS (SELECT * FROM {staged})",
            "ex AS (SELECT match_id, unnest(map_keys(m)) AS var, unnest(map_values(m)) AS ids "
            "FROM (SELECT match_id, CAST(bindings::JSON AS MAP(VARCHAR, VARCHAR[])) AS m FROM st))",
            "bound_ids AS (SELECT match_id, var, unnest(ids) AS event_id FROM ex)",
            f"j AS (SELECT b.match_id, b.var, b.event_id, e.ets{kcols} FROM bound_ids b "
            "LEFT JOIN ev e ON b.event_id = e.event_id)",
            "pm AS (SELECT match_id, count(*) AS bound, count(ets) AS found, count(DISTINCT "
            f"event_id) AS n_distinct, min(ets) AS first_ts, max(ets) AS last_ts{kaggs} "
            "FROM j GROUP BY match_id)",
            f"pv AS (SELECT match_id{pivots} FROM j GROUP BY match_id)",
            "df AS (SELECT * FROM st LEFT JOIN pm USING (match_id) LEFT JOIN pv USING (match_id))",
        ]
        negations = []
        for i, n in enumerate(checked_negations(pattern)):
            name, tau = n.var.name, pattern.tau // 1000
            if n.before is None:
                lo, hi, lo_op, hi_op = f"end_ts - {tau}", "start_ts", ">=", "<"
            else:
                lo, lo_op = last(pattern.sets[n.before]), ">"
                if n.after is None:
                    hi, hi_op = f"start_ts + {tau}", "<="
                else:
                    hi, hi_op = first(pattern.sets[n.after]), "<"
            view = self._witnesses(run, pattern, name, keys)
            on = " AND ".join(f"w.{quoted('key_' + k)} = c.{quoted('key_' + k)}" for k in keys)
            ctes.append(
                f"hit_{i} AS (SELECT w.match_id FROM (SELECT match_id, "
                + "".join(f"{quoted('key_' + k)}, " for k in keys)
                + f"{lo} AS nlo, {hi} AS nhi FROM df) w JOIN {view} c ON {on} "
                f"WHERE c.wts {lo_op} w.nlo AND c.wts {hi_op} w.nhi GROUP BY w.match_id "
                f"HAVING count(*) >= {int(n.var.min)})")  # not n{{k,}}: k witnesses
            negations.append(f", match_id NOT IN (SELECT match_id FROM hit_{i}) AS "
                             f"{quoted(pre + 'no_' + name + '_ok')}")
        counts = "".join(f", coalesce({quoted(v + '_n')}, 0) AS {quoted(pre + 'n_' + v)}"
                         for v in variables)
        measures = "".join(f", CAST(json_extract_string(\"values\", {text('$.' + m)}) AS "
                           f"BIGINT) AS {quoted(pre + 'm_' + m)}"
                           for m, _ in counted_measures(pattern))
        return (
            "WITH " + ", ".join(ctes) + " SELECT match_id"
            + (", alternative" if pre else "") + BOUND_CHECKS
            + f", {' AND '.join(order) if order else 'true'} AS set_order_ok"
            + f", {'coalesce(' + ' AND '.join(part) + ', false)' if part else 'true'} AS partition_ok"
            + counts + (f", n_events AS {quoted(pre + 'n_events')}" if pre else "")
            + measures + "".join(negations) + " FROM df")


BOUND_CHECKS = (
    ", start_ts, end_ts, n_events, (last_ts - first_ts) / 1e6 AS span_seconds"
    ", coalesce(start_ts = first_ts AND end_ts = last_ts AND n_events = bound, false) AS times_ok"
    ", coalesce(found = bound, false) AS events_found_ok"
    ", coalesce(n_distinct = bound, false) AS distinct_events_ok")


def window_sql(pattern) -> str:
    """``quality._window_frame`` as one query: bound events in processing order (first,
    buffer, last), start/end at the first and last event, equal partition values."""
    keys = list(pattern.partition_attributes)
    kcols = "".join(f", e.{quoted(k)}" for k in keys)
    kaggs = "".join(f", count(DISTINCT {quoted(k)}) AS {quoted('dk_' + k)}, count({quoted(k)}) "
                    f"AS {quoted('nk_' + k)}" for k in keys)
    part = [f"{quoted('dk_' + k)} = 1 AND {quoted('nk_' + k)} = bound" for k in keys]
    return (
        "WITH ex AS (SELECT match_id, unnest(map_keys(m)) AS var, unnest(map_values(m)) AS ids "
        "FROM (SELECT match_id, CAST(bindings::JSON AS MAP(VARCHAR, VARCHAR[])) AS m FROM staged)), "
        "bound_ids AS (SELECT match_id, var, unnest(ids) AS event_id, "
        "generate_subscripts(ids, 1) AS pos FROM ex), "
        f"j AS (SELECT b.match_id, b.var, b.pos, b.event_id, e.ets{kcols}, "
        "CASE b.var WHEN 'first' THEN 0 WHEN 'buffer' THEN 1 WHEN 'last' THEN 2 END AS role "
        "FROM bound_ids b LEFT JOIN ev e ON b.event_id = e.event_id), "
        "o AS (SELECT *, lag(ets) OVER w AS prev_ts, lag(event_id) OVER w AS prev_id FROM j "
        "WINDOW w AS (PARTITION BY match_id ORDER BY role, pos)), "
        "pm AS (SELECT match_id, count(*) AS bound, count(ets) AS found, count(DISTINCT "
        "event_id) AS n_distinct, min(ets) FILTER (WHERE var = 'first') AS first_ts, "
        "max(ets) FILTER (WHERE var = 'last') AS last_ts, min(CASE WHEN prev_ts IS NULL THEN 1 "
        "ELSE (prev_ts < ets OR (prev_ts = ets AND prev_id < event_id))::INT END) AS ordered, "
        "sum((var = 'first')::INT) AS n_first, sum((var = 'last')::INT) AS n_last"
        f"{kaggs} FROM o GROUP BY match_id), "
        "df AS (SELECT * FROM staged LEFT JOIN pm USING (match_id)) "
        "SELECT match_id" + BOUND_CHECKS + ", coalesce(ordered = 1, false) AS set_order_ok"
        + f", {'coalesce(' + ' AND '.join(part) + ', false)' if part else 'true'} AS partition_ok"
        + ", coalesce(n_first, 0)::BIGINT AS n_first, coalesce(n_last, 0)::BIGINT AS n_last"
        " FROM df")


def typed(table: pa.Table) -> pa.Table:
    """The Spark frame's types: instants as UTC microsecond timestamps, counts as int64
    (``alternative`` keeps the staged type)."""
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        if name in ("start_ts", "end_ts"):
            table = table.set_column(i, name, pc.cast(column, pa.int64()).cast(TIME))
        elif pa.types.is_integer(column.type) and name != "alternative":
            table = table.set_column(i, name, column.cast(pa.int64()))
    return table
