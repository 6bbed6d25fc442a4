"""Bad inputs fail only what they touch: duplicate names, bad pattern files, bad landing
files, corrections, timestamps out of range, retraction, and the matchers' memory
budget. In-process on the shared SparkSession (real Spark, Delta and GX)."""

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs.config import TimeRange, load_sources
from jobs.lake import store as lk
from jobs.lake.store import Lake
from jobs.pipeline.ingest import commit, describe, stage
from jobs.pipeline.run import run_all
from jobs.pipeline.upkeep.retract import retract
from jobs.project.patterns import load_catalog, pattern_paths

from ..conftest import ROOT, make_profile
from .conftest import P1
from .lakecheck import check

DATE = "2010-08-30"
quiet = dict(echo=lambda *_: None)


def _profile(tmp_path, *sources, **kw):
    landing = tmp_path / "landing"
    for s in sources or ("chemo_mw",):
        shutil.copytree(ROOT / "data" / "landing" / s, landing / s)
    return make_profile(tmp_path, landing=landing, **kw), landing


def _runs(profile):
    return DeltaTable(lk.Lake(profile.lake).runs()).to_pyarrow_table().to_pylist()


def test_duplicate_names_fail_both_files_and_never_touch_a_table(spark, tmp_path, monkeypatch):
    profile, _ = _profile(tmp_path)
    folder = tmp_path / "patterns"
    folder.mkdir()
    text = Path(P1).read_text()
    (folder / "a.yaml").write_text(text)
    (folder / "b.yml").write_text(text.replace("within: 15d", "within: 9d"))  # a copy
    (folder / "c.yaml").write_text(text.replace("name: mw_chemo_p1", "name: other_p1"))
    assert [p.name for p in pattern_paths(folder)] == ["a.yaml", "b.yml", "c.yaml"]
    rows = run_all(spark, profile, DATE, [str(p) for p in pattern_paths(folder)], **quiet)
    status = sorted((r["pattern"], r["status"]) for r in rows)
    assert status == [("mw_chemo_p1", "failed"), ("mw_chemo_p1", "failed"),
                      ("other_p1", "success")]
    assert all("is also used by" in r["message"] for r in rows if r["status"] == "failed")
    assert not Lake.of_profile(profile).exists(Lake.of_profile(profile).matches("mw_chemo_p1"))
    # the per-pattern steps (the DAG's) refuse it too, and say so in the run log
    from jobs.cli.main import main

    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  test:\n    landing: {profile.landing}\n"
                    f"    lake: {profile.lake}\n")
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    monkeypatch.setenv("SES_PROFILE", "test")
    assert main(["publish", str(folder / "a.yaml"), "--run-id", "x"]) == 2
    assert [r["status"] for r in _runs(profile) if r["run_id"] == "x"] == ["failed"]
    check(profile.lake)


def test_a_bad_pattern_file_fails_only_itself(spark, tmp_path, monkeypatch, capsys):
    profile, _ = _profile(tmp_path)
    folder = tmp_path / "patterns"
    folder.mkdir()
    shutil.copy(P1, folder / "p1.yaml")
    (folder / "broken.yaml").write_text("name: broken\nsource: chemo_mw\nwithin: 2d\nsets: [[\n")
    (folder / "forever.yaml").write_text(Path(P1).read_text().replace(
        "name: mw_chemo_p1", "name: forever").replace("within: 15d", "within: 99999999999999999999999999d"))
    (folder / "typo.yaml").write_text(Path(P1).read_text().replace(
        "name: mw_chemo_p1", "name: typo").replace("prev(p.value) < p.value",
                                                   "prev(p.valeu) < p.value"))
    printed = []
    rows = run_all(spark, profile, DATE, [str(p) for p in pattern_paths(folder)],
                   echo=printed.append)
    by = {r["pattern"]: r for r in rows}
    assert by["mw_chemo_p1"]["status"] == "success"
    assert by["broken"]["status"] == "failed" and "broken.yaml:5: not valid YAML" in by["broken"]["message"]
    # an unknown column is found before Spark, as validate finds it: one line, final
    assert by["typo"]["status"] == "failed"
    assert "typo.yaml:18: " in by["typo"]["message"] and "'valeu'" in by["typo"]["message"] \
        and "did you mean 'value'" in by["typo"]["message"]
    assert not any("AnalysisException" in str(line) or "UNRESOLVED" in str(line)
                   for line in printed)
    assert by["forever"]["status"] == "failed"
    assert "forever.yaml:8: within: the duration 999" in by["forever"]["message"]
    assert {r["pattern"] for r in _runs(profile)} == {"mw_chemo_p1", "broken", "forever", "typo"}
    # the DAG's step: exit 2 (final, never retried), the file's line on stderr
    from jobs.cli.main import main

    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  test:\n    landing: {profile.landing}\n"
                    f"    lake: {profile.lake}\n")
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    monkeypatch.setenv("SES_PROFILE", "test")
    capsys.readouterr()
    assert main(["run-patterns", str(folder / "typo.yaml"), "--run-id", "t",
                 "--logical-date", DATE]) == 2
    assert "did you mean 'value'" in capsys.readouterr().err


