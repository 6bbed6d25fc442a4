"""The nightly run of the committed ``.sql`` row patterns: each partition matched on the
executors, ``matches/NAME`` published with typed measures in one commit that carries the
run's row, equal to the local matcher over the same events; a second night with nothing
new commits nothing."""

import pyarrow as pa
from deltalake import DeltaTable

from jobs.core.local.row_patterns import load_row_pattern
from jobs.core.rowpattern.output import event_rows
from jobs.core.rowpattern.table import match_schema, match_table
from jobs.lake import store as lk
from jobs.lake.match_commits import RUN_KEY

from ..conftest import ROOT
from ..lakes import events_from_lake

PATTERNS = ["sepsis_crp_falls_then_rebounds", "sepsis_er_treatment_then_admission"]


def test_row_patterns_are_published_as_the_local_matcher_finds(nightly):
    profile, rows, log = nightly
    outcomes = {r["pattern"]: r for r in rows if r.get("pattern") in PATTERNS}
    assert set(outcomes) == set(PATTERNS), log
    lake = lk.Lake(profile.lake)
    for name in PATTERNS:
        assert outcomes[name]["status"] == "success", outcomes[name]
        pf = load_row_pattern(ROOT / "patterns" / f"{name}.sql")
        dt = DeltaTable(lake.matches(name))
        table = dt.to_pyarrow_table()
        events = events_from_lake(profile, "sepsis")
        schema = match_schema(pf.query, {"patient": "string", "value": "double",
                                         "event_type": "string"})
        want = match_table(pf.query, event_rows(events), schema)
        assert table.num_rows == want.num_rows == outcomes[name]["matches"] > 0
        got = table.select(schema.names).sort_by([("match_id", "ascending")])
        assert got.equals(want.sort_by([("match_id", "ascending")]).cast(got.schema))
        assert set(table.column("pattern_version").to_pylist()) == {pf.version}
        commit = dt.history(1)[0]
        assert RUN_KEY in commit and commit["ses.inserted"] == str(table.num_rows)
    types = DeltaTable(lake.matches(PATTERNS[0])).schema().to_arrow()
    assert types.field("peak_crp").type == pa.float64()
    assert types.field("falls").type == pa.int64()
    assert types.field("seconds_to_rebound").type == pa.float64()
