"""The pull-request path (``make pr-check``): what a branch's pattern and model changes do
to the published tables, found in a git checkout, run in a scratch lake, reported."""

import io
import json
import os
import shutil
import subprocess
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from jobs.cli.main import main
from jobs.project.changes import ADDED, CHANGED, INVALID, REMOVED, UNCHANGED, find_changes

from ..conftest import ROOT, make_profile

CHANGED_P = "sepsis_rising_crp_then_icu"  # within 7d -> 4d: some matches go
COMMENTED = "sepsis_three_rising_crp"  # a comment added: no change
GONE = "paper_ex2_next_after_lab"  # the file is removed
PARENT = "sepsis_er_episode"  # unchanged; the model sepsis_episodes reads it too
MODEL = "sepsis_episodes"
TYPO = "sepsis_crp_then_icu_typo"  # new: its examples pass, but no event is 'Admission ICU'
ROWS = "sepsis_crp_falls_then_rebounds"  # a .sql row pattern: WITHIN 30 days -> 10 days


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def make_repo(tmp: Path) -> Path:
    """A checkout with four committed patterns and one model on ``main``, and a branch
    ``change`` that changes one condition, comments another file and removes a third."""
    repo = tmp / "repo"
    (repo / "patterns").mkdir(parents=True)
    (repo / "models").mkdir()
    for name in (CHANGED_P, COMMENTED, GONE, PARENT):
        shutil.copy(ROOT / "patterns" / f"{name}.yaml", repo / "patterns")
    for suffix in (".sql", ".yaml"):
        shutil.copy(ROOT / "models" / f"{MODEL}{suffix}", repo / "models")
        shutil.copy(ROOT / "patterns" / f"{ROWS}{suffix}", repo / "patterns")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "change")
    f = repo / "patterns" / f"{CHANGED_P}.yaml"
    f.write_text(f.read_text().replace("within: 7d", "within: 4d"))
    f = repo / "patterns" / f"{COMMENTED}.yaml"
    f.write_text("# reworded: nothing it matches changes\n" + f.read_text().replace(
        "\nconditions:", "\n# the conditions\nconditions:"))
    (repo / "patterns" / f"{GONE}.yaml").unlink()
    f = repo / "patterns" / f"{ROWS}.sql"
    f.write_text(f.read_text().replace("INTERVAL '30' DAY", "INTERVAL '10' DAY"))
    typo = (ROOT / "patterns" / f"{CHANGED_P}.yaml").read_text().replace(
        f"name: {CHANGED_P}", f"name: {TYPO}").replace("Admission IC", "Admission ICU")
    (repo / "patterns" / f"{TYPO}.yaml").write_text(typo)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "change")
    return repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("pr"))


# -- what changed (git and files only) ---------------------------------------------------
def test_changes_by_normalized_version(repo):
    changes = find_changes(repo)  # default base: the merge base with main
    status = {c.name: c.status for c in changes.patterns}
    assert status == {CHANGED_P: CHANGED, COMMENTED: UNCHANGED, GONE: REMOVED,
                      PARENT: UNCHANGED, TYPO: ADDED, ROWS: CHANGED}
    changed = {c.name: c for c in changes.changed_patterns}
    assert changed[CHANGED_P].base.version != changed[CHANGED_P].head.version
    assert set(changed) == {CHANGED_P, GONE, TYPO, ROWS}
    models = {m.name: m for m in changes.affected_models}
    assert models[MODEL].status == UNCHANGED and CHANGED_P in models[MODEL].reason


def test_new_and_broken_files_and_model_edits(tmp_path):
    repo = make_repo(tmp_path)
    new = (ROOT / "patterns" / f"{GONE}.yaml").read_text().replace(
        f"name: {GONE}", "name: paper_ex2_copy")
    (repo / "patterns" / "paper_ex2_copy.yaml").write_text(new)
    (repo / "patterns" / "broken.yaml").write_text("name: broken\nsource: [\n")
    sql = repo / "models" / f"{MODEL}.sql"
    sql.write_text("-- a comment only\n" + sql.read_text())
    changes = find_changes(repo, "main")
    status = {c.name: c.status for c in changes.patterns}
    assert status["paper_ex2_copy"] == ADDED and status["broken"] == INVALID
    assert {m.name: m.status for m in changes.models}[MODEL] == UNCHANGED  # comment only
    sql.write_text(sql.read_text().strip().rstrip(";") + "\nlimit 1000000\n")
    assert {m.name: m.status for m in find_changes(repo, "main").models}[MODEL] == CHANGED


