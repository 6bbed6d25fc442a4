"""``conf/`` read strictly, and the project found from where you stand (pure: no Spark)."""

import re
import shutil
from pathlib import Path

import pytest

from jobs.config import ConfigError, Project, ProjectNotFound, load_profile, load_sources
from jobs.config.profiles import DEFAULTS
from jobs.config.project import MARKER, use_project
from jobs.config.references import check_reference, reference_files
from jobs.config.suites import SUITES, read_suite

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = (ROOT / "conf" / "pipeline.yaml").read_text(encoding="utf-8")


def _project(tmp_path: Path, pipeline: str = PIPELINE) -> Project:
    (tmp_path / "conf").mkdir(parents=True)
    (tmp_path / MARKER).write_text(pipeline, encoding="utf-8")
    shutil.copy(ROOT / "conf" / "sources.yaml", tmp_path / "conf" / "sources.yaml")
    return Project(tmp_path)


def test_the_committed_configuration_loads_every_profile():
    for name in ("local", "standalone", "cluster"):
        profile = load_profile(name, project=Project(ROOT))
        assert profile.name == name and profile.memory_budget > 0
    assert load_profile("local", project=Project(ROOT)).lake == str(ROOT / "lake")
    assert set(load_sources(ROOT / "conf" / "sources.yaml")) >= {"hospital", "sepsis"}


def test_sources_are_parsed_once_and_read_again_when_edited(tmp_path):
    """The same text gives the same sources without a second parse; an edited file is
    read again, a broken edit is refused every time, and a caller's changes to the
    returned dict reach no other caller."""
    path = tmp_path / "sources.yaml"
    text = (ROOT / "conf" / "sources.yaml").read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    first = load_sources(path)
    first.pop("hospital")
    again = load_sources(path)
    assert "hospital" in again and again["sepsis"] is first["sepsis"]  # parsed once
    path.write_text(text.replace("time_column: timestamp", "time_column: ts", 1),
                    encoding="utf-8")
    with pytest.raises(ConfigError, match="time column 'ts'"):
        load_sources(path)
    with pytest.raises(ConfigError, match="time column 'ts'"):
        load_sources(path)
    path.write_text(text.replace("landing: sepsis", "landing: sepsis_v2", 1),
                    encoding="utf-8")
    assert load_sources(path)["sepsis"].landing == "sepsis_v2"


def test_an_unknown_key_is_refused_with_its_line_and_the_nearest_known_one(tmp_path):
    text = PIPELINE.replace("      max_matches_per_window: 1000000  # live",
                            "      max_matches_per_windw: 1000000  # live", 1)
    project = _project(tmp_path, text)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "max_matches_per_windw" in row)
    with pytest.raises(ConfigError) as info:
        load_profile("local", project=project)
    assert str(info.value) == (f"{project.pipeline_file}:{line}: unknown key "
                               "'max_matches_per_windw' in profiles.local.match; did you mean "
                               "'max_matches_per_window'?")
    # a key of a profile nobody runs is refused too: the file is wrong, whatever runs
    other = _project(tmp_path / "b", PIPELINE.replace("  standalone:", "  standalone:\n    lake_dir: x", 1))
    with pytest.raises(ConfigError, match=r"pipeline.yaml:\d+: unknown key 'lake_dir' in "
                                          r"profiles.standalone; did you mean 'lock_dir'"):
        load_profile("local", project=other)


def test_sources_are_strict_too(tmp_path):
    project = _project(tmp_path)
    path = project.sources_file
    path.write_text(path.read_text().replace("    time_column: timestamp", "    time_colum: timestamp", 1))
    with pytest.raises(ConfigError, match=r"sources.yaml:\d+: unknown key 'time_colum' in "
                                          r"sources.hospital; did you mean 'time_column'"):
        load_sources(path)


@pytest.mark.parametrize("edit, message", [
    (("    lake: lake  ", "    lake_typo: lake  "), r"unknown key 'lake_typo'"),
    (("    lake: lake  ", "    # no lake  "), r"profile 'local': lake must be a path"),
    (("      memory_budget: 2GB ", "      memory_budget: lots "), r"pipeline.yaml:\d+: profile 'local': match.memory_budget: bad size 'lots'"),
    (("      parallel_jobs: 2 ", "      parallel_jobs: two "), r":\d+: profile 'local': match.parallel_jobs: 'two' is not a whole number"),
    (("      max_partition_events: 1000000", "      max_partition_events: many"), r"match.max_partition_events: 'many'"),
    (("      slice_length: 90d", "      slice_length: 90 days"), r"match.slice_length"),
    (("    ingest:\n      earliest: 1900-01-01         # events before this date are quarantined\n"
      "      max_future: 1d               # ... and events later than now + this\n",
      "    ingest: soon\n"), r"pipeline.yaml:\d+: profiles.local.ingest must be a mapping"),
    (("      conf:\n        spark.sql.shuffle.partitions: \"8\"", "      conf: [8]\n      x:\n        spark.sql.shuffle.partitions: \"8\""),
     r"pipeline.yaml:\d+: profiles.local.spark.conf must be a mapping"),
])
def test_every_missing_or_bad_value_is_a_config_error(tmp_path, edit, message):
    old, new = edit
    assert old in PIPELINE
    project = _project(tmp_path, PIPELINE.replace(old, new, 1))
    with pytest.raises(ConfigError, match=message):
        load_profile("local", project=project)


