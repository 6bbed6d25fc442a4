"""What the tests of a lake on real Spark and Delta share: the events and the published
match ids of a lake, the local matcher's ids, a run's staged rows, a lake of the
chemotherapy example."""

import shutil
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from jobs.core.engine.output import match_id_of
from jobs.core.engine.window_matcher import windows_of
from jobs.core.language.events import Event, events_from_arrow
from jobs.core.local.runner import run
from jobs.lake import store as lk

from .conftest import make_profile

_EVENTS: dict[tuple[str, int], pa.Table] = {}


def events_from_lake(profile, source: str) -> list[Event]:
    """The source's events in the lake, its files read once per table version (a test that
    adds events makes a new version): the sepsis events' 504 files take a second, and most
    tests of a whole lake ask for them once per pattern."""
    dt = DeltaTable(lk.Lake(profile.lake).events(source))
    key = (dt.table_uri, dt.version())
    if key not in _EVENTS:
        if len(_EVENTS) >= 4:
            _EVENTS.pop(next(iter(_EVENTS)))
        _EVENTS[key] = dt.to_pyarrow_table()
    return events_from_arrow(_EVENTS[key])


def local_ids(profile, pattern, low=None, high=None) -> set[str]:
    events = events_from_lake(profile, pattern.source)
    if pattern.kind == "window":
        found = [(w, w.first.ts) for w in windows_of(pattern, events)[0]]
    else:
        found = [(m, m.start.ts) for m in run(pattern, events)[0]]
    return {match_id_of(pattern, m) for m, start in found
            if (low is None or start >= low) and (high is None or start < high)}


def published_ids(profile, name: str) -> set[str]:
    t = DeltaTable(lk.Lake(profile.lake).matches(name)).to_pyarrow_table(columns=["match_id"])
    return set(t.column("match_id").to_pylist())


def staged_rows(lake, name, run_id) -> list[tuple]:
    import pyarrow.dataset as pads

    t = pads.dataset(lake.staging(name, run_id), format="parquet").to_table()
    t = t.filter(pa.compute.equal(t.column("kind"), "match")).drop_columns(["stats"])
    return sorted(tuple(str(v) for v in row.values()) for row in t.to_pylist())


def chemo_profile(tmp_path):
    landing = tmp_path / "landing"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "landing" / "chemo_mw",
                    landing / "chemo_mw")
    return make_profile(tmp_path, landing=landing), landing


P1 = str(Path(__file__).resolve().parents[1] / "patterns" / "mw_chemo_p1.yaml")