def test_a_bad_landing_file_fails_only_its_source(spark, tmp_path):
    profile, landing = _profile(tmp_path, "chemo_mw", "chemo_ses")
    (landing / "chemo_ses" / "truncated.csv.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    (landing / "chemo_mw" / "empty.csv").write_text("")
    q1 = str(ROOT / "patterns" / "ses_chemo_q1.yaml")
    rows = run_all(spark, profile, DATE, [P1, q1], **quiet)
    by = {r["pattern"]: r for r in rows}
    assert by["mw_chemo_p1"]["status"] == "success"
    assert by["ses_chemo_q1"]["status"] == "failed"
    assert "truncated.csv.gz: cannot be read as csv" in by["ses_chemo_q1"]["message"]
    assert not Lake.of_profile(profile).exists(Lake.of_profile(profile).events("chemo_ses"))  # nothing half-written
    assert [r["status"] for r in _runs(profile)].count("failed") == 1
    check(profile.lake)


def test_bom_crlf_corrections_and_infinity(tmp_path):
    profile, landing = _profile(tmp_path)
    source = load_sources()["chemo_mw"]
    lake = lk.Lake(profile.lake)
    commit(lake, stage(source, profile.landing, lake, "r1"))
    (landing / "chemo_mw" / "excel.csv").write_bytes(
        "\ufeffevent_id,patient,type,value,unit,ts\r\n"
        "x1,1,B,1,mg,2010-09-01T00:00:00\r\n"
        "e2,1,B,9999,1/ul,2010-07-04T00:00:00\r\n"  # e2 again, another value: a correction
        "x2,1,B,1e400,mg,2010-09-02T00:00:00\r\n".encode("utf-8"))
    batch = stage(source, profile.landing, lake, "r2")
    result = commit(lake, batch)
    assert result.new_events == 1 and result.quarantined == 2
    # the ingest's line says why, where, and how to list them all
    said = describe(result, "r2").splitlines()
    assert said[1].startswith("  quarantined chemo_mw/excel.csv:") and len(said) == 4
    assert "not a finite number" in "\n".join(said)
    assert "ses query \"SELECT source_file, line, reason FROM quarantine_chemo_mw WHERE " \
        "ingest_run = 'r2'\"" in said[-1]
    q = {r["reason"] for r in DeltaTable(lake.quarantine("chemo_mw")).to_pyarrow_table().to_pylist()}
    assert any("event_id 'e2' was already ingested from chemo_mw/chemo_match_windows.csv with "
               "other values (value: 7100.0 -> 9999.0)" in r and "retract" in r for r in q)
    assert "column 'value': '1e400' is not a finite number" in q
    ids = DeltaTable(lake.events("chemo_mw")).to_pyarrow_table().column("event_id").to_pylist()
    assert "x1" in ids and ids.count("e2") == 1
    check(profile.lake)


def test_retract_a_bad_event_and_the_next_run_rematches(spark, tmp_path):
    """An event dated 0001-01-01 that got in (here: ingested without the range check, as
    before) broke every run of the source; retracting its file repairs it, logged."""
    from jobs.core.engine.output import match_id
    from jobs.core.local.runner import run

    profile, landing = _profile(tmp_path)
    source = load_sources()["chemo_mw"]
    lake = lk.Lake(profile.lake)
    (landing / "chemo_mw" / "ancient.csv").write_text(
        "event_id,patient,type,value,unit,ts\nz0,1,C,1,mg,0001-01-01T00:00:00\n")
    commit(lake, stage(source, profile.landing, lake, "old", ts_range=TimeRange(-10**21, 10**19)))
    broken = run_all(spark, profile, DATE, [P1], **quiet)[0]
    assert broken["status"] == "failed" and "out of bounds" in broken["message"].lower()
    row = retract(lake, "chemo_mw", source_file="chemo_mw/ancient.csv", reason="a test row")
    assert row["events"] == 1 and row["ts_min"].year == 1
    ok = run_all(spark, profile, DATE, [P1], **quiet)[0]
    assert ok["status"] == "success" and ok["matches"] == 3
    # retract a real event: the next night re-matches the range it touched
    with pytest.raises(ValueError, match="has no event"):  # a typo retracts nothing
        retract(lake, "chemo_mw", event_ids=["e1", "nope"], reason="test")
    retract(lake, "chemo_mw", event_ids=["e1"], reason="test")
    later = run_all(spark, profile, "2010-08-31", [P1], **quiet)[0]
    assert later["deleted"] == 1
    from tests.lakes import events_from_lake

    pattern = load_catalog([P1]).get(Path(P1))
    matches, _ = run(pattern, events_from_lake(profile, "chemo_mw"))
    t = DeltaTable(lake.matches("mw_chemo_p1")).to_pyarrow_table()
    assert set(t.column("match_id").to_pylist()) == {match_id(pattern.version, m.key)
                                                     for m in matches}
    log = DeltaTable(lake.retractions()).to_pyarrow_table().to_pylist()
    assert sorted((r["retracted_at"], r["events"], r["reason"]) for r in log)[0][1:] == (1, "a test row")
    assert len(log) == 2
    check(profile.lake)


BOMB = """name: crp_bomb
source: sepsis
within: 30d
sets:
  - [a+, b+, c+]
conditions:
  - a.event_type = 'CRP'
  - b.event_type = 'CRP'
  - c.event_type = 'CRP'
  - a.patient = b.patient
  - b.patient = c.patient
"""


def test_the_memory_budget_stops_a_match_explosion(spark, tmp_path):
    """The reported pattern on the sepsis log took 13-24 GB; with a budget it fails alone,
    with a message naming the pattern, the window and the setting."""
    profile, _ = _profile(tmp_path, "sepsis", "chemo_mw", memory_budget=64 * 1024**2,
                          max_matches_per_window=10**9)
    folder = tmp_path / "patterns"
    folder.mkdir()
    (folder / "bomb.yaml").write_text(BOMB)
    shutil.copy(P1, folder / "p1.yaml")
    rows = run_all(spark, profile, "2016-01-01", [str(p) for p in pattern_paths(folder)], **quiet)
    by = {r["pattern"]: r for r in rows}
    assert by["mw_chemo_p1"]["status"] == "success"
    msg = by["crp_bomb"]["message"]
    assert by["crp_bomb"]["status"] == "failed" and "MatchBudgetExceeded" in msg
    assert "pattern 'crp_bomb'" in msg and "window starting at event" in msg
    assert "memory budget of 64 MB" in msg and "match.memory_budget" in msg
    assert "conf/pipeline.yaml" in msg


def test_hostile_pattern_files_get_file_and_line_quickly(tmp_path, capsys):
    import time

    from jobs.cli.main import main

    base = "name: x\nsource: chemo_mw\nwithin: 1d\nsets:\n  - [a]\nconditions:\n  - a.type = 'C'\n"
    level = ", ".join(["*a"] * 9)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [{level.replace('*a', f'*l{i - 1}' if i else '*a')}]\n" for i in range(12))
    files = {
        "bomb.yaml": bomb + base.replace("name: x", "name: bomb"),
        "digits.yaml": base.replace("'C'", "1" + "0" * 400),
        "deep.yaml": base + "description: " + "[" * 20000 + "]" * 20000 + "\n",
        "key.yaml": base + "? [a, b]\n: x\n",
        "newline.yaml": 'name: "abc\\n"\nsource: chemo_mw\nwithin: 1d\nsets:\n  - [a]\n',
        "huge_within.yaml": base.replace("1d", "99999999999999999999999999d"),
        "never.yaml": base.replace("1d", "365250d"),
        "wide.yaml": base.replace("[a]", "[a, " + ", ".join(f"v{i}" for i in range(49)) + "]"),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    started = time.perf_counter()
    assert main(["validate", str(tmp_path)]) == 1
    assert time.perf_counter() - started < 10
    err = capsys.readouterr().err
    expected = {"bomb.yaml:1: anchors and aliases", "deep.yaml:8: lists and mappings nested",
                "digits.yaml:7: in condition", "key.yaml:8: a mapping key must be plain text",
                "newline.yaml:1: name 'abc\\n' must be", "huge_within.yaml:3: within",
                "never.yaml:3: within: 365250d must be positive and at most 36525d",
                "wide.yaml:5: event set 1 has 50 variables"}
    for text in expected:
        assert text in err, text
    assert "Traceback" not in err


def test_programs_that_read_the_tables_exit_cleanly(lake):
    """`jobs runs` reads Delta tables with delta-rs; it used to abort at exit 1 time in 3."""
    first = lake.jobs("run", "--logical-date", DATE, "--pattern", P1)
    assert first.returncode == 0, first.stderr[-2000:]
    for _ in range(6):
        proc = lake.jobs("runs")
        assert proc.returncode == 0 and "terminate called" not in proc.stderr, proc.stderr


def test_quarantining_garbage_streams(tmp_path):
    """40 MB of printable garbage: typed in chunks, raw text truncated; the peak memory of
    the process stays a small multiple of the file (it was 21x)."""
    import subprocess
    import sys

    folder = tmp_path / "landing" / "sepsis"
    folder.mkdir(parents=True)
    line = ("#garbage " * 40 + "\n").encode()
    with open(folder / "junk.jsonl", "wb") as f:
        for _ in range(40 * 1024**2 // len(line)):
            f.write(line)
    # VmHWM, not ru_maxrss: Linux keeps the parent's ru_maxrss across fork and exec
    script = f"""
from jobs.lake import store as lk
from jobs.config import load_sources
from jobs.pipeline.ingest import stage
b = stage(load_sources()["sepsis"], {str(tmp_path / "landing")!r}, lk.Lake({str(tmp_path / "lake")!r}), "r")
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0].split()[1]
print(sum(t.num_rows for t in b.quarantine), hwm)
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    rows, peak_kb = int(out[0]), int(out[1])
    assert rows == 40 * 1024**2 // len(line)
    assert peak_kb < 400 * 1024, f"peak {peak_kb / 1024:.0f} MB for a 40 MB file"


def test_catalog_lists_yml_like_the_dag(tmp_path):
    (tmp_path / "a.yml").write_text(Path(P1).read_text())
    assert [p.name for p in pattern_paths(tmp_path)] == ["a.yml"]
    assert load_catalog([tmp_path / "a.yml"]).patterns
    dag = (ROOT / "dags" / "ses_nightly.py").read_text()
    assert "pattern_paths(glob=" in dag and 'glob("*.yaml")' not in dag


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])


def test_a_bad_parallel_jobs_setting_is_named(tmp_path):
    from jobs.config import ConfigError, load_profile

    conf = tmp_path / "pipeline.yaml"
    for value, ok in (("4", 4), ("0", None), ("two", None), ("true", None)):
        conf.write_text(f"profiles:\n  t:\n    landing: l\n    lake: k\n"
                        f"    match: {{parallel_jobs: {value}}}\n")
        if ok:
            assert load_profile("t", conf).parallel_jobs == ok
        else:
            with pytest.raises(ConfigError, match=r"profile 't': match.parallel_jobs: .* is "
                                                  r"not a whole number of at least 1"):
                load_profile("t", conf)
