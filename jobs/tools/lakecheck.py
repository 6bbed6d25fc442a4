"""``ses check``: an fsck for the lake, the invariants every writer keeps (and the fault
tests check after each kill), and ``ses vacuum``: the files no snapshot names.

The invariants (``check_lake``; each violation is one line naming the table):

* every table can be read (its log and its data files), and no data file stores
  ``string_view`` (``jobs.lake.rewrite``; the next writer repairs it);
* no duplicate ``event_id`` in an events table, ``match_id`` in a match table, or
  (source, file, sha256) in the ingest log;
* for each pattern, the run log's inserted minus deleted equals its match table's rows;
* every event a published match binds is in its source's events table;
* a pattern's partition state (history conditions, partition facts) counts, per
  partition, the events its watermark has seen (unless a retraction since then makes the
  next run rebuild it);
* nothing in staging that no run owns (a run row or a run plan names it).

Read-only: run it under the lake lock (no writer between two of its reads).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from jobs.lake import rewrite
from jobs.lake import store as lk
from jobs.lake.maintenance import all_tables
from jobs.lake.views import lake_tables, match_sources
from jobs.pipeline.upkeep.reconcile import orphan_staging
from jobs.status import SUCCESS

RETENTION_HOURS = 168  # VACUUM's default: a reader's snapshot up to a week old stays whole


@dataclass(frozen=True)
class Finding:
    table: str
    problem: str

    def __str__(self) -> str:
        return f"{self.table}: {self.problem}"


def _duplicates(values: list) -> list:
    return [k for k, n in Counter(values).items() if n > 1]


def check_lake(lake: lk.Lake) -> list[Finding]:
    """Every violation of the lake's invariants (none: the lake is consistent)."""
    found: list[Finding] = []
    tables = {name: path for name, path in _all_tables(lake).items()}
    data: dict[str, pa.Table] = {}
    for name, path in tables.items():
        try:
            lake.check_files(path)
            t = lake.read_arrow(path)
        except lk.BrokenTable as exc:
            found.append(Finding(name, str(exc).split("; docs/")[0]))
            continue
        if t is None:
            continue
        data[name] = t
        views = rewrite.view_files(lake, path)
        if views:
            found.append(Finding(name, f"{len(views)} data file(s) store string_view (the next "
                                       "`ses run` or `ses ingest` rewrites them)"))
        key = {"events": "event_id", "matches": "match_id"}.get(name.split("/")[0])
        if key and key in t.column_names:
            dup = _duplicates(t.column(key).to_pylist())
            if dup:
                found.append(Finding(name, f"{len(dup)} duplicate {key}(s), e.g. {dup[0]}"))
    log = data.get("ingest_log")
    if log is not None:
        dup = _duplicates(list(zip(*(log.column(c).to_pylist()
                                     for c in ("source", "file", "sha256")))))
        if dup:
            found.append(Finding("ingest_log", f"{len(dup)} entries logged twice, e.g. {dup[0]}"))
    runs = data["runs"].to_pylist() if "runs" in data else []
    found += _run_totals(data, runs)
    found += _bound_events(lake, data)
    found += _partition_states(lake, data)
    found += _staging(lake, runs)
    return found


def _all_tables(lake: lk.Lake) -> dict[str, str]:
    out = all_tables(lake)
    return {k: v for k, v in out.items() if lake.exists(v) or k.split("/")[0] in
            ("events", "matches")}


def _run_totals(data: dict[str, pa.Table], runs: list[dict]) -> list[Finding]:
    out = []
    for name, t in data.items():
        if not name.startswith("matches/"):
            continue
        pattern = name.split("/", 1)[1]
        net = sum((r["inserted"] or 0) - (r["deleted"] or 0) for r in runs
                  if r["pattern"] == pattern and r["status"] == SUCCESS)
        if net != t.num_rows:
            out.append(Finding(name, f"the run log's inserted minus deleted is {net}, the "
                                     f"table has {t.num_rows} rows"))
    return out


