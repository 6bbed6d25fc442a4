"""Event ids never change: a fresh ingest of the committed landing files gives every event
the id (and the time) recorded in ``golden/ingest_ids.json`` before ingest was rewritten,
so that existing lakes, match tables, retractions and first-ever states stay valid. The
ids of sources without an id column are content hashes with an occurrence number within
the whole file."""

import hashlib
import json
from pathlib import Path

from deltalake import DeltaTable

from jobs.config import load_sources
from jobs.lake.store import Lake
from jobs.pipeline.ingest import ingest

from ..conftest import ROOT

GOLDEN = json.loads((Path(__file__).parent / "golden" / "ingest_ids.json").read_text())


def test_a_fresh_ingest_gives_the_recorded_ids(tmp_path):
    lake = Lake.of(str(tmp_path / "lake"))
    got = {}
    for name, source in load_sources().items():
        if not source.landing:
            continue
        ingest(source, str(ROOT / "data" / "landing"), lake, "ids")
        t = DeltaTable(lake.events(name)).to_pyarrow_table(columns=["event_id", "ts"])
        rows = sorted(zip(t.column("event_id").to_pylist(),
                          (x.isoformat() for x in t.column("ts").to_pylist())))
        ids = [i for i, _ in rows]
        got[name] = {
            "events": len(ids),
            "ids_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
            "ids_and_times_sha256": hashlib.sha256(
                "\n".join(f"{i} {ts}" for i, ts in rows).encode()).hexdigest(),
            "repeated_content": sum(1 for i in ids if "-" in i and not i.endswith("-1")),
            "first": ids[:3]}
    assert got == GOLDEN["sources"]
