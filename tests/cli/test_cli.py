"""``python -m jobs validate`` and ``python -m jobs match``: the contract tools rely on."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.cli.main import main
from jobs.config.project import Project, use_project
from jobs.core.language.events import EventFileError, format_ts, parse_ts, read_events

from ..helpers import EXAMPLES, ROOT

MW = str(EXAMPLES / "chemo_mw" / "chemo_match_windows.csv")
P1 = str(ROOT / "patterns" / "mw_chemo_p1.yaml")


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_default_patterns(capsys):
    code, out, err = run_cli(capsys, "validate")
    assert code == 0 and "valid" in out and err == ""


def test_validate_reports_path_line_message(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsource: chemo_mw\nwithin: 2 weeks\nsets: [[c]]\n"
                   "conditions:\n  - c.kind = 'C'\n")
    code, out, err = run_cli(capsys, "validate", str(bad), P1)
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[0] == f"{bad}:3: within: bad unit 'weeks' in '2 weeks': use one of ms, s, min, h, d"
    assert len(lines) == 2 and "1 problem(s) in 2 pattern file(s)" in lines[1]


def test_validate_names_a_suite_with_a_key_written_twice(capsys, tmp_path, monkeypatch):
    """The expectation suites are checked with the project's configuration: a suite whose
    expectation gives ``column`` twice would check only the second column, silently."""
    for folder in ("conf", "patterns", "models", "expectations"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    suite = tmp_path / "expectations" / "events.json"
    text = suite.read_text()
    old = '"kwargs": {"column": "event_id"}'
    assert old in text
    suite.write_text(text.replace(old, '"kwargs": {"column": "event_id", "column": "ts"}', 1))
    monkeypatch.setenv("SES_PROJECT_DIR", str(ROOT))  # restored after the test
    before = use_project(Project(tmp_path))
    try:
        code, out, err = run_cli(capsys, "validate")
    finally:
        use_project(before)
    assert code == 2 and out == ""
    assert re.fullmatch(rf"error: {re.escape(str(suite))}:\d+: key 'column' appears twice in "
                        r"expectations\[\d+\]\.kwargs \(first on line \d+\); JSON would keep "
                        r"only the last\n", err)



def test_match_refuses_a_condition_on_ts(capsys, tmp_path):
    """`b.ts - c.ts < 864000` used to give 0 matches with no error: a duration compared
    with a number is refused (with a unit, `b.ts - c.ts < 10d`, it is a condition)."""
    text = Path(P1).read_text().split("examples:")[0].replace(
        "  - prev(p.value) < p.value\n", "  - prev(p.value) < p.value\n  - b.ts - c.ts < 864000\n")
    f = tmp_path / "gap.yaml"
    f.write_text(text)
    code, out, err = run_cli(capsys, "match", str(f), MW)
    assert code == 2 and out == ""
    assert f"{f}:19: in condition 'b.ts - c.ts < 864000': b.ts - c.ts < 864000 compares a " \
           "duration with a number: write the number with its unit, e.g. 10d" in err
    code, out, err = run_cli(capsys, "validate", str(f))
    assert code == 1 and "compares a duration with a number" in err
    f.write_text(text.replace("< 864000", "< 10d"))
    code, out, err = run_cli(capsys, "match", str(f), MW)
    # P1 has 3 matches; the one with 14 days from C (e1) to the count (e11) is out
    assert code == 0 and len(out.splitlines()) == 2 and '"c": ["e1"]' not in out, err


def test_validate_checks_schema_and_source(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsource: chemo_mw\nwithin: 2d\nsets: [[c]]\n"
                   "conditions:\n  - c.kind = 'C'\n")
    code, _, err = run_cli(capsys, "validate", str(bad))
    assert code == 1 and f"{bad}:6: in condition 'c.kind = 'C'': the source has no attribute 'kind'" in err
    bad.write_text("name: bad\nsource: nowhere\nwithin: 2d\nsets: [[c]]\n")
    code, _, err = run_cli(capsys, "validate", str(bad))
    assert code == 1 and "unknown source 'nowhere'" in err


def test_validate_duplicate_names(capsys, tmp_path):
    for n in ("a", "b"):
        (tmp_path / f"{n}.yaml").write_text("name: same\nsource: chemo_mw\nwithin: 2d\nsets: [[c]]\n")
    code, _, err = run_cli(capsys, "validate", str(tmp_path))
    assert code == 1 and err.count("pattern name 'same' is also used by") == 2


def test_match_bruteforce_jsonl_and_stats(capsys):
    code, out, err = run_cli(capsys, "match", P1, MW, "--matcher", "bruteforce", "--stats")
    assert code == 0
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[0] == {"pattern": "mw_chemo_p1", "start": "2010-07-03T00:00:00",
                       "end": "2010-07-17T00:00:00",
                       "bindings": {"c": ["e1"], "p": ["e3", "e9"], "b": ["e11"]}}
    assert [r["start"] for r in rows] == sorted(r["start"] for r in rows)
    assert len(rows) == 3
    stats = json.loads(err)
    for key in ("events", "events_after_filter", "partitions", "windows", "candidate_windows",
                "matcher_calls", "matches", "seconds"):
        assert key in stats
    assert stats["events"] == 14 and stats["matches"] == 3


def test_match_stats_report_the_start_up_apart(capsys):
    """``--stats`` of the compiled matchers: which kernels, their load, reading the input and
    the start-up, apart from the matching's own seconds. The fallback calls are counted
    per process (a test before this one in the same worker may have made one on purpose):
    this command adds none."""
    from jobs.core.engine import aot

    before = aot.load().loaded.fallback_calls
    code, out, err = run_cli(capsys, "match", P1, MW, "--stats")
    assert code == 0 and len(out.splitlines()) == 3
    stats = json.loads(err)
    assert stats["kernels"] == "aot" and stats["kernel_fallback_calls"] == before
    assert stats["kernel_load_seconds"] >= 0
    assert stats["read_seconds"] >= 0 and stats["startup_seconds"] > 0
    assert stats["matches"] == 3 and stats["seconds"] >= 0


def test_match_bruteforce_zstream_means_all_matches(capsys, tmp_path):
    p = tmp_path / "z.yaml"
    p.write_text(open(P1).read().replace("matcher: ses", "matcher: zstream"))
    code, out, _ = run_cli(capsys, "match", str(p), MW, "--matcher", "bruteforce")
    assert code == 0 and len(out.splitlines()) == 11


@pytest.mark.parametrize("args, fragment", [
    (["missing.csv"], "no such file"),
    ([MW, "--id-column", "nope"], "no column 'nope'"),
    ([MW, "--time-column", "type"], "is not an ISO-8601 timestamp"),
])
def test_match_bad_input_exit_2(capsys, args, fragment):
    code, out, err = run_cli(capsys, "match", P1, *args, "--matcher", "bruteforce")
    assert code == 2 and fragment in err and out == ""


def test_match_attribute_missing_from_file(capsys, tmp_path):
    f = tmp_path / "e.csv"
    f.write_text("event_id,ts,kind\ne1,2010-01-01,C\n")
    code, _, err = run_cli(capsys, "match", P1, str(f), "--matcher", "bruteforce")
    assert code == 2 and "no attribute 'type'" in err


def test_installed_command(tmp_path):
    """`make` installs the project: `ses` works from any folder, and says its version."""
    ses = Path(sys.executable).parent / "ses"
    proc = subprocess.run([str(ses), "match", P1, MW, "--matcher", "bruteforce"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 3, proc.stderr
    proc = subprocess.run([str(ses), "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ses 0.1.0"


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "jobs", "match", P1, MW, "--matcher",
                           "bruteforce"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 3


# -- reading events ---------------------------------------------------------------------
def test_csv_numbers_and_missing_values(tmp_path):
    f = tmp_path / "e.csv"
    f.write_text("event_id,ts,n,x,s\n2,2010-01-02T00:00:00,1,1.5,a\n"
                 "1,2010-01-01T00:00:00,2,,7\n10,2010-01-02T00:00:00,3,2,b\n")
    ev = read_events(f)
    assert [e.id for e in ev] == ["1", "10", "2"]  # (ts, id) with ids as strings
    assert [e.seq for e in ev] == [0, 1, 2]
    assert ev[0].attrs["n"] == 2 and ev[0].attrs["x"] is None and ev[0].attrs["s"] == "7"
    assert ev[2].attrs["x"] == 1.5


@pytest.mark.parametrize("content, fragment", [
    ("event_id,ts\ne1,2010-01-01\ne1,2010-01-02\n", "line 3: duplicate event_id 'e1' (first at line 2)"),
    ("event_id,ts\ne1,yesterday\n", "line 2: ts 'yesterday' is not an ISO-8601 timestamp"),
    ("event_id,ts\ne1,\n", "line 2: empty 'ts'"),
    ("event_id,ts\ne1,2010-01-01,extra\n", "line 2: 3 fields, the header has 2"),
    ("", "empty file"),
])
def test_csv_errors_name_the_line(tmp_path, content, fragment):
    f = tmp_path / "e.csv"
    f.write_text(content)
    with pytest.raises(EventFileError) as info:
        read_events(f)
    assert fragment in str(info.value) and str(f) in str(info.value)


def test_parquet_with_timestamp_type(tmp_path):
    f = tmp_path / "e.parquet"
    table = pa.table({"event_id": ["a", "b"],
                      "ts": pa.array([1_000_000_000_123, 5], pa.timestamp("ns")),
                      "v": [1.5, None]})
    pq.write_table(table, f)
    ev = read_events(f)
    assert [e.id for e in ev] == ["b", "a"]
    assert ev[1].ts == 1_000_000_000_123 and format_ts(ev[1].ts) == "1970-01-01T00:16:40.000000123"
    assert ev[0].attrs["v"] is None


def test_not_parquet(tmp_path):
    f = tmp_path / "e.parquet"
    f.write_text("not parquet")
    with pytest.raises(EventFileError, match="not a readable Parquet file"):
        read_events(f)


def test_timestamps():
    assert parse_ts("1970-01-01T00:00:01") == 10**9
    assert parse_ts("1970-01-01T01:00:00+01:00") == 0
    assert parse_ts("1970-01-01T00:00:00.123456789Z") == 123456789
    assert format_ts(parse_ts("2010-07-03T09:00:00")) == "2010-07-03T09:00:00"
    assert format_ts(1_500_000) == "1970-01-01T00:00:00.001500"
    assert format_ts(1_500_000_000) == "1970-01-01T00:00:01.500"


def test_match_reads_the_landing_formats_of_ingest(capsys, tmp_path):
    """A source's own jsonl.gz (and a csv.gz with --source) is typed as ingest types it:
    the same content-hash ids, times and types; rows ingest would quarantine are left out
    and counted."""
    import gzip

    from jobs.config import load_sources
    from jobs.pipeline.ingest import read_raw, type_rows

    crp = str(ROOT / "patterns" / "sepsis_rising_crp_then_icu.yaml")
    raw = ROOT / "data" / "landing" / "sepsis" / "sepsis_1.jsonl.gz"
    code, out, err = run_cli(capsys, "match", crp, str(raw))
    assert code == 0, err
    rows = [json.loads(x) for x in out.splitlines()]
    typed = type_rows(load_sources()["sepsis"], read_raw(raw, "jsonl"), raw.name, "t", None)
    ids = {e["event_id"] for e in typed.events}
    assert rows and all(i in ids for r in rows for v in r["bindings"].values() for i in v)
    # a bad line is reported, not fatal
    bad = tmp_path / "few.jsonl.gz"
    lines = gzip.open(raw, "rt").read().splitlines()[:50] + ["{not json"]
    bad.write_bytes(gzip.compress("\n".join(lines).encode()))
    code, out, err = run_cli(capsys, "match", crp, str(bad))
    assert code == 0 and "1 row(s) of" in err and "quarantined" in err
    hospital = ROOT / "data" / "landing" / "hospital" / "hospital_2005.csv.gz"
    pattern = str(ROOT / "patterns" / "hospital_ca125_blood_then_consult.yaml")
    code, out, err = run_cli(capsys, "match", pattern, str(hospital), "--source", "hospital")
    assert code == 0 and out.strip(), err
    code, out, err = run_cli(capsys, "match", pattern, str(hospital), "--source", "nope")
    assert code == 2 and "source 'nope' is not in conf/sources.yaml" in err


@pytest.mark.parametrize("source", ["sepsis", "hospital", "chemo_mw", "locations"])
def test_new_pattern_scaffold_validates_with_its_examples(capsys, tmp_path, source):
    from jobs.tools.scaffold import scaffold

    path = scaffold(f"my_{source}", source, folder=tmp_path)
    code, out, err = run_cli(capsys, "validate", str(path))
    assert code == 0 and "2 example(s) pass" in out, err
    with pytest.raises(ValueError, match="exists already"):
        scaffold(f"my_{source}", source, folder=tmp_path)


def test_validate_requires_examples(capsys, tmp_path):
    text = (ROOT / "patterns" / "mw_chemo_p1.yaml").read_text()
    path = tmp_path / "bare.yaml"
    path.write_text(text[:text.index("examples:")])
    code, out, err = run_cli(capsys, "validate", str(path))
    assert code == 1 and f"{path}:1: no examples: add an `examples:` block" in err


def test_progress_lines_inside_a_long_step():
    import time

    from jobs.progress import progress

    lines = []
    with progress("match slow", None, lines.append, every=0.05):
        time.sleep(0.3)
    assert len(lines) >= 3 and lines[0].startswith("  match slow … 0 s")
    quiet = []
    with progress("match fast", None, quiet.append, every=5):
        pass
    assert quiet == []  # a short step prints nothing


def test_publish_refuses_an_unvalidated_run_before_spark_starts(tmp_path, monkeypatch, capsys):
    """The staged/validated checks come first: no Spark session is built for a run that
    may not be published (the step fails in a second, not after Spark's start-up)."""
    import jobs.cli.steps
    import jobs.spark.session
    from jobs.lake.store import Lake

    def no_spark(*_a, **_k):
        raise AssertionError("publish started Spark before checking the staged run")

    monkeypatch.setattr(jobs.spark.session, "build_session", no_spark)
    monkeypatch.setattr(jobs.cli.steps, "build_session", no_spark)  # bound where it is used
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  t:\n    landing: {tmp_path}\n    lake: {tmp_path / 'lake'}\n")
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    pattern = ROOT / "patterns" / "mw_chemo_p1.yaml"
    args = ["publish", str(pattern), "--run-id", "r1", "--profile", "t"]
    assert main(args) != 0
    assert "no staged run 'r1'" in capsys.readouterr().err
    lake = Lake(str(tmp_path / "lake"))
    lake.write_text(lake.staging("mw_chemo_p1", "r1") + "/_stats.json", json.dumps({"x": 1}))
    assert main(args) != 0
    assert "was not validated: run `validate-run` for it first" in capsys.readouterr().err


def test_the_command_table_is_what_the_groups_declare():
    """`ses --help` lists jobs.cli.commands.COMMANDS without importing the groups: the
    table must say what each group module declares."""
    import argparse
    import importlib

    from jobs.cli.commands import COMMANDS, SUMMARIES, Registry
    from jobs.cli.main import build_parser, main

    for group in set(COMMANDS.values()):
        sub = argparse.ArgumentParser().add_subparsers()
        registry = Registry(sub)
        module = importlib.import_module(f"jobs.cli.{group}")
        module.register(registry, main) if group == "steps" else module.register(registry)
        assert {c.name for c in registry.commands} == {n for n, g in COMMANDS.items()
                                                       if g == group}, group
    assert set(SUMMARIES) == set(COMMANDS)
    everything = build_parser(None)._subparsers._group_actions[0].choices
    assert set(everything) == set(COMMANDS)


def test_help_and_match_do_not_load_the_pipeline():
    """Start-up: `ses --help` imports no command group; `ses match` (the engine, or the
    oracle; on a CSV file or on a landing file typed as ingest types it) loads no module
    of the pipeline, the lake or Spark, and neither pyspark nor delta-rs."""
    probe = ("import sys, contextlib, io\nfrom jobs.cli.main import main\n"
             "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
             "    main(sys.argv[1:])\n"
             "print(sorted(m for m in sys.modules if m.startswith(('jobs.', 'pyspark', "
             "'deltalake', 'py4j'))))\n")
    out = subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True,
                         text=True, cwd=ROOT).stdout
    assert "jobs.cli.patterns" not in out and "jobs.pipeline" not in out, out
    landing = str(ROOT / "data" / "landing" / "sepsis" / "sepsis_1.jsonl.gz")
    sepsis = str(ROOT / "patterns" / "sepsis_rising_crp_then_icu.yaml")
    for argv in ([P1, MW, "--matcher", "bruteforce"], [P1, MW], [sepsis, landing]):
        done = subprocess.run([sys.executable, "-c", probe, "match", *argv],
                              capture_output=True, text=True, cwd=ROOT)
        loaded = ast.literal_eval(done.stdout.strip().splitlines()[-1])
        assert "jobs.cli.match" in loaded and "jobs.core.local.files" in loaded, loaded
        heavy = [m for m in loaded if m.startswith(("jobs.pipeline", "jobs.spark", "jobs.lake",
                                                    "jobs.cli.common", "pyspark", "py4j",
                                                    "deltalake"))]
        assert not heavy, (argv, heavy)


