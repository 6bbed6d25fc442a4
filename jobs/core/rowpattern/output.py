"""What a MATCH_RECOGNIZE returns, as Trino lays it out: rows split by PARTITION BY and
put in ORDER BY order, matched (``matcher``), and for each match one row (ONE ROW PER
MATCH: the partition columns, then the measures as of the match's last row) or a row per
matched row that no exclusion hides (ALL ROWS PER MATCH: the partition columns, the order
columns, the measures as of that row, the other input columns). An empty match gives one
row with null measures but ``MATCH_NUMBER()``; an unmatched row (WITH UNMATCHED ROWS) one
with null measures."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cmp_to_key

from jobs.core.language.events import Event
from jobs.core.rowpattern.evaluate import Frame, column_value, value
from jobs.core.rowpattern.matcher import RowMatch, fitting_rows, partition_matches
from jobs.core.rowpattern.model import ROWS_ALL_OMIT, RowPatternQuery
from jobs.core.rowpattern.program import compile_row_pattern
from jobs.core.rowpattern.pruning import may_match, necessary_conditions
from jobs.core.rowpattern.values import Ts, json_value


@dataclass(frozen=True)
class PartitionMatch:
    """A match with its partition's key and rows."""

    key: tuple
    rows: list
    match: RowMatch


def partitions(query: RowPatternQuery, rows: Iterable[dict]) -> list[tuple[tuple, list[dict]]]:
    """The rows by PARTITION BY value (partitions in order of their keys, nulls last),
    each in ORDER BY order (ties keep the input order)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(column_value(row, c) for c in query.partition_by), []).append(row)
    ordered = []
    for key in sorted(groups, key=_null_safe):
        part = groups[key]
        if query.order_by:
            part = sorted(part, key=cmp_to_key(lambda a, b: _order(query, a, b)))
        ordered.append((key, part))
    return ordered


def _null_safe(key: tuple):
    return tuple((v is None, type(v).__name__, v if v is not None else 0) for v in key)


def _order(query, a: dict, b: dict) -> int:
    for k in query.order_by:
        x, y = column_value(a, k.column), column_value(b, k.column)
        if x == y:
            continue
        if x is None or y is None:
            return (-1 if x is None else 1) * (1 if k.nulls_first else -1)
        c = -1 if x < y else 1
        return c if k.ascending else -c
    return 0


def matches(query: RowPatternQuery, rows: Iterable[dict], with_unmatched: bool = False,
            prune: bool = True, pruned: list | None = None) -> Iterator[PartitionMatch | tuple]:
    """Every match of every partition, in order (and ``(key, rows, row)`` for each
    unmatched row when ``with_unmatched``). ``prune``: a partition that fails a necessary
    condition is not searched (its key goes to ``pruned``), nor a row that no variable
    able to begin a match fits; the result is the same."""
    program = compile_row_pattern(query.pattern)
    necessary = necessary_conditions(query) if prune else ()
    for key, part in partitions(query, rows):
        fitting = fitting_rows(query, part)
        if not may_match(necessary, fitting):
            if pruned is not None:
                pruned.append(key)
            continue
        ts = [int(r["ts"]) for r in part] if query.within_ns is not None else None
        for kind, item in partition_matches(query, program, part, ts, fitting, prune):
            if kind == "match":
                yield PartitionMatch(key, part, item)
            elif with_unmatched:
                yield key, part, item


def measures_at(query, pm: PartitionMatch, current: int | None) -> dict:
    m = pm.match
    f = Frame(pm.rows, m.start, list(m.labels), current, True, m.number, query.subset_map)
    return {ms.name: value(ms.expr, f) for ms in query.measures}


def final_measures(query, pm: PartitionMatch) -> dict:
    """The measures as of the match's last row (ONE ROW PER MATCH)."""
    return measures_at(query, pm, None if pm.match.empty else pm.match.end)


def output_rows(query: RowPatternQuery, rows: Iterable[dict], prune: bool = True
                ) -> list[dict]:
    """The statement's result over ``rows`` (dicts of the input's columns), as Trino
    returns it: a list of dicts whose keys are in Trino's column order (``prune``: skip
    the partitions that fail a necessary condition; the same result)."""
    rows = list(rows)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    order_cols = [k.column for k in query.order_by]
    rest = [c for c in columns if c not in query.partition_by and c not in order_cols]
    null_measures = {m.name: None for m in query.measures}
    out = []

    def row_out(key, row, measures):
        head = dict(zip(query.partition_by, key))
        if not query.all_rows:
            return {**head, **measures}
        ordered = [(f"{c}" if i == 0 or c not in order_cols[:i] else f"{c}_{i}", column_value(row, c))
                   for i, c in enumerate(order_cols)]
        return {**head, **dict(ordered), **measures, **{c: row[c] for c in rest}}

    for item in matches(query, rows, with_unmatched=True, prune=prune):
        if not isinstance(item, PartitionMatch):
            key, part, r = item
            out.append(row_out(key, part[r], null_measures))
            continue
        m = item.match
        if not query.all_rows:
            out.append(row_out(item.key, None, final_measures(query, item)))
        elif m.empty:
            if query.rows_per_match != ROWS_ALL_OMIT:
                out.append(row_out(item.key, item.rows[m.start], measures_at(query, item, None)))
        else:
            for i, excluded in enumerate(m.excluded):
                if not excluded:
                    r = m.start + i
                    out.append(row_out(item.key, item.rows[r], measures_at(query, item, r)))
    return out


def event_rows(events: Iterable[Event]) -> list[dict]:
    """Events as rows: ``event_id``, ``ts`` (a timestamp) and their attributes, in
    processing order."""
    return [{"event_id": e.id, "ts": Ts(e.ts),
             **{k: v for k, v in e.attrs.items() if k not in ("event_id", "ts")}}
            for e in events]


def match_json(query: RowPatternQuery, pm: PartitionMatch) -> dict:
    """One match as ``ses match`` prints it: the event ids each variable binds (an empty
    match binds none), the partition, the match number and the measures as of its last
    row."""
    m = pm.match
    bindings = {v: [] for v in query.variables}
    for i, label in enumerate(m.labels):
        bindings[label].append(pm.rows[m.start + i].get("event_id"))
    out = {"pattern": query.name}
    if query.partition_by:
        out["partition"] = {c: json_value(v) for c, v in zip(query.partition_by, pm.key)}
    first, last = (None, None) if m.empty else (pm.rows[m.start], pm.rows[m.end])
    out.update(match_number=m.number,
               start=None if first is None else json_value(first.get("ts")),
               end=None if last is None else json_value(last.get("ts")),
               bindings=bindings)
    if query.measures:
        out["measures"] = {k: json_value(v) for k, v in final_measures(query, pm).items()}
    return out
