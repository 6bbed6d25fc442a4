"""``conf/`` read strictly, and the project found from where you stand (pure: no Spark)."""

import re
import shutil
from pathlib import Path

import pytest

from jobs.config import ConfigError, Project, ProjectNotFound, load_profile, load_sources
from jobs.config.profiles import DEFAULTS
from jobs.config.project import MARKER

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