def test_defaults_are_written_once(tmp_path):
    """The settings a profile leaves out take the ``Profile`` field defaults, and the
    engine's limits come from one ``match_options()``."""
    text = re.sub(r"(?m)^    match:\n(      .*\n)+", "", PIPELINE.split("  standalone:")[0])
    assert "memory_budget" not in text
    profile = load_profile("local", project=_project(tmp_path, text))
    assert profile.memory_budget == DEFAULTS.memory_budget
    assert profile.parallel_jobs == DEFAULTS.parallel_jobs
    assert profile.slice_length == DEFAULTS.slice_length
    options = DEFAULTS.match_options()
    assert options.memory_budget == DEFAULTS.memory_budget == 2 * 1024**3
    assert options.max_matches_per_window == DEFAULTS.max_matches_per_window
    assert "conf/pipeline.yaml" in options.limits


def test_the_project_is_found_from_where_you_stand(tmp_path, monkeypatch):
    project = _project(tmp_path / "proj")
    deep = project.root / "patterns" / "drafts"
    deep.mkdir(parents=True)
    monkeypatch.delenv("SES_PROJECT_DIR", raising=False)
    assert Project.find(cwd=deep).root == project.root.resolve()
    assert Project.find(project_dir=project.root, cwd=tmp_path).root == project.root.resolve()
    monkeypatch.setenv("SES_PROJECT_DIR", str(project.root))
    assert Project.find(cwd=Path("/")).root == project.root.resolve()
    with pytest.raises(ProjectNotFound, match="has no conf/pipeline.yaml"):
        Project.find(project_dir=tmp_path)
    monkeypatch.delenv("SES_PROJECT_DIR")
    # outside any project: this checkout (an editable install) is the project
    assert Project.find(cwd=Path("/")).root == ROOT
    profile = load_profile("local", project=project)
    assert profile.lake == str(project.root / "lake")  # relative to the project, not the cwd


def test_a_source_s_freshness_and_its_mistakes(tmp_path):
    text = (ROOT / "conf" / "sources.yaml").read_text(encoding="utf-8")
    path = tmp_path / "sources.yaml"
    path.write_text(text.replace("    landing: hospital\n", "    landing: hospital\n"
                                 "    freshness: {warn_after: 2d, error_after: 168h}\n"))
    fresh = load_sources(path)["hospital"].freshness
    assert (fresh.warn_after, fresh.error_after) == (2 * 86400 * 10**9, 7 * 86400 * 10**9)
    assert load_sources(path)["sepsis"].freshness is None  # not set: not checked
    line = text.split("\n").index("    landing: hospital") + 2
    for bad, message in (("{warn_after: 8d, error_after: 7d}", "the warning comes first"),
                         ("{warn_after: two days}", "freshness.warn_after: bad duration"),
                         ("{error_within: 7d}", "unknown key")):
        path.write_text(text.replace("    landing: hospital\n", "    landing: hospital\n"
                                     f"    freshness: {bad}\n"))
        with pytest.raises(ConfigError, match=message) as err:
            load_sources(path)
        assert f"sources.yaml:{line}" in str(err.value)


def test_alerts_read_their_secrets_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HOOK_TOKEN", "s3cret")
    monkeypatch.setenv("SMTP_PASSWORD", "pw")
    monkeypatch.setenv("SES_ALERT_WEBHOOK", "http://127.0.0.1:9999/env")
    text = PIPELINE.replace("  local:\n", "  local:\n    alerts:\n"
                            "      webhooks: https://hooks.example.org/${HOOK_TOKEN}\n"
                            "      email: {host: smtp.example.org, port: 587, to: [a@b.org],"
                            " user: ses, password: '${SMTP_PASSWORD}', starttls: true}\n"
                            "      nights: 14\n", 1)
    alerts = load_profile("local", project=_project(tmp_path, text)).alerts
    assert alerts.targets == ("https://hooks.example.org/s3cret", "http://127.0.0.1:9999/env")
    assert alerts.email.password == "pw" and alerts.email.to == ("a@b.org",)
    assert alerts.nights == 14 and alerts.min_nights == DEFAULTS.alerts.min_nights
    monkeypatch.delenv("SMTP_PASSWORD")
    with pytest.raises(ConfigError, match="alerts.email.password: the environment variable "
                                          "SMTP_PASSWORD is not set"):
        load_profile("local", project=_project(tmp_path / "b", text))


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path):
    """YAML keeps the last of two equal keys and drops the first without a word: a second
    ``lake:`` in a profile, or a Spark setting given twice, is an error naming both lines."""
    text = PIPELINE.replace("    lake: lake  ", "    lake: /mnt/old-lake\n    lake: lake  ", 1)
    project = _project(tmp_path, text)
    first = next(n for n, row in enumerate(text.splitlines(), 1) if "/mnt/old-lake" in row)
    with pytest.raises(ConfigError) as info:
        load_profile("local", project=project)
    assert str(info.value) == (f"{project.pipeline_file}:{first + 1}: key 'lake' appears twice "
                               f"in profiles.local (first on line {first}); YAML would keep "
                               "only the last")
    conf = PIPELINE.replace('        spark.sql.shuffle.partitions: "8"',
                            '        spark.sql.shuffle.partitions: "8"\n'
                            '        spark.sql.shuffle.partitions: "200"', 1)
    with pytest.raises(ConfigError, match=r"pipeline.yaml:\d+: key 'spark.sql.shuffle.partitions' "
                                          r"appears twice in profiles.local.spark.conf"):
        load_profile("local", project=_project(tmp_path / "b", conf))


