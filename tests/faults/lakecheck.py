"""What "the lake is consistent" means, checked after every fault."""

from __future__ import annotations

import os
from collections import Counter

from deltalake import DeltaTable

from jobs.lake import store as lk


def tables(root: str) -> dict[str, str]:
    out = {}
    for kind in ("events", "quarantine", "matches"):
        folder = os.path.join(root, kind)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            out[f"{kind}/{name}"] = os.path.join(folder, name)
    for name in ("runs", "ingest_log", "retractions"):
        if lk.Lake(root).exists(os.path.join(root, name)):
            out[name] = os.path.join(root, name)
    return out


def check(root: str) -> dict[str, int]:
    """Every table readable; no duplicate event_id, match_id or ingest-log entry; for each
    pattern the run log's inserted minus deleted equals the table's rows. Returns the row
    count per table (to compare two lakes)."""
    counts = {}
    for name, path in tables(root).items():
        t = DeltaTable(path).to_pyarrow_table()
        counts[name] = t.num_rows
        if name.startswith("events/"):
            dup = [k for k, n in Counter(t.column("event_id").to_pylist()).items() if n > 1]
            assert not dup, f"{name}: duplicate event_id {dup[:3]}"
        if name.startswith("matches/"):
            dup = [k for k, n in Counter(t.column("match_id").to_pylist()).items() if n > 1]
            assert not dup, f"{name}: duplicate match_id {dup[:3]}"
        if name == "ingest_log":
            keys = Counter(zip(t.column("source").to_pylist(), t.column("file").to_pylist(),
                               t.column("sha256").to_pylist()))
            assert all(n == 1 for n in keys.values()), f"ingest_log: duplicate rows {keys}"
    runs = DeltaTable(os.path.join(root, "runs")).to_pyarrow_table().to_pylist() \
        if "runs" in counts else []
    for name in [n for n in counts if n.startswith("matches/")]:
        pattern = name.split("/", 1)[1]
        ok = [r for r in runs if r["pattern"] == pattern and r["status"] == "success"]
        net = sum((r["inserted"] or 0) - (r["deleted"] or 0) for r in ok)
        assert net == counts[name], f"{name}: runs log says {net} rows, table has {counts[name]}"
    return counts
