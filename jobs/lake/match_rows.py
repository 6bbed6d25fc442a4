"""The published shape of a pattern's matches (docs/semantics.md) and the conversion of
staged match rows into it.

``MatchRows`` is small and picklable: the driver builds it once per run (it needs the
pattern and the source's column types), and the executors convert their own batches with
it while they write the match table's data files (``jobs.lake.delta_files``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa

from jobs.core.pattern import Disjunction, Pattern
from jobs.config import load_sources
from jobs.core.events import parse_ts
from jobs.core.measures import measure_types
from jobs.core.window import select_types

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

    @classmethod
    def of(cls, pattern: Pattern | Disjunction, run_id: str) -> MatchRows:
        window = pattern.kind == "window"
        select = None
        if window or pattern.measure_names:
            source = load_sources().get(pattern.source)
            columns = dict(source.columns) if source else {}
            select = tuple((select_types(pattern, columns) if window
                            else measure_types(pattern, columns)).items())
        return cls(pattern.name, pattern.version, run_id,
                   () if window else tuple(pattern.partition_attributes),
                   isinstance(pattern, Disjunction), select)

    def convert(self, staged: pa.Table | pa.RecordBatch) -> pa.Table:
        """Staged match rows (``jobs.pipeline.phase1``'s output, ``kind = 'match'``) as
        published rows."""
        t = staged if isinstance(staged, pa.Table) else pa.Table.from_batches([staged])
        n = t.num_rows
        bindings = [list(json.loads(b).items()) for b in t.column("bindings").to_pylist()]
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
            "bindings": pa.array(bindings, BINDINGS),
        })
        if self.select is not None:
            cols.update(self._select_columns(t.column("values").to_pylist()))
        cols["run_id"] = pa.array([self.run_id] * n, pa.string())
        return pa.table(cols)

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