def test_unknown_base_is_a_clear_error(repo, capsys):
    assert main(["pr-check", "--root", str(repo), "--base", "no-such-ref", "--list"]) == 2
    assert "no-such-ref" in capsys.readouterr().err


def test_list_and_pytest_filter(repo):
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["pr-check", "--root", str(repo), "--list"]) == 0
    lines = out.getvalue().splitlines()
    assert any(line.split()[:3] == ["changed", "pattern", CHANGED_P] for line in lines)
    assert any(line.split()[:3] == ["removed", "pattern", GONE] for line in lines)
    assert not any(COMMENTED in line for line in lines)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["pr-check", "--root", str(repo), "--pytest-k"]) == 0
    # the removed file has no tests left
    assert sorted(out.getvalue().strip().split(" or ")) == sorted([CHANGED_P, TYPO, ROWS])


def test_nothing_changed_reports_so_without_spark(repo, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["pr-check", "--root", str(repo), "--base", "HEAD", "--out", str(out)]) == 0
    assert "No pattern or model changes" in (out / "report.md").read_text()
    assert json.loads((out / "summary.json").read_text())["patterns"] == []


def test_invalid_new_version_is_reported_not_run(tmp_path):
    from jobs.prcheck.check import PatternDiff, _validate

    repo = make_repo(tmp_path)
    f = repo / "patterns" / f"{CHANGED_P}.yaml"
    f.write_text(f.read_text().replace("within: 4d", "within: 1h"))  # its example fails
    diffs = [PatternDiff(c) for c in find_changes(repo, "main").changed_patterns]
    _validate(repo, diffs)
    by = {d.change.name: d for d in diffs}
    assert by[CHANGED_P].problems and by[CHANGED_P].failed
    assert any("example" in p for p in by[CHANGED_P].problems)
    assert not by[GONE].problems


# -- the scratch run (Spark) ---------------------------------------------------------------
def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def _oracle(pattern_text: str, tmp: Path, source: str, suffix: str = ".yaml") -> set[str]:
    """The matches of a pattern version over the committed data of its source, by the
    matcher on one file without Spark (``python -m jobs match``): bindings as keys."""
    from jobs.config import load_sources
    from jobs.pipeline.ingest import landing_files, typed_file

    src = load_sources()[source]
    parts = [typed_file(src, f)[0] for f in landing_files(src, str(ROOT / "data" / "landing"))]
    events = pa.concat_tables(parts).drop_columns(["event_date", "source_file", "ingest_run",
                                                   "ingested_at"])
    data = tmp / f"{source}.parquet"
    pq.write_table(events, data)
    pattern = tmp / f"p{suffix}"
    pattern.write_text(pattern_text)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["match", str(pattern), str(data), "--id-column", "event_id",
                     "--time-column", "ts"]) == 0
    return {json.dumps(sorted((k, v) for k, v in json.loads(line)["bindings"].items()
                              if v or suffix != ".sql"))  # a row pattern's table: bound ones
            for line in out.getvalue().splitlines()}


def _keys(rows) -> set[str]:
    return {json.dumps(sorted((k, list(v)) for k, v in r["bindings"])) for r in rows}


@pytest.fixture(scope="module")
def checked(spark, repo, tmp_path_factory):
    """pr-check of the branch on a sample of a real lake (one that holds the committed
    sepsis and locations events), every added and removed match kept."""
    from jobs.pipeline.context import RunContext
    from jobs.pipeline.run import ingest_sources
    from jobs.prcheck.check import pr_check
    from jobs.prcheck.report import write_report

    tmp = tmp_path_factory.mktemp("pr-run")
    real = replace(make_profile(tmp), pr_sample=30 * 365 * 86400 * 10**9)
    ingest_sources(spark, RunContext.start(real, "20261122T000000Z-000000"), ["sepsis", "locations"],
                   echo=lambda *_: None)
    before = _tree(Path(real.lake))
    check = pr_check(spark, real, repo, "main", sample=True, charts=tmp / "report",
                     shown=10**6, echo=lambda *_: None)
    write_report(check, tmp / "report")
    return check, tmp, before, Path(real.lake)


def test_a_changed_row_pattern_reports_the_matches_it_loses(checked, repo):
    """A .sql pattern's WITHIN shortened: it runs on both sides, each side's table holds
    what the local matcher finds, and the long rebounds are among the removed matches."""
    check, tmp, _, _ = checked
    d = {d.change.name: d for d in check.patterns}[ROWS]
    assert not d.problems and d.before.status == d.after.status == "success"
    base = _git(repo, "show", f"main:patterns/{ROWS}.sql")
    head = (repo / "patterns" / f"{ROWS}.sql").read_text()
    old = _oracle(base, tmp, "sepsis", ".sql")
    new = _oracle(head, tmp, "sepsis", ".sql")
    assert _keys(d.before.matches.to_pylist()) == old and _keys(d.after.matches.to_pylist()) == new
    assert old - new and d.n_removed >= len(old - new) > 0
    assert any(r["seconds_to_rebound"] >= 10 * 86400 for r in d.removed)


