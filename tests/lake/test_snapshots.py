"""A local table's latest snapshot is opened once and kept while its log gains no commit
(``Lake.snapshot``): every read after a commit, a table made again at the same path or a
commit file cut short sees the table as a fresh open does (pure: no Spark)."""

import shutil
import threading

import pyarrow as pa
import pytest

from jobs.lake import store as lk


def _lake(tmp_path) -> tuple[lk.Lake, str]:
    lake = lk.Lake(str(tmp_path / "lake"))
    return lake, lake.runs()


def _rows(n: int, first: int = 0) -> pa.Table:
    return pa.table({"run_id": [f"r{k}" for k in range(first, first + n)],
                     "day": ["2026-01-01"] * n})


def test_a_snapshot_is_kept_until_the_next_commit(tmp_path):
    lake, path = _lake(tmp_path)
    assert lake.snapshot(path) is None
    with pytest.raises(FileNotFoundError, match="no Delta table"):
        lake.snapshot(path, required=True)
    lake.write(path, _rows(2), mode="append")
    first = lake.snapshot(path)
    assert lake.snapshot(path) is first and first.version() == 0
    assert lake.read_arrow(path).num_rows == 2
    lake.write(path, _rows(3, 2), mode="append")
    second = lake.snapshot(path)
    assert second is not first and second.version() == 1
    assert lake.read_arrow(path).num_rows == 5
    assert first.version() == 0  # the kept object was not moved on: it may still be read


def test_a_table_made_again_at_the_same_path_is_read_anew(tmp_path):
    lake, path = _lake(tmp_path)
    lake.write(path, _rows(2), mode="append")
    kept = lake.snapshot(path)
    assert lake.read_arrow(path).num_rows == 2
    shutil.rmtree(path)
    lake.write(path, _rows(7, 10), mode="append")  # version 0 again, other rows
    again = lake.snapshot(path)
    assert again is not kept and again.version() == 0
    assert sorted(lake.read_arrow(path, ["run_id"]).column(0).to_pylist()) == \
        sorted(f"r{k}" for k in range(10, 17))


def test_a_latest_commit_cut_short_is_a_broken_table(tmp_path):
    lake, path = _lake(tmp_path)
    for k in range(2):
        lake.write(path, _rows(1, k), mode="append")
    lake.snapshot(path)
    commit = tmp_path / "lake" / "runs" / "_delta_log" / f"{1:020d}.json"
    commit.write_bytes(commit.read_bytes()[: commit.stat().st_size // 2])
    with pytest.raises(lk.BrokenTable, match="runs cannot be read"):
        lake.snapshot(path)


def test_threads_read_one_kept_snapshot_while_another_commits(tmp_path):
    lake, path = _lake(tmp_path)
    lake.write(path, _rows(1), mode="append")
    errors, seen = [], [[] for _ in range(3)]

    def read(counts: list) -> None:
        try:
            for _ in range(40):
                dt = lake.snapshot(path)
                dt.history(5)
                dt.file_uris()
                counts.append(lake.read_arrow(path).num_rows)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    readers = [threading.Thread(target=read, args=(counts,)) for counts in seen]
    for t in readers:
        t.start()
    for k in range(1, 6):
        lake.write(path, _rows(1, k), mode="append")
    for t in readers:
        t.join()
    assert not errors, errors[:3]
    assert all(counts == sorted(counts) for counts in seen)  # never an older snapshot
    assert lake.read_arrow(path).num_rows == 6


def test_a_match_table_is_documented_again_only_where_it_differs(tmp_path):
    """The pattern's metadata is compared on the kept snapshot: nothing changed, no
    commit; a changed description is written, and read back by the next snapshot."""
    from dataclasses import replace

    from jobs.core.language.patternfile import load_pattern
    from jobs.lake.table_docs import document_match_table

    from ..conftest import ROOT

    pattern = load_pattern(ROOT / "patterns" / "sepsis_rising_crp_then_icu.yaml")
    lake = lk.Lake(str(tmp_path / "lake"))
    path = lake.matches(pattern.name)
    lake.write(path, pa.table({"match_id": ["m1"], "pattern": [pattern.name]}))
    assert document_match_table(lake, pattern)
    version = lake.snapshot(path).version()
    assert not document_match_table(lake, pattern)
    assert lake.snapshot(path).version() == version  # no commit
    other = replace(pattern, description="Rising CRP, then the ICU: said otherwise.")
    assert document_match_table(lake, other)
    meta = lake.snapshot(path).metadata()
    assert lake.snapshot(path).version() > version
    assert "said otherwise" in meta.description
    assert not document_match_table(lake, other)