def test_query_and_runs_load_no_pipeline_module():
    """`ses query` and `ses runs` answer from the lake's tables: their command group loads
    no module of jobs.pipeline (explain, which plans, is a group of its own), and fewer
    of the project's modules than explain's does."""
    probe = ("import sys\nfrom jobs.cli.main import build_parser\n"
             "build_parser(sys.argv[1])\n"
             "print(sorted(m for m in sys.modules if m.startswith('jobs.')))\n")
    loaded = {}
    for command in ("query", "runs", "explain"):
        out = subprocess.run([sys.executable, "-c", probe, command], capture_output=True,
                             text=True, cwd=ROOT)
        loaded[command] = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    for command in ("query", "runs"):
        assert not [m for m in loaded[command] if m.startswith("jobs.pipeline")], loaded[command]
        assert len(loaded[command]) < len(loaded["explain"]) - 10
    assert "jobs.pipeline.match.steps" in loaded["explain"]


TIMED = """name: timed
source: chemo_mw
within: 15d
sets: [[c, p+], [b]]
conditions:
  - c.type = 'C'
  - p.type = 'P'
  - b.type = 'B'
  - c.patient = p.patient
  - p.patient = b.patient
  - b.ts - c.ts <= 8d
  - last(p.ts) - first(p.ts) >= 1d or count(p) = 1
measures:
  gap: b.ts - c.ts
  first_p: first(p.ts)
  span: end_ts - start_ts
"""


