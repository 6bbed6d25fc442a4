"""The driver's part of ingest before any task runs: which landing files are pending. Each
file is known by its sha256, remembered by its size and modification time so that a night
hashes only the files that are new or changed; the ingest log says which (file, sha256)
were ingested. The files themselves and their splits: ``jobs.landing.splits``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from jobs.lake import store as lk


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Digests:
    """The sha256 of each landing file of a source, remembered by its size and modification
    time (``_digests/<source>.json`` in the lake): a night hashes only the files that are
    new or changed, not every file of the history again."""

    def __init__(self, lake: lk.Lake, source: str):
        self.lake, self.uri = lake, lk.join(lake.root, "_digests", f"{source}.json")
        try:
            self.old = json.loads(lake.read_text(self.uri))
        except (FileNotFoundError, OSError, ValueError):
            self.old = {}
        self.new: dict[str, list] = {}

    def of(self, label: str, path: Path) -> str:
        st = path.stat()
        key = [st.st_size, st.st_mtime_ns]
        kept = self.old.get(label)
        digest = kept[2] if isinstance(kept, list) and kept[:2] == key else sha256(path)
        self.new[label] = [*key, digest]
        return digest

    def save(self) -> None:
        if self.new != self.old:
            self.lake.write_text(self.uri, json.dumps(self.new))
