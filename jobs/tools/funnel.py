"""``ses funnel``: how far each partition got in a pattern, step by step, on the lake's
events (docs/semantics.md, "Funnels").

The steps are ``core.language.funnel_steps``'s; the engine (``core.engine.funnel``)
runs each step on the source's events, read once from the lake. Every event of the
source is read, not only those some variable fits: what stopped a window is found by
leaving one condition out, and an event no variable fits may bind then.
"""

from __future__ import annotations

from pathlib import Path

from jobs.config import Profile
from jobs.core.engine.columns import from_arrow, from_events
from jobs.core.engine.funnel import funnel as engine_funnel
from jobs.core.engine.marks import with_marks
from jobs.core.errors import InputError
from jobs.core.language.funnel_steps import AFTER_MATCH, FunnelRow
from jobs.lake.funnels import latest, read_funnels
from jobs.lake.store import Lake
from jobs.project.patterns import load_catalog, pattern_paths
from jobs.spark.tables import read_spark
from jobs.tools.explain import why_not_events


def pattern_file(name_or_path: str) -> Path:
    """A pattern file given as a path or by its name (``patterns/NAME.yaml``)."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    found = {p.stem: p for p in pattern_paths()}
    if name_or_path in found:
        return found[name_or_path]
    near = sorted(found, key=lambda n: -len(set(n) & set(name_or_path)))[:3]
    raise InputError(f"no pattern file {name_or_path!r} (a path or a name in patterns/; "
                     f"nearest: {', '.join(near) or 'none'})")


def funnel_of(spark, profile: Profile, name_or_path: str, partition: str | None = None
              ) -> tuple[object, list[FunnelRow]]:
    """(the pattern, its funnel over the lake's events; of one partition with
    ``partition``: VALUE, or ATTR=VALUE,... for several partition attributes)."""
    path = pattern_file(name_or_path)
    pattern = load_catalog([path]).get(path)
    if pattern.kind == "window":
        raise InputError(f"{pattern.name} is a window pattern: a funnel has the steps of a "
                         "sequence pattern (its sets)")
    lake = Lake.of_profile(profile)
    table = lake.events(pattern.source)
    if not lake.exists(table):
        raise InputError(f"no events of source {pattern.source!r} in {lake.root}: run "
                         "`ses run` (or `ses ingest`) first")
    events = read_spark(spark, lake, table)
    if partition:
        rows, _, _ = why_not_events(events, pattern, partition, None)
        cols = from_events(rows, pattern.stored_attributes)
    else:
        wanted = ["event_id", "ts", *(a for a in pattern.stored_attributes if a != "ts")]
        cols = from_arrow(events.select(*wanted).toArrow(), pattern.stored_attributes)
    if pattern.marks_needed:  # the events read are the whole history
        marked, cols = with_marks(pattern, cols)
        return pattern, engine_funnel(marked, cols)
    return pattern, engine_funnel(pattern, cols)


def funnel_lines(pattern, rows: list[FunnelRow]) -> list[str]:
    """The funnel as a table: one line per step, then what stopped the windows there."""
    out = [f"{pattern.name}: how far the windows got (a window: an event and its partition's "
           f"events within {pattern.within})"]
    width = max((len(_step_text(r)) for r in rows), default=10)
    out.append(f"  {'step':<{width}}  {'partitions':>10}  {'windows':>9}")
    for r in rows:
        out.append(f"  {_step_text(r):<{width}}  {r.partitions:>10,}  {r.windows:>9,}")
        for label, n in r.stopped:
            if label == AFTER_MATCH:  # the last step: matches the rule did not keep
                out.append(f"  {'':<{width}}  with matches that after_match "
                           f"{getattr(pattern, 'after_match', '')} did not keep (an earlier "
                           f"kept match overlaps them): {n:,}")
                continue
            out.append(f"  {'':<{width}}  stopped before the next step by {label}: {n:,}")
    return out


def _step_text(r: FunnelRow) -> str:
    alt = f"alternative {r.alternative}, " if r.alternative else ""
    neg = f" ({', '.join(r.negations)})" if r.negations else ""
    return f"{alt}{r.step}. {', '.join(r.variables)}{neg}"


def stored_funnel(profile: Profile, name_or_path: str, run: str) -> tuple[object, list[FunnelRow]]:
    """The funnel a run recorded for the pattern (``run``: a run id, or ``latest``)."""
    path = pattern_file(name_or_path)
    pattern = load_catalog([path]).get(path)
    rows = read_funnels(Lake.of_profile(profile), pattern.name)
    if run != "latest":
        rows = [r for r in rows if r.run_id == run]
    rows = latest(rows)
    if not rows:
        raise InputError(f"no funnel of {pattern.name} recorded"
                         + ("" if run == "latest" else f" by run {run}")
                         + ": `ses run` records one each night (match.funnels)")
    return pattern, [FunnelRow(r.alternative, r.step, tuple(r.variables.split(", ")),
                               tuple(x for x in r.negations.split(", ") if x),
                               r.partitions, r.windows,
                               tuple(sorted(r.stops.items(), key=lambda kv: (-kv[1], kv[0]))))
                     for r in rows]