def test_time_conditions_on_csv_and_parquet_equal_the_oracle(tmp_path, capsys):
    """A condition on ts used to be silently false (a CSV's ts was text): the same pattern
    with time conditions and time measures over the committed CSV, as Parquet with a
    timestamp column (microseconds) and by the oracle, gives the same lines; one match
    lies exactly 8 days apart (the bound holds)."""
    import pandas as pd

    pattern = tmp_path / "timed.yaml"
    pattern.write_text(TIMED)
    csv = next((ROOT / "data" / "landing" / "chemo_mw").glob("*.csv"))
    frame = pd.read_csv(csv)
    frame["ts"] = pd.to_datetime(frame["ts"]).dt.tz_localize("UTC").astype("datetime64[us, UTC]")
    parquet = tmp_path / "events.parquet"
    frame.to_parquet(parquet)
    outputs = []
    for events, matcher in ((csv, "ses"), (parquet, "ses"), (csv, "bruteforce")):
        code, out, err = run_cli(capsys, "match", str(pattern), str(events), "--matcher", matcher)
        assert code == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1] == outputs[2]
    lines = [json.loads(x) for x in outputs[0].splitlines()]
    assert lines and all(m["measures"]["gap"] <= 8 * 86400 for m in lines)
    assert {m["measures"]["gap"] for m in lines} & {8 * 86400.0}  # exactly on the bound