def test_changed_condition_reports_exactly_the_added_and_removed(checked, repo):
    check, tmp, _, _ = checked
    d = {d.change.name: d for d in check.patterns}[CHANGED_P]
    base = _git(repo, "show", f"main:patterns/{CHANGED_P}.yaml")
    head = (repo / "patterns" / f"{CHANGED_P}.yaml").read_text()
    old, new = _oracle(base, tmp, "sepsis"), _oracle(head, tmp, "sepsis")
    assert old != new and new - old == set() and old - new  # shorter window: matches go
    assert _keys(d.added) == new - old and d.n_added == len(new - old)
    assert _keys(d.removed) == old - new and d.n_removed == len(old - new)
    assert d.before.row["matches"] == len(old) and d.after.row["matches"] == len(new)
    assert sum(b for _, b, _ in d.months) == len(old)
    assert sum(a for _, _, a in d.months) == len(new)
    for key in ("events", "events_after_filter", "candidate_windows", "matcher_calls",
                "work", "match_seconds"):
        assert d.after.row[key] is not None and d.before.row[key] is not None


def test_comment_only_change_is_no_change(checked):
    check, tmp, _, _ = checked
    assert COMMENTED not in {d.change.name for d in check.patterns}
    summary = json.loads((tmp / "report" / "summary.json").read_text())
    assert COMMENTED in summary["unchanged"]
    assert COMMENTED in (tmp / "report" / "report.md").read_text().split("## ")[0]


def test_removed_pattern_is_reported(checked, tmp_path):
    check, tmp, _, _ = checked
    d = {d.change.name: d for d in check.patterns}[GONE]
    base = (ROOT / "patterns" / f"{GONE}.yaml").read_text()
    old = _oracle(base, tmp_path, "locations")
    assert d.change.status == REMOVED and d.after is None
    assert d.n_removed == len(old) > 0 and _keys(d.removed) == old and d.n_added == 0
    md = (tmp / "report" / "report.md").read_text()
    assert f"`{GONE}` — removed" in md and "no longer updated" in md


def test_new_pattern_that_no_event_fits_is_warned_about(checked):
    check, tmp, _, _ = checked
    d = {d.change.name: d for d in check.patterns}[TYPO]
    assert d.change.status == ADDED and d.before is None and d.after.status == "success"
    assert d.n_added == d.n_removed == 0 and not d.failed
    text = " | ".join(d.warnings)
    assert "variable i can never bind: 0 event(s) with i.event_type = 'Admission ICU'" in text
    assert "'Admission IC'" in text  # the nearest value the data has
    assert "matches nothing" in text
    md = (tmp / "report" / "report.md").read_text()
    assert "## Warnings" in md and f"`{TYPO}`: variable i can never bind" in md


def test_dependent_model_runs_on_both_versions(checked):
    check, _, _, _ = checked
    m = {m.change.name: m for m in check.models}[MODEL]
    assert m.before["status"] == "success" and m.after["status"] == "success"
    assert m.before["rows"] == m.after["rows"] > 0
    # the model counts rising-CRP-to-ICU matches per episode: fewer matches change rows
    assert m.n_added == m.n_removed > 0
    assert all(a["rising_crp_to_icu"] <= r["rising_crp_to_icu"]
               for a in m.added for r in m.removed if a["episode_id"] == r["episode_id"])


def test_scratch_lake_leaves_the_real_lake_untouched(checked):
    check, _, before, lake = checked
    assert _tree(lake) == before
    assert not (lake / "matches").exists()  # nothing was published to the real lake
    assert check.scratch and not Path(check.scratch).exists()  # the scratch lake is gone
    assert "a sample of the lake" in check.data


def test_report_markdown_terminal_and_chart(checked):
    from PIL import Image

    from jobs.prcheck.report import terminal

    check, tmp, _, _ = checked
    md = (tmp / "report" / "report.md").read_text()
    d = {d.change.name: d for d in check.patterns}[CHANGED_P]
    assert f"| `{CHANGED_P}` | changed | {d.before.row['matches']} | " \
           f"{d.after.row['matches']} | 0 | {d.n_removed} |" in md
    assert f"**Removed: {d.n_removed} match(es)**" in md
    assert "matcher calls" in md and "Admission IC" in md  # counters; events with their type
    png = tmp / "report" / f"{CHANGED_P}_per_month.png"
    assert f"]({png.name})" in md
    with Image.open(png) as im:
        low, high = im.convert("L").getextrema()
        assert im.size[0] > 300 and high - low > 100  # not blank
    text = terminal(check)
    assert CHANGED_P in text and GONE in text and "model sepsis_episodes" in text