SUITE = '''{
  "name": "events",
  "expectations": [
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "event_id"}},
    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "event_id"}}
  ]
}
'''


@pytest.mark.parametrize("text, message", [
    (SUITE, None),
    (SUITE.replace('{"column": "event_id"}}\n', '{"column": "event_id", "column": "ts"}}\n', 1),
     r"events.json:5: key 'column' appears twice in expectations\[2\].kwargs \(first on line "
     r"5\); JSON would keep only the last"),
    (SUITE.replace('"kwargs": {"column": "event_id"}},', '"kwargs": {"column": "event_id"}}', 1),
     r"events.json:5: not valid JSON \(Expecting ',' delimiter\)"),
    (SUITE.replace('"expectations": [', '"expectation": [', 1),
     r'events.json: a suite is an object with "expectations": \[...\]'),
    (SUITE.replace('"kwargs": {"column": "event_id"}}\n', '"kwarg": {"column": "event_id"}}\n'),
     r"events.json: expectation 2 is not"),
])
def test_an_expectation_suite_is_read_strictly(tmp_path, text, message):
    path = tmp_path / "events.json"
    path.write_text(text, encoding="utf-8")
    if message is None:
        assert [e["type"] for e in read_suite(path)["expectations"]] == [
            "expect_column_values_to_not_be_null", "expect_column_values_to_be_unique"]
        return
    with pytest.raises(ConfigError, match=message):
        read_suite(path)


def test_the_committed_suites_are_valid():
    for name in SUITES:
        assert read_suite(ROOT / "expectations" / f"{name}.json")["expectations"]


@pytest.mark.parametrize("text, message", [
    ("room,state\nr1,a\n\nr2,b\n", None),
    ("room,state\nr1,a\nr2\nr3,c\n", r"room_state.csv:3: 1 field\(s\) where the header names 2"),
    ("room,state\nr1,a,extra\n", r"room_state.csv:2: 3 field\(s\) where the header names 2"),
    ("room,room\nr1,a\n", r"room_state.csv:1: the header names 'room' more than once"),
    ("", r"room_state.csv:1: a reference table needs a header line"),
])
def test_a_reference_table_is_checked_before_an_engine_guesses_at_it(tmp_path, monkeypatch,
                                                                     text, message):
    """DuckDB's sniffer reads ``room,state / r1,a / r2 / r3,c`` as no rows at all, and
    Spark fills the missing field with a null: a ragged file is an error with its line."""
    project = _project(tmp_path)
    (tmp_path / "conf" / "reference").mkdir()
    path = tmp_path / "conf" / "reference" / "room_state.csv"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("SES_PROJECT_DIR", str(ROOT))  # restored after the test
    before = use_project(project)
    try:
        if message is None:
            assert reference_files() == {"reference_room_state": path}
            return
        with pytest.raises(ConfigError, match=message):
            reference_files()
        path.write_text("room,state\nr1,a\n", encoding="utf-8")  # mended: read again
        assert reference_files() == {"reference_room_state": path}
    finally:
        use_project(before)


def test_the_committed_reference_tables_are_sound():
    for path in sorted((ROOT / "conf" / "reference").glob("*.csv")):
        check_reference(path)


def test_the_dag_s_settings_are_read_strictly(tmp_path):
    """The DAG reads its ``airflow:`` block through ``jobs.config``: the committed values,
    defaults for a block left out, and a bad value named with its line."""
    from jobs.config import AirflowSettings, load_airflow_settings

    committed = load_airflow_settings(Project(ROOT))
    assert committed.schedule == "0 2 * * *" and committed.retries >= 0
    assert load_airflow_settings(_project(tmp_path / "bare", "profiles: {}\n")) == \
        AirflowSettings()
    bad = PIPELINE.replace("retries: ", "retries: -", 1)
    assert bad != PIPELINE
    with pytest.raises(ConfigError, match=r"pipeline.yaml:\d+: airflow.retries: -"):
        load_airflow_settings(_project(tmp_path / "bad", bad))
