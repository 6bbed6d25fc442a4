"""The published shape of a pattern's matches (docs/semantics.md) and the conversion of
staged match rows into it.

``MatchRows`` is small and picklable: the driver builds it once per run (it needs the
pattern and the source's column types), and the executors convert their own batches with
it while they write the match table's data files (``jobs.lake.delta_files``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa

from jobs.config import load_sources
from jobs.core.language.events import parse_ts
from jobs.core.language.measures import measure_types
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.core.language.window import BINDINGS as WINDOW_BINDINGS
from jobs.core.language.window import select_types

BINDINGS = pa.map_(pa.string(), pa.list_(pa.string()))
TS = pa.timestamp("us", tz="UTC")
SELECT_TYPES = {"string": pa.string(), "double": pa.float64(), "integer": pa.int64(),
                "timestamp": TS}


@dataclass(frozen=True)
class MatchRows:
    name: str
    version: str
    run_id: str
    keys: tuple[str, ...]  # partition attributes (a window pattern publishes none)
    disjunctive: bool  # a disjunction publishes which alternative matched (1, 2, ...)
    # (column, type) of a window pattern's select values or a sequence pattern's measures
    select: tuple[tuple[str, str], ...] | None
    # per alternative (its number, None for a pattern of one), the names its bindings
    # have, in the order phase 2 writes them
    variables: tuple[tuple[int | None, tuple[str, ...]], ...] = ()

    @classmethod
    def of(cls, pattern: Pattern | Disjunction, run_id: str) -> MatchRows:
        window = pattern.kind == "window"
        select = None
        if window or pattern.measure_names:
            source = load_sources().get(pattern.source)
            columns = dict(source.columns) if source else {}
            select = tuple((select_types(pattern, columns) if window
                            else measure_types(pattern, columns)).items())
        variables = ((None, WINDOW_BINDINGS),) if window else tuple(
            (a.alternative, tuple(v.name for v in a.variables)) for a in pattern.alternatives)
        return cls(pattern.name, pattern.version, run_id,
                   () if window else tuple(pattern.partition_attributes),
                   isinstance(pattern, Disjunction), select, variables)

    def convert(self, staged: pa.Table | pa.RecordBatch) -> pa.Table:
        """Staged match rows (``jobs.pipeline.match.phase1``'s output, ``kind = 'match'``) as
        published rows."""
        t = staged if isinstance(staged, pa.Table) else pa.Table.from_batches([staged])
        n = t.num_rows
        cols = {
            "match_id": t.column("match_id"),
            "pattern": pa.array([self.name] * n, pa.string()),
            "pattern_version": pa.array([self.version] * n, pa.string()),
        }
        if self.disjunctive:
            cols["alternative"] = t.column("alternative").cast(pa.int32())
        for k in self.keys:
            cols[k] = t.column(k)
        cols.update({
            "start_ts": t.column("start_ts").cast(TS),
            "end_ts": t.column("end_ts").cast(TS),
            "n_events": t.column("n_events").cast(pa.int64()),
            "bindings": self.bindings(t),
        })
        if self.select is not None:
            cols.update(self._select_columns(t.column("values").to_pylist()))
        cols["run_id"] = pa.array([self.run_id] * n, pa.string())
        return pa.table(cols)

    def bindings(self, t: pa.Table) -> pa.Array:
        """The staged ``bindings`` (JSON text) as the published map, in the same order:
        parsed by Arrow's JSON reader, one alternative at a time with its variables as
        the schema (``json.loads`` per match costs seconds per million matches). Text
        that does not fit that schema is parsed match by match."""
        texts = t.column("bindings").combine_chunks()
        if len(texts) == 0 or texts.null_count or not self.variables:
            return _bindings_per_row(texts)
        alternative = (t.column("alternative").to_numpy(zero_copy_only=False)
                       if self.disjunctive else None)
        pieces, order = [], []
        for number, names in self.variables:
            rows = (np.arange(len(texts)) if alternative is None
                    else np.flatnonzero(alternative == number))
            if len(rows):
                try:
                    pieces.append(_bindings_map(texts.take(pa.array(rows)), names))
                except (pa.ArrowInvalid, ValueError):
                    return _bindings_per_row(texts)
                order.append(rows)
        rows = np.concatenate(order) if order else np.zeros(0, np.int64)
        if len(rows) != len(texts):  # an alternative this pattern does not have
            return _bindings_per_row(texts)
        return pa.concat_arrays(pieces).take(pa.array(np.argsort(rows, kind="stable")))

    def _select_columns(self, values_json: list[str | None]) -> dict[str, pa.Array]:
        """A window pattern's select values or a sequence pattern's measures (JSON per
        match), one typed column each."""

        rows = [json.loads(v) if v else {} for v in values_json]
        out = {}
        for name, kind in self.select:
            column = [r.get(name) for r in rows]
            if kind == "timestamp":
                column = [None if v is None else
                          datetime.fromtimestamp(parse_ts(v) / 1e9, tz=timezone.utc)
                          for v in column]
            elif kind == "integer":
                column = [None if v is None else int(v) for v in column]
            elif kind == "string":
                column = [None if v is None else str(v) for v in column]
            out[name] = pa.array(column, SELECT_TYPES[kind])
        return out


def _bindings_per_row(texts: pa.Array) -> pa.Array:
    return pa.array([None if b is None else list(json.loads(b).items())
                     for b in texts.to_pylist()], BINDINGS)


def _bindings_map(texts: pa.Array, names: tuple[str, ...]) -> pa.Array:
    """JSON objects of variable -> event ids, each naming a subset of ``names`` in that
    order, as a map array (a variable absent from an object has no entry)."""
    import io

    import pyarrow.json as pj

    schema = pa.schema([pa.field(v, pa.list_(pa.string())) for v in names])
    data = "\n".join(texts.to_pylist()).encode()
    parsed = pj.read_json(io.BytesIO(data), parse_options=pj.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="error"))
    if parsed.num_rows != len(texts):
        raise ValueError("bindings: not one JSON object per match")
    n = parsed.num_rows
    fields = [parsed.column(v).combine_chunks() for v in names]
    present = np.stack([f.is_valid().to_numpy(zero_copy_only=False) for f in fields], axis=1)
    rows, variables = np.nonzero(present)  # row by row, each in the order of names
    items = pa.concat_arrays(fields).take(pa.array(variables * n + rows))
    keys = pa.array(list(names), pa.string()).take(pa.array(variables))
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(present.sum(axis=1), out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items).cast(BINDINGS)