def _bound_events(lake: lk.Lake, data: dict[str, pa.Table]) -> list[Finding]:
    """Matches bound to an event that is not in their source (retracted, lost)."""
    out = []
    sources = match_sources(lake, lake_tables(lake))
    ids: dict[str, pa.Array] = {}
    for name, t in data.items():
        if not name.startswith("matches/") or "bindings" not in t.column_names:
            continue
        source = sources.get(name.split("/", 1)[1])
        events = data.get(f"events/{source}")
        if events is None or not pa.types.is_map(t.column("bindings").type):
            continue
        if source not in ids:
            ids[source] = events.column("event_id").combine_chunks()
        bound = pa.chunked_array([c.items.flatten() for c in t.column("bindings").chunks],
                                 pa.string())
        missing = pc.unique(pc.filter(bound, pc.invert(pc.is_in(bound, value_set=ids[source]))))
        if len(missing):
            out.append(Finding(name, f"{len(missing)} bound event(s) are not in events/{source}, "
                                     f"e.g. {missing[0].as_py()} (a retraction the next run "
                                     "re-matches, or a lost events table)"))
    return out


def _partition_states(lake: lk.Lake, data: dict[str, pa.Table]) -> list[Finding]:
    """A partition state whose facts disagree with the events its watermark has seen."""
    out = []
    sources = match_sources(lake, lake_tables(lake))
    retracted: dict[str, list] = {}  # per source, when its retractions were made
    if "retractions" in data:
        for r in data["retractions"].select(["source", "retracted_at"]).to_pylist():
            retracted.setdefault(r["source"], []).append(r["retracted_at"])
    for name, state in data.items():
        if not name.startswith("partition_state/") or not state.num_rows:
            continue
        source = sources.get(name.split("/", 1)[1])
        events = data.get(f"events/{source}")
        watermark = pc.max(state.column("watermark")).as_py()
        if events is None or any(t > watermark for t in retracted.get(source, ())):
            continue  # a retraction since: the next run rebuilds the state
        facts = state.filter(pc.equal(state.column("item"), "facts"))
        names = state.column_names
        attrs = [c for c in names[names.index("x") + 1:names.index("times")]
                 if facts.num_rows and facts.column(c).null_count == 0]
        seen = events.filter(pc.less_equal(events.column("ingested_at"), pa.scalar(
            watermark, events.column("ingested_at").type)))
        counts = {tuple(r[a] for a in attrs): r["event_id_count"] for r in seen.group_by(
            attrs).aggregate([("event_id", "count")]).to_pylist()} if attrs else {
            (): seen.num_rows}
        wrong = [r for r in facts.select([*attrs, "count"]).to_pylist()
                 if counts.get(tuple(r[a] for a in attrs), 0) != r["count"]]
        if wrong:
            out.append(Finding(name, f"{len(wrong)} partition(s) whose count differs from "
                                     f"the events it has seen, e.g. {wrong[0]} (delete the "
                                     "table: the next run rebuilds it)"))
    return out


def _staging(lake: lk.Lake, runs: list[dict]) -> list[Finding]:
    return [Finding(f"staging/{pattern}/{run_id}", "no run in progress owns it (the next "
                    "run removes it)") for pattern, run_id in orphan_staging(lake, runs)]


def vacuum(lake: lk.Lake, retention_hours: int = RETENTION_HOURS,
           dry_run: bool = False) -> dict[str, list[str]]:
    """Delete, in every table, the data files no snapshot of the last ``retention_hours``
    names (a killed write's files, the files a rewrite replaced): {table: files}."""
    out = {}
    for name, path in _all_tables(lake).items():
        dt = lake.read_table(path)
        if dt is None:
            continue
        gone = dt.vacuum(retention_hours=retention_hours, dry_run=dry_run, full=True,
                         enforce_retention_duration=retention_hours >= RETENTION_HOURS)
        if gone:
            out[name] = gone
    return out