def test_warnings_for_a_slower_version_and_a_near_cap():
    from jobs.prcheck.check import PatternDiff, Side, _compare
    from jobs.project.changes import PatternChange

    t = pa.table({"match_id": ["a"], "start_ts": pa.array([0], pa.timestamp("us", tz="UTC")),
                  "bindings": pa.array([[("a", ["e1"])]], pa.map_(pa.string(),
                                                                  pa.list_(pa.string())))})
    d = PatternDiff(PatternChange("p", CHANGED, None, None),
                    before=Side("success", {"match_seconds": 2.0, "work": 100, "peak": 1}, t),
                    after=Side("success", {"match_seconds": 30.0, "work": 900, "peak": 60,
                                           "warnings": ["x: 0 event(s) with ..."]}, t))
    _compare(d, cap=100, shown=5)
    text = " | ".join(d.warnings)
    assert "15.0x the base's" in text and "9.0x the base's" in text
    assert "60% of match.max_matches_per_window" in text and "x: 0 event(s)" in text
    failed = PatternDiff(PatternChange("p", CHANGED, None, None),
                         before=Side("success", {}, t),
                         after=Side("failed", message="MatchCapExceeded: window of patient 7 "
                                    "has over 100 partial matches",
                                    error_type="MatchCapExceeded"))
    _compare(failed, cap=100, shown=5)
    assert failed.warnings[0].startswith("window cap reached (new version)")
    assert failed.failed
    # the kind of failure comes from the error's class (PatternOutcome), not its words
    other = PatternDiff(PatternChange("p", CHANGED, None, None), before=Side("success", {}, t),
                        after=Side("failed", message="OSError: MatchCapExceeded.log is gone",
                                   error_type="OSError"))
    _compare(other, cap=100, shown=5)
    assert other.warnings[0].startswith("run failed (new version)")


def test_workflow_runs_validate_pattern_tests_and_pr_check():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "patterns.yml").read_text())
    on = flow.get("on") or flow.get(True)  # YAML 1.1 reads a bare `on` as true
    assert set(on["pull_request"]["paths"]) == {"patterns/**", "models/**"}
    steps = flow["jobs"]["pr-check"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    for target in ("make validate", "make pattern-tests", "make pr-check"):
        assert target in runs
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "pr-check/" and upload["if"] == "always()"
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    for target in ("validate", "pattern-tests", "pr-check"):  # the Makefile has them
        out = subprocess.run(["make", "-n", target, "BASE=main"], cwd=ROOT, capture_output=True,
                             text=True)
        assert out.returncode == 0, out.stderr
    dry = subprocess.run(["make", "-n", "pr-check", "BASE=origin/main"], cwd=ROOT,
                         capture_output=True, text=True).stdout
    assert ".venv/bin/ses pr-check --base origin/main" in dry  # the installed command


def test_added_and_removed_matches_show_their_measures():
    from jobs.prcheck.check import PatternDiff, Side, _compare
    from jobs.prcheck.report import describe_match
    from jobs.project.changes import PatternChange, PatternFile

    path = "patterns/sepsis_crp_run_high_average.yaml"
    text = (ROOT / path).read_text()
    head = PatternFile(path, text, "sepsis_crp_run_high_average", None)
    bindings = pa.map_(pa.string(), pa.list_(pa.string()))
    t = pa.table({"match_id": ["a", "b"], "start_ts": pa.array([0, 1], pa.timestamp("us", tz="UTC")),
                  "bindings": pa.array([[("c", ["e1", "e2"])], [("c", ["e3", "e4"])]], bindings),
                  "tests": [2, 2], "mean_crp": [120.0, 150.5], "ward": ["Admission IC", None]})
    d = PatternDiff(PatternChange("sepsis_crp_run_high_average", CHANGED, head, head),
                    before=Side("success", {}, t.slice(0, 1)), after=Side("success", {}, t.slice(1)))
    _compare(d, cap=100, shown=5)
    assert d.added[0]["measures"] == {"tests": 2, "mean_crp": 150.5, "ward": None}
    assert describe_match(d.added[0], {}).endswith("; tests = 2; mean_crp = 150.5; ward = —")
    assert "mean_crp = 120.0" in describe_match(d.removed[0], {})
